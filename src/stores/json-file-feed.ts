/**
 * The `json-file` store's change feed (moved out of json-file.ts as it was): file-system notifications on the folder
 * (an editor's save replaces the file by a rename, which a watch on the file itself would lose), plus a check every
 * `intervalMs` as a safety net for file systems that deliver no events. Each look compares the fingerprint, and when it
 * moved, reads the file and reports exactly the sets whose configs differ from the last look. A file the store object
 * itself just wrote is not read: the store says what it wrote (`written`), and when the feed had seen the file that
 * write replaced, only the written sets are compared again.
 */
import { readFileSync, statSync, watch, type FSWatcher } from 'node:fs';
import { basename, dirname } from 'node:path';
import { StoreUnavailableError } from '../core/errors.js';
import { reasonOf, type SetIndex } from './common.js';
import { fileIdentity, parseJsonConfigs, setSnapshot, setText } from './json-file-format.js';
import { changedSets, FeedSink, Poller, type OpenFeeds } from './feed.js';
import type { ChangeFeed, ChangeListener, Config } from '../core/ports.js';

/** The store's last write through this object, as the feed may use it instead of reading the file. */
export interface WrittenFile {
  /** The identity (inode, size, mtime in ns) of the file the write made. */
  file: string;
  /** The identity of the file it replaced, when the write started from the store's copy of exactly that file. */
  before: string | undefined;
  /** The sets the write changed. */
  sets: ReadonlySet<string>;
  /** A set's configs after the write (a new array). */
  configsOf(set: string): Config[];
  /** Every config after the write. */
  all(): Iterable<Config>;
}

const isCode = (e: unknown, ...codes: string[]) => codes.includes((e as NodeJS.ErrnoException)?.code ?? '');

/** What a write left: its sets' configs from the index and data it made (neither is ever changed in place). */
export function writtenFile(file: string, before: string | undefined, sets: ReadonlySet<string>, index: SetIndex, data: ReadonlyMap<string, Config>): WrittenFile {
  return { file, before, sets, configsOf: (set) => [...(index.get(set)?.values() ?? [])].map((e) => e.config), all: () => data.values() };
}

/** The snapshot of the file a write replaced, with the written sets made again. */
function patched(snapshot: ReadonlyMap<string, string>, w: WrittenFile): Map<string, string> {
  const next = new Map(snapshot);
  for (const set of w.sets) {
    const configs = w.configsOf(set);
    if (configs.length) next.set(set, setText(configs));
    else next.delete(set);
  }
  return next;
}

/** One feed over the file at `options.path`; its poller joins `pollers` (a write through the store makes it look at once). */
export function watchJsonFile(
  options: { path: string; store: string; intervalMs: number; written?: () => WrittenFile | undefined },
  listener: ChangeListener,
  pollers: Set<Poller>,
  openFeeds: OpenFeeds,
): ChangeFeed {
  const sink = new FeedSink(listener);
  const base = basename(options.path);
  let watcher: FSWatcher | undefined;
  let fingerprint: string | undefined;
  let snapshot: Map<string, string> | undefined;

  /** One look: fingerprint, then (when it moved) the file's per-set snapshot. Synchronous: one stat, maybe one read. */
  const look = (): void => {
    if (!watcher && !sink.isClosed) watcher = watchFolder();
    let now: string;
    let next: Map<string, string>;
    try {
      const st = statSync(options.path, { bigint: true, throwIfNoEntry: false });
      if (st !== undefined && !st.isFile()) throw Object.assign(new Error('not a file'), { code: 'EISDIR' });
      now = st === undefined ? 'missing' : fileIdentity(st);
      if (now === fingerprint) {
        sink.ok();
        return;
      }
      const w = options.written?.();
      if (w !== undefined && w.file === now) {
        next = snapshot !== undefined && w.before !== undefined && fingerprint === w.before ? patched(snapshot, w) : setSnapshot(w.all());
      } else {
        let text = '';
        if (st !== undefined) {
          try {
            text = readFileSync(options.path, 'utf8');
          } catch (e) {
            if (!isCode(e, 'ENOENT')) throw e;
            poller.now(); // replaced while we looked: look again
            return;
          }
        }
        const parsed = parseJsonConfigs(text);
        if (!parsed.ok) throw new StoreUnavailableError(options.store, parsed.reason);
        next = setSnapshot(parsed.configs.values());
      }
    } catch (e) {
      fingerprint = undefined;
      sink.fail(e instanceof StoreUnavailableError ? e : new StoreUnavailableError(options.store, `cannot read the file: ${reasonOf(e)}`));
      return;
    }
    fingerprint = now;
    const before = snapshot;
    snapshot = next;
    if (!before) {
      sink.ok();
      return;
    }
    const sets = changedSets(before, next);
    if (sets.length) sink.change({ sets });
    else sink.ok();
  };
  const poller = new Poller(options.intervalMs, async () => look());
  const watchFolder = (): FSWatcher | undefined => {
    try {
      const w = watch(dirname(options.path), { persistent: false }, (_event, filename) => {
        if (filename === null || filename === undefined || String(filename) === base) poller.now();
      });
      w.on('error', () => {
        // Folder removed or watch limit reached: the periodic check carries on and watches again later.
        w.close();
        if (watcher === w) watcher = undefined;
        poller.now();
      });
      return w;
    } catch {
      return undefined;
    }
  };
  // The first look is synchronous: what watch() returns compares against the file as it is now.
  look();
  poller.start();
  pollers.add(poller);
  return openFeeds.add(async () => {
    sink.close();
    pollers.delete(poller);
    watcher?.close();
    watcher = undefined;
    await poller.stop();
  });
}
