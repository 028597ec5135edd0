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
    'config/a.ts': "import { b } from '../server/b.js';\nexport const a = b;\n",
    'server/b.ts': "export const b = 1;\n",
  };
  assert.equal(check(oneWay).status, 0);
  const r = check({ ...oneWay, 'server/b.ts': "import { c } from '../config/c.js';\nexport const b = c;\n", 'config/c.ts': 'export const c = 1;\n' });
  assert.notEqual(r.status, 0);
  assert.match(r.output, /no-folder-cycle: src\/config →/);
});
