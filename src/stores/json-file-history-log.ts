/**
 * The json-file history sidecar's text and its fold in memory (json-file-history.ts reads and writes the file).
 *
 * The file is JSON lines. Its first line is the base: the sets' states and records as of the last compaction,
 *
 *   {"format":"cfgu-history/2","epoch":"<random>","sets":{"<set>":{"revision":7,"snapshot":{...}|null,"records":[...]}}}
 *
 * and every further line is one write, appended (and fsynced) under the store's lock before the data file is replaced:
 *
 *   {"epoch":"<the base's>","set":"<set>","revision":9,"file":"<identity of the data file it replaces>",
 *    "prune":[<pruneThrough>,<pruneBefore ms or null>],"records":[<the write's records, oldest first>]}
 *
 * A set's state after a line: its revision; its snapshot is the one before with every record's changes applied (the
 * unrecorded record's difference brings it to the data as found, the write's own record to the data as written); no
 * records (history off) means no snapshot. Its records: those before, less what the line's retention drops, then the
 * line's.
 *
 * Whether a write landed: a line is void (its data file was never replaced: a crash between the append and the rename,
 * or a failed rename) when the next line names the same data file, or, for the last line, while the data file is
 * still that very file (same inode, size and modification time). A replaced data file is always a new inode, so a
 * landed write's successor names another file. A void line is left out by every reader.
 *
 * An earlier version wrote the whole sidecar as one document (`cfgu-history/1`, the same `sets`, plus `pending`: the
 * last write's set, its state before, and the data file it replaced). Such a file is read as it is (`pending` settled
 * by the same rule) and converted to this format by the first write (a compaction).
 */
import { pruned, type Snapshot } from './history.js';
import type { RevisionRecord } from '../core/ports.js';

export const FORMAT_1 = 'cfgu-history/1';
export const FORMAT_2 = 'cfgu-history/2';

/** A set's state and records. */
export interface SetEntry {
  revision: number;
  snapshot: Snapshot | undefined;
  records: RevisionRecord[];
}

/** One appended write. */
export interface WriteLine {
  epoch: string;
  set: string;
  revision: number;
  /** The identity of the data file the write replaces ("missing" when there was none). */
  file: string;
  /** Retention of the write: records at or below the first revision go, and those older than the second time (ms). */
  prune: [number, number | null];
  records: RevisionRecord[];
}

/** The last write of a `cfgu-history/1` sidecar. */
interface Pending {
  set: string;
  revision: number;
  file: string;
  undo: { revision: number; snapshot: Record<string, string> | null };
}

type StoredEntry = { revision: number; snapshot: Record<string, string> | null; records: RevisionRecord[] };

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isRevision = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;

function entryFrom(v: unknown): SetEntry | undefined {
  if (!isObject(v) || !isRevision(v.revision) || !Array.isArray(v.records)) return undefined;
  if (v.snapshot !== null && !isObject(v.snapshot)) return undefined;
  return { revision: v.revision, snapshot: v.snapshot ? new Map(Object.entries(v.snapshot as Record<string, string>)) : undefined, records: v.records as RevisionRecord[] };
}

/** A write line, or undefined when the text is not one. */
export function parseLine(text: string): WriteLine | undefined {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!isObject(v) || typeof v.epoch !== 'string' || typeof v.set !== 'string' || !isRevision(v.revision) || typeof v.file !== 'string') return undefined;
  const prune = v.prune;
  if (!Array.isArray(prune) || prune.length !== 2 || !isRevision(prune[0]) || !(prune[1] === null || Number.isFinite(prune[1]))) return undefined;
  if (!Array.isArray(v.records)) return undefined;
  return v as unknown as WriteLine;
}

/**
 * The records a line's retention keeps. Records are in revision order, so retention by count drops a run at the
 * start: found with one loop (a set keeps up to 1,000 records, and this runs at every write) unless a record out of
 * order, or retention by age, needs the full test.
 */
function kept(records: readonly RevisionRecord[], line: WriteLine): readonly RevisionRecord[] {
  const [through, before] = line.prune;
  if (before === null) {
    let start = 0;
    while (start < records.length && records[start]!.revision <= through) start++;
    let ordered = true;
    for (let i = start; i < records.length && ordered; i++) ordered = records[i]!.revision > through && records[i]!.revision < line.revision;
    if (ordered) return start ? records.slice(start) : records;
  }
  const plan = { revision: line.revision, pruneThrough: through, pruneBefore: before ?? undefined };
  return records.filter((r) => !pruned(r, plan));
}

/** A set's entry after a write line. */
export function applyLine(before: SetEntry | undefined, line: WriteLine): SetEntry {
  const records = [...kept(before?.records ?? [], line), ...line.records];
  let snapshot: Snapshot | undefined;
  if (line.records.length) {
    snapshot = new Map(before?.snapshot ?? []);
    for (const r of line.records) for (const c of r.changes) c.after === null ? snapshot.delete(c.key) : snapshot.set(c.key, c.after);
  }
  return { revision: line.revision, snapshot, records };
}

const sortedObject = (s: Snapshot | undefined): Record<string, string> | null =>
  s ? Object.fromEntries([...s].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : null;

/**
 * The file as folded so far: the sets as every settled line leaves them, and the last line apart (`tail`), which only
 * the next line or the data file can settle.
 */
export class HistoryLog {
  /** The base's epoch (undefined: a `cfgu-history/1` base, which a write converts). */
  readonly epoch: string | undefined;
  readonly sets: Map<string, SetEntry>;
  private tail: { line: WriteLine; entry: SetEntry } | undefined;
  private pending: Pending | undefined;
  /** Write lines after the base. */
  lines = 0;

  private constructor(epoch: string | undefined, sets: Map<string, SetEntry>, pending?: Pending) {
    this.epoch = epoch;
    this.sets = sets;
    this.pending = pending;
  }

  static empty(epoch: string): HistoryLog {
    return new HistoryLog(epoch, new Map());
  }

  /** The log of a base line, or undefined when the text is not one. */
  static fromBase(text: string): HistoryLog | undefined {
    let v: unknown;
    try {
      v = JSON.parse(text);
    } catch {
      return undefined;
    }
    if (!isObject(v) || !isObject(v.sets)) return undefined;
    const sets = new Map<string, SetEntry>();
    for (const [set, stored] of Object.entries(v.sets)) {
      const entry = entryFrom(stored);
      if (!entry) return undefined;
      sets.set(set, entry);
    }
    if (v.format === FORMAT_2 && typeof v.epoch === 'string') return new HistoryLog(v.epoch, sets);
    if (v.format !== FORMAT_1) return undefined;
    const p = v.pending;
    if (p === undefined) return new HistoryLog(undefined, sets);
    if (!isObject(p) || typeof p.set !== 'string' || typeof p.file !== 'string' || !isObject(p.undo) || !isRevision(p.undo.revision)) return undefined;
    return new HistoryLog(undefined, sets, p as unknown as Pending);
  }

  /** Fold the next line in: it settles the line before it (void when it names the same data file). */
  push(line: WriteLine, entry?: SetEntry): void {
    if (this.tail && this.tail.line.file !== line.file) this.sets.set(this.tail.line.set, this.tail.entry);
    this.tail = { line, entry: entry ?? applyLine(this.entryBefore(line.set), line) };
    this.lines++;
  }

  /** The settled entry of a set (the last line not counted). */
  private entryBefore(set: string): SetEntry | undefined {
    return this.sets.get(set);
  }

  /** A set's entry as the data file (`file`: its identity now) makes it true. */
  entry(set: string, file: string): SetEntry | undefined {
    if (this.tail && this.tail.line.set === set) return this.tail.line.file === file ? this.sets.get(set) : this.tail.entry;
    const p = this.pending;
    if (p && p.set === set && p.file === file) {
      const records = (this.sets.get(set)?.records ?? []).filter((r) => r.revision <= p.undo.revision);
      return { revision: p.undo.revision, snapshot: p.undo.snapshot ? new Map(Object.entries(p.undo.snapshot)) : undefined, records };
    }
    return this.sets.get(set);
  }

  /**
   * Settle the last line (or a `cfgu-history/1` base's pending write) for good against the data file, under the
   * store's lock, where no write is under way: a write then appends after it.
   */
  settle(file: string): void {
    if (this.tail) {
      if (this.tail.line.file !== file) this.sets.set(this.tail.line.set, this.tail.entry);
      this.tail = undefined;
    }
    const p = this.pending;
    if (p) {
      const entry = this.entry(p.set, file);
      if (entry) this.sets.set(p.set, entry);
      this.pending = undefined;
    }
  }

  /** Records held by the settled sets. */
  records(): number {
    let n = 0;
    for (const e of this.sets.values()) n += e.records.length;
    return n;
  }

  /** The base line of the settled sets (for a compaction), with a new epoch. */
  baseText(epoch: string): string {
    const sets: Record<string, StoredEntry> = Object.create(null);
    for (const [set, e] of this.sets) sets[set] = { revision: e.revision, snapshot: sortedObject(e.snapshot), records: e.records };
    return JSON.stringify({ format: FORMAT_2, epoch, sets });
  }
}
