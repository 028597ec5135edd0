// Build step run by `npm ci` (postinstall), `npm test` and `npm start`'s prerequisites:
// 1. every `scripts/build-*.mjs` step (e.g. the sandbox library bundle), then
// 2. the application bundles in dist/ (esbuild; the dependencies are bundled too, but for the native addons and the
//    few packages scripts/inline-packages.mjs keeps in node_modules).
import { build } from 'esbuild';
import { existsSync, readdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { BANNER, inlinePackages } from './inline-packages.mjs';
import { prepareSandboxAids } from './sandbox-aids.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const started = Date.now();

for (const file of readdirSync(join(root, 'scripts')).filter((f) => /^build-.+\.mjs$/.test(f)).sort()) {
  const step = await import(pathToFileURL(join(root, 'scripts', file)).href);
  if (typeof step.default === 'function') await step.default({ root });
}

// Application entry points: each becomes dist/<name>.js.
const entries = {
  cli: 'src/cli/bin.ts',
  'sandbox-child': 'src/expressions/child/main.ts',
  // Which isolated-vm build this Node loads (scripts/prune-image.mjs asks it in the image's builder stage).
  'sandbox-build': 'src/expressions/isolated-vm.ts',
  // The warm-up plan and code cache that make sandboxes start faster (run below).
  'sandbox-prepare': 'src/expressions/child/prepare.ts',
  // Which better-sqlite3 line this Node loads, and the loader itself (scripts/prune-image.mjs, check-image.mjs).
  'sqlite-build': 'src/stores/drivers.ts',
};
const entryPoints = Object.fromEntries(
  Object.entries(entries).filter(([, src]) => existsSync(join(root, src))).map(([name, src]) => [name, join(root, src)]),
);
if (Object.keys(entryPoints).length) {
  // Chunk names carry a content hash: the chunks of an earlier build go first.
  rmSync(join(root, 'dist/chunks'), { recursive: true, force: true });
  await build({
    entryPoints,
    outdir: join(root, 'dist'),
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    // Dependencies bundled but for those scripts/inline-packages.mjs keeps external.
    plugins: [inlinePackages()],
    // Code shared by the entries, and each command's own code (loaded by a dynamic import when the command runs), go
    // into chunks: start-up loads only what the command needs.
    splitting: true,
    chunkNames: 'chunks/[name]-[hash]',
    sourcemap: true,
    logLevel: 'warning',
    banner: { js: BANNER },
  });
}
// cfgu/client (package.json "exports", docs/clients.md): one file of its own, dist/client.js, apart from the chunks
// above: it imports nothing but Node's own modules, so an application that loads it loads nothing else of cfgu.
if (existsSync(join(root, 'src/client/index.ts'))) {
  await build({
    entryPoints: { client: join(root, 'src/client/index.ts') },
    outdir: join(root, 'dist'),
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    packages: 'external',
    sourcemap: true,
    logLevel: 'warning',
  });
}
// 3. The sandbox's start-up aids next to its bundle, made with this Node (scripts/sandbox-aids.mjs).
const prepared = prepareSandboxAids(root);
console.log(`cfgu build: done in ${Date.now() - started} ms${prepared}`);
