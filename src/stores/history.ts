/**
 * Revisions and history, the part every store kind shares (docs/stores.md, "Revisions and history"): checking a
 * write, finding changes made outside cfgu, building the records, retention, and answering a history query from
 * records read newest first. Each kind supplies the atomic step around it (a transaction, WATCH/MULTI, an etcd
 * transaction, the file lock) and where the records live.
 *
 * A set's state, kept by each kind beside the data (never inside Configu's layout): its revision (0 until cfgu first
 * writes it) and, while history is on, its snapshot: the set's key -> value as the last revision left it. A write
 * compares the data with the snapshot first; a difference is a change another tool made, recorded before the write's
 * own record with `recorded: false` and the difference as its changes.
 */
import { ErrorCodes, InputError, RevisionConflictError } from '../core/errors.js';
import { keyProblem, parseSet } from '../core/names.js';
import type { Config, ConfigChange, ConfigQuery, HistoryQuery, KeyChange, RevisionRecord, WriteOptions } from '../core/ports.js';

/** The `history` store setting, parsed (settings.ts). */
export interface HistorySettings {
  /** False: revisions are kept (compare-and-set works), records and snapshots are not. */
  enabled: boolean;
  /** Records kept per set: a write drops the records `keep` or more revisions older than its own. */
  keep: number;
  /** Records older than this many days are dropped by writes to their set (the newest record always stays). */
  maxAgeDays: number | undefined;
  /**
   * The clock of a write: its records' time and the age retention measures from, in ms since the epoch. Default
   * `Date.now`; `.configu` never sets it (a program embedding a store, or a test, may give its own).
   */
  now?: () => number;
}

export const DEFAULT_HISTORY: Readonly<HistorySettings> = Object.freeze({ enabled: true, keep: 1000, maxAgeDays: undefined });

/** History pages: `limit` defaults to this, and is at most MAX_HISTORY_LIMIT. */
export const DEFAULT_HISTORY_LIMIT = 100;
export const MAX_HISTORY_LIMIT = 1000;

/** A set's key -> value. */
export type Snapshot = Map<string, string>;

/** What a kind keeps per set beside the data. */
export interface SetState {
  revision: number;
  /** Absent: never written with history on (every value then counts as found, not recorded). */
  snapshot: Snapshot | undefined;
}

export const EMPTY_STATE: Readonly<SetState> = Object.freeze({ revision: 0, snapshot: undefined });

/** The set path, checked as the engine checks it (a bad one would be an InputError there too). */
export function checkedSet(set: string): string {
  const parsed = parseSet(set);
  if ('problem' in parsed) throw new InputError(ErrorCodes.INVALID_SET, parsed.problem, [{ path: '/set', message: parsed.problem }]);
  return parsed.path;
}

/**
 * The changes of one write: keys checked, the last change of a key wins (at the place of its first), in the order given
 * (the order new keys are appended to the data, as `set` appends them); "" reads as null. Records list them by key.
 */
export function checkedChanges(changes: readonly ConfigChange[]): ConfigChange[] {
  if (!changes.length) throw new InputError(ErrorCodes.INVALID_INPUT, 'a write must change at least one key');
  const byKey = new Map<string, string | null>();
  for (const c of changes) {
    const problem = keyProblem(c.key);
    if (problem) throw new InputError(ErrorCodes.INVALID_KEY, problem, [{ path: `/changes/${c.key}`, message: problem }]);
    if (c.value !== null && typeof c.value !== 'string') {
      throw new InputError(ErrorCodes.INVALID_INPUT, `the value of key "${c.key}" must be a string or null`);
    }
    byKey.set(c.key, c.value === '' ? null : c.value);
  }
  return [...byKey].map(([key, value]) => ({ key, value }));
}

/** The keys whose values differ between two snapshots, sorted, with before and after. */
export function difference(before: Snapshot, after: Snapshot): KeyChange[] {
  const keys = new Set([...before.keys(), ...after.keys()]);
  const out: KeyChange[] = [];
  for (const key of [...keys].sort()) {
    const b = before.get(key) ?? null;
    const a = after.get(key) ?? null;
    if (b !== a) out.push({ key, before: b, after: a });
  }
  return out;
}

/** True when the data differs from what the last revision left (only with history on: no snapshot, no judgement). */
export function changedOutside(state: SetState, current: Snapshot, history: HistorySettings): boolean {
  if (!history.enabled) return false;
  if (!state.snapshot) return current.size > 0;
  return difference(state.snapshot, current).length > 0;
}

export interface WritePlan {
  revision: number;
  /** The records to append, oldest first. */
  records: RevisionRecord[];
  /** The new values of the configuration data. */
  upserts: Config[];
  deletes: ConfigQuery[];
  /** The set's state after the write (snapshot only with history on). */
  state: SetState;
  /** Records with a revision at or below this are to be dropped (retention by count); 0: none. */
  pruneThrough: number;
  /** Records written before this time (ms since the epoch) are to be dropped, except the newest; undefined: none. */
  pruneBefore: number | undefined;
}

export interface WriteInput {
  store: string;
  set: string;
  /** The data's current values of the set (for a key-value root set: at least the snapshot's keys and the written ones). */
  current: Snapshot;
  state: SetState;
  changes: readonly ConfigChange[];
  options: WriteOptions | undefined;
  history: HistorySettings;
}

/**
 * The whole decision of one write, from what the atomic step read: throws RevisionConflictError when the set is not
 * at the expected revision; else the records (an unrecorded one first when the data moved since the last revision),
 * the data to write, the new state and what retention drops.
 */
export function planWrite(input: WriteInput): WritePlan {
  const { set, current, state, history } = input;
  const options = input.options ?? {};
  const expected = options.expectedRevision;
  if (expected !== undefined && expected !== state.revision) throw new RevisionConflictError(input.store, set, expected, state.revision);
  const now = new Date(history.now?.() ?? Date.now());
  const time = now.toISOString();
  const records: RevisionRecord[] = [];
  let revision = state.revision;
  if (history.enabled) {
    const found = difference(state.snapshot ?? new Map(), current);
    if (found.length) {
      revision++;
      const message =
        state.revision === 0 || !state.snapshot
          ? 'values present before cfgu kept the history of this set; not recorded'
          : `changed outside cfgu after revision ${state.revision}; found at the next write, not recorded`;
      records.push({ set, revision, time, subject: null, requestId: null, message, recorded: false, changes: found });
    }
  }
  revision++;
  const after = new Map(current);
  const changes: KeyChange[] = [];
  const upserts: Config[] = [];
  const deletes: ConfigQuery[] = [];
  for (const c of input.changes) {
    changes.push({ key: c.key, before: current.get(c.key) ?? null, after: c.value });
    if (c.value === null) {
      after.delete(c.key);
      deletes.push({ set, key: c.key });
    } else {
      after.set(c.key, c.value);
      upserts.push({ set, key: c.key, value: c.value });
    }
  }
  changes.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  if (history.enabled) {
    records.push({
      set,
      revision,
      time,
      subject: options.subject ?? null,
      requestId: options.requestId ?? null,
      message: options.message ?? null,
      recorded: true,
      changes,
    });
  }
  return {
    revision,
    records,
    upserts,
    deletes,
    state: { revision, snapshot: history.enabled ? after : undefined },
    pruneThrough: Math.max(0, revision - history.keep),
    pruneBefore: history.maxAgeDays === undefined ? undefined : Math.floor(now.getTime() - history.maxAgeDays * 86_400_000),
  };
}

/** Whether retention drops a record (never the newest one, `revision`). */
export function pruned(record: { revision: number; time: string }, plan: Pick<WritePlan, 'revision' | 'pruneThrough' | 'pruneBefore'>): boolean {
  if (record.revision >= plan.revision) return false;
  if (record.revision <= plan.pruneThrough) return true;
  return plan.pruneBefore !== undefined && Date.parse(record.time) < plan.pruneBefore;
}

// ---------------------------------------------------------------------------------------------------------------
// Reading history

export interface CheckedQuery {
  set: string;
  key: string | undefined;
  since: number | undefined;
  until: number | undefined;
  /** Revisions below this (Infinity: from the newest). */
  before: number;
  limit: number;
}

function timeOf(what: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const ms = Date.parse(value);
  if (!Number.isFinite(ms)) throw new InputError(ErrorCodes.INVALID_INPUT, `${what} must be a time in ISO 8601 (e.g. 2025-01-31T12:00:00Z)`);
  return ms;
}

/** The query with its bounds checked (InputError) and defaults applied. */
export function checkedQuery(q: HistoryQuery): CheckedQuery {
  const limit = q.limit ?? DEFAULT_HISTORY_LIMIT;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_HISTORY_LIMIT) {
    throw new InputError(ErrorCodes.INVALID_INPUT, `limit must be a whole number from 1 to ${MAX_HISTORY_LIMIT}`);
  }
  if (q.before !== undefined && (!Number.isInteger(q.before) || q.before < 1)) {
    throw new InputError(ErrorCodes.INVALID_INPUT, 'before must be a revision number (a whole number from 1)');
  }
  if (q.key !== undefined) {
    const problem = keyProblem(q.key);
    if (problem) throw new InputError(ErrorCodes.INVALID_KEY, problem);
  }
  return {
    set: checkedSet(q.set),
    key: q.key,
    since: timeOf('since', q.since),
    until: timeOf('until', q.until),
    before: q.before ?? Infinity,
    limit,
  };
}

export const matchesQuery = (r: RevisionRecord, q: CheckedQuery): boolean => {
  if (r.revision >= q.before) return false;
  const t = Date.parse(r.time);
  if (q.since !== undefined && t < q.since) return false;
  if (q.until !== undefined && t >= q.until) return false;
  return q.key === undefined || r.changes.some((c) => c.key === q.key);
};

/**
 * Collects a page from records met newest first (in any number of batches). `done` once the page is full; the page's
 * `next` is the revision of its last record when more records could follow.
 */
export class HistoryPager {
  readonly records: RevisionRecord[] = [];
  private full = false;
  constructor(private readonly q: CheckedQuery) {}

  get done(): boolean {
    return this.full;
  }

  /** Offer the next record (newest first). */
  add(r: RevisionRecord): void {
    if (this.full || !matchesQuery(r, this.q)) return;
    this.records.push(r);
    if (this.records.length >= this.q.limit) this.full = true;
  }

  /** The page; `more` says whether records older than the last one offered exist. */
  page(more: boolean): { set: string; records: RevisionRecord[]; next?: number } {
    const last = this.records.at(-1);
    const next = this.full && more && last ? last.revision : undefined;
    return next === undefined ? { set: this.q.set, records: this.records } : { set: this.q.set, records: this.records, next };
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Encodings shared by the kinds that keep records and state as text

export const encodeSnapshot = (s: Snapshot): string => JSON.stringify(Object.fromEntries([...s].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))));

export function decodeSnapshot(text: string | null | undefined): Snapshot | undefined {
  if (text === null || text === undefined) return undefined;
  const obj = JSON.parse(text) as Record<string, string>;
  return new Map(Object.entries(obj));
}

export const encodeRecord = (r: RevisionRecord): string => JSON.stringify(r);

export function decodeRecord(text: string): RevisionRecord {
  return JSON.parse(text) as RevisionRecord;
}

/** A record's changes as stored in a SQL column, and back. */
export const encodeChanges = (changes: readonly KeyChange[]): string => JSON.stringify(changes.map((c) => [c.key, c.before, c.after]));

export function decodeChanges(text: string): KeyChange[] {
  return (JSON.parse(text) as Array<[string, string | null, string | null]>).map(([key, before, after]) => ({ key, before, after }));
}
