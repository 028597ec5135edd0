/**
 * core/impact.ts: the statuses of a write's impact per named schema and set, the sets looked at (the written one and
 * those under it, bounded), and the overlay view of a store (reads as if the changes were written; writes nothing).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { impactOf, overlayStore, type ResolvedStore, type SetListing, type StoreRevisions } from '../../src/core/index.js';
import { MemoryStore } from '../helpers/engine.js';

/** A MemoryStore with the listing of its sets (the only part of the revisions the impact uses). */
function store(configs: Array<{ set: string; key: string; value: string }>): MemoryStore & { revisions: StoreRevisions } {
  const s = new MemoryStore('main', 'in-memory', configs) as MemoryStore & { revisions: StoreRevisions };
  const list = async (prefix: string, options?: { sets?: number }): Promise<SetListing> => {
    const sets = [...new Set([...s.data.keys()].map((k) => k.split('\u0000')[0]!))]
      .filter((set) => prefix === '' || set === prefix || set.startsWith(`${prefix}/`))
      .sort();
    const max = options?.sets ?? 1000;
    return { prefix, sets: sets.slice(0, max).map((set) => ({ set, keys: [] })), truncated: sets.length > max, limits: { sets: max, keys: 100_000 } };
  };
  (s as { revisions: StoreRevisions }).revisions = { list } as unknown as StoreRevisions;
  return s;
}

const app = { name: 'app', schema: { keys: { URL: { required: true }, LEVEL: { enum: ['debug', 'info'] } } } };
const other = { name: 'other', schema: { keys: { UNRELATED: {} } } };

test('breaks, fixes, changes and unchanged, per schema declaring a changed key and per set at or under the written one', async () => {
  const s = store([
    { set: '', key: 'URL', value: 'https://a' },
    { set: 'prod', key: 'LEVEL', value: 'info' },
    { set: 'prod/eu', key: 'URL', value: 'https://eu' },
    { set: 'staging', key: 'LEVEL', value: 'debug' },
  ]);
  const removed = await impactOf({ store: s, set: '', changes: [{ key: 'URL', after: '' }], schemas: [app, other] });
  assert.deepEqual(removed, {
    truncated: false,
    impact: [
      { schema: 'app', set: '', status: 'breaks', changed: ['URL'], failures: [{ key: 'URL', rule: 'required', message: 'key "URL" is required but has no value' }] },
      { schema: 'app', set: 'prod', status: 'breaks', changed: ['URL'], failures: [{ key: 'URL', rule: 'required', message: 'key "URL" is required but has no value' }] },
      // prod/eu holds its own URL: the root's does not reach it.
      { schema: 'app', set: 'prod/eu', status: 'unchanged', changed: [], failures: [] },
      { schema: 'app', set: 'staging', status: 'breaks', changed: ['URL'], failures: [{ key: 'URL', rule: 'required', message: 'key "URL" is required but has no value' }] },
    ],
  });
  assert.equal(s.writes, 0, 'the impact writes nothing');
  const level = await impactOf({ store: s, set: 'prod', changes: [{ key: 'LEVEL', after: 'debug' }], schemas: [app, other] });
  assert.deepEqual(level.impact.map((i) => [i.set, i.status, i.changed]), [['prod', 'changes', ['LEVEL']], ['prod/eu', 'changes', ['LEVEL']]]);
  // No schema declares the key: no impact, and no store read.
  const reads = s.reads;
  assert.deepEqual(await impactOf({ store: s, set: 'prod', changes: [{ key: 'NOPE', after: 'x' }], schemas: [app] }), { impact: [], truncated: false });
  assert.equal(s.reads, reads);
  // A set that failed and passes after: fixes.
  await s.write([{ set: 'staging', key: 'LEVEL', value: 'loud' }]);
  const fixed = await impactOf({ store: s, set: 'staging', changes: [{ key: 'LEVEL', after: 'info' }], schemas: [app] });
  assert.deepEqual(fixed.impact, [{ schema: 'app', set: 'staging', status: 'fixes', changed: ['LEVEL'], failures: [] }]);
});

test('at most maxSets sets, the written one first; past that `truncated`', async () => {
  const configs = Array.from({ length: 5 }, (_, i) => ({ set: `prod/s${i}`, key: 'LEVEL', value: 'info' }));
  const s = store([{ set: '', key: 'URL', value: 'u' }, ...configs]);
  const r = await impactOf({ store: s, set: 'prod', changes: [{ key: 'LEVEL', after: 'debug' }], schemas: [app], maxSets: 3 });
  assert.deepEqual(r.impact.map((i) => i.set), ['prod', 'prod/s0', 'prod/s1']);
  assert.equal(r.truncated, true);
  const all = await impactOf({ store: s, set: 'prod', changes: [{ key: 'LEVEL', after: 'debug' }], schemas: [app], maxSets: 6 });
  assert.equal(all.truncated, false);
  assert.equal(all.impact.length, 6);
});

test('the overlay answers the pending values at the written set only, and refuses writes', async () => {
  const s: ResolvedStore = store([{ set: 'prod', key: 'A', value: '1' }, { set: 'prod', key: 'B', value: '2' }, { set: '', key: 'A', value: 'root' }]);
  const view = overlayStore(s, 'prod', [{ key: 'A', after: '' }, { key: 'C', after: '3' }]);
  const { configs } = await view.read([{ set: 'prod', key: 'A' }, { set: 'prod', key: 'B' }, { set: 'prod', key: 'C' }, { set: '', key: 'A' }]);
  assert.deepEqual(configs.sort((x, y) => (x.set + x.key).localeCompare(y.set + y.key)), [
    { set: '', key: 'A', value: 'root' },
    { set: 'prod', key: 'B', value: '2' },
    { set: 'prod', key: 'C', value: '3' },
  ]);
  await assert.rejects(view.write([]), /an impact view is read-only/);
});

test('the store is read once for every schema and set (one batch of their keys at every set of the hierarchies), in the order of schemas then sets', async () => {
  const configs = Array.from({ length: 6 }, (_, i) => ({ set: `prod/s${i}`, key: 'LEVEL', value: i % 2 ? 'info' : 'debug' }));
  const s = store([{ set: '', key: 'URL', value: 'u' }, { set: 'prod', key: 'LEVEL', value: 'info' }, ...configs]);
  const level = { name: 'level', schema: { keys: { LEVEL: { enum: ['info', 'warn'] }, URL: {} } } };
  const reads = s.reads;
  const report = await impactOf({ store: s, set: 'prod', changes: [{ key: 'LEVEL', after: 'warn' }], schemas: [app, other, level] });
  assert.equal(s.reads - reads, 1, 'one read');
  // prod breaks "app" (whose enum lacks warn) and changes "level"; the sets under it hold their own LEVEL: unchanged.
  const under = (schema: string) => configs.map((c) => [schema, c.set, 'unchanged']);
  assert.deepEqual(report.impact.map((i) => [i.schema, i.set, i.status]), [['app', 'prod', 'breaks'], ...under('app'), ['level', 'prod', 'changes'], ...under('level')]);
  assert.deepEqual(
    report.impact.filter((i) => i.schema === 'level' && i.set !== 'prod').map((i) => i.failures.length),
    configs.map((c) => (c.value === 'debug' ? 1 : 0)),
    'the failures after the write are those of each set (debug is not in the enum of "level")',
  );
});
