/**
 * The json-file history sidecar as a log (src/stores/json-file-history.ts, docs/stores.md "Revisions and history"):
 * one appended line per write, a torn last line ignored and cut off, a line whose data file was never replaced left
 * out, the earlier one-document format read and converted, compaction keeping retention. Every check reads the result
 * through a store object opened afterwards (as another process would), besides the one that wrote.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { appendFileSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { StoreUnavailableError } from '../../src/core/errors.js';
import type { RevisionRecord } from '../../src/core/ports.js';
import { JsonFileConfigStore, type JsonFileStoreOptions } from '../../src/stores/json-file.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const TMP = join(root, 'test', '.tmp', `json-file-history-${Date.now().toString(36)}${randomBytes(3).toString('hex')}`);
mkdirSync(TMP, { recursive: true });
after(() => rmSync(TMP, { recursive: true, force: true }));

let n = 0;
const file = () => join(TMP, `h${++n}.json`);
const sidecar = (path: string) => `${path}.history.json`;
const lines = (path: string) => readFileSync(sidecar(path), 'utf8').split('\n');
const identity = (path: string) => {
  const st = statSync(path, { bigint: true });
  return `${st.ino}:${st.size}:${st.mtimeNs}`;
};

async function open(path: string, extra: Partial<JsonFileStoreOptions> = {}): Promise<JsonFileConfigStore> {
  const s = new JsonFileConfigStore('files', { path, ...extra });
  await s.init();
  return s;
}

/** The whole history of a set, oldest first, as [revision, recorded, key=after...]. */
async function folded(s: JsonFileConfigStore, set: string): Promise<Array<[number, boolean, string]>> {
  const page = await s.history({ set, limit: 1000 });
  return page.records.reverse().map((r) => [r.revision, r.recorded, r.changes.map((c) => `${c.key}=${c.after}`).join(',')]);
}

/** A fresh store object's view: revision, whether it finds an outside change, and the folded history. */
async function seenAfresh(path: string, set: string, extra: Partial<JsonFileStoreOptions> = {}) {
  const s = await open(path, extra);
  try {
    const { revision, changedOutside } = await s.revision(set);
    return { revision, changedOutside, history: await folded(s, set) };
  } finally {
    await s.close();
  }
}

describe('json-file history log', () => {
  test('each write appends one line (the file is not replaced); the data file keeps the layout Configu writes', async () => {
    const path = file();
    const s = await open(path);
    await s.write('prod', [{ key: 'A', value: '1' }]);
    const ino = statSync(sidecar(path)).ino;
    await s.write('prod', [{ key: 'A', value: '2' }, { key: 'B', value: 'x' }]);
    await s.write('dev', [{ key: 'A', value: '3' }]);
    assert.equal(statSync(sidecar(path)).ino, ino, 'appended to, not replaced');
    const text = lines(path);
    assert.equal(text.pop(), '', 'every line ends with a newline');
    assert.equal(text.length, 4, 'the base (made by the first write, with its line), then one line per write');
    assert.equal(JSON.parse(text[0]!).format, 'cfgu-history/2');
    assert.deepEqual(text.slice(1).map((l) => (JSON.parse(l) as { set: string; revision: number }).revision), [1, 2, 1]);
    const data = readFileSync(path, 'utf8');
    assert.equal(data, `${JSON.stringify(JSON.parse(data), null, 2)}\n`, 'indented by two, as before');
    assert.deepEqual(JSON.parse(data), [
      { set: 'prod', key: 'A', value: '2' },
      { set: 'prod', key: 'B', value: 'x' },
      { set: 'dev', key: 'A', value: '3' },
    ]);
    await s.close();
    assert.deepEqual(await seenAfresh(path, 'prod'), { revision: 2, changedOutside: false, history: [[1, true, 'A=1'], [2, true, 'A=2,B=x']] });
  });

  test('a torn last line (a crash in the middle of an append) is ignored by readers and cut off by the next write', async () => {
    const path = file();
    const s = await open(path);
    await s.write('prod', [{ key: 'A', value: '1' }]);
    await s.write('prod', [{ key: 'A', value: '2' }]);
    await s.close();
    const whole = lines(path)[2]!;
    // The first half of a line like the last one, without its newline: what a crash mid-append leaves.
    appendFileSync(sidecar(path), whole.replace('"revision":2', '"revision":3').slice(0, whole.length >> 1));
    const expected = [[1, true, 'A=1'], [2, true, 'A=2']];
    assert.deepEqual(await seenAfresh(path, 'prod'), { revision: 2, changedOutside: false, history: expected });
    const w = await open(path);
    assert.equal((await w.write('prod', [{ key: 'A', value: '3' }])).revision, 3);
    await w.close();
    assert.ok(lines(path).every((l) => l === '' || JSON.parse(l)), 'the torn part was cut off: every line is whole');
    assert.deepEqual(await seenAfresh(path, 'prod'), { revision: 3, changedOutside: false, history: [...expected, [3, true, 'A=3']] });
  });

  test('an empty history file (made by hand) is an empty history; the first write gives it its base', async () => {
    const path = file();
    writeFileSync(path, JSON.stringify([{ set: 'prod', key: 'A', value: '1' }]));
    writeFileSync(sidecar(path), '');
    assert.deepEqual(await seenAfresh(path, 'prod'), { revision: 0, changedOutside: true, history: [] });
    const s = await open(path);
    assert.equal((await s.write('prod', [{ key: 'A', value: '2' }])).revision, 2);
    await s.close();
    assert.equal(JSON.parse(lines(path)[0]!).format, 'cfgu-history/2');
    assert.deepEqual(await seenAfresh(path, 'prod'), { revision: 2, changedOutside: false, history: [[1, false, 'A=1'], [2, true, 'A=2']] });
  });

  test('a damaged line before the last is refused: reads and writes fail, the file is left as it is', async () => {
    const path = file();
    const s = await open(path);
    await s.write('prod', [{ key: 'A', value: '1' }]);
    await s.write('prod', [{ key: 'A', value: '2' }]);
    await s.close();
    const text = lines(path);
    text[1] = '{"epoch": damaged';
    writeFileSync(sidecar(path), text.join('\n'));
    const w = await open(path);
    const refused = (e: unknown) => e instanceof StoreUnavailableError && e.message === 'store "files" is unavailable: the history file is not valid; not writing over it';
    await assert.rejects(w.history({ set: 'prod' }), refused);
    await assert.rejects(w.write('prod', [{ key: 'A', value: '3' }]), refused);
    assert.equal(readFileSync(sidecar(path), 'utf8'), text.join('\n'), 'not written over');
    assert.deepEqual(JSON.parse(readFileSync(path, 'utf8')), [{ set: 'prod', key: 'A', value: '2' }], 'nor the data');
    await w.close();
  });

  test('a line whose data file was never replaced (a crash between the append and the rename) is left out, also after later writes', async () => {
    const path = file();
    const s = await open(path);
    await s.write('prod', [{ key: 'A', value: '1' }]);
    await s.write('prod', [{ key: 'A', value: '2' }]);
    await s.close();
    // What the crashed write appended: its line, naming the data file that is still there.
    const last = JSON.parse(lines(path)[2]!) as { revision: number; file: string; records: RevisionRecord[] };
    const lost = { ...last, revision: 3, file: identity(path), records: [{ ...last.records[0]!, revision: 3, changes: [{ key: 'A', before: '2', after: 'lost' }] }] };
    appendFileSync(sidecar(path), `${JSON.stringify(lost)}\n`);
    const expected = [[1, true, 'A=1'], [2, true, 'A=2']];
    assert.deepEqual(await seenAfresh(path, 'prod'), { revision: 2, changedOutside: false, history: expected }, 'the data file says it did not land');
    const w = await open(path);
    assert.equal((await w.write('prod', [{ key: 'A', value: '3' }])).revision, 3, 'its revision is taken again');
    await w.close();
    assert.equal(lines(path).length, 6, 'the lost line stays in the file: the next line, naming the same data file, leaves it out');
    assert.deepEqual(await seenAfresh(path, 'prod'), { revision: 3, changedOutside: false, history: [...expected, [3, true, 'A=3']] });
  });

  test('a sidecar of the earlier one-document format is read as it is, its pending write settled by the data file, and converted by the first write', async () => {
    const path = file();
    writeFileSync(path, JSON.stringify([{ set: 'prod', key: 'A', value: '2' }]));
    const record = (revision: number, before: string | null, after: string): RevisionRecord => ({
      set: 'prod',
      revision,
      time: new Date(Date.UTC(2026, 0, revision)).toISOString(),
      subject: 'ops',
      requestId: null,
      message: null,
      recorded: true,
      changes: [{ key: 'A', before, after }],
    });
    const v1 = (pending?: unknown) =>
      `${JSON.stringify({ format: 'cfgu-history/1', sets: { prod: { revision: 3, snapshot: { A: '3' }, records: [record(1, null, '1'), record(2, '1', '2'), record(3, '2', '3')] } }, ...(pending ? { pending } : {}) })}\n`;
    // Revision 3's write never landed: the data file is still the one it was to replace.
    writeFileSync(sidecar(path), v1({ set: 'prod', revision: 3, file: identity(path), undo: { revision: 2, snapshot: { A: '2' } } }));
    const expected: Array<[number, boolean, string]> = [[1, true, 'A=1'], [2, true, 'A=2']];
    assert.deepEqual(await seenAfresh(path, 'prod'), { revision: 2, changedOutside: false, history: expected });
    // Without `pending` (it landed), the same document reads as revision 3, and the data, still at 2, as changed outside.
    writeFileSync(sidecar(path), v1());
    assert.deepEqual(await seenAfresh(path, 'prod'), { revision: 3, changedOutside: true, history: [...expected, [3, true, 'A=3']] });
    // The first write converts it: a base of the new format, then its line.
    const w = await open(path);
    assert.equal((await w.write('prod', [{ key: 'A', value: '4' }])).revision, 5);
    await w.close();
    assert.equal(JSON.parse(lines(path)[0]!).format, 'cfgu-history/2');
    assert.deepEqual(await seenAfresh(path, 'prod'), {
      revision: 5,
      changedOutside: false,
      history: [...expected, [3, true, 'A=3'], [4, false, 'A=2'], [5, true, 'A=4']],
    });
  });

  test('compaction: the file is replaced by a base of the records retention keeps, then grows by lines again; every reader folds the same history', async () => {
    const path = file();
    const extra = { history: { enabled: true, keep: 3, maxAgeDays: undefined }, historyCompactLines: 5 };
    const s = await open(path, extra);
    const other = await open(path, extra); // another replica: reads what the first appends, and writes too
    const inodes = new Set<bigint>();
    for (let i = 1; i <= 14; i++) {
      await (i % 4 === 0 ? other : s).write('prod', [{ key: 'A', value: String(i) }]);
      inodes.add(statSync(sidecar(path), { bigint: true }).ino);
      assert.ok(lines(path).length - 2 <= 5, `write ${i}: at most the base and 5 lines (then a write compacts)`);
      assert.deepEqual(await folded(other, 'prod'), await folded(s, 'prod'), `write ${i}: both replicas fold the same history`);
    }
    assert.ok(inodes.size >= 2, 'the file was replaced at least once (compacted)');
    const base = JSON.parse(lines(path)[0]!) as { sets: Record<string, { records: unknown[] }> };
    assert.ok(base.sets.prod!.records.length <= 3, 'the base holds only the records retention keeps');
    const history = [[12, true, 'A=12'], [13, true, 'A=13'], [14, true, 'A=14']];
    assert.deepEqual(await seenAfresh(path, 'prod', extra), { revision: 14, changedOutside: false, history });
    await s.close();
    await other.close();
  });
});
