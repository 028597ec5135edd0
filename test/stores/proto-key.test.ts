/**
 * A key named `__proto__` is an ordinary key in a named set of the key-value stores (Redis, etcd): it is written as an
 * own property of the set's JSON object, read back, and deleted, like any other key. Redis and etcd are the shared
 * servers on 127.0.0.1; this file only touches storage keys named with its own run prefix, and deletes them.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import { Etcd3 } from 'etcd3';
import { Redis } from 'ioredis';
import { createStore } from '../../src/stores/index.js';
import { applyKeyValueWrites, decodeKeyValue } from '../../src/stores/key-value.js';
import { privateMissing, sharedPrivate } from '../helpers/private.js';
import { probeTcp, requireService } from '../helpers/services.js';

const RUN = `cfgu-proto-${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;

describe('a key named __proto__ in a named set (key-value layout)', () => {
  test('the layout writes it as an own property, reads it back and deletes it', () => {
    const first = applyKeyValueWrites(
      [
        { set: 'S', key: '__proto__', value: 'p' },
        { set: 'S', key: 'A', value: 'a' },
      ],
      new Map(),
    );
    assert.deepEqual([...first], [['S', '{"__proto__":"p","A":"a"}']]);
    const raw = new Map([['S', first.get('S')!]]);
    assert.deepEqual(decodeKeyValue([{ set: 'S', key: '__proto__' }, { set: 'S', key: 'A' }], raw), [
      { set: 'S', key: '__proto__', value: 'p' },
      { set: 'S', key: 'A', value: 'a' },
    ]);
    // Overwrite, then delete it: the other key stays; deleting the last key deletes the storage key.
    assert.deepEqual([...applyKeyValueWrites([{ set: 'S', key: '__proto__', value: 'q' }], raw)], [['S', '{"__proto__":"q","A":"a"}']]);
    const deleted = applyKeyValueWrites([{ set: 'S', key: '__proto__', value: '' }], raw);
    assert.deepEqual([...deleted], [['S', '{"A":"a"}']]);
    assert.deepEqual([...applyKeyValueWrites([{ set: 'S', key: '__proto__', value: '' }, { set: 'S', key: 'A', value: '' }], raw)], [['S', null]]);
    // A new set holding only __proto__ (the object starts empty: the first write must not become its prototype).
    assert.deepEqual([...applyKeyValueWrites([{ set: 'T', key: '__proto__', value: 'only' }], new Map())], [['T', '{"__proto__":"only"}']]);
  });

  test('redis', async (t) => {
    if (!(await requireService(t, 'redis', probeTcp(6379)))) return;
    const set = `${RUN}-redis`;
    const store = createStore('redis', { host: '127.0.0.1', port: 6379, timeout: 2000 }, 'r');
    const raw = new Redis({ host: '127.0.0.1', port: 6379, maxRetriesPerRequest: 1 });
    try {
      await store.init();
      await store.set([{ set, key: '__proto__', value: 'p' }]);
      assert.equal(await raw.get(set), '{"__proto__":"p"}');
      await store.set([{ set, key: 'A', value: 'a' }]);
      assert.deepEqual(await store.get([{ set, key: '__proto__' }, { set, key: 'A' }]), [
        { set, key: '__proto__', value: 'p' },
        { set, key: 'A', value: 'a' },
      ]);
      await store.set([{ set, key: '__proto__', value: '' }]);
      assert.equal(await raw.get(set), '{"A":"a"}');
    } finally {
      await raw.del(set);
      raw.disconnect();
      await store.close();
    }
  });

  test('etcd', async (t) => {
    // A private etcd of this test process (never an etcd that happens to run on the machine).
    const probe = async () => {
      const missing = privateMissing('etcd');
      if (missing) throw new Error(missing);
      const res = await fetch(`${(await sharedPrivate('etcd')).url}/health`, { signal: AbortSignal.timeout(10_000) });
      if (!res.ok) throw new Error(`etcd /health answered ${res.status}`);
    };
    if (!(await requireService(t, 'etcd', probe))) return;
    const ETCD_HOST = (await sharedPrivate('etcd')).url;
    const set = `${RUN}-etcd`;
    const store = createStore('etcd', { hosts: ETCD_HOST, timeout: 2000 }, 'e');
    const raw = new Etcd3({ hosts: ETCD_HOST });
    try {
      await store.init();
      await store.set([{ set, key: '__proto__', value: 'p' }]);
      assert.equal(await raw.get(set).string(), '{"__proto__":"p"}');
      await store.set([{ set, key: 'A', value: 'a' }]);
      assert.deepEqual(await store.get([{ set, key: '__proto__' }, { set, key: 'A' }]), [
        { set, key: '__proto__', value: 'p' },
        { set, key: 'A', value: 'a' },
      ]);
      await store.set([{ set, key: '__proto__', value: '' }]);
      assert.equal(await raw.get(set).string(), '{"A":"a"}');
    } finally {
      await raw.delete().key(set);
      raw.close();
      await store.close();
    }
  });
});
