/**
 * maintainers/issue-audit.md is a traceability table (requirement → code → test → doc). Its citations go stale when code or
 * tests move: every cited file must exist, every cited test name must be in its test file, every cited code symbol
 * in its source file.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const TEXT = readFileSync(join(ROOT, 'maintainers', 'issue-audit.md'), 'utf8');
const source = (file: string) => readFileSync(join(ROOT, file), 'utf8');

/** Cells of a table row; a `|` inside backticks (`eval | export`) is text. */
function cells(row: string): string[] {
  const out: string[] = [];
  let cell = '';
  let code = false;
  for (const c of row.trim().slice(1, -1)) {
    if (c === '`') code = !code;
    if (c === '|' && !code) {
      out.push(cell.trim());
      cell = '';
    } else cell += c;
  }
  out.push(cell.trim());
  return out;
}

const rows = TEXT.split('\n')
  .filter((l) => l.startsWith('| ') && !l.startsWith('| requirement '))
  .map(cells);
const backticked = (cell: string) => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);
/** A repository path: a folder, a name and an extension, no glob. */
const isPath = (s: string) => /^[\w.-]+\/[\w./-]+\.\w+$/.test(s.split(':')[0]!);

test('the audit is a table of four columns with rows', () => {
  assert.ok(rows.length >= 60, `${rows.length} rows`);
  for (const r of rows) assert.equal(r.length, 4, r.join(' | '));
});

test('every cited file exists; every cited code symbol is in its file', () => {
  const missing: string[] = [];
  for (const [, code, tests, doc] of rows) {
    for (const ref of [code!, tests!, doc!].flatMap(backticked).filter(isPath)) {
      const [file, symbols] = ref.split(':') as [string, string | undefined];
      if (!existsSync(join(ROOT, file))) {
        missing.push(file);
        continue;
      }
      const text = source(file);
      for (const name of symbols?.split(/[/.]/) ?? []) {
        if (!new RegExp(`\\b${name}\\b`).test(text)) missing.push(`${file}: ${name}`);
      }
    }
  }
  assert.deepEqual(missing, []);
});

test('every cited test name is in the test file cited before it', () => {
  const missing: string[] = [];
  let checked = 0;
  for (const [, , tests] of rows) {
    let file: string | undefined;
    for (const part of tests!.split(/;\s*/)) {
      const cited = backticked(part).find((s) => isPath(s) && s.startsWith('test/'));
      if (cited) file = cited;
      const at = part.indexOf('›');
      if (at < 0 || !file) continue;
      const text = source(file);
      for (const [, name] of part.slice(at).matchAll(/"([^"]+)"/g)) {
        checked++;
        // `…` marks an omitted part: each remaining piece must be in the file.
        const pieces = name!.split('…').map((p) => p.trim()).filter(Boolean);
        if (!pieces.every((p) => text.includes(p))) missing.push(`${file} › "${name}"`);
      }
    }
  }
  assert.ok(checked >= 80, `${checked} names checked`);
  assert.deepEqual(missing, []);
});
