/**
 * The layering check (scripts/check-layers.mjs with .dependency-cruiser.cjs), which `npm test` runs on src/ before the
 * tests: it fails, naming the rule, on a source tree that breaks it (core importing another folder, also by a
 * type-only import; a cycle between two folders).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '../..');

function check(files?: Record<string, string>): { status: number | null; output: string } {
  let dir: string | undefined;
  const args = [join(root, 'scripts/check-layers.mjs')];
  if (files) {
    dir = mkdtempSync(join(tmpdir(), 'cfgu-layers-test-'));
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(dirname(join(dir, path)), { recursive: true });
      writeFileSync(join(dir, path), text);
    }
    args.push(dir);
  }
  try {
    const r = spawnSync(process.execPath, args, { cwd: root, encoding: 'utf8' });
    return { status: r.status, output: r.stdout + r.stderr };
  } finally {
    if (dir) rmSync(dir, { recursive: true, force: true });
  }
}

test('core importing a type from another folder fails the check', () => {
  const r = check({
    'core/eval.ts': "import type { Store } from '../stores/types.js';\nexport const use = (s: Store) => s.name;\n",
    'stores/types.ts': 'export interface Store { name: string }\n',
  });
  assert.notEqual(r.status, 0);
  assert.match(r.output, /core-imports-only-core: src\/core\/eval\.js → src\/stores\/types\.js/);
});

test('core importing a value from another folder fails the check; npm packages and built-ins do not', () => {
  const r = check({
    'core/a.ts': "import { join } from 'node:path';\nimport _ from 'lodash';\nimport { b } from '../expressions/b.js';\nexport const a = join(_.identity(b), 'x');\n",
    'expressions/b.ts': "export const b = 'b';\n",
  });
  assert.notEqual(r.status, 0);
  const lines = r.output.split('\n').filter((l) => l.includes('core-imports-only-core'));
  assert.deepEqual(lines.map((l) => l.trim()), ['error core-imports-only-core: src/core/a.js → src/expressions/b.js']);
});

test('a cycle between two folders fails the check; the same imports one way pass', () => {
  const oneWay = {
    'server/a.ts': "import { b } from '../config/b.js';\nexport const a = b;\n",
    'config/b.ts': 'export const b = 1;\n',
  };
  assert.equal(check(oneWay).status, 0);
  const r = check({ ...oneWay, 'config/b.ts': "import { c } from '../server/c.js';\nexport const b = c;\n", 'server/c.ts': 'export const c = 1;\n' });
  assert.notEqual(r.status, 0);
  assert.match(r.output, /no-folder-cycle: src\/config →/);
});

// The whole table of docs/architecture.md: each folder may import only the folders its row names.
const TABLE: Record<string, string[]> = {
  core: [],
  stores: ['core'],
  expressions: ['core'],
  config: ['core', 'stores'],
  server: ['core', 'stores', 'expressions', 'config'],
  client: [],
  console: [],
  cli: ['core', 'stores', 'expressions', 'config', 'server', 'client', 'console'],
};

test('every folder may import exactly the folders its row of the table names', () => {
  const folders = Object.keys(TABLE);
  const files: Record<string, string> = {};
  for (const to of folders) files[`${to}/target.ts`] = `export const ${to} = 1;\n`;
  // One file per (from, to) pair, so that each forbidden import is reported on a line of its own.
  for (const from of folders) {
    for (const to of folders) {
      if (from !== to) files[`${from}/uses-${to}.ts`] = `import { ${to} } from '../${to}/target.js';\nexport const x = ${to};\n`;
    }
  }
  const r = check(files);
  assert.notEqual(r.status, 0);
  for (const from of folders) {
    for (const to of folders) {
      if (from === to) continue;
      const reported = r.output.includes(`src/${from}/uses-${to}.js → src/${to}/target.js`);
      assert.equal(reported, !TABLE[from]!.includes(to), `${from} -> ${to}: ${reported ? 'reported' : 'not reported'}\n${r.output}`);
    }
  }
  // The allowed imports alone pass.
  const allowed = Object.fromEntries(
    Object.entries(files).filter(([path]) => {
      const m = /^(\w+)\/uses-(\w+)\.ts$/.exec(path);
      return !m || TABLE[m[1]!]!.includes(m[2]!);
    }),
  );
  const ok = check(allowed);
  assert.equal(ok.status, 0, ok.output);
});

test('stores importing the sandbox fails, naming the stores rule', () => {
  const r = check({
    'stores/redis.ts': "import { run } from '../expressions/index.js';\nexport const r = run;\n",
    'expressions/index.ts': 'export const run = 1;\n',
  });
  assert.notEqual(r.status, 0);
  assert.match(r.output, /error stores-imports-only-core: src\/stores\/redis\.js → src\/expressions\/index\.js/);
});

test('a folder missing from the table fails the check', () => {
  const r = check({
    'widgets/a.ts': "import { c } from '../core/c.js';\nexport const a = c;\n",
    'core/c.ts': 'export const c = 1;\n',
  });
  assert.notEqual(r.status, 0);
  assert.match(r.output, /no-unknown-folder: src\/widgets\/a\.js → src\/core\/c\.js/);
});
