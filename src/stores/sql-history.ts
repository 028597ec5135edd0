/**
 * Revisions and history in the SQL kinds (`sqlite`, `postgresql`, `mysql`/`mariadb`): two tables beside the config
 * table, created when first needed (never by reads of the configuration, so a role that only reads needs no more
 * rights than before), never read by Configu's tools:
 *
 *   <tableName>_revisions: set_id varchar(32) primary key (MD5 of the set), set, revision, snapshot (JSON or NULL)
 *   <tableName>_history:   (set_id, revision) primary key, set, time_ms, subject, request_id, message, recorded,
 *                          changes (JSON: [[key, before, after], ...])
 *
 * A write is one transaction: lock the set's row of `_revisions` (SELECT ... FOR UPDATE; BEGIN IMMEDIATE in SQLite),
 * read the set's rows of the config table, decide (history.ts planWrite; a stale expected revision rolls back), write
 * the config rows, insert the records, update the revision row, delete what retention drops. Each kind supplies the
 * statements (SqlHistoryDriver); this file holds what they share.
 */
import { configId } from './common.js';
import { decodeChanges, decodeSnapshot, encodeChanges, encodeSnapshot, type SetState, type Snapshot, type WritePlan } from './history.js';
import type { RevisionRecord } from '../core/ports.js';

/** The two table names of a config table (cut to 63 characters, the identifier limit of PostgreSQL). */
export function historyTables(table: string): { revisions: string; history: string } {
  return { revisions: `${table}_revisions`.slice(0, 63), history: `${table}_history`.slice(0, 63) };
}

/** The key of a set's rows in both tables. */
export const setId = (set: string): string => configId(set, '');

/** A row of `<table>_history` as the drivers return it (numbers may come as text or bigint). */
export interface HistoryRow {
  set: string;
  revision: unknown;
  time_ms: unknown;
  subject: string | null;
  request_id: string | null;
  message: string | null;
  recorded: unknown;
  changes: string;
}

export function recordOf(row: HistoryRow): RevisionRecord {
  return {
    set: String(row.set),
    revision: Number(row.revision),
    time: new Date(Number(row.time_ms)).toISOString(),
    subject: row.subject ?? null,
    requestId: row.request_id ?? null,
    message: row.message ?? null,
    recorded: row.recorded === true || Number(row.recorded) === 1,
    changes: decodeChanges(String(row.changes)),
  };
}

/** The values of one record's row, in the column order of `HISTORY_COLUMNS`. */
export function rowValues(r: RevisionRecord): unknown[] {
  return [setId(r.set), r.revision, r.set, Date.parse(r.time), r.subject, r.requestId, r.message, r.recorded, encodeChanges(r.changes)];
}

export const HISTORY_COLUMNS = ['set_id', 'revision', 'set', 'time_ms', 'subject', 'request_id', 'message', 'recorded', 'changes'] as const;

/** A revision row's state. */
export function stateOf(row: { revision: unknown; snapshot: string | null } | undefined): SetState {
  if (!row) return { revision: 0, snapshot: undefined };
  return { revision: Number(row.revision), snapshot: decodeSnapshot(row.snapshot) };
}

/** The snapshot column's value of a plan's state. */
export const snapshotText = (plan: WritePlan): string | null => (plan.state.snapshot ? encodeSnapshot(plan.state.snapshot) : null);

/** A set's rows as a snapshot (values "" are not configs). */
export function snapshotOf(rows: ReadonlyArray<{ key: unknown; value: unknown }>): Snapshot {
  const out: Snapshot = new Map();
  for (const r of rows) {
    const value = String(r.value);
    if (value !== '') out.set(String(r.key), value);
  }
  return out;
}

/** The prune statement's bounds: drop below `revision` when at or below `through`, or older than `before` ms. */
export function pruneBounds(plan: WritePlan): [revision: number, through: number, before: number] {
  return [plan.revision, plan.pruneThrough, plan.pruneBefore ?? -1];
}

/** Records read per statement when paging history (a key filter may skip many). */
export const HISTORY_BATCH = 200;

/** What a SQL kind supplies for revisions and history. */
export interface SqlHistoryDriver {
  /** Create both tables when absent. */
  createTables(): Promise<void>;
  /** The set's state and its current rows, outside any transaction. */
  readState(set: string): Promise<{ state: SetState; current: Snapshot }>;
  /**
   * One transaction: lock the state row (created at revision 0 when absent), read the set's rows, call `decide`
   * (a throw rolls back), apply its plan (config rows, records, state, retention), commit.
   */
  transact(set: string, decide: (state: SetState, current: Snapshot) => WritePlan): Promise<WritePlan>;
  /** Records of a set with a revision below `before`, newest first, at most `limit`, written in [since, until). */
  readRecords(set: string, before: number, limit: number, since: number, until: number): Promise<RevisionRecord[]>;
}
