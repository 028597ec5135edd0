// Build step (run by scripts/build.mjs, hence by `npm ci`, `npm test` and `npm pack`): the browser console, from
// src/console/ (Preact components in TSX) to dist/console/: index.html and assets/ holding one JavaScript and one CSS
// file whose names carry a content hash (served with a year-long cache by the server; index.html is revalidated).
// Minified, for current browsers; no source maps shipped. dist/console/manifest.json lists the files with their sizes
// (raw and gzipped) for the bundle-size budget (bench/console-size.mjs).
import { build } from 'esbuild';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { gzipSync } from 'node:zlib';

/**
 * What a first visit may download, gzipped (bench/console.mjs reports it, test/console/bundle.test.ts holds the build
 * to it): the one script and the one style sheet.
 */
export const CONSOLE_BUDGET = { js: 60 * 1024, css: 10 * 1024 };

export default async function buildConsole({ root }) {
  const src = join(root, 'src/console');
  if (!existsSync(join(src, 'main.tsx'))) return;
  const out = join(root, 'dist/console');
  rmSync(out, { recursive: true, force: true });
  mkdirSync(join(out, 'assets'), { recursive: true });
  const result = await build({
    entryPoints: { app: join(src, 'main.tsx') },
    outdir: join(out, 'assets'),
    entryNames: '[name]-[hash]',
    assetNames: '[name]-[hash]',
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: ['chrome109', 'firefox115', 'safari16'],
    jsx: 'automatic',
    jsxImportSource: 'preact',
    tsconfig: join(src, 'tsconfig.json'),
    minify: true,
    legalComments: 'none',
    metafile: true,
    logLevel: 'warning',
  });
  const files = Object.keys(result.metafile.outputs).map((p) => basename(p));
  const js = files.find((f) => f.endsWith('.js'));
  const css = files.find((f) => f.endsWith('.css'));
  if (!js || !css) throw new Error(`console build: expected one .js and one .css, got ${files.join(', ')}`);
  const html = readFileSync(join(src, 'index.html'), 'utf8').replace('%JS%', js).replace('%CSS%', css);
  writeFileSync(join(out, 'index.html'), html);
  const sizes = Object.fromEntries(
    ['index.html', ...files.map((f) => `assets/${f}`)].map((f) => {
      const bytes = readFileSync(join(out, f));
      return [f, { bytes: bytes.length, gzip: gzipSync(bytes, { level: 9 }).length }];
    }),
  );
  writeFileSync(join(out, 'manifest.json'), `${JSON.stringify({ js: `assets/${js}`, css: `assets/${css}`, files: sizes }, null, 2)}\n`);
}
