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
 * Writes: an exclusive lock file `<path>.lock` (file-lock.ts: kept alive by its holder's heartbeat, taken over when
 * not refreshed for `staleLockMs`, default 10 s) serialises writers across processes and containers; under the lock
 * the file is read again unless it is still the one the in-memory copy was read from or written as (same fingerprint,
 * the rule of every read), the batch applied, the result written to a temporary file in the same folder, fsynced,
 * renamed over the file and the folder fsynced (atomic-write.ts). A crash at any point leaves either the old or the
 * new file, never a partial one. Each config's text is kept with it, so a write formats only the configs it made.
 *
 * A file that cannot be read or parsed makes every request fail with StoreUnavailableError naming the store (the
 * file is never overwritten while it is corrupt); the store recovers as soon as the file is fixed.
 *
 * Change feed (`watch`): file-system notifications on the folder (an editor's save replaces the file by a rename,
 * which a watch on the file itself would lose), plus a check every `feedIntervalMs` (default 1000 ms) as a safety net
 * for file systems that deliver no events (network mounts, some containers). Each look compares the fingerprint, and
 * when it moved, reads the file (or takes what this object just wrote) and reports exactly the sets whose configs
 * differ from the last look.
 */
import { statSync, watch, type FSWatcher } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { basename, dirname } from 'node:path';
import { StoreUnavailableError } from '../core/errors.js';
import { writeFileAtomic } from './atomic-write.js';
import { FileLock, sweepLeftovers, type HeldLock } from './file-lock.js';
import { changedOutside, checkedChanges, checkedQuery, checkedSet, DEFAULT_HISTORY, type HistorySettings } from './history.js';
import { JsonFileHistory, valuesOf } from './json-file-history.js';
import { AnswerMemo, indexBySet, Mutex, pairKey, reasonOf, reindexSets, splitWrites, type SetIndex } from './common.js';
import { fileIdentity, formatJsonConfigs, identityOf, parseJsonConfigs } from './json-file-format.js';
import { DEFAULT_FEED_INTERVAL_MS, OpenFeeds, type Poller } from './feed.js';
import { watchJsonFile, writtenFile, type WrittenFile } from './json-file-feed.js';
import { listArguments, listingFromIndex } from './listing.js';
import type {
  ChangeFeed,
  ChangeListener,
  Config,
  ConfigChange,
  ConfigQuery,
  HistoryPage,
  HistoryQuery,
  RevisionedStore,
  SetListing,
  SetListOptions,
  SetRevision,
  WriteOptions,
  WriteResult,
} from '../core/ports.js';

export { parseJsonConfigs };

export interface JsonFileStoreOptions {
  /** Absolute path of the file. */
  path: string;
  /** How long a writer waits for the lock before giving up (ms). Default 5000. */
  lockTimeoutMs?: number;
  /** A lock whose holder has not refreshed it for this long is abandoned (ms). Default 10000. See file-lock.ts. */
  staleLockMs?: number;
  /**
   * Watch mode (default false): skip even the per-request stat while no file-system event arrived, re-checking at
   * least every `recheckMs`. Saves a few microseconds per request, at the price of a short window (until the event
   * is delivered) in which a change made by another process is not yet seen.
   */
  watch?: boolean;
  /** In watch mode, re-check the fingerprint at least this often even without events (ms). Default 1000. */
  recheckMs?: number;
  /** Change feed: the safety-net check's period (ms) behind the file-system notifications. Default 1000. */
  feedIntervalMs?: number;
  /** Revisions and history, in `<path>.history.json` (docs/stores.md, "Revisions and history"). */
  history?: HistorySettings;
  /** The history file is compacted once its lines outnumber this and the records it holds. Default 1000. */
  historyCompactLines?: number;
}

const isCode = (e: unknown, ...codes: string[]) => codes.includes((e as NodeJS.ErrnoException)?.code ?? '');

export class JsonFileConfigStore implements RevisionedStore {
  readonly type = 'json-file';
  readonly path: string;
  private readonly lock: FileLock;
  private readonly staleLockMs: number;
  private readonly recheckMs: number;
  private readonly useWatch: boolean;

  private dataMap = new Map<string, Config>();
  /** Read index of `data`, rebuilt whenever `data` is replaced (after a parse or a write; never mutated in place). */
  private index: SetIndex = new Map();
  /** Answers to repeated batches, while `index` is the same object (it is replaced, never changed). */
  private readonly answers = new AnswerMemo();
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
  /** When this object last swept leftovers (0: not yet). */
  private lastSweep = 0;
  private closed = false;
  private readonly feedIntervalMs: number;
  /** The change feeds' pollers: a write through this object makes them look at once. */
  private readonly feedPollers = new Set<Poller>();
  private readonly openFeeds = new OpenFeeds();
  /** What the last write through this object wrote, for the change feeds (json-file-feed.ts). */
  private lastWrite: WrittenFile | undefined;
  /** The fingerprint of the file a write of this object is renaming into place, until the write has taken it. */
  private renaming: string | undefined;

  constructor(
    readonly name: string,
    options: JsonFileStoreOptions,
  ) {
    this.path = options.path;
    this.staleLockMs = options.staleLockMs ?? 10_000;
    this.lock = new FileLock({ path: `${options.path}.lock`, store: name, timeoutMs: options.lockTimeoutMs ?? 5000, staleMs: this.staleLockMs });
    this.recheckMs = options.recheckMs ?? 1000;
    this.useWatch = options.watch ?? false;
    this.feedIntervalMs = options.feedIntervalMs ?? DEFAULT_FEED_INTERVAL_MS['json-file'];
    this.historySettings = options.history ?? { ...DEFAULT_HISTORY };
    this.revisions = new JsonFileHistory(options.path, name, this.historySettings, options.historyCompactLines);
  }

  private readonly historySettings: HistorySettings;
  private readonly revisions: JsonFileHistory;

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
    return this.answers.answer(this.index, 0, queries);
  }

  /** From memory, after the same freshness check as get(): the file is read again only when it changed. */
  async list(prefix: string, options?: SetListOptions): Promise<SetListing> {
    const args = listArguments(prefix, options);
    const pending = this.refresh();
    if (pending) await pending;
    if (this.error) throw this.error;
    return listingFromIndex(this.index, args.prefix, args.limits);
  }

  async set(configs: readonly Config[]): Promise<void> {
    if (!configs.length) return;
    const { upserts, deletes } = splitWrites(configs);
    await this.commit(new Set(configs.map((c) => c.set)), async (current) => {
      for (const c of deletes) current.delete(pairKey(c.set, c.key));
      for (const c of upserts) current.set(pairKey(c.set, c.key), { ...c });
    });
  }

  /** The sidecar first, then the data file, both under the lock (json-file-history.ts: how a crash between them reads). */
  async write(set: string, changes: readonly ConfigChange[], options?: WriteOptions): Promise<WriteResult> {
    const s = checkedSet(set);
    const checked = checkedChanges(changes);
    const plan = await this.commit(new Set([s]), async (current, file, lock) => {
      const plan = await this.revisions.prepare(s, file, current, checked, options, () => lock.check());
      for (const c of plan.deletes) current.delete(pairKey(c.set, c.key));
      for (const c of plan.upserts) current.set(pairKey(c.set, c.key), { ...c });
      return plan;
    });
    return { set: s, revision: plan.revision, records: plan.records };
  }

  async revision(set: string): Promise<SetRevision> {
    const s = checkedSet(set);
    const file = await this.fresh();
    const state = await this.revisions.state(s, file);
    return { set: s, revision: state.revision, changedOutside: changedOutside(state, valuesOf(this.data.values(), s), this.historySettings) };
  }

  async history(query: HistoryQuery): Promise<HistoryPage> {
    const q = checkedQuery(query);
    return this.revisions.history(q, await this.fresh());
  }

  /** The in-memory copy brought up to date (as get() does); returns the identity of the file it reflects. */
  private async fresh(): Promise<string> {
    const pending = this.refresh();
    if (pending) await pending;
    if (this.error) throw this.error;
    return this.fingerprint ?? 'missing';
  }

  /**
   * Under the lock: read the file again when another process (or tool) changed it since our last look, with its
   * identity, let `change` edit the configs of `sets`, write the file atomically, and take the result as the in-memory
   * copy.
   */
  private async commit<T>(sets: ReadonlySet<string>, change: (current: Map<string, Config>, file: string, lock: HeldLock) => Promise<T>): Promise<T> {
    const result = await this.writes.run(async () => {
      const lock = await this.lock.acquire();
      try {
        const file = identityOf(this.path);
        // The file is read again only when it is not the one the memory copy reflects (the rule of every read).
        const fromMemory = file === this.fingerprint && this.error === undefined;
        const current = fromMemory ? new Map(this.data) : await this.readFromDisk();
        const out = await change(current, file, lock);
        // Only the written sets' part of the index is made again (all of it after a read).
        const index = fromMemory ? reindexSets(this.index, current.values(), sets) : indexBySet(current.values());
        const fingerprint = await this.writeAtomically([...current.values()], async (renaming) => {
          await lock.check();
          // From the rename on, the file is what this write made: a read meanwhile keeps the copy it has (the write
          // has not returned), and the feeds take what was written (json-file-feed.ts) rather than read it.
          this.renaming = renaming;
          this.lastWrite = writtenFile(renaming, fromMemory ? file : undefined, sets, index, current);
        });
        // What killed writers left beside the file: looked for at most once per stale age (a folder listing per
        // write would cost more than the write's own file calls).
        if (Date.now() - this.lastSweep >= this.staleLockMs) {
          this.lastSweep = Date.now();
          await sweepLeftovers(this.path, this.staleLockMs);
        }
        this.dataMap = current;
        this.index = index;
        this.fingerprint = fingerprint;
        this.error = undefined;
        return out;
      } finally {
        this.renaming = undefined;
        await lock.release();
      }
    });
    for (const p of this.feedPollers) p.now();
    return result;
  }

  /** json-file-feed.ts */
  watch(listener: ChangeListener): ChangeFeed {
    const written = () => this.lastWrite;
    return watchJsonFile({ path: this.path, store: this.name, intervalMs: this.feedIntervalMs, written }, listener, this.feedPollers, this.openFeeds);
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.openFeeds.closeAll();
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
        const now = st === undefined ? 'missing' : st.isFile() ? fileIdentity(st) : undefined;
        if (now !== undefined && (now === this.fingerprint || now === this.renaming)) {
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
      fingerprint = fileIdentity(st);
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
    if (fingerprint === this.fingerprint || fingerprint === this.renaming) return;
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

  /** Write the whole file atomically; returns the new file's fingerprint (`beforeRename` gets it first). */
  private async writeAtomically(configs: Config[], beforeRename: (fingerprint: string) => Promise<void>): Promise<string> {
    const text = formatJsonConfigs(configs);
    try {
      const st = await writeFileAtomic(this.path, text, { beforeRename: (stats) => beforeRename(fileIdentity(stats)) });
      return fileIdentity(st);
    } catch (e) {
      if (e instanceof StoreUnavailableError) throw e;
      throw new StoreUnavailableError(this.name, `cannot write the file: ${reasonOf(e)}`);
    }
  }
}
