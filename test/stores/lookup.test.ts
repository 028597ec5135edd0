import assert from 'node:assert/strict';
import { test } from 'node:test';
import { indexBySet, lookUp } from '../../src/stores/common.js';
import { InMemoryConfigStore } from '../../src/stores/in-memory.js';

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
