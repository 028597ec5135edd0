/**
 * A database killed and restarted during a run: cfgu answers StoreUnavailableError quickly (or from the backup when
 * the store has `backup: true`), then recovers without a restart. Redis and PostgreSQL are stopped for real and ALWAYS
 * restarted in a finally block.
 */
import assert from 'node:assert/strict';
import { execFileSync, execSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import pg from 'pg';
import { createStoreRegistry } from '../../src/config/registry.js';
import { StoreUnavailableError } from '../../src/core/errors.js';
import type { LoadedConfiguration } from '../../src/config/types.js';
import { createStore } from '../../src/stores/index.js';
import { forgetService, probeTcp, requireService } from '../helpers/services.js';
import { PG, RUN, TMP } from './kinds.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(what: string, check: () => Promise<boolean> | boolean, timeoutMs = 20_000): Promise<number> {
  const started = Date.now();
  for (;;) {
    if (await check()) return Date.now() - started;
    if (Date.now() - started > timeoutMs) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await sleep(100);
  }
}

const portOpen = (port: number) => probeTcp(port, '127.0.0.1', 500)().then(() => true, () => false);

const REDIS_START = [
  '--daemonize', 'yes', '--bind', '127.0.0.1', '-::1', '--port', '6379', '--save', '', '--appendonly', 'no',
  '--dir', '/var/lib/redis', '--logfile', '/var/log/redis/ci.log',
];
function startRedis(): void {
  execFileSync('redis-server', REDIS_START, { stdio: 'ignore' });
}
function stopRedis(): void {
  try {
    execFileSync('redis-cli', ['-h', '127.0.0.1', '-p', '6379', 'shutdown', 'nosave'], { stdio: 'ignore', timeout: 5000 });
  } catch {
    /* the connection drops as the server exits */
  }
}

const pgCluster = (): string => readdirSync('/etc/postgresql').sort().at(-1)!;
const pgCtl = (action: 'start' | 'stop') =>
  execSync(`pg_ctlcluster --skip-systemctl-redirect ${pgCluster()} main ${action}`, { stdio: 'ignore', timeout: 60_000 });

function report(kind: string, numbers: Record<string, number>): void {
  process.stderr.write(`[outage ${kind}] ${Object.entries(numbers).map(([k, v]) => `${k}=${v}ms`).join(' ')}\n`);
}

describe('a database killed and restarted during a run', () => {
  test('redis: StoreUnavailableError while down (backup answers), then recovers without a restart', async (t) => {
    if (!(await requireService(t, 'redis', probeTcp(6379)))) return;
    const loaded: LoadedConfiguration = {
      file: undefined,
      stores: [
        { name: 'cache', type: 'redis', configuration: { host: '127.0.0.1', port: 6379, timeout: 1000 }, default: true, backup: true },
        { name: 'plain', type: 'redis', configuration: { host: '127.0.0.1', port: 6379, timeout: 1000 }, default: false, backup: false },
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
    const set = `outage_${RUN}`;
    const q = [{ set, key: 'A' }, { set, key: 'B' }];
    try {
      await registry.resolve('cache').write([{ set, key: 'A', value: 'a' }]);
      const first = await registry.resolve('cache').read(q);
      assert.deepEqual(first, { configs: [{ set, key: 'A', value: 'a' }], fromBackup: false });
      await sleep(20); // the backup write happens off the request path
      await registry.resolve('memory').write([{ set: '', key: 'M', value: 'm' }]);

      stopRedis();
      await until('redis down', async () => !(await portOpen(6379)), 10_000);

      const started = Date.now();
      await assert.rejects(registry.resolve('plain').read(q), (e: unknown) => {
        assert.ok(e instanceof StoreUnavailableError);
        assert.equal(e.store, 'plain');
        return true;
      });
      const failMs = Date.now() - started;
      assert.ok(failMs < 3000, `failing took ${failMs} ms`);
      assert.deepEqual(await registry.resolve('cache').read(q), { configs: [{ set, key: 'A', value: 'a' }], fromBackup: true });
      await assert.rejects(registry.resolve('cache').write([{ set, key: 'B', value: 'b' }]), StoreUnavailableError);
      // Other stores keep working.
      assert.equal((await registry.resolve('memory').read([{ set: '', key: 'M' }])).configs.length, 1);
      assert.deepEqual(
        registry.status().map((s) => [s.name, s.available]),
        [['cache', false], ['plain', false], ['memory', true]],
      );

      startRedis();
      const upMs = await until('redis up', () => portOpen(6379), 10_000);
      const recoverStarted = Date.now();
      await until('cfgu reads redis again', async () => {
        try {
          return (await registry.resolve('plain').read(q)).fromBackup === false;
        } catch {
          return false;
        }
      });
      const recoverMs = Date.now() - recoverStarted;
      // Redis ran with --save "": the data is gone; writing and reading work again through the same clients.
      await registry.resolve('cache').write([{ set, key: 'B', value: 'b' }]);
      assert.deepEqual(await registry.resolve('cache').read([{ set, key: 'B' }]), { configs: [{ set, key: 'B', value: 'b' }], fromBackup: false });
      report('redis', { failFast: failMs, serverUp: upMs, recovered: recoverMs });
    } finally {
      if (!(await portOpen(6379))) startRedis();
      await until('redis restored', () => portOpen(6379), 10_000).catch(() => undefined);
      forgetService('redis');
      await registry.close();
    }
  });

  test('postgresql: StoreUnavailableError while stopped, then recovers without a restart', async (t) => {
    const probe = async () => {
      const c = new pg.Client({ host: PG.host, port: PG.port, user: PG.username, database: PG.database, connectionTimeoutMillis: 2000 });
      await c.connect();
      await c.end();
    };
    if (!(await requireService(t, 'postgresql', probe))) return;
    const tableName = `cfgu_outage_${RUN}`;
    const store = createStore('postgresql', { ...PG, tableName, timeout: 1500 }, 'pg');
    await store.init();
    try {
      await store.set([{ set: 's', key: 'A', value: 'a' }]);
      assert.equal((await store.get([{ set: 's', key: 'A' }])).length, 1);

      pgCtl('stop');
      const started = Date.now();
      await assert.rejects(store.get([{ set: 's', key: 'A' }]), (e: unknown) => {
        assert.ok(e instanceof StoreUnavailableError, String(e));
        assert.equal(e.store, 'pg');
        assert.doesNotMatch(e.message, /\n/);
        return true;
      });
      const failMs = Date.now() - started;
      assert.ok(failMs < 4000, `failing took ${failMs} ms`);
      await assert.rejects(store.set([{ set: 's', key: 'B', value: 'b' }]), StoreUnavailableError);

      const restartStarted = Date.now();
      pgCtl('start');
      const upMs = Date.now() - restartStarted;
      const recoverMs = await until('cfgu reads postgresql again', async () => {
        try {
          return (await store.get([{ set: 's', key: 'A' }])).length === 1;
        } catch {
          return false;
        }
      });
      await store.set([{ set: 's', key: 'B', value: 'b' }]);
      assert.equal((await store.get([{ set: 's', key: 'A' }, { set: 's', key: 'B' }])).length, 2);
      report('postgresql', { failFast: failMs, serverStart: upMs, recoveredAfterStart: recoverMs });
    } finally {
      if (!(await portOpen(5432))) {
        try {
          pgCtl('start');
        } catch {
          /* reported by the assertion below */
        }
      }
      await until('postgresql restored', () => portOpen(5432), 30_000);
      forgetService('postgresql');
      const c = new pg.Client({ host: PG.host, port: PG.port, user: PG.username, database: PG.database });
      await c.connect();
      await c.query(`DROP TABLE IF EXISTS "${tableName}"`);
      await c.end();
      await store.close();
    }
  });
});
