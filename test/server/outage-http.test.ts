/**
 * A store outage seen through the real binary over HTTP: a PRIVATE Redis server (test/helpers/private.ts, its own
 * folder and port; the machine's Redis is never touched) is stopped under a running cfgu, which answers 503 +
 * Retry-After with the exact problem body for the store without a backup, answers from the backup
 * (X-Configu-Backup) for the store with one, keeps serving the other stores, and recovers by itself when the server
 * is back: no restart.
 */
import { after, afterEach, test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { startPrivate } from '../helpers/private.js';
import { waitFor } from '../helpers/wait.js';
import { killChildren, postJson, removeTempDirs, serveOnFreePort, tempDir, waitForStatus, writeJson } from './helpers.js';
import { sqliteDriver } from '../../src/stores/drivers.js';

const Database = sqliteDriver();

after(async () => {
  await killChildren();
  removeTempDirs();
});
afterEach(killChildren);

test('redis stopped: 503 + Retry-After (exact body), the backup answers with X-Configu-Backup, other stores work, then recovery without a restart', async (t) => {
  const server = await startPrivate(t, 'redis');
  if (!server) return;
  const key = 'OUTAGE_KEY';
  const put = async () => {
    const redis = new Redis({ host: server.host, port: server.port, lazyConnect: true });
    await redis.connect();
    await redis.set(key, 'from-redis');
    redis.disconnect();
  };
  await put();
  const dir = tempDir();
  writeJson(join(dir, 'data.json'), [{ set: '', key: 'LOCAL', value: 'from-file' }]);
  const redisConf = { host: server.host, port: server.port, timeout: 1000 };
  const file = writeJson(join(dir, '.configu'), {
    backup: 'backup.db',
    stores: {
      cache: { type: 'redis', configuration: redisConf, backup: true },
      plain: { type: 'redis', configuration: redisConf },
      files: { type: 'json-file', configuration: { path: 'data.json' }, default: true },
    },
  });
  const { p, base } = await serveOnFreePort(['--config', file, '--workers', '1']);
  await waitForStatus(`${base}/ready`, 200);
  const ask = (store: string, k = key) => postJson(`${base}/export`, [{ store, schema: { keys: { [k]: {} } } }]);

  let a = await ask('cache');
  assert.equal(a.status, 200, a.body);
  assert.deepEqual(a.json(), { [key]: 'from-redis' });
  assert.equal(a.headers['x-configu-backup'], undefined);
  assert.equal((await ask('plain')).status, 200);
  // The backup copy is written off the request path: wait until it is in the backup database.
  await waitFor('the backup copy', () => {
    const db = new Database(join(dir, 'backup.db'), { readonly: true, fileMustExist: true });
    try {
      return (db.prepare(`SELECT value FROM "cache" WHERE "key" = ?`).get(key) as { value: string } | undefined)?.value === 'from-redis' || undefined;
    } finally {
      db.close();
    }
  });

  await server.stop();
  const down = await ask('plain');
  assert.equal(down.status, 503, down.body);
  assert.match(String(down.headers['content-type']), /^application\/problem\+json/);
  assert.match(String(down.headers['retry-after']), /^[1-9]\d*$/);
  assert.deepEqual(down.json(), {
    type: 'urn:cfgu:problem:store-unavailable',
    title: 'Store Unavailable',
    status: 503,
    detail: 'store "plain" cannot be reached or read; retry later',
  });
  a = await ask('cache');
  assert.equal(a.status, 200, a.body);
  assert.deepEqual(a.json(), { [key]: 'from-redis' });
  assert.equal(a.headers['x-configu-backup'], 'cache');
  const other = await ask('files', 'LOCAL');
  assert.equal(other.status, 200, other.body);
  assert.deepEqual(other.json(), { LOCAL: 'from-file' });
  assert.equal((await waitForStatus(`${base}/live`, 200)).status, 200);

  // Back (it keeps no data across a restart: the value is written again), and cfgu reads it without a restart.
  await server.start();
  await put();
  const again = await waitFor('cfgu reads redis again', async () => {
    const r = await ask('plain');
    if (r.status !== 503) return r;
    return undefined;
  });
  assert.equal(again.status, 200, again.body);
  assert.deepEqual(again.json(), { [key]: 'from-redis' });
  // Each store has a client of its own, which reconnects on its own schedule: the backup store answers from the
  // backup until its client is back, then from redis again.
  a = await waitFor('the backup store answered by redis again, not the backup', async () => {
    const r = await ask('cache');
    assert.equal(r.status, 200, r.body);
    return r.headers['x-configu-backup'] === undefined ? r : undefined;
  });
  assert.deepEqual(a.json(), { [key]: 'from-redis' });
  assert.ok(!p.stdout().includes('from-redis'), 'values are not logged');

  p.child.kill('SIGTERM');
  assert.equal(await p.exited, 0);
});
