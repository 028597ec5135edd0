// Layering check run by `npm test` before the tests: dependency-cruiser with .dependency-cruiser.cjs over src/.
// dependency-cruiser reads TypeScript only through the `typescript` package's JS API, which TypeScript 7 no longer
// ships; so src/ is transpiled file by file with esbuild into a temporary folder first. Type-only imports count as
// dependencies (a port is a type): `import type` / `export type {..} from` lose their `type` before transpiling, and
// verbatimModuleSyntax keeps every import, used or not.
// Usage: node scripts/check-layers.mjs [<source folder>] (default: the repository's src/). Exit 0 when clean.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { transformSync } from 'esbuild';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const source = resolve(process.argv[2] ?? join(root, 'src'));

const walk = (dir) =>
  readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? walk(p) : /\.tsx?$/.test(name) && !/\.d\.ts$/.test(name) ? [p] : [];
  });

/** `import type X from`, `import type {..}`, `import type * as`, `export type {..} from`, `export type * from`. */
function keepTypeImports(text) {
  return text.replace(/^(\s*import)\s+type(?=\s+[\w${*])/gm, '$1').replace(/^(\s*export)\s+type(?=\s*[{*])/gm, '$1');
}

const work = mkdtempSync(join(tmpdir(), 'cfgu-layers-'));
try {
  for (const file of walk(source)) {
    const out = join(work, 'src', relative(source, file).replace(/\.tsx?$/, '.js'));
    mkdirSync(dirname(out), { recursive: true });
    const { code } = transformSync(keepTypeImports(readFileSync(file, 'utf8')), {
      loader: file.endsWith('.tsx') ? 'tsx' : 'ts',
      format: 'esm',
      sourcefile: file,
      // The console's components (src/console/*.tsx): JSX becomes calls of preact's runtime (an npm package).
      jsx: 'automatic',
      jsxImportSource: 'preact',
      tsconfigRaw: { compilerOptions: { verbatimModuleSyntax: true } },
    });
    writeFileSync(out, code);
  }
  const r = spawnSync(
    join(root, 'node_modules/.bin/depcruise'),
    ['--config', join(root, '.dependency-cruiser.cjs'), '--output-type', 'err', 'src'],
    { cwd: work, stdio: 'inherit' },
  );
  if (r.status !== 0) {
    console.error('cfgu layers: src/ breaks the layering (docs/architecture.md); paths above are src/**/*.ts as .js');
    process.exitCode = r.status ?? 1;
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}
