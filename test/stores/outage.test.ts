/**
 * A database stopped and restarted during a run: cfgu answers StoreUnavailableError (or from the backup when the
 * store has `backup: true`), then recovers without a restart. Every server here is a PRIVATE instance started by the
 * test in a temporary folder on a free loopback port (test/helpers/private.ts); the machine's own services are never
 * stopped. A missing server binary skips loudly (fails under CI=true).
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import mysql from 'mysql2/promise';
import { createStoreRegistry } from '../../src/stores/registry.js';
import type { LoadedConfiguration } from '../../src/config/types.js';
import { StoreUnavailableError } from '../../src/core/errors.js';
import { createStore } from '../../src/stores/index.js';
import { startPrivate, type PrivateKind, type PrivateServer } from '../helpers/private.js';
import { waitFor } from '../helpers/wait.js';
import { RUN, TMP } from './kinds.js';

const unavailable = (store: string) => (e: unknown) => {
  assert.ok(e instanceof StoreUnavailableError, String(e));
  assert.equal(e.store, store);
  assert.match(e.message, new RegExp(`^store "${store}" is unavailable: `));
  assert.doesNotMatch(e.message, /\n/);
  return true;
};

describe('a database stopped and restarted during a run (private servers)', () => {
  test('redis: StoreUnavailableError while down (the backup answers), other stores work, then recovery without a restart', async (t) => {
    const redis = await startPrivate(t, 'redis');
    if (!redis) return;
    const conf = { host: redis.host, port: redis.port, timeout: 1000 };
    const loaded: LoadedConfiguration = {
      file: undefined,
      stores: [
        { name: 'cache', type: 'redis', configuration: conf, default: true, backup: true },
        { name: 'plain', type: 'redis', configuration: conf, default: false, backup: false },
        { name: 'memory', type: 'in-memory', configuration: {}, default: false, backup: false },
      ],
      defaultStore: 'cache',
      backup: join(TMP, `outage-backup-${RUN}.db`),
      schemas: {},
      scripts: {},
      interface: {},
    };
    const registry = createStoreRegistry(loaded, { logger: { warn: () => undefined } });
    await registry.init();
    t.after(() => registry.close());
    const set = `outage_${RUN}`;
    const q = [{ set, key: 'A' }, { set, key: 'B' }];

    await registry.resolve('cache').write([{ set, key: 'A', value: 'a' }]);
    assert.deepEqual(await registry.resolve('cache').read(q), { configs: [{ set, key: 'A', value: 'a' }], fromBackup: false });
    registry.backup!.flush(); // the backup copy is written off the request path: write it now
    await registry.resolve('memory').write([{ set: '', key: 'M', value: 'm' }]);

    await redis.stop();
    await assert.rejects(registry.resolve('plain').read(q), unavailable('plain'));
    assert.deepEqual(await registry.resolve('cache').read(q), { configs: [{ set, key: 'A', value: 'a' }], fromBackup: true });
    await assert.rejects(registry.resolve('cache').write([{ set, key: 'B', value: 'b' }]), unavailable('cache'));
    assert.equal((await registry.resolve('memory').read([{ set: '', key: 'M' }])).configs.length, 1, 'other stores keep working');
    assert.deepEqual(
      registry.status().map((s) => [s.name, s.available]),
      [['cache', false], ['plain', false], ['memory', true]],
    );

    await redis.start();
    // The server ran with --save "": its data is gone; the same clients read and write again.
    // Each store has its own client, which reconnects on its own.
    for (const name of ['plain', 'cache']) {
      await waitFor(`store "${name}" reads redis again`, async () => (await registry.resolve(name).read(q)).fromBackup === false || undefined);
    }
    await registry.resolve('cache').write([{ set, key: 'B', value: 'b' }]);
    assert.deepEqual(await registry.resolve('cache').read([{ set, key: 'B' }]), { configs: [{ set, key: 'B', value: 'b' }], fromBackup: false });
    assert.deepEqual(registry.status().map((s) => s.available), [true, true, true]);
  });

  // The same outage for each server-backed kind through the store itself; these servers keep their data.
  const kinds: Array<{ kind: PrivateKind; type: string; configuration(s: PrivateServer): Promise<Record<string, unknown>> }> = [
    {
      kind: 'postgresql',
      type: 'postgresql',
      configuration: async (s) => ({ host: s.host, port: s.port, username: 'postgres', database: 'postgres', tableName: `outage_${RUN}`, timeout: 1500 }),
    },
    {
      kind: 'mariadb',
      type: 'mariadb',
      async configuration(s) {
        const c = await mysql.createConnection({ host: s.host, port: s.port, user: 'root' });
        await c.query('CREATE DATABASE IF NOT EXISTS cfgu');
        await c.end();
        return { host: s.host, port: s.port, username: 'root', database: 'cfgu', tableName: `outage_${RUN}`, timeout: 1500 };
      },
    },
    { kind: 'etcd', type: 'etcd', configuration: async (s) => ({ hosts: s.url, timeout: 1500 }) },
  ];
  for (const k of kinds) {
    test(`${k.kind}: StoreUnavailableError while stopped, then recovers without a restart, data intact`, async (t) => {
      const server = await startPrivate(t, k.kind);
      if (!server) return;
      const store = createStore(k.type, await k.configuration(server), 'db');
      t.after(() => store.close());
      await store.init();
      await store.set([{ set: 's', key: 'A', value: 'a' }]);
      assert.deepEqual(await store.get([{ set: 's', key: 'A' }]), [{ set: 's', key: 'A', value: 'a' }]);

      await server.stop();
      await assert.rejects(store.get([{ set: 's', key: 'A' }]), unavailable('db'));
      await assert.rejects(store.set([{ set: 's', key: 'B', value: 'b' }]), unavailable('db'));

      await server.start();
      await waitFor(`cfgu reads ${k.kind} again`, async () => (await store.get([{ set: 's', key: 'A' }])).length === 1 || undefined);
      await store.set([{ set: 's', key: 'B', value: 'b' }]);
      assert.deepEqual(
        (await store.get([{ set: 's', key: 'A' }, { set: 's', key: 'B' }])).map((c) => c.value).sort(),
        ['a', 'b'],
      );
    });
  }
});
