/**
 * Revisions and history of the `sqlite` kind (sql-history.ts): the tables, and one write as one `BEGIN IMMEDIATE`
 * transaction (it takes the database's write lock first, so the state row read in it is the latest, and a second
 * store object or process waits for it, up to the store's timeout). better-sqlite3 is synchronous: the transaction
 * runs to its end without yielding.
 */
import type Database from 'better-sqlite3';
import type { SetState, Snapshot, WritePlan } from './history.js';
import { HISTORY_COLUMNS, historyTables, pruneBounds, recordOf, rowValues, setId, snapshotOf, snapshotText, stateOf, type HistoryRow, type SqlHistoryDriver } from './sql-history.js';
import type { SqliteStatements } from './sqlite.js';
import type { RevisionRecord } from '../core/ports.js';

const q = (id: string) => `"${id.replace(/"/g, '""')}"`;

export class SqliteHistory implements SqlHistoryDriver {
  private readonly names: { revisions: string; history: string };
  private prepared: Map<string, Database.Statement> | undefined;
  private preparedFor: Database.Database | undefined;

  constructor(
    private readonly db: () => Database.Database,
    private readonly statements: () => SqliteStatements,
    private readonly table: string,
  ) {
    this.names = historyTables(table);
  }

  async createTables(): Promise<void> {
    const { revisions, history } = this.names;
    const db = this.db();
    db.exec(`CREATE TABLE IF NOT EXISTS ${q(revisions)} ("set_id" varchar(32) PRIMARY KEY NOT NULL, "set" text NOT NULL, "revision" integer NOT NULL, "snapshot" text)`);
    db.exec(
      `CREATE TABLE IF NOT EXISTS ${q(history)} ("set_id" varchar(32) NOT NULL, "revision" integer NOT NULL, "set" text NOT NULL, ` +
        `"time_ms" integer NOT NULL, "subject" text, "request_id" text, "message" text, "recorded" integer NOT NULL, "changes" text NOT NULL, ` +
        `PRIMARY KEY ("set_id", "revision"))`,
    );
  }

  /** Statements of the current connection, prepared once. */
  private stmt(name: 'state' | 'rows' | 'insertState' | 'saveState' | 'insertRecord' | 'prune' | 'records'): Database.Statement {
    const db = this.db();
    if (this.preparedFor !== db || !this.prepared) {
      this.prepared = new Map();
      this.preparedFor = db;
    }
    let s = this.prepared.get(name);
    if (!s) {
      const { revisions, history } = this.names;
      const cols = HISTORY_COLUMNS.map((c) => q(c)).join(', ');
      const sql = {
        state: `SELECT "revision", "snapshot" FROM ${q(revisions)} WHERE "set_id" = ?`,
        rows: `SELECT "key", "value" FROM ${q(this.table)} WHERE "set" = ?`,
        insertState: `INSERT INTO ${q(revisions)} ("set_id", "set", "revision", "snapshot") VALUES (?, ?, ?, ?)`,
        saveState: `UPDATE ${q(revisions)} SET "revision" = ?, "snapshot" = ? WHERE "set_id" = ?`,
        insertRecord: `INSERT INTO ${q(history)} (${cols}) VALUES (${HISTORY_COLUMNS.map(() => '?').join(', ')})`,
        prune: `DELETE FROM ${q(history)} WHERE "set_id" = ? AND "revision" < ? AND ("revision" <= ? OR "time_ms" < ?)`,
        records:
          `SELECT ${cols} FROM ${q(history)} WHERE "set_id" = ? AND "revision" < ? AND "time_ms" >= ? AND "time_ms" < ? ` +
          `ORDER BY "revision" DESC LIMIT ?`,
      }[name];
      s = db.prepare(sql);
      this.prepared.set(name, s);
    }
    return s;
  }

  private readNow(set: string): { state: SetState; current: Snapshot; found: boolean } {
    const row = this.stmt('state').get(setId(set)) as { revision: number; snapshot: string | null } | undefined;
    const current = snapshotOf(this.stmt('rows').all(set) as Array<{ key: string; value: string }>);
    return { state: stateOf(row), current, found: row !== undefined };
  }

  async readState(set: string): Promise<{ state: SetState; current: Snapshot }> {
    const { state, current } = this.db().transaction(() => this.readNow(set))();
    return { state, current };
  }

  async transact(set: string, decide: (state: SetState, current: Snapshot) => WritePlan): Promise<WritePlan> {
    const run = this.db().transaction((): WritePlan => {
      const { state, current, found } = this.readNow(set);
      const plan = decide(state, current);
      this.statements().write(plan.upserts, plan.deletes);
      for (const r of plan.records) this.stmt('insertRecord').run(...rowValues(r).map((v) => (typeof v === 'boolean' ? Number(v) : v)));
      if (found) this.stmt('saveState').run(plan.revision, snapshotText(plan), setId(set));
      else this.stmt('insertState').run(setId(set), set, plan.revision, snapshotText(plan));
      if (plan.records.length) this.stmt('prune').run(setId(set), ...pruneBounds(plan));
      return plan;
    });
    return run.immediate();
  }

  async readRecords(set: string, before: number, limit: number, since: number, until: number): Promise<RevisionRecord[]> {
    return (this.stmt('records').all(setId(set), before, since, until, limit) as HistoryRow[]).map(recordOf);
  }
}
