/**
 * `json-file`: the file is a JSON array of `{ "set", "key", "value" }` (the Cfgu v1 layout); empty values are not
 * kept; a missing file is an empty store.
 *
 * Reads are answered from memory. Before answering, one synchronous `fs.statSync` compares the file's fingerprint
 * (inode + size + mtime in ns) with the one the in-memory copy was read from; the file is re-read only when it
 * changed. So every change (ours, another process's, an editor's) is seen by the next request, at the cost of one
 * stat (about 2 microseconds; no thread-pool hop, no read). With `watch: true` even that stat is skipped while no
 * file-system event arrived (re-checked at least every `recheckMs`, default 1000 ms).
 *
 * Writes: an exclusive lock file `<path>.lock` (created atomically with its content by hard-linking a private draft,
 * which fails with EEXIST like an O_EXCL create; it holds pid, time and a random token) serialises
 * writers across processes; under the lock the file is re-read from disk, the batch applied, the result written to a
 * temporary file in the same folder, fsynced, renamed over the file and the folder fsynced. A lock whose pid is no
 * longer alive, or that is older than `staleLockMs` (default 10 s), is broken. A crash at any point leaves either the
 * old or the new file, never a partial one.
 *
 * A file that cannot be read or parsed makes every request fail with StoreUnavailableError naming the store (the
 * file is never overwritten while it is corrupt); the store recovers as soon as the file is fixed.
 */
import { randomBytes } from 'node:crypto';
import { statSync, watch, type FSWatcher } from 'node:fs';
import { link, mkdir, open, readdir, readFile, rename, stat, unlink, writeFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { StoreUnavailableError } from '../core/errors.js';
import { indexBySet, lookUp, Mutex, pairKey, reasonOf, splitWrites, type SetIndex } from './common.js';
import type { Config, ConfigQuery, ConfigStore } from './types.js';

export interface JsonFileStoreOptions {
  /** Absolute path of the file. */
  path: string;
  /** How long a writer waits for the lock before giving up (ms). Default 5000. */
  lockTimeoutMs?: number;
  /** A lock older than this is considered abandoned (ms). Default 10000. */
  staleLockMs?: number;
  /**
   * Watch mode (default false): skip even the per-request stat while no file-system event arrived, re-checking at
   * least every `recheckMs`. Saves a few microseconds per request, at the price of a short window (until the event
   * is delivered) in which a change made by another process is not yet seen.
   */
  watch?: boolean;
  /** In watch mode, re-check the fingerprint at least this often even without events (ms). Default 1000. */
  recheckMs?: number;
}

type Parsed = { ok: true; configs: Map<string, Config> } | { ok: false; reason: string };

/** Parse the file's text. Lenient about scalars (numbers/booleans become strings); strict about shape. */
export function parseJsonConfigs(text: string): Parsed {
  if (text.trim() === '') return { ok: true, configs: new Map() };
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch {
    return { ok: false, reason: 'the file is not valid JSON' };
  }
  if (!Array.isArray(data)) return { ok: false, reason: 'the file is not a JSON array of {set, key, value} objects' };
  const configs = new Map<string, Config>();
  for (let i = 0; i < data.length; i++) {
    const item = data[i] as Record<string, unknown> | null;
    const bad = (): Parsed => ({ ok: false, reason: `item ${i} of the file is not a {set, key, value} object` });
    if (!item || typeof item !== 'object' || Array.isArray(item)) return bad();
    const set = item.set === undefined || item.set === null ? '' : item.set;
    const { key, value } = item;
    if (typeof set !== 'string' || typeof key !== 'string' || key === '') return bad();
    let v: string;
    if (value === undefined || value === null) continue;
    if (typeof value === 'string') v = value;
    else if (typeof value === 'number' || typeof value === 'boolean') v = String(value);
    else return bad();
    if (v === '') continue;
    const k = pairKey(set, key);
    configs.delete(k);
    configs.set(k, { set, key, value: v });
  }
  return { ok: true, configs };
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

const isCode = (e: unknown, ...codes: string[]) => codes.includes((e as NodeJS.ErrnoException)?.code ?? '');

export class JsonFileConfigStore implements ConfigStore {
  readonly type = 'json-file';
  readonly path: string;
  private readonly lockPath: string;
  private readonly lockTimeoutMs: number;
  private readonly staleLockMs: number;
  private readonly recheckMs: number;
  private readonly useWatch: boolean;

  private dataMap = new Map<string, Config>();
  /** Read index of `data`, rebuilt whenever `data` is replaced (after a parse or a write; never mutated in place). */
  private index: SetIndex = new Map();
  private get data(): Map<string, Config> {
    return this.dataMap;
  }
  private set data(map: Map<string, Config>) {
    this.dataMap = map;
    this.index = indexBySet(map.values());
  }
  /** Fingerprint of the file the in-memory copy (or `error`) reflects; undefined = must look. */
  private fingerprint: string | undefined;
  private error: StoreUnavailableError | undefined;
  private dirty = true;
  private lastCheck = 0;
  private watcher: FSWatcher | undefined;
  private refreshing: Promise<void> | undefined;
  private readonly writes = new Mutex();
  private closed = false;

  constructor(
    readonly name: string,
    options: JsonFileStoreOptions,
  ) {
    this.path = options.path;
    this.lockPath = `${options.path}.lock`;
    this.lockTimeoutMs = options.lockTimeoutMs ?? 5000;
    this.staleLockMs = options.staleLockMs ?? 10_000;
    this.recheckMs = options.recheckMs ?? 1000;
    this.useWatch = options.watch ?? false;
  }

  async init(): Promise<void> {
    this.closed = false;
    this.startWatch();
    this.dirty = true;
    this.fingerprint = undefined;
    await this.refresh();
    if (this.error) throw this.error;
  }

  async get(queries: readonly ConfigQuery[]): Promise<Config[]> {
    const pending = this.refresh();
    if (pending) await pending;
    if (this.error) throw this.error;
    return lookUp(this.index, queries);
  }

  async set(configs: readonly Config[]): Promise<void> {
    if (!configs.length) return;
    const { upserts, deletes } = splitWrites(configs);
    await this.writes.run(async () => {
      const release = await this.lock();
      try {
        // Re-read under the lock: other processes may have written since our last look.
        const current = await this.readFromDisk();
        for (const c of deletes) current.delete(pairKey(c.set, c.key));
        for (const c of upserts) {
          const k = pairKey(c.set, c.key);
          const old = current.get(k);
          if (old) old.value = c.value;
          else current.set(k, { ...c });
        }
        const fingerprint = await this.writeAtomically([...current.values()]);
        await this.sweepLeftovers();
        this.data = current;
        this.fingerprint = fingerprint;
        this.error = undefined;
      } finally {
        await release();
      }
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    this.watcher?.close();
    this.watcher = undefined;
  }

  // -------------------------------------------------------------------------------------------------------------
  // Reading

  private startWatch(): void {
    if (!this.useWatch || this.watcher) return;
    const base = basename(this.path);
    try {
      const w = watch(dirname(this.path), { persistent: false }, (_event, filename) => {
        if (filename === null || filename === undefined || String(filename) === base) this.dirty = true;
      });
      w.on('error', () => {
        // Folder removed or watch limit reached: fall back to the periodic check.
        w.close();
        if (this.watcher === w) this.watcher = undefined;
        this.dirty = true;
      });
      this.watcher = w;
    } catch {
      this.watcher = undefined; // folder missing or watching unsupported: stat on every request instead
    }
  }

  /**
   * Bring the in-memory copy up to date with the file, cheaply; undefined when it already is (the common case: no
   * promise, no I/O but one synchronous stat, or nothing at all in watch mode). Never throws; sets `error` instead.
   */
  private refresh(): Promise<void> | undefined {
    if (this.refreshing) return this.refreshing;
    if (this.watcher !== undefined && !this.dirty && this.fingerprint !== undefined && Date.now() - this.lastCheck < this.recheckMs) {
      return undefined; // watch mode: no event since the last check
    }
    if (this.fingerprint !== undefined) {
      // One synchronous stat (a few microseconds, served from the kernel's inode cache, no thread-pool hop).
      try {
        const st = statSync(this.path, { bigint: true, throwIfNoEntry: false });
        const now = st === undefined ? 'missing' : st.isFile() ? `${st.ino}:${st.size}:${st.mtimeNs}` : undefined;
        if (now !== undefined && now === this.fingerprint) {
          this.dirty = false;
          this.lastCheck = Date.now();
          return undefined;
        }
      } catch {
        /* fall through to the full check, which reports the problem */
      }
    }
    this.refreshing = this.check().finally(() => {
      this.refreshing = undefined;
    });
    return this.refreshing;
  }

  private async check(): Promise<void> {
    if (!this.closed && !this.watcher) this.startWatch();
    this.dirty = false; // an event arriving while we look sets it again
    this.lastCheck = Date.now();
    let fingerprint: string;
    try {
      const st = await stat(this.path, { bigint: true });
      if (!st.isFile()) throw Object.assign(new Error('not a file'), { code: 'EISDIR' });
      fingerprint = `${st.ino}:${st.size}:${st.mtimeNs}`;
    } catch (e) {
      if (isCode(e, 'ENOENT')) {
        if (this.fingerprint !== 'missing') {
          this.data = new Map();
          this.error = undefined;
          this.fingerprint = 'missing';
        }
        return;
      }
      this.fail(reasonOf(e));
      return;
    }
    if (fingerprint === this.fingerprint) return;
    let text: string;
    try {
      text = await readFile(this.path, 'utf8');
    } catch (e) {
      if (isCode(e, 'ENOENT')) {
        this.dirty = true; // replaced while we looked: look again next time
        return;
      }
      this.fail(reasonOf(e));
      return;
    }
    const parsed = parseJsonConfigs(text);
    this.fingerprint = fingerprint;
    if (parsed.ok) {
      this.data = parsed.configs;
      this.error = undefined;
    } else {
      this.error = new StoreUnavailableError(this.name, parsed.reason);
    }
  }

  private fail(reason: string): void {
    this.error = new StoreUnavailableError(this.name, `cannot read the file: ${reason}`);
    this.fingerprint = undefined;
    this.dirty = true;
  }

  /** Read and parse the file now (under the write lock). Missing = empty; unreadable or corrupt = throw. */
  private async readFromDisk(): Promise<Map<string, Config>> {
    let text: string;
    try {
      text = await readFile(this.path, 'utf8');
    } catch (e) {
      if (isCode(e, 'ENOENT')) return new Map();
      throw new StoreUnavailableError(this.name, `cannot read the file: ${reasonOf(e)}`);
    }
    const parsed = parseJsonConfigs(text);
    if (!parsed.ok) throw new StoreUnavailableError(this.name, `${parsed.reason}; not writing over it`);
    return parsed.configs;
  }

  // -------------------------------------------------------------------------------------------------------------
  // Writing

  /** Write the whole file atomically; returns the new file's fingerprint. */
  private async writeAtomically(configs: Config[]): Promise<string> {
    const dir = dirname(this.path);
    const tmp = join(dir, `.${basename(this.path)}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`);
    const text = `${JSON.stringify(
      configs.map((c) => ({ set: c.set, key: c.key, value: c.value })),
      null,
      2,
    )}\n`;
    let mode = 0o644;
    try {
      mode = (await stat(this.path)).mode & 0o777;
    } catch {
      /* new file */
    }
    let fingerprint: string;
    try {
      const fh = await open(tmp, 'wx', mode);
      try {
        await fh.writeFile(text, 'utf8');
        await fh.sync();
        const st = await fh.stat({ bigint: true });
        fingerprint = `${st.ino}:${st.size}:${st.mtimeNs}`;
      } finally {
        await fh.close();
      }
      await rename(tmp, this.path);
    } catch (e) {
      await unlink(tmp).catch(() => undefined);
      throw new StoreUnavailableError(this.name, `cannot write the file: ${reasonOf(e)}`);
    }
    try {
      const d = await open(dir, 'r');
      try {
        await d.sync();
      } finally {
        await d.close();
      }
    } catch {
      /* some file systems cannot fsync a folder; the rename is still atomic */
    }
    return fingerprint;
  }

  /** Take the cross-process lock; resolves to its release function. */
  private async lock(): Promise<() => Promise<void>> {
    const token = `${process.pid} ${Date.now()} ${randomBytes(8).toString('hex')}`;
    const deadline = Date.now() + this.lockTimeoutMs;
    let madeDir = false;
    for (;;) {
      try {
        // Create the lock with its content in one step: write a private file, then hard-link it to the lock name
        // (link fails with EEXIST like an O_EXCL create), so no one can ever see an empty lock.
        const draft = `${this.lockPath}.${process.pid}.${randomBytes(4).toString('hex')}`;
        await writeFile(draft, token, { encoding: 'utf8', mode: 0o644, flag: 'wx' });
        try {
          await link(draft, this.lockPath);
        } finally {
          await unlink(draft).catch(() => undefined);
        }
        return async () => {
          try {
            if ((await readFile(this.lockPath, 'utf8')) === token) await unlink(this.lockPath);
          } catch {
            /* already gone (broken as stale by someone else) */
          }
        };
      } catch (e) {
        if (isCode(e, 'ENOENT') && !madeDir) {
          madeDir = true;
          await mkdir(dirname(this.path), { recursive: true }).catch(() => undefined);
          continue;
        }
        if (!isCode(e, 'EEXIST')) throw new StoreUnavailableError(this.name, `cannot take the write lock: ${reasonOf(e)}`);
      }
      if (await this.breakStaleLock()) continue;
      if (Date.now() > deadline) {
        throw new StoreUnavailableError(this.name, 'timed out waiting for the write lock held by another process', 1);
      }
      await sleep(3 + Math.random() * 12);
    }
  }

  /**
   * Remove what killed writers left behind: temporary files `.<name>.<pid>.<random>.tmp` and lock drafts
   * `<name>.lock.<pid>.<random>` whose pid is no longer alive. Called while holding the lock, after every write.
   */
  private async sweepLeftovers(): Promise<void> {
    const dir = dirname(this.path);
    const tmpPrefix = `.${basename(this.path)}.`;
    const draftPrefix = `${basename(this.lockPath)}.`;
    try {
      for (const f of await readdir(dir)) {
        let pidText: string | undefined;
        if (f.startsWith(tmpPrefix) && f.endsWith('.tmp')) pidText = f.slice(tmpPrefix.length).split('.')[0];
        else if (f.startsWith(draftPrefix) && !f.startsWith(`${draftPrefix}stale-`)) pidText = f.slice(draftPrefix.length).split('.')[0];
        const pid = Number(pidText);
        if (pidText && Number.isInteger(pid) && pid > 0 && pid !== process.pid && !pidAlive(pid)) {
          await unlink(join(dir, f)).catch(() => undefined);
        }
      }
    } catch {
      /* best effort */
    }
  }

  /** Remove the lock when its owner is dead or it is too old. True when the caller should retry at once. */
  private async breakStaleLock(): Promise<boolean> {
    let content: string;
    let ageMs: number;
    try {
      content = await readFile(this.lockPath, 'utf8');
      ageMs = Date.now() - (await stat(this.lockPath)).mtimeMs;
    } catch (e) {
      return isCode(e, 'ENOENT');
    }
    const pid = Number(content.split(' ')[0]);
    const valid = Number.isInteger(pid) && pid > 0;
    const ownerDead = valid && pid !== process.pid && !pidAlive(pid);
    // A lock without a pid (made by another tool) is judged by age alone, with a shorter limit.
    const limit = valid ? this.staleLockMs : Math.min(this.staleLockMs, 2000);
    if (!ownerDead && ageMs < limit) return false;
    // Move it aside atomically, then make sure we moved the one we judged (not a fresh lock taken meanwhile).
    const aside = `${this.lockPath}.stale-${process.pid}-${randomBytes(4).toString('hex')}`;
    try {
      await rename(this.lockPath, aside);
    } catch {
      return true;
    }
    try {
      if ((await readFile(aside, 'utf8')) !== content) {
        await link(aside, this.lockPath).catch(() => undefined); // put the live lock back
      }
    } finally {
      await unlink(aside).catch(() => undefined);
    }
    return true;
  }
}
