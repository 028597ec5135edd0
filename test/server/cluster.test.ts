/**
 * `--workers 2` through the real binary: however workers die (SIGKILL of every worker at once, several rounds; a
 * replacement that cannot start), the primary stays up, logs each death, respawns, and serves again on the same
 * port; SIGTERM still stops everything with exit 0. Every wait is on a condition (a log line, a status), never a sleep.
 */
import { after, afterEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { killChildren, postJson, removeTempDirs, spawnCfgu, tempDir, waitForStatus, writeJson, type Spawned } from './helpers.js';
import { waitFor } from '../helpers/wait.js';

after(async () => {
  await killChildren();
  removeTempDirs();
});
afterEach(killChildren);

const CONFIGU = { stores: { main: { type: 'json-file', configuration: { path: 'data.json' } } } };

function project(): string {
  const dir = tempDir();
  writeJson(join(dir, 'data.json'), [{ set: '', key: 'GREETING', value: 'hello' }]);
  return writeJson(join(dir, '.configu'), CONFIGU);
}

/** Waits until `count` log lines satisfy `match`; fails at once if the process exits meanwhile. */
async function waitForLines(p: Spawned, match: (l: Record<string, any>) => boolean, count: number, what: string): Promise<Array<Record<string, any>>> {
  const seen = await waitFor(what, () => {
    const hits = p.logs().filter(match);
    if (hits.length >= count) return { hits };
    if (p.child.exitCode !== null || p.child.signalCode !== null) return { exited: p.child.exitCode ?? p.child.signalCode };
    return undefined;
  }, 90_000).catch((e: Error) => {
    throw new Error(`${e.message}\n${p.stdout()}\n${p.stderr()}`);
  });
  if ('exited' in seen) throw new Error(`cfgu exited (${seen.exited}) while waiting for ${what}\n${p.stdout()}\n${p.stderr()}`);
  return seen.hits;
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

async function serves(port: number): Promise<void> {
  await waitForStatus(`http://127.0.0.1:${port}/ready`, 200, 90_000);
  const r = await postJson(`http://127.0.0.1:${port}/export`, [{ schema: { keys: { GREETING: {} } } }]);
  assert.deepEqual([r.status, r.json()], [200, { GREETING: 'hello' }]);
}

describe('--workers 2: the primary never exits because workers die', { timeout: 300_000 }, () => {
  test('every worker SIGKILLed at once, three rounds: each death logged, replacements serve on the same port; SIGTERM exits 0', async () => {
    const p = spawnCfgu(['serve', '--config', project(), '--workers', '2', '--port', '0', '--host', '127.0.0.1']);
    const ready = await p.waitForLog('ready', (l) => l.role === 'primary' && l.workers === 2, Infinity);
    const port = ready.port as number;
    assert.ok(port > 0);
    const primary = p.child.pid!;
    let workers = (await waitForLines(p, (l) => l.role === 'worker' && l.msg === 'ready', 2, 'two ready workers')).map((l) => l.pid as number);
    await serves(port);

    for (let round = 1; round <= 3; round++) {
      for (const pid of workers) process.kill(pid, 'SIGKILL');
      const deaths = await waitForLines(p, (l) => l.msg === 'worker died: starting a replacement' && workers.includes(l.worker), 2, `round ${round}: two deaths`);
      assert.deepEqual(deaths.map((d) => d.signal), ['SIGKILL', 'SIGKILL']);
      assert.ok(deaths.every((d) => d.role === 'primary' && d.pid === primary && typeof d.respawnInMs === 'number'));
      const replaced = await waitForLines(p, (l) => l.msg === 'replacement worker ready', 2 * round, `round ${round}: two replacements`);
      workers = replaced.slice(-2).map((l) => l.worker as number);
      assert.ok(replaced.slice(-2).every((l) => l.port === port), 'replacements listen on the port of the first start');
      assert.equal(p.child.exitCode, null, 'the primary is still running');
      await serves(port);
    }

    p.child.kill('SIGTERM');
    assert.equal(await p.exited, 0);
    for (const pid of workers) assert.equal(alive(pid), false, `worker ${pid} is gone`);
  });

  test('a replacement that fails to start (the .configu broke after start-up) does not stop the server', async () => {
    const file = project();
    const p = spawnCfgu(['serve', '--config', file, '--workers', '2', '--port', '0', '--host', '127.0.0.1']);
    const { port } = await p.waitForLog('ready', (l) => l.role === 'primary' && l.workers === 2, Infinity);
    const [victim, survivor] = (await waitForLines(p, (l) => l.role === 'worker' && l.msg === 'ready', 2, 'two ready workers')).map((l) => l.pid as number);

    writeFileSync(file, JSON.stringify({ cache: 'x.db', ...CONFIGU }));
    process.kill(victim!, 'SIGKILL');
    // Two failed start-ups in a row: the primary logs each one and keeps trying.
    const failures = await waitForLines(p, (l) => l.msg === 'a replacement worker failed to start', 2, 'two failed replacements');
    assert.match(failures[0]!.reason, /"cache".*backup/);
    assert.doesNotMatch(p.stdout() + p.stderr(), /\n\s+at /, 'no stack');
    const died = p.logs().filter((l) => l.msg === 'worker died: starting a replacement');
    assert.ok(died.some((l) => l.wasReady === false && l.code === 2), 'a replacement that never got ready (exit 2: a configuration error) is replaced too');
    assert.equal(p.child.exitCode, null, 'the primary is still running');
    assert.ok(alive(survivor!));
    await serves(port); // the survivor answers for itself

    writeJson(file, CONFIGU);
    await p.waitForLog('replacement worker ready', undefined, Infinity);
    await serves(port);
    p.child.kill('SIGTERM');
    assert.equal(await p.exited, 0);
  });
});
