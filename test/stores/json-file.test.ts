/** json-file specifics: crash safety, cross-process locking, corrupt files, change detection. */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { StoreUnavailableError } from '../../src/core/errors.js';
import { JsonFileConfigStore } from '../../src/stores/json-file.js';
import { waitFor } from '../helpers/wait.js';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const WRITER = join(here, 'fixtures', 'json-writer.ts');
const TMP = join(root, 'test', '.tmp', `json-file-${Date.now().toString(36)}${randomBytes(3).toString('hex')}`);
mkdirSync(TMP, { recursive: true });
after(() => rmSync(TMP, { recursive: true, force: true }));

let n = 0;
const file = () => join(TMP, `f${++n}.json`);

function writer(path: string, prefix: string, count: number, staleLockMs?: number): { child: ChildProcess; ready: Promise<void>; exit: Promise<number | null> } {
  const extra = staleLockMs === undefined ? [] : ['shared', String(staleLockMs)];
  const child = spawn(process.execPath, ['--import', 'tsx', WRITER, path, prefix, String(count), ...extra], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const ready = new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => d.toString().includes('ready') && resolve());
    child.once('exit', (code) => reject(new Error(`writer exited (${code}) before ready`)));
  });
  const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, ready, exit };
}

describe('json-file store', () => {
  test('a missing file is an empty store; the first write creates the file (and its folder)', async () => {
    const path = join(TMP, 'new-folder', 'sub', 'configs.json');
    const s = new JsonFileConfigStore('files', { path });
    await s.init();
    assert.deepEqual(await s.get([{ set: '', key: 'A' }]), []);
    await s.set([{ set: 'x', key: 'A', value: '1' }]);
    assert.deepEqual(JSON.parse(readFileSync(path, 'utf8')), [{ set: 'x', key: 'A', value: '1' }]);
    await s.set([{ set: 'x', key: 'A', value: '' }]);
    assert.deepEqual(JSON.parse(readFileSync(path, 'utf8')), []);
    assert.ok(!existsSync(`${path}.lock`), 'lock released');
    await s.close();
  });

  test('changes made by others (another process, an editor) are seen by the next request', async () => {
    const path = file();
    writeFileSync(path, JSON.stringify([{ set: '', key: 'A', value: 'one' }]));
    const s = new JsonFileConfigStore('files', { path });
    await s.init();
    assert.deepEqual(await s.get([{ set: '', key: 'A' }]), [{ set: '', key: 'A', value: 'one' }]);
    // In-place edit of the same size with the same mtime second: the ns mtime / inode still differ.
    writeFileSync(path, JSON.stringify([{ set: '', key: 'A', value: 'two' }]));
    assert.deepEqual(await s.get([{ set: '', key: 'A' }]), [{ set: '', key: 'A', value: 'two' }]);
    // Replaced by rename (as editors and cfgu do).
    writeFileSync(`${path}.new`, JSON.stringify([{ set: '', key: 'A', value: 'three' }, { set: 'b', key: 'B', value: 'bee', extra: 1 }]));
    const { renameSync } = await import('node:fs');
    renameSync(`${path}.new`, path);
    assert.deepEqual(await s.get([{ set: '', key: 'A' }, { set: 'b', key: 'B' }]), [
      { set: '', key: 'A', value: 'three' },
      { set: 'b', key: 'B', value: 'bee' },
    ]);
    rmSync(path);
    assert.deepEqual(await s.get([{ set: '', key: 'A' }]), [], 'deleted file = empty store');
    await s.close();
  });

  test('watch mode sees changes through file-system events', async () => {
    const path = file();
    writeFileSync(path, JSON.stringify([{ set: '', key: 'A', value: 'one' }]));
    const s = new JsonFileConfigStore('files', { path, watch: true, recheckMs: 60_000 });
    await s.init();
    assert.deepEqual(await s.get([{ set: '', key: 'A' }]), [{ set: '', key: 'A', value: 'one' }]);
    writeFileSync(path, JSON.stringify([{ set: '', key: 'A', value: 'two' }]));
    // recheckMs is a minute: only the file-system event can make the change visible.
    await waitFor('the change is seen', async () => (await s.get([{ set: '', key: 'A' }]))[0]?.value === 'two' || undefined);
    await s.close();
  });

  test('a corrupt file gives StoreUnavailableError naming the store, is never overwritten, and recovers when fixed', async () => {
    const path = file();
    writeFileSync(path, JSON.stringify([{ set: '', key: 'A', value: 'ok' }]));
    const s = new JsonFileConfigStore('files', { path });
    await s.init();
    const corrupt = '[{"set": "", "key": "A", "value": "ok"';
    writeFileSync(path, corrupt);
    const isUnavailable = (reason: RegExp) => (e: unknown) => {
      assert.ok(e instanceof StoreUnavailableError);
      assert.equal(e.store, 'files');
      assert.match(e.message, reason);
      assert.doesNotMatch(e.message, new RegExp(TMP.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')), 'no server path');
      return true;
    };
    await assert.rejects(s.get([{ set: '', key: 'A' }]), isUnavailable(/^store "files" is unavailable: the file is not valid JSON$/));
    await assert.rejects(s.get([{ set: '', key: 'A' }]), isUnavailable(/not valid JSON/), 'still failing, from memory');
    await assert.rejects(s.set([{ set: '', key: 'B', value: 'x' }]), isUnavailable(/not valid JSON; not writing over it/));
    assert.equal(readFileSync(path, 'utf8'), corrupt, 'corrupt file untouched');
    writeFileSync(path, JSON.stringify({ not: 'an array' }));
    await assert.rejects(s.get([{ set: '', key: 'A' }]), isUnavailable(/not a JSON array of \{set, key, value\} objects/));
    writeFileSync(path, JSON.stringify([{ set: '', key: 'A', value: { nested: true } }]));
    await assert.rejects(s.get([{ set: '', key: 'A' }]), isUnavailable(/item 0 of the file is not a \{set, key, value\} object/));
    writeFileSync(path, JSON.stringify([{ set: '', key: 'A', value: 'fixed' }]));
    assert.deepEqual(await s.get([{ set: '', key: 'A' }]), [{ set: '', key: 'A', value: 'fixed' }]);
    await s.set([{ set: '', key: 'B', value: 'x' }]);
    assert.equal(JSON.parse(readFileSync(path, 'utf8')).length, 2);
    await s.close();
  });

  test('a corrupt file at start-up: init reports it, requests fail, and it recovers when fixed', async () => {
    const path = file();
    writeFileSync(path, 'not json');
    const s = new JsonFileConfigStore('files', { path });
    await assert.rejects(s.init(), StoreUnavailableError);
    await assert.rejects(s.get([{ set: '', key: 'A' }]), StoreUnavailableError);
    writeFileSync(path, '[]');
    assert.deepEqual(await s.get([{ set: '', key: 'A' }]), []);
    await s.close();
  });

  test('an unreadable path (a folder) gives StoreUnavailableError, not a crash', async () => {
    const path = join(TMP, 'a-folder.json');
    mkdirSync(path, { recursive: true });
    const s = new JsonFileConfigStore('files', { path });
    await assert.rejects(s.get([{ set: '', key: 'A' }]), /store "files" is unavailable: cannot read the file: is a folder/);
    await s.close();
  });

  test('two processes writing at once lose no update', async () => {
    const path = file();
    const a = writer(path, 'a', 40);
    const b = writer(path, 'b', 40);
    await Promise.all([a.ready, b.ready]);
    const codes = await Promise.all([a.exit, b.exit]);
    assert.deepEqual(codes, [0, 0]);
    const configs = JSON.parse(readFileSync(path, 'utf8')) as Array<{ key: string }>;
    const keys = new Set(configs.map((c) => c.key));
    assert.equal(keys.size, 80, `expected 80 keys, found ${keys.size}`);
    for (let i = 0; i < 40; i++) assert.ok(keys.has(`a${i}`) && keys.has(`b${i}`));
    assert.ok(!existsSync(`${path}.lock`));
    // And this process sees all of them.
    const s = new JsonFileConfigStore('files', { path });
    assert.equal((await s.get([...keys].map((key) => ({ set: 'shared', key })))).length, 80);
    await s.close();
  });

  test('kill -9 of a writer mid-write leaves valid JSON; its abandoned lock and temp files are cleaned up', async () => {
    const path = file();
    for (let round = 0; round < 3; round++) {
      // The writer declares a 300 ms stale age in its lock: a lock it leaves is abandoned 300 ms after the kill.
      const w = writer(path, `k${round}_`, 0, 300);
      await w.ready;
      // Kill at a varying point: after a random number of writes have landed (the writer writes without end).
      const landed = 1 + Math.floor(Math.random() * 20);
      await waitFor(`${landed} writes`, () => {
        try {
          const configs = JSON.parse(readFileSync(path, 'utf8')) as Array<{ key: string }>;
          return configs.filter((c) => c.key.startsWith(`k${round}_`)).length >= landed || undefined;
        } catch {
          return undefined; // no file yet
        }
      });
      w.child.kill('SIGKILL');
      await w.exit;
      const text = readFileSync(path, 'utf8');
      const parsed = JSON.parse(text) as unknown[]; // throws if partial
      assert.ok(Array.isArray(parsed) && parsed.length > 0, 'writes happened');
      // The next writer takes over a lock the dead process may have left, once it is no longer refreshed.
      const s = new JsonFileConfigStore('files', { path, lockTimeoutMs: 60_000, staleLockMs: 300 });
      await s.set([{ set: 'after', key: `K${round}`, value: 'v' }]);
      assert.deepEqual(await s.get([{ set: 'after', key: `K${round}` }]), [{ set: 'after', key: `K${round}`, value: 'v' }]);
      await s.close();
    }
    // Leftovers (temp files, lock drafts) not modified for the stale age are deleted by the next write: write until
    // none is left.
    const name = `f${n}.json`;
    const leftovers = () => readdirSync(TMP).filter((f) => f !== name && f.includes(name));
    const s = new JsonFileConfigStore('files', { path, lockTimeoutMs: 30_000, staleLockMs: 300 });
    let i = 0;
    await waitFor('the leftovers swept by a write', async () => {
      await s.set([{ set: 'sweep', key: `S${i++}`, value: 'v' }]);
      return leftovers().length === 0 || undefined;
    });
    await s.close();
  });

  test('a lock held by a live process makes writers wait, then time out with StoreUnavailableError', async () => {
    const path = file();
    // A live process that is not us: a sleeping child.
    const holder = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 30000)'], { stdio: 'ignore' });
    try {
      writeFileSync(`${path}.lock`, `${holder.pid} ${Date.now()} token`);
      const s = new JsonFileConfigStore('files', { path, lockTimeoutMs: 300 });
      await assert.rejects(s.set([{ set: '', key: 'A', value: '1' }]), /store "files" is unavailable: timed out waiting for the write lock/);
      // An old lock (past staleLockMs) is broken even when its pid is alive (pid reuse, hung writer).
      const old = new Date(Date.now() - 60_000);
      utimesSync(`${path}.lock`, old, old);
      const t = new JsonFileConfigStore('files', { path, lockTimeoutMs: 1000, staleLockMs: 10_000 });
      await t.set([{ set: '', key: 'A', value: '1' }]);
      assert.ok(!existsSync(`${path}.lock`));
      await Promise.all([s.close(), t.close()]);
    } finally {
      holder.kill('SIGKILL');
    }
  });

  test('the file layout: a JSON array of {set,key,value}, other scalar values read as strings, empty values skipped', async () => {
    const path = file();
    writeFileSync(
      path,
      JSON.stringify([
        { set: '', key: 'N', value: 42 },
        { set: '', key: 'B', value: true },
        { set: '', key: 'E', value: '' },
        { set: 'x', key: 'A', value: 'a' },
      ]),
    );
    const s = new JsonFileConfigStore('files', { path });
    assert.deepEqual(await s.get([{ set: '', key: 'N' }, { set: '', key: 'B' }, { set: '', key: 'E' }, { set: 'x', key: 'A' }]), [
      { set: '', key: 'N', value: '42' },
      { set: '', key: 'B', value: 'true' },
      { set: 'x', key: 'A', value: 'a' },
    ]);
    await s.set([{ set: 'x', key: 'A', value: 'a2' }]);
    assert.deepEqual(JSON.parse(readFileSync(path, 'utf8')), [
      { set: '', key: 'N', value: '42' },
      { set: '', key: 'B', value: 'true' },
      { set: 'x', key: 'A', value: 'a2' },
    ]);
    await s.close();
  });
});
