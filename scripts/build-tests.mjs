// `npm test`'s test build: every test file bundled with the sources it imports into one ES module of plain JavaScript
// under .cache/test-build/ (the same relative path, `.test.mjs`), so that each test process is a plain `node` that
// loads one file, instead of a TypeScript loader (tsx) that starts a hooks thread and resolves every source module
// through it. Measured: 0.6-1.4 s of CPU less per test file (README.md, Development).
//
//   node scripts/build-tests.mjs FILE...        (paths relative to the checkout, e.g. test/core/names.test.ts)
//
// What keeps the bundles behaving like the sources:
// - `import.meta.url` in a bundled file is written as the URL of the source file it came from, so paths a test or a
//   module finds next to itself (fixtures, dist/, createRequire) are the ones it finds under tsx.
// - Packages are bundled as dist/ bundles them (scripts/inline-packages.mjs), so that the tests load what the binary
//   loads; those it keeps external, and the development dependencies (test tools), are loaded from node_modules at
//   run time (the bundles live inside the checkout so that node finds it). Code that several test files share (the
//   sources, the packages) goes into chunks of its own (.cache/test-build/chunks/), written once: 23 MB in all where
//   one bundle per file would be 190 MB.
// - test/helpers/capture.ts (the secret scan's recorder, preloaded with --import) is a module of its own that every
//   bundle imports, so the preloaded copy and the one the tests call are one module with one state.
// - Names are kept (esbuild's keepNames, as tsx does): class and function names stay what the sources say.
// - Inline source maps: with --enable-source-maps a stack trace names the .ts file and line.
// Type checking is not done here (tsc --noEmit runs beside it in scripts/test.mjs).
import { readFile, rm } from 'node:fs/promises';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { BANNER, inlinePackages } from './inline-packages.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
export const TEST_BUILD = join(root, '.cache', 'test-build');
export const CAPTURE_SOURCE = join(root, 'test', 'helpers', 'capture.ts');
/** Where the bundle of a source file (relative to the checkout) goes. */
export const bundleOf = (file) => join(TEST_BUILD, file.replace(/\.[cm]?ts$/, '.mjs'));
/** The source file (relative to the checkout) of a bundle's path, or undefined for another path. */
export function sourceOf(path) {
  const rel = relative(TEST_BUILD, resolve(root, path));
  return rel.startsWith('..') ? undefined : rel.replace(/\.mjs$/, '.ts');
}

const sourceUrls = {
  name: 'source-urls',
  setup(b) {
    b.onLoad({ filter: /\.[cm]?[jt]s$/ }, async (args) => {
      if (args.path.includes(`${join('/', 'node_modules', '/')}`)) return undefined;
      let text = await readFile(args.path, 'utf8');
      if (text.includes('import.meta.url')) text = text.replaceAll('import.meta.url', JSON.stringify(pathToFileURL(args.path).href));
      return { contents: text, loader: /\.[cm]?ts$/.test(args.path) ? 'ts' : 'js' };
    });
  },
};

const sharedCapture = {
  name: 'shared-capture',
  setup(b) {
    b.onResolve({ filter: /capture(\.js|\.ts)?$/ }, (args) => {
      if (!args.importer) return undefined;
      const target = resolve(args.resolveDir, args.path.replace(/\.js$/, '.ts'));
      if (target !== CAPTURE_SOURCE || args.importer === CAPTURE_SOURCE) return undefined;
      return { path: pathToFileURL(bundleOf(relative(root, CAPTURE_SOURCE))).href, external: true };
    });
  },
};

/** The development dependencies (package.json): left to node_modules by the test build. */
const devDependencies = Object.keys(JSON.parse(await readFile(join(root, 'package.json'), 'utf8')).devDependencies ?? {});

export async function buildTests(files) {
  const { build } = await import('esbuild');
  await rm(TEST_BUILD, { recursive: true, force: true });
  const entries = [...new Set([relative(root, CAPTURE_SOURCE), ...files])];
  await build({
    absWorkingDir: root,
    entryPoints: entries.map((f) => ({ in: join(root, f), out: f.replace(/\.[cm]?ts$/, '') })),
    outdir: TEST_BUILD,
    outExtension: { '.js': '.mjs' },
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: `node${process.versions.node.split('.')[0]}`,
    keepNames: true,
    splitting: true,
    chunkNames: 'chunks/[name]-[hash]',
    sourcemap: 'inline',
    sourcesContent: false,
    logLevel: 'error',
    plugins: [sharedCapture, inlinePackages({ alsoExternal: devDependencies }), sourceUrls],
    // `require` and the package paths of bundled packages (scripts/inline-packages.mjs), as in dist/.
    banner: { js: BANNER },
  });
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await buildTests(process.argv.slice(2));
}
