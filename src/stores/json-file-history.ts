/**
 * Revisions and history of the `json-file` kind (docs/stores.md, "Revisions and history"): a sidecar file
 * `<path>.history.json` beside the data file (Configu's tools read the data file only):
 *
 *   { "format": "cfgu-history/1",
 *     "sets": { "<set>": { "revision": 7, "snapshot": {...} | null, "records": [ oldest first ] } },
 *     "pending": { "set", "revision", "file", "undo": { "revision", "snapshot" } } }
 *
 * A write holds the store's file lock throughout and replaces two files, each atomically (atomic-write.ts): first the
 * sidecar, with the new records and `pending` (the last write: its set, the set's state before it, and `file`, the
 * identity of the data file it replaces: inode, size and modification time in ns, or `missing`), then the data file.
 * Two renames cannot be one step, so the sidecar says how to tell whether the second one happened: while the data
 * file is still that very file (same identity), the write did not land (a crash between the renames, or a reader
 * looking between them), and every reader takes the set's state from `undo` and leaves out the records above its
 * revision; the next write drops them for good. Any other data file means it landed (a later change by another tool
 * is then found as an outside change). So a crash leaves both or neither, as every reader sees it. One case it cannot
 * tell: a crash between the renames followed by an edit of the data file before cfgu writes again: the write that
 * never landed then stays in the history, and the next write records the edit's difference from it as not recorded.
 */
import { readFile } from 'node:fs/promises';
import { StoreUnavailableError } from '../core/errors.js';
import { writeFileAtomic } from './atomic-write.js';
import { reasonOf } from './common.js';
import { decodeSnapshot, encodeSnapshot, HistoryPager, planWrite, pruned, type CheckedQuery, type HistorySettings, type SetState, type Snapshot, type WritePlan } from './history.js';
import type { Config, ConfigChange, HistoryPage, RevisionRecord, WriteOptions } from '../core/ports.js';

const FORMAT = 'cfgu-history/1';

interface SetEntry {
  revision: number;
  snapshot: Record<string, string> | null;
  records: RevisionRecord[];
}

interface Pending {
  set: string;
  revision: number;
  /** The identity of the data file the write replaces. */
  file: string;
  undo: { revision: number; snapshot: Record<string, string> | null };
}

interface Sidecar {
  format: typeof FORMAT;
  sets: Record<string, SetEntry>;
  pending?: Pending;
}

/** A set's values in a data file's configs. */
export function valuesOf(configs: Iterable<Config>, set: string): Snapshot {
  const out: Snapshot = new Map();
  for (const c of configs) if (c.set === set && c.value !== '') out.set(c.key, c.value);
  return out;
}

const toObject = (s: Snapshot | undefined): Record<string, string> | null => (s ? (JSON.parse(encodeSnapshot(s)) as Record<string, string>) : null);

export class JsonFileHistory {
  readonly path: string;

  constructor(
    dataPath: string,
    private readonly store: string,
    private readonly settings: HistorySettings,
  ) {
    this.path = `${dataPath}.history.json`;
  }

  /** The sidecar as written (an empty one when missing). Throws StoreUnavailableError when unreadable or not ours. */
  private async read(): Promise<Sidecar> {
    let text: string;
    try {
      text = await readFile(this.path, 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return { format: FORMAT, sets: {} };
      throw new StoreUnavailableError(this.store, `cannot read the history file: ${reasonOf(e)}`);
    }
    try {
      const v = JSON.parse(text) as Sidecar;
      if (v?.format === FORMAT && v.sets && typeof v.sets === 'object') return { ...v, sets: Object.assign(Object.create(null), v.sets) };
    } catch {
      /* below */
    }
    throw new StoreUnavailableError(this.store, 'the history file is not valid; not writing over it');
  }

  /** The sidecar as the data file makes it true: a write whose data file did not land is undone (see the header). */
  private settled(sidecar: Sidecar, file: string): Sidecar {
    const p = sidecar.pending;
    if (!p) return sidecar;
    if (file !== p.file) return { format: FORMAT, sets: sidecar.sets };
    const entry = sidecar.sets[p.set];
    const sets = Object.assign(Object.create(null), sidecar.sets) as Record<string, SetEntry>;
    sets[p.set] = { revision: p.undo.revision, snapshot: p.undo.snapshot, records: (entry?.records ?? []).filter((r) => r.revision <= p.undo.revision) };
    return { format: FORMAT, sets };
  }

  /** A set's state, as the data file (`file`: its identity now) makes it true. */
  async state(set: string, file: string): Promise<SetState> {
    const entry = this.settled(await this.read(), file).sets[set];
    return entry ? { revision: entry.revision, snapshot: entry.snapshot ? decodeSnapshot(JSON.stringify(entry.snapshot)) : undefined } : { revision: 0, snapshot: undefined };
  }

  /**
   * Under the store's lock, with the data file's identity and configs just read: decide, write the sidecar (records
   * and `pending`), and return the plan; the caller then writes the data file.
   */
  async prepare(
    set: string,
    file: string,
    data: Map<string, Config>,
    changes: readonly ConfigChange[],
    options: WriteOptions | undefined,
    stillLocked: () => Promise<void>,
  ): Promise<WritePlan> {
    const sidecar = this.settled(await this.read(), file);
    const entry = sidecar.sets[set];
    const state: SetState = entry
      ? { revision: entry.revision, snapshot: entry.snapshot ? new Map(Object.entries(entry.snapshot)) : undefined }
      : { revision: 0, snapshot: undefined };
    const current = valuesOf(data.values(), set);
    const plan = planWrite({ store: this.store, set, current, state, changes, options, history: this.settings });
    const records = [...(entry?.records ?? []).filter((r) => !pruned(r, plan)), ...plan.records];
    sidecar.sets[set] = { revision: plan.revision, snapshot: toObject(plan.state.snapshot), records };
    sidecar.pending = {
      set,
      revision: plan.revision,
      file,
      undo: { revision: state.revision, snapshot: toObject(state.snapshot) },
    };
    try {
      await writeFileAtomic(this.path, `${JSON.stringify(sidecar)}\n`, { beforeRename: stillLocked });
    } catch (e) {
      if (e instanceof StoreUnavailableError) throw e;
      throw new StoreUnavailableError(this.store, `cannot write the history file: ${reasonOf(e)}`);
    }
    return plan;
  }

  async history(q: CheckedQuery, file: string): Promise<HistoryPage> {
    const records = this.settled(await this.read(), file).sets[q.set]?.records ?? [];
    const pager = new HistoryPager(q);
    let i = records.length - 1;
    for (; i >= 0 && !pager.done; i--) pager.add(records[i]!);
    return pager.page(i >= 0);
  }
}
