/**
 * The size check (scripts/check-sizes.mjs), which `npm test` runs on src/ before the tests: a file over 400 lines or a
 * function over 100 fails it, named with its line and length; the exceptions it allows must still be needed.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '../..');

function check(files: Record<string, string>): { status: number | null; output: string } {
  const dir = mkdtempSync(join(tmpdir(), 'cfgu-sizes-test-'));
  try {
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(dirname(join(dir, path)), { recursive: true });
      writeFileSync(join(dir, path), text);
    }
    const r = spawnSync(process.execPath, [join(root, 'scripts/check-sizes.mjs'), dir], { cwd: root, encoding: 'utf8' });
    return { status: r.status, output: r.stdout + r.stderr };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A function of exactly `lines` lines (its first line, `lines - 2` statements, its closing brace), typed. */
const fn = (name: string, lines: number) =>
  [`export function ${name}(a: number): number {`, ...Array.from({ length: lines - 2 }, (_, i) => `  a += ${i} as number;`), '}'].join('\n');

test('a function of 100 lines and a file of 400 pass', () => {
  const file = [fn('hundred', 100), ...Array.from({ length: 300 }, (_, i) => `export const c${i}: number = ${i};`)].join('\n') + '\n';
  assert.equal(file.split('\n').length - 1, 400);
  const r = check({ 'core/a.ts': file });
  assert.equal(r.status, 0, r.output);
});

test('a function of 101 lines fails, named with its first line and length', () => {
  const r = check({ 'core/a.ts': `// a comment\n${fn('tooLong', 101)}\n` });
  assert.equal(r.status, 1);
  assert.match(r.output, /core\/a\.ts:2 tooLong: 101 lines, over the limit of 100 for a function/);
});

test('methods, arrow functions and callbacks count, each under the name a reader looks for', () => {
  const body = Array.from({ length: 105 }, (_, i) => `      n += ${i};`).join('\n');
  const text = [
    'export class Pool {',
    '  private n = 0;',
    '  drain(list: number[]): number {',
    '    let n = 0;',
    '    list.forEach((x: number) => {',
    body,
    '    });',
    '    return n;',
    '  }',
    '}',
    'export const handler = async (x: number): Promise<number> => {',
    body.replace(/n \+=/g, 'x +='),
    '  return x;',
    '};',
    '',
  ].join('\n');
  const r = check({ 'server/p.ts': text });
  assert.equal(r.status, 1);
  assert.match(r.output, /server\/p\.ts:3 drain: 111 lines/);
  assert.match(r.output, /server\/p\.ts:5 <anonymous>: 107 lines/);
  assert.match(r.output, /server\/p\.ts:115 handler: 108 lines/);
});

test('a file of 401 lines fails, and type-only lines count', () => {
  const text = Array.from({ length: 401 }, (_, i) => `export interface I${i} { a: number }`).join('\n') + '\n';
  const r = check({ 'stores/wide.ts': text });
  assert.equal(r.status, 1);
  assert.match(r.output, /stores\/wide\.ts: 401 lines, over the limit of 400 for a file/);
});

test('declaration files are not checked', () => {
  const text = Array.from({ length: 500 }, (_, i) => `export declare const c${i}: number;`).join('\n') + '\n';
  assert.equal(check({ 'cli/ini.d.ts': text }).status, 0);
});

test('the repository passes its own check, with every exception still needed', () => {
  const r = spawnSync(process.execPath, [join(root, 'scripts/check-sizes.mjs')], { cwd: root, encoding: 'utf8' });
  assert.equal(r.status, 0, r.stdout + r.stderr);
});
