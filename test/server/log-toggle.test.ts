/**
 * Request lines switched off and on again without a restart: SIGUSR2 to the primary of `cfgu serve --workers 2`
 * reaches every worker. Absence is proven by order, not by waiting: a worker writes its lines in order, so a request
 * answered while lines were off would have its line before that worker's "on" line, which the test waits for.
 * A worker that replaces a dead one starts with the lines as SIGUSR2 last left them, not the configured default.
 */
import { after, afterEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { killChildren, postJson, removeTempDirs, spawnCfgu, tempDir, writeJson, type Spawned } from './helpers.js';
import { waitFor } from '../helpers/wait.js';

after(async () => {
  await killChildren();
  removeTempDirs();
});
afterEach(killChildren);

const lines = (p: Spawned, msg: string) => p.logs().filter((l) => l.msg === msg);

/** `cfgu serve --workers 2` on a one-key store, ready; `send` posts a request with an id, `logged` says if it has a line. */
async function twoWorkers() {
  const dir = tempDir();
  writeJson(join(dir, 'data.json'), [{ set: '', key: 'A', value: 'x' }]);
  const configu = writeJson(join(dir, '.configu'), { stores: { main: { type: 'json-file', configuration: { path: 'data.json' } } } });
  const p = spawnCfgu(['serve', '--config', configu, '--workers', '2', '--port', '0', '--host', '127.0.0.1'], { CONFIGU_EXPRESSION_WORKERS: '1' });
  const { port } = await p.waitForLog('ready', (l) => l.role === 'primary' && l.workers === 2, 120_000);
  const url = `http://127.0.0.1:${port}/export`;
  const body = [{ schema: { keys: { A: {} } } }];
  const send = async (id: string) => assert.equal((await postJson(url, body, { 'x-request-id': id })).status, 200);
  const logged = (id: string) => p.logs().some((l) => l.msg === 'request' && l.reqId === id);
  return { p, send, logged };
}

describe('SIGUSR2', { timeout: 300_000 }, () => {
  test('turns the request lines of every worker off, then on again; the server keeps serving', async () => {
    const { p, send, logged } = await twoWorkers();

    await send('before-1');
    await waitFor('the line of a request while lines are on', () => logged('before-1'));

    process.kill(p.child.pid!, 'SIGUSR2');
    await waitFor('both workers off', () => lines(p, 'request lines off (SIGUSR2)').length === 2);
    // Several requests, so both workers (round robin) answer some while off.
    for (let i = 0; i < 6; i++) await send(`off-${i}`);

    process.kill(p.child.pid!, 'SIGUSR2');
    await waitFor('both workers on', () => lines(p, 'request lines on (SIGUSR2)').length === 2);
    await send('after-1');
    await waitFor('the line of a request after lines are back', () => logged('after-1'));

    for (let i = 0; i < 6; i++) assert.equal(logged(`off-${i}`), false, `off-${i} was logged while lines were off`);
    const toggles = [...lines(p, 'request lines off (SIGUSR2)'), ...lines(p, 'request lines on (SIGUSR2)')];
    assert.deepEqual(
      toggles.map((l) => [l.level, l.role, l.requestLines]),
      [...Array(2).fill(['warn', 'worker', false]), ...Array(2).fill(['warn', 'worker', true])],
    );
    assert.equal(p.child.exitCode, null, 'still running');
    p.child.kill('SIGTERM');
    assert.equal(await p.exited, 0);
    assert.ok(lines(p, 'stopped').length >= 2, 'the last lines are flushed at exit');
  });

  test('a worker forked to replace a dead one starts with the lines off when SIGUSR2 turned them off', async () => {
    const { p, send, logged } = await twoWorkers();

    process.kill(p.child.pid!, 'SIGUSR2');
    const off = await waitFor('both workers off', () => {
      const l = lines(p, 'request lines off (SIGUSR2)');
      return l.length === 2 ? l : undefined;
    });
    const dead = Number(off[0]!.pid);
    process.kill(dead, 'SIGKILL');
    const replaced = await p.waitForLog('replacement worker ready', (l) => l.role === 'primary', 120_000);
    const replacement = Number(replaced.worker);
    assert.notEqual(replacement, dead);
    // Enough requests that the replacement (round robin) answers some: none may be logged.
    for (let i = 0; i < 8; i++) await send(`replaced-${i}`);

    // The next SIGUSR2 turns every worker on, the replacement included: it was off, not at the configured default (on).
    process.kill(p.child.pid!, 'SIGUSR2');
    const on = await waitFor('both workers on', () => {
      const l = lines(p, 'request lines on (SIGUSR2)');
      return l.length === 2 ? l : undefined;
    });
    assert.deepEqual(on.map((l) => Number(l.pid)).sort(), [Number(off[1]!.pid), replacement].sort(), 'the survivor and the replacement switched on');
    assert.equal(lines(p, 'request lines off (SIGUSR2)').length, 2, 'no worker switched off on the second signal');
    await send('after-1');
    await waitFor('the line of a request after lines are back', () => logged('after-1'));
    for (let i = 0; i < 8; i++) assert.equal(logged(`replaced-${i}`), false, `replaced-${i} was logged while lines were off`);
    p.child.kill('SIGTERM');
    assert.equal(await p.exited, 0);
  });
});

describe('audit lines with the request lines off', () => {
  test('after SIGUSR2 turned request lines off, each /export still has its audit line, whole, and none has a request line', async () => {
    const dir = tempDir();
    writeJson(join(dir, 'data.json'), [{ set: '', key: 'A', value: 'x' }]);
    const configu = writeJson(join(dir, '.configu'), { stores: { main: { type: 'json-file', configuration: { path: 'data.json' } } } });
    const p = spawnCfgu(['serve', '--config', configu, '--workers', '1', '--port', '0', '--host', '127.0.0.1']);
    const { port } = await p.waitForLog('listening; initialising stores', (l) => typeof l.port === 'number' && l.port > 0);
    process.kill(p.child.pid!, 'SIGUSR2');
    await p.waitForLog('request lines off (SIGUSR2)');
    const url = `http://127.0.0.1:${port}/export`;
    const ids = Array.from({ length: 20 }, (_, i) => `audit-off-${i}`);
    await Promise.all(ids.map(async (id) => assert.equal((await postJson(url, [{ schema: { keys: { A: {} } } }], { 'x-request-id': id })).status, 200)));
    const audited = await waitFor('20 audit lines', () => {
      const got = lines(p, 'audit').filter((l) => ids.includes(String(l.requestId)));
      return got.length === ids.length ? got : undefined;
    });
    for (const l of audited) {
      assert.equal(l.status, 200);
      assert.equal(l.keys, 1);
      assert.equal(l.commands.length, 1);
      assert.equal(l.commands[0].store, 'main');
    }
    assert.equal(lines(p, 'request').filter((l) => ids.includes(String(l.reqId))).length, 0, 'no request line while they are off');
    // Every line on stdout is one whole JSON object (the server log and the audit lines share one writer).
    assert.ok(p.stdout().split('\n').filter(Boolean).every((l) => l.startsWith('{') && l.endsWith('}')), p.stdout());
    p.child.kill('SIGTERM');
    assert.equal(await p.exited, 0);
  });
});
