/**
 * The json-file write lock (src/stores/file-lock.ts) is judged by its heartbeat, never by a pid: a lock refreshed by
 * a live holder in another pid namespace (its pid dead or unknown here) is never broken, and an abandoned one is taken
 * over once it has not been refreshed for the stale age.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { StoreUnavailableError } from '../../src/core/errors.js';
import { FileLock } from '../../src/stores/file-lock.js';
import { JsonFileConfigStore } from '../../src/stores/json-file.js';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const TMP = join(root, 'test', '.tmp', `file-lock-${Date.now().toString(36)}${randomBytes(3).toString('hex')}`);
mkdirSync(TMP, { recursive: true });
const children = new Set<ChildProcess>();
after(() => {
  for (const c of children) c.kill('SIGKILL');
  rmSync(TMP, { recursive: true, force: true });
});

let n = 0;
const file = () => join(TMP, `f${++n}.json`);

/** A tsx child from test/stores/fixtures, resolved once it printed `word`. */
function child(fixture: string, args: string[]): { proc: ChildProcess; said(word: string): Promise<void>; exited: Promise<unknown> } {
  const proc = spawn(process.execPath, ['--import', 'tsx', join(here, 'fixtures', fixture), ...args], { cwd: root, stdio: ['pipe', 'pipe', 'inherit'] });
  children.add(proc);
  let out = '';
  const waiters: Array<() => void> = [];
  proc.stdout!.setEncoding('utf8').on('data', (d: string) => {
    out += d;
    for (const w of waiters.splice(0)) w();
  });
  const exited = new Promise((resolve) => proc.once('exit', resolve)).finally(() => children.delete(proc));
  const said = (word: string) =>
    new Promise<void>((resolve, reject) => {
      const look = () => (out.split('\n').includes(word) ? resolve() : waiters.push(look));
      proc.once('exit', (code) => reject(new Error(`${fixture} exited (${code}) before saying ${word}`)));
      look();
    });
  return { proc, said, exited };
}

/** A pid that is not alive here, as the pid of a writer in another container usually is. */
function deadPid(): number {
  for (let pid = 4_194_000; pid > 1000; pid -= 7) {
    try {
      process.kill(pid, 0);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ESRCH') return pid;
    }
  }
  throw new Error('no free pid found');
}

describe('json-file lock: heartbeat, not pids', () => {
  test('a live lock whose pid is dead here is never broken: writers wait, then time out', async () => {
    const pid = deadPid();
    // Both formats: this version's (which declares its stale age) and the `pid time token` of earlier versions.
    const contents = [JSON.stringify({ token: 'other-container', staleMs: 1000, host: 'elsewhere', pid }), `${pid} ${Date.now()} token`];
    await Promise.all(
      contents.map(async (content) => {
        const path = file();
        const lockPath = `${path}.lock`;
        // Refreshed every 50 ms, twenty times more often than the 1 s stale age.
        const holder = child('heartbeat.ts', [lockPath, content, '50']);
        await holder.said('held');
        // Waiting three stale ages: an mtime-based judge sees a live lock all along; a pid-based one breaks it at once.
        const s = new JsonFileConfigStore('files', { path, lockTimeoutMs: 3000, staleLockMs: 1000 });
        await assert.rejects(s.set([{ set: '', key: 'A', value: '1' }]), (e: unknown) => {
          assert.ok(e instanceof StoreUnavailableError);
          assert.equal(e.message, 'store "files" is unavailable: timed out waiting for the write lock held by another process');
          return true;
        });
        assert.equal(readFileSync(lockPath, 'utf8'), content, 'the live lock is untouched');
        assert.ok(!existsSync(path), 'nothing was written');
        holder.proc.stdin!.end('stop\n');
        await holder.exited;
        await s.close();
      }),
    );
  });

  test('a holder keeps its lock past the stale age by its heartbeat; the lock is taken once released', async () => {
    const path = file();
    const holder = child('lock-holder.ts', [`${path}.lock`, '300']);
    await holder.said('held');
    const waiting = new JsonFileConfigStore('files', { path, lockTimeoutMs: 1500, staleLockMs: 300 });
    await assert.rejects(waiting.set([{ set: '', key: 'A', value: '1' }]), /timed out waiting for the write lock/);
    const patient = new JsonFileConfigStore('files', { path, lockTimeoutMs: 30_000, staleLockMs: 300 });
    const writing = patient.set([{ set: '', key: 'A', value: '2' }]);
    holder.proc.stdin!.write('release\n');
    await holder.said('released');
    await writing;
    assert.deepEqual(JSON.parse(readFileSync(path, 'utf8')), [{ set: '', key: 'A', value: '2' }]);
    assert.ok(!existsSync(`${path}.lock`));
    await holder.exited;
    await Promise.all([waiting.close(), patient.close()]);
  });

  test('an abandoned lock (its holder killed) is taken over once it is older than the stale age it declares', async () => {
    const path = file();
    const holder = child('lock-holder.ts', [`${path}.lock`, '200']);
    await holder.said('held');
    holder.proc.kill('SIGKILL');
    await holder.exited;
    assert.ok(existsSync(`${path}.lock`), 'the killed holder left its lock');
    // The waiter's own stale age is long: the lock is judged by the 200 ms its holder declared.
    const s = new JsonFileConfigStore('files', { path, lockTimeoutMs: 30_000, staleLockMs: 60_000 });
    await s.set([{ set: '', key: 'A', value: '1' }]);
    assert.deepEqual(await s.get([{ set: '', key: 'A' }]), [{ set: '', key: 'A', value: '1' }]);
    assert.deepEqual(readdirSync(TMP).filter((f) => f.startsWith(`f${n}.json.lock`)), [], 'no lock, draft or moved-aside lock is left');
    await s.close();
  });

  test('a lock without a declared stale age (an earlier version, another tool) is judged by the waiter’s', async () => {
    const path = file();
    const holder = child('heartbeat.ts', [`${path}.lock`, `${deadPid()} 0 token`, '1000000']);
    await holder.said('held');
    holder.proc.stdin!.end('stop\n');
    await holder.exited;
    const s = new JsonFileConfigStore('files', { path, lockTimeoutMs: 30_000, staleLockMs: 100 });
    await s.set([{ set: '', key: 'A', value: '1' }]);
    assert.ok(!existsSync(`${path}.lock`));
    await s.close();
  });

  test('a holder whose lock was taken over (it stalled past the stale age) is told so before it writes', async () => {
    const path = file();
    const lockPath = `${path}.lock`;
    const mine = await new FileLock({ path: lockPath, store: 'files', timeoutMs: 1000, staleMs: 60_000 }).acquire();
    await mine.check();
    rmSync(lockPath); // what a takeover does to the stalled holder's lock
    await assert.rejects(mine.check(), (e: unknown) => {
      assert.ok(e instanceof StoreUnavailableError);
      assert.equal(
        e.message,
        'store "files" is unavailable: the write lock was taken over while writing (the writer stalled past staleLockMs); nothing was written',
      );
      return true;
    });
    await mine.release();
  });
});
