/**
 * Watching the files of the named schemas (./registry.ts), the way the json-file store watches its file: file-system
 * notifications on each folder that holds one (an editor's save replaces the file by a rename, which a watch on the
 * file itself would lose), plus a look every `intervalMs` as a safety net (notifications can be lost, folders removed,
 * watch limits reached). A look compares each entry's fingerprint (its files, from its glob again when it has one, and
 * each file's inode, size and modification time) with the last one; when it moved, the registry reads the entry again.
 * A notification is followed by a short pause before the look, so that a file written in several steps is read once
 * it is whole.
 *
 * Every serving process watches on its own (each cluster worker loads and watches the files itself).
 */
import { statSync, watch, type FSWatcher } from 'node:fs';
import { basename, dirname } from 'node:path';
import { MAGIC } from '../../config/glob.js';
import { namedSchemaFiles } from '../../config/named-schemas.js';
import { Poller } from '../../stores/feed.js';
import type { NamedSchemas } from './registry.js';

export interface SchemaWatchOptions {
  /** Look at every file at least this often (ms). Default 1000. */
  intervalMs?: number;
  /** Pause between a notification and the look it causes (ms). Default 30. */
  settleMs?: number;
}

/** An entry's files and their state now (`missing` for a file that is gone). */
function fingerprint(path: string): { files: string[]; text: string } {
  const found = namedSchemaFiles(path);
  if ('problem' in found) return { files: [], text: `problem:${found.problem}` };
  const parts = found.files.map((f) => {
    try {
      const st = statSync(f, { bigint: true, throwIfNoEntry: false });
      return `${f}:${st ? `${st.ino}:${st.size}:${st.mtimeNs}` : 'missing'}`;
    } catch (e) {
      return `${f}:${(e as NodeJS.ErrnoException).code ?? 'error'}`;
    }
  });
  return { files: found.files, text: parts.join('\n') };
}

interface Watched {
  name: string;
  path: string;
  last: string;
  folders: Set<string>;
  basenames: Set<string>;
  glob: boolean;
  poller: Poller;
}

/** Watch every schema of `schemas`; resolves nothing, starts at once. `close()` stops every watcher and timer. */
export class SchemaWatcher {
  private readonly entries: Watched[] = [];
  private readonly folders = new Map<string, FSWatcher | undefined>();
  private readonly settling = new Set<Watched>();
  private settleTimer: NodeJS.Timeout | undefined;
  private closed = false;
  private readonly settleMs: number;

  constructor(
    private readonly schemas: NamedSchemas,
    options: SchemaWatchOptions = {},
  ) {
    const intervalMs = options.intervalMs ?? 1000;
    this.settleMs = options.settleMs ?? 30;
    for (const s of schemas.all()) {
      const entry: Watched = {
        name: s.name,
        path: s.path,
        last: '',
        folders: new Set(),
        basenames: new Set(),
        glob: MAGIC.test(s.path),
        poller: new Poller(intervalMs, async () => this.look(entry)),
      };
      this.entries.push(entry);
      // The first look reads the entry again: a change made between start-up's read and now is not missed.
      entry.poller.start();
    }
  }

  /** One look at an entry: when its fingerprint moved, the registry reads it again. */
  private look(entry: Watched): void {
    if (this.closed) return;
    const now = fingerprint(entry.path);
    this.follow(entry, now.files);
    if (now.text === entry.last) return;
    entry.last = now.text;
    this.schemas.reload(entry.name);
  }

  /** Watch the folders of the entry's files (those not watched yet, or whose watch was lost). */
  private follow(entry: Watched, files: readonly string[]): void {
    entry.basenames = new Set(files.map((f) => basename(f)));
    entry.folders = new Set(files.map((f) => dirname(f)));
    if (!entry.glob) entry.folders.add(dirname(entry.path));
    for (const folder of entry.folders) {
      if (this.folders.get(folder)) continue;
      this.folders.set(folder, this.watchFolder(folder));
    }
  }

  private watchFolder(folder: string): FSWatcher | undefined {
    try {
      const w = watch(folder, { persistent: false }, (_event, filename) => {
        const name = filename === null || filename === undefined ? undefined : String(filename);
        for (const e of this.entries) {
          if (!e.folders.has(folder)) continue;
          if (name === undefined || e.glob || e.basenames.has(name) || name === basename(e.path)) this.settle(e);
        }
      });
      w.on('error', () => {
        // Folder removed or watch limit reached: the periodic look carries on and watches again later.
        w.close();
        if (this.folders.get(folder) === w) this.folders.set(folder, undefined);
      });
      return w;
    } catch {
      return undefined;
    }
  }

  /** Look at `entry` once the writes of the moment are over. */
  private settle(entry: Watched): void {
    if (this.closed) return;
    this.settling.add(entry);
    if (this.settleTimer) return;
    this.settleTimer = setTimeout(() => {
      this.settleTimer = undefined;
      const due = [...this.settling];
      this.settling.clear();
      for (const e of due) e.poller.now();
    }, this.settleMs);
    this.settleTimer.unref();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.settleTimer) clearTimeout(this.settleTimer);
    for (const w of this.folders.values()) w?.close();
    this.folders.clear();
    await Promise.all(this.entries.map((e) => e.poller.stop()));
  }
}
