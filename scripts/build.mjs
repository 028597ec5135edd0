// Build step run by `npm ci` (postinstall), `npm test` and `npm start`'s prerequisites:
// 1. every `scripts/build-*.mjs` step (e.g. the sandbox library bundle), then
// 2. the application bundles in dist/ (esbuild; dependencies stay external in node_modules).
import { build } from 'esbuild';
import { existsSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const started = Date.now();

for (const file of readdirSync(join(root, 'scripts')).filter((f) => /^build-.+\.mjs$/.test(f)).sort()) {
  const step = await import(pathToFileURL(join(root, 'scripts', file)).href);
  if (typeof step.default === 'function') await step.default({ root });
}

// Application entry points: each becomes dist/<name>.js.
const entries = {
  cli: 'src/cli/bin.ts',
  'sandbox-child': 'src/expressions/sandbox-child.ts',
  // Which isolated-vm build this Node loads (scripts/prune-image.mjs asks it in the image's builder stage).
  'sandbox-build': 'src/expressions/isolated-vm.ts',
  // Which better-sqlite3 line this Node loads, and the loader itself (scripts/prune-image.mjs, check-image.mjs).
  'sqlite-build': 'src/stores/drivers.ts',
};
const entryPoints = Object.fromEntries(
  Object.entries(entries).filter(([, src]) => existsSync(join(root, src))).map(([name, src]) => [name, join(root, src)]),
);
if (Object.keys(entryPoints).length) {
  await build({
    entryPoints,
    outdir: join(root, 'dist'),
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    packages: 'external',
    sourcemap: true,
    logLevel: 'warning',
    banner: { js: "import { createRequire as __cfguCreateRequire } from 'node:module'; const require = __cfguCreateRequire(import.meta.url);" },
  });
}
console.log(`cfgu build: done in ${Date.now() - started} ms`);
