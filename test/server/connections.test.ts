/**
 * Connections and open files (issue 31): one client holding many idle connections cannot take the server's file
 * descriptors from everyone else. The real binary, because the cap is installed by `cfgu serve` (src/server/start.ts).
 * Every wait is on a condition: a socket's close, a status, a log line.
 */
import { after, afterEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { call, killChildren, postJson, removeTempDirs, serveOnFreePort, tempDir, writeJson } from './helpers.js';
import { waitFor } from '../helpers/wait.js';
import { defaultConnectionsPerClient, openFileLimits, RESERVED_FILES } from '../../src/server/process/connections.js';

after(removeTempDirs);
afterEach(killChildren);

function project(): string {
  const dir = tempDir();
  writeJson(join(dir, 'data.json'), [{ set: '', key: 'GREETING', value: 'hello' }]);
  return writeJson(join(dir, '.configu'), { stores: { main: { type: 'json-file', configuration: { path: 'data.json' } } } });
}

/** A raw connection from `localAddress` that sends nothing; resolves once connected, with a promise of its close. */
function idle(port: number, localAddress = '127.0.0.1'): Promise<{ socket: Socket; closed: Promise<void>; isClosed: () => boolean }> {
  return new Promise((resolve, reject) => {
    let closed = false;
    const socket = connect({ host: '127.0.0.1', port, localAddress });
    const closedP = new Promise<void>((r) => socket.once('close', () => ((closed = true), r())));
    socket.on('error', () => undefined);
    socket.once('connect', () => resolve({ socket, closed: closedP, isClosed: () => closed }));
    socket.once('error', reject);
  });
}

describe('connections per client', () => {
  const open: Socket[] = [];
  afterEach(() => {
    for (const s of open.splice(0)) s.destroy();
  });

  test('a client beyond its share of connections is cut at once; another address, and /live, are still served', async () => {
    const { p, port } = await serveOnFreePort(['--config', project(), '--workers', '1'], { CONFIGU_HTTP_MAX_CONNECTIONS_PER_CLIENT: '5' });
    const line = p.logs().find((l) => l.msg === 'listening; initialising stores')!;
    assert.equal(line.maxConnectionsPerClient, 5);
    const limits = openFileLimits();
    if (limits) assert.equal(line.openFiles, Number.isFinite(limits.soft) ? limits.soft : 'unlimited', 'the log says which limit the server runs with');

    // Five idle connections from 127.0.0.1: its whole share. They stay open.
    const held = [];
    for (let i = 0; i < 5; i++) {
      const c = await idle(port);
      open.push(c.socket);
      held.push(c);
    }
    // The sixth is closed by the server without a byte.
    const sixth = await idle(port);
    open.push(sixth.socket);
    await sixth.closed;
    assert.ok(held.every((c) => !c.isClosed()), 'the five within the share stay open');
    // A request over a new connection from the same address is refused the same way.
    await assert.rejects(call(`http://127.0.0.1:${port}/live`, { timeoutMs: 60_000 }));

    // Another client (another loopback address) is served: /live, /ready and an export.
    const other = { localAddress: '127.0.0.2' };
    assert.equal((await call(`http://127.0.0.1:${port}/live`, other)).status, 200);
    await waitFor('ready for another client', async () => (await call(`http://127.0.0.1:${port}/ready`, other)).status === 200);
    const r = await postJson(`http://127.0.0.1:${port}/export`, [{ schema: { keys: { GREETING: {} } } }], {}, other);
    assert.equal(r.status, 200);
    assert.deepEqual(r.json(), { GREETING: 'hello' });

    // Once the client lets one go, it may open one again.
    held[0]!.socket.destroy();
    await held[0]!.closed;
    await waitFor('a freed share is usable again', async () => (await call(`http://127.0.0.1:${port}/live`)).status === 200);
    assert.ok(p.logs().some((l) => l.msg === 'connection refused: the client already holds its share of connections' && l.client === '127.0.0.1'));
  });

  test('under a soft limit of 1,024 open files, a client holding 1,000 idle connections leaves room for others', async (t) => {
    if (spawnSync('prlimit', ['--version']).status !== 0) {
      // util-linux is essential on Debian: prlimit is missing only on a machine that is not one.
      if (process.env.CI === 'true') assert.fail('prlimit (util-linux) is missing');
      t.skip('prlimit (util-linux) is missing');
      return;
    }
    // The server's own process gets the limit: soft and hard 1,024, so Node cannot raise it.
    const { p, port } = await serveOnFreePort(['--config', project(), '--workers', '1'], {}, undefined, ['prlimit', '--nofile=1024:1024']);
    const line = p.logs().find((l) => l.msg === 'listening; initialising stores')!;
    assert.equal(line.openFiles, 1024);
    assert.equal(line.maxConnectionsPerClient, defaultConnectionsPerClient(1024));
    assert.equal(defaultConnectionsPerClient(1024), Math.floor((1024 - RESERVED_FILES) / 4));
    let refused = 0;
    for (let i = 0; i < 1000; i++) {
      const c = await idle(port);
      open.push(c.socket);
      c.closed.then(() => refused++);
    }
    await waitFor('the connections beyond the share are closed', () => refused >= 1000 - defaultConnectionsPerClient(1024));
    // Probes and other clients are answered.
    const other = { localAddress: '127.0.0.2' };
    assert.equal((await call(`http://127.0.0.1:${port}/live`, other)).status, 200);
    const r = await postJson(`http://127.0.0.1:${port}/export`, [{ schema: { keys: { GREETING: {} } } }], {}, other);
    assert.equal(r.status, 200);
  });
});
