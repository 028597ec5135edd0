/**
 * A store outage seen through the real binary over HTTP: the Redis server "goes away" (a TCP relay between cfgu and
 * the shared Redis is cut, so the shared server itself is never stopped), cfgu answers 503 + Retry-After with the
 * exact problem body for the store without a backup, answers from the backup (X-Configu-Backup) for the store with
 * one, keeps serving the other stores, and recovers by itself when the relay is back: no restart.
 */
import { after, afterEach, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { probeTcp, requireService } from '../helpers/services.js';
import { freePort, killChildren, postJson, removeTempDirs, sleep, spawnCfgu, tempDir, waitForStatus, writeJson } from './helpers.js';

after(async () => {
  await killChildren();
  removeTempDirs();
});
afterEach(killChildren);

/** A TCP relay to 127.0.0.1:6379 that can be cut (every connection dropped, port closed) and restored. */
function relay(port: number): { up: () => Promise<void>; down: () => Promise<void> } {
  let server: Server | undefined;
  const sockets = new Set<Socket>();
  const track = (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => s.destroy());
  };
  return {
    up: () =>
      new Promise((resolve, reject) => {
        server = createServer((client) => {
          const upstream = connect(6379, '127.0.0.1');
          track(client);
          track(upstream);
          client.pipe(upstream);
          upstream.pipe(client);
          client.on('close', () => upstream.destroy());
          upstream.on('close', () => client.destroy());
        });
        server.once('error', reject);
        server.listen(port, '127.0.0.1', () => resolve());
      }),
    down: () =>
      new Promise((resolve) => {
        for (const s of sockets) s.destroy();
        if (!server) return resolve();
        server.close(() => resolve());
        server = undefined;
      }),
  };
}

test('redis unreachable: 503 + Retry-After (exact body), the backup answers with X-Configu-Backup, other stores work, then recovery without a restart', async (t) => {
  if (!(await requireService(t, 'redis', probeTcp(6379)))) return;
  const key = `AUDIT_OUTAGE_${process.pid}_${Date.now()}`;
  const redis = new Redis({ host: '127.0.0.1', port: 6379, lazyConnect: true });
  await redis.connect();
  const relayPort = await freePort();
  const r = relay(relayPort);
  await r.up();
  try {
    await redis.set(key, 'from-redis');
    const dir = tempDir();
    writeJson(join(dir, 'data.json'), [{ set: '', key: 'LOCAL', value: 'from-file' }]);
    const redisConf = { host: '127.0.0.1', port: relayPort, timeout: 1000 };
    const file = writeJson(join(dir, '.configu'), {
      backup: 'backup.db',
      stores: {
        cache: { type: 'redis', configuration: redisConf, backup: true },
        plain: { type: 'redis', configuration: redisConf },
        files: { type: 'json-file', configuration: { path: 'data.json' }, default: true },
      },
    });
    const port = await freePort();
    const p = spawnCfgu(['serve', '--config', file, '--workers', '1', '--port', String(port), '--host', '127.0.0.1']);
    await waitForStatus(`http://127.0.0.1:${port}/ready`, 200);
    const url = `http://127.0.0.1:${port}/export`;
    const ask = (store: string, k = key) => postJson(url, [{ store, schema: { keys: { [k]: {} } } }]);

    let a = await ask('cache');
    assert.equal(a.status, 200, a.body);
    assert.deepEqual(a.json(), { [key]: 'from-redis' });
    assert.equal(a.headers['x-configu-backup'], undefined);
    assert.equal((await ask('plain')).status, 200);
    await sleep(200); // the backup copy is written off the request path

    await r.down();
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
    assert.equal((await waitForStatus(`http://127.0.0.1:${port}/live`, 200)).status, 200);

    await r.up();
    const started = Date.now();
    for (;;) {
      const again = await ask('plain');
      if (again.status === 200) {
        assert.deepEqual(again.json(), { [key]: 'from-redis' });
        break;
      }
      assert.equal(again.status, 503, again.body);
      assert.ok(Date.now() - started < 15_000, 'recovered within 15 s');
      await sleep(100);
    }
    a = await ask('cache');
    assert.equal(a.status, 200);
    assert.equal(a.headers['x-configu-backup'], undefined, 'answered by redis again, not the backup');
    assert.ok(!p.stdout().includes('from-redis'), 'values are not logged');

    p.child.kill('SIGTERM');
    assert.equal(await p.exited, 0);
  } finally {
    await r.down();
    await redis.del(key).catch(() => undefined);
    redis.disconnect();
  }
});
