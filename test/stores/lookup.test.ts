import assert from 'node:assert/strict';
import { test } from 'node:test';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { indexBySet, lookUp } from '../../src/stores/common.js';
import { InMemoryConfigStore } from '../../src/stores/in-memory.js';
import { JsonFileConfigStore } from '../../src/stores/json-file.js';
import { memoryRegistry } from '../../bench/stores.js';
import { exportPipeline, freezeDeep, type EvalCommandInput } from '../../src/core/index.js';

const configs = [
  { set: '', key: 'A', value: 'root-a' },
  { set: 'prod', key: 'A', value: 'prod-a' },
  { set: 'prod', key: 'B', value: 'prod-b' },
  { set: 'prod', key: 'E', value: '' },
  { set: 'prod/eu', key: 'B', value: 'eu-b' },
];

test('lookUp answers each stored config once per call, whatever repeats within the call, and again in the next call', () => {
  const index = indexBySet(configs);
  const queries = [
    { set: '', key: 'A' },
    { set: 'prod', key: 'A' },
    { set: 'prod', key: 'B' },
    { set: 'prod', key: 'A' }, // repeated within the run of its set
    { set: 'prod', key: 'E' }, // empty: never answered
    { set: 'prod/eu', key: 'B' },
    { set: 'prod', key: 'B' }, // its set comes back after another set
    { set: 'prod/eu', key: 'MISSING' },
    { set: 'nowhere', key: 'A' },
  ];
  const expected = [configs[0], configs[1], configs[2], configs[4]];
  for (let round = 0; round < 3; round++) assert.deepEqual(lookUp(index, queries), expected, `round ${round}`);
  // An overlapping batch right after: the entries the last call answered are answered again.
  assert.deepEqual(lookUp(index, [{ set: 'prod', key: 'B' }, { set: 'prod', key: 'B' }]), [configs[2]]);
  // Two indexes share no state: a lookup in one does not hide an entry of the other.
  const other = indexBySet(configs);
  assert.deepEqual(lookUp(other, [{ set: '', key: 'A' }]), [configs[0]]);
  assert.deepEqual(lookUp(index, [{ set: '', key: 'A' }]), [configs[0]]);
});

test('lookUp hands out frozen configs that later writes to an in-memory store do not change', async () => {
  const store = new InMemoryConfigStore();
  await store.set([{ set: 's', key: 'K', value: 'one' }]);
  const [before] = await store.get([{ set: 's', key: 'K' }]);
  await store.set([{ set: 's', key: 'K', value: 'two' }]);
  const [after] = await store.get([{ set: 's', key: 'K' }, { set: 's', key: 'K' }]);
  assert.equal(before!.value, 'one');
  assert.ok(Object.isFrozen(before));
  assert.equal(after!.value, 'two');
  assert.deepEqual(await store.get([{ set: 's', key: 'K' }, { set: 's', key: 'K' }]), [{ set: 's', key: 'K', value: 'two' }]);
});

test('a frozen batch is answered from the memo while the store is unchanged, and afresh after every write', async () => {
  const store = new InMemoryConfigStore();
  await store.set([
    { set: '', key: 'A', value: 'root-a' },
    { set: 'prod', key: 'A', value: 'prod-a' },
  ]);
  const batch = Object.freeze([Object.freeze({ set: '', key: 'A' }), Object.freeze({ set: 'prod', key: 'A' }), Object.freeze({ set: 'prod', key: 'B' })]);
  const first = await store.get(batch);
  assert.deepEqual(first, [
    { set: '', key: 'A', value: 'root-a' },
    { set: 'prod', key: 'A', value: 'prod-a' },
  ]);
  // Unchanged store: the same answer object, which no caller can change.
  assert.equal(await store.get(batch), first);
  assert.ok(Object.isFrozen(first));
  // A write (an insert, an update, a delete) is seen by the next read of the same batch.
  await store.set([{ set: 'prod', key: 'B', value: 'prod-b' }]);
  const second = await store.get(batch);
  assert.notEqual(second, first);
  assert.deepEqual(second.map((c) => c.value), ['root-a', 'prod-a', 'prod-b']);
  await store.set([{ set: 'prod', key: 'A', value: 'changed' }]);
  assert.deepEqual((await store.get(batch)).map((c) => c.value), ['root-a', 'changed', 'prod-b']);
  await store.set([{ set: '', key: 'A', value: '' }]);
  assert.deepEqual((await store.get(batch)).map((c) => c.value), ['changed', 'prod-b']);
  // A batch that is not frozen gets a new array on every read, which its caller may change.
  const open = [{ set: 'prod', key: 'B' }];
  const a = await store.get(open);
  const b = await store.get(open);
  assert.notEqual(a, b);
  assert.ok(!Object.isFrozen(a));
  a.push({ set: 'x', key: 'Y', value: 'z' });
  assert.deepEqual(await store.get(open), [{ set: 'prod', key: 'B', value: 'prod-b' }]);
});

test('the json-file store answers a frozen batch afresh once the file changed, also when another process rewrote it', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'cfgu-lookup-'));
  try {
    const path = join(dir, 'configs.json');
    writeFileSync(path, JSON.stringify([{ set: '', key: 'A', value: 'one' }]));
    const store = new JsonFileConfigStore('lookup', { path });
    await store.init();
    const batch = Object.freeze([Object.freeze({ set: '', key: 'A' })]);
    const first = await store.get(batch);
    assert.deepEqual(first, [{ set: '', key: 'A', value: 'one' }]);
    assert.equal(await store.get(batch), first);
    // Rewritten behind the store's back (as Configu's CLI or an editor would), with a longer text.
    writeFileSync(path, JSON.stringify([{ set: '', key: 'A', value: 'two, longer' }]));
    assert.deepEqual(await store.get(batch), [{ set: '', key: 'A', value: 'two, longer' }]);
    // Written through the store.
    await store.set([{ set: '', key: 'A', value: 'three' }]);
    assert.deepEqual(await store.get(batch), [{ set: '', key: 'A', value: 'three' }]);
    await store.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('repeated exports of one frozen body through an in-process store: the deepest set wins, and every write is seen', async () => {
  const registry = await memoryRegistry([
    { set: '', key: 'A', value: 'root-a' },
    { set: 'prod', key: 'A', value: 'prod-a' },
    { set: '', key: 'B', value: 'root-b' },
    { set: 'prod/eu', key: 'C', value: 'eu-c' },
  ]);
  const store = registry.store('main')!;
  // The server's body cache hands out one deep-frozen body for a repeated request text.
  const body = freezeDeep([{ store: 'main', set: 'prod/eu', schema: { keys: { A: {}, B: {}, C: {}, D: { default: 'd' } } } }]);
  const root = freezeDeep([{ store: 'main', set: '', schema: body[0]!.schema }]);
  const answer = async (b: typeof body) => (await exportPipeline(b as unknown as EvalCommandInput[], { stores: registry })).configs;
  for (let round = 0; round < 3; round++) {
    assert.deepEqual(await answer(body), { A: 'prod-a', B: 'root-b', C: 'eu-c', D: 'd' }, `round ${round}`);
    assert.deepEqual(await answer(root), { A: 'root-a', B: 'root-b', C: '', D: 'd' }, `round ${round}`);
  }
  await store.set([{ set: 'prod/eu', key: 'A', value: 'eu-a' }, { set: '', key: 'B', value: '' }, { set: 'prod', key: 'D', value: 'prod-d' }]);
  assert.deepEqual(await answer(body), { A: 'eu-a', B: '', C: 'eu-c', D: 'prod-d' });
  assert.deepEqual(await answer(root), { A: 'root-a', B: '', C: '', D: 'd' });
  await store.set([{ set: 'prod/eu', key: 'A', value: '' }]);
  assert.deepEqual(await answer(body), { A: 'prod-a', B: '', C: 'eu-c', D: 'prod-d' });
  await registry.close();
});
