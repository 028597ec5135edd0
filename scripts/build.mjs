// Build step run by `npm ci` (postinstall), `npm test` and `npm start`'s prerequisites:
// 1. every `scripts/build-*.mjs` step (e.g. the sandbox library bundle), then
// 2. the application bundles in dist/ (esbuild; the dependencies are bundled too, but for the native addons and the
//    few packages scripts/inline-packages.mjs keeps in node_modules).
import { build } from 'esbuild';
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { BANNER, inlinePackages } from './inline-packages.mjs';

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
// 3. The sandbox's start-up aids next to its bundle (src/expressions/child/prepared.ts): made with this Node, in a process of
// their own (isolated-vm needs --no-node-snapshot). Without them sandboxes start the slow way, so a failure here (no
// isolated-vm build for this Node yet) is a warning, not a failed build.
let prepared = '';
if (existsSync(join(root, 'dist/sandbox-prepare.js'))) {
  const r = spawnSync(process.execPath, ['--no-node-snapshot', join(root, 'dist/sandbox-prepare.js')], { cwd: root, encoding: 'utf8' });
  const line = (r.stdout ?? '').trim().split('\n').pop() ?? '';
  if (r.status === 0 && line.startsWith('{')) {
    const p = JSON.parse(line);
    prepared = p.plan
      ? `; sandbox warm-up plan of ${p.plan} calls, code cache ${(p.cache.bytes / 2 ** 20).toFixed(1)} MiB (start-up ${p.startupMs.full} -> ${p.startupMs.prepared} ms)`
      : `; sandbox start-up aids: ${p.why ?? 'none made'}`;
  } else {
    console.warn(`cfgu build: warning: the sandbox start-up aids were not made (sandboxes start without them): ${(r.stderr || r.stdout || r.error?.message || '').trim().split('\n')[0]}`);
  }
}
console.log(`cfgu build: done in ${Date.now() - started} ms${prepared}`);
