/**
 * core/impact.ts `impactOf`: which (schema, set) pairs are evaluated (named schemas declaring a changed key; the
 * written set and the listed sets under it, bounded), how each is judged, and that nothing is written.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { impactOf, type ConfigSchema } from '../../src/core/index.js';
import { MemoryStore } from '../helpers/engine.js';

const store = () =>
  new MemoryStore('main', 'in-memory', [
    { set: 'prod', key: 'HOST', value: 'a' },
    { set: 'prod/b', key: 'HOST', value: 'b' },
    { set: 'prod/c', key: 'HOST', value: 'c' },
  ]);
const list = (sets: string[]) => async (_prefix: string, options?: { sets?: number }) => ({ sets: sets.slice(0, options?.sets).map((set) => ({ set })), truncated: sets.length > (options?.sets ?? Infinity) });
const schemas: Array<{ name: string; schema: ConfigSchema }> = [
  { name: 'web', schema: { keys: { HOST: { required: true }, MODE: { enum: ['x', 'y'] } } } },
  { name: 'aaa', schema: { keys: { MODE: {} } } },
  { name: 'other', schema: { keys: { NAME: {} } } },
];

test('impactOf: schemas declaring a changed key, by name; the written set and the sets under it; nothing written', async () => {
  const s = store();
  const { impact, truncated } = await impactOf({ store: s, list: list(['prod', 'prod/b', 'prod/c']), set: '/prod/', changes: [{ key: 'HOST', after: '' }, { key: 'MODE', after: 'x' }], schemas });
  assert.equal(truncated, false);
  assert.deepEqual(impact, [
    { schema: 'aaa', set: 'prod', status: 'changes', changed: ['MODE'], failures: [] },
    { schema: 'aaa', set: 'prod/b', status: 'changes', changed: ['MODE'], failures: [] },
    { schema: 'aaa', set: 'prod/c', status: 'changes', changed: ['MODE'], failures: [] },
    { schema: 'web', set: 'prod', status: 'breaks', changed: [], failures: [{ key: 'HOST', rule: 'required', message: 'key "HOST" is required but has no value' }] },
    { schema: 'web', set: 'prod/b', status: 'changes', changed: ['MODE'], failures: [] },
    { schema: 'web', set: 'prod/c', status: 'changes', changed: ['MODE'], failures: [] },
  ]);
  assert.equal(s.writes, 0);
  assert.equal(s.get('prod', 'HOST'), 'a');
});

test('impactOf: a bound on the sets; the written set is evaluated also when the store holds nothing there', async () => {
  const { impact, truncated } = await impactOf({ store: store(), list: list(['prod/b', 'prod/c']), set: 'prod', changes: [{ key: 'MODE', after: 'y' }], schemas: [schemas[1]!], maxSets: 2 });
  assert.equal(truncated, true);
  assert.deepEqual(impact.map((i) => i.set), ['prod', 'prod/b']);
  const none = await impactOf({ store: store(), list: list([]), set: 'new', changes: [{ key: 'NAME', after: 'n' }], schemas });
  assert.deepEqual(none, { impact: [{ schema: 'other', set: 'new', status: 'changes', changed: ['NAME'], failures: [] }], truncated: false });
  const unrelated = await impactOf({ store: store(), list: list([]), set: 'new', changes: [{ key: 'ZZZ', after: 'n' }], schemas });
  assert.deepEqual(unrelated, { impact: [], truncated: false });
});
