/**
 * Revisions and history of the `postgresql` kind (sql-history.ts). A write is one transaction on one pooled
 * connection: SELECT the set's revision row FOR UPDATE (inserting it at revision 0 first when absent, ON CONFLICT DO
 * NOTHING, so two first writers meet on the row lock), read the set's rows (READ COMMITTED: the latest committed, read
 * after the lock), then the config rows (the store's own write statement), the records, the revision row and the
 * retention delete. A writer killed mid-way leaves an open transaction the server rolls back when its connection goes.
 */
import type pg from 'pg';
import type { SetState, Snapshot, WritePlan } from './history.js';
import { HISTORY_COLUMNS, historyTables, pruneBounds, recordOf, rowValues, setId, snapshotOf, snapshotText, stateOf, type HistoryRow, type SqlHistoryDriver } from './sql-history.js';
import type { RevisionRecord } from '../core/ports.js';

const q = (id: string) => `"${id.replace(/"/g, '""')}"`;

export class PostgresHistory implements SqlHistoryDriver {
  private readonly sql: Record<'state' | 'insertState' | 'rows' | 'saveState' | 'insert' | 'prune' | 'records', string>;

  constructor(
    private readonly pool: () => pg.Pool,
    private readonly table: string,
    /** The config rows' write, on the transaction's connection (the store's own statement). */
    private readonly writeRows: (c: pg.PoolClient, plan: WritePlan) => Promise<void>,
  ) {
    const { revisions, history } = historyTables(table);
    const r = q(revisions);
    const h = q(history);
    const cols = HISTORY_COLUMNS.map(q).join(', ');
    this.sql = {
      state: `SELECT "revision", "snapshot" FROM ${r} WHERE "set_id" = $1 FOR UPDATE`,
      insertState: `INSERT INTO ${r} ("set_id", "set", "revision", "snapshot") VALUES ($1, $2, 0, NULL) ON CONFLICT ("set_id") DO NOTHING`,
      rows: `SELECT "key", "value" FROM ${q(table)} WHERE "set" = $1`,
      saveState: `UPDATE ${r} SET "revision" = $2, "snapshot" = $3 WHERE "set_id" = $1`,
      insert:
        `INSERT INTO ${h} (${cols}) SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bigint[], $5::text[], $6::text[], ` +
        `$7::text[], $8::boolean[], $9::text[])`,
      prune: `DELETE FROM ${h} WHERE "set_id" = $1 AND "revision" < $2 AND ("revision" <= $3 OR "time_ms" < $4)`,
      records:
        `SELECT ${cols} FROM ${h} WHERE "set_id" = $1 AND "revision" < $2 AND "time_ms" >= $3 AND "time_ms" < $4 ` +
        `ORDER BY "revision" DESC LIMIT $5`,
    };
  }

  async createTables(): Promise<void> {
    const { revisions, history } = historyTables(this.table);
    const statements = [
      `CREATE TABLE IF NOT EXISTS ${q(revisions)} ("set_id" varchar(32) NOT NULL PRIMARY KEY, "set" text NOT NULL, ` +
        `"revision" bigint NOT NULL, "snapshot" text)`,
      `CREATE TABLE IF NOT EXISTS ${q(history)} ("set_id" varchar(32) NOT NULL, "revision" bigint NOT NULL, "set" text NOT NULL, ` +
        `"time_ms" bigint NOT NULL, "subject" text, "request_id" text, "message" text, "recorded" boolean NOT NULL, ` +
        `"changes" text NOT NULL, PRIMARY KEY ("set_id", "revision"))`,
    ];
    for (const sql of statements) {
      try {
        await this.pool().query(sql);
      } catch (e) {
        // Two processes creating the same table at once: one of them loses the race on the catalog; that is fine.
        const code = (e as { code?: string }).code;
        if (code !== '23505' && code !== '42P07') throw e;
      }
    }
  }

  async readState(set: string): Promise<{ state: SetState; current: Snapshot }> {
    const c = await this.pool().connect();
    try {
      // One snapshot for both reads.
      await c.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
      const row = (await c.query({ text: this.sql.state.replace(' FOR UPDATE', ''), values: [setId(set)] })).rows[0];
      const rows = (await c.query({ text: this.sql.rows, values: [set] })).rows;
      await c.query('COMMIT');
      return { state: stateOf(row), current: snapshotOf(rows) };
    } catch (e) {
      await c.query('ROLLBACK').catch(() => undefined);
      throw e;
    } finally {
      c.release();
    }
  }

  async transact(set: string, decide: (state: SetState, current: Snapshot) => WritePlan): Promise<WritePlan> {
    const c = await this.pool().connect();
    let broken = false;
    try {
      await c.query('BEGIN');
      let row = (await c.query({ text: this.sql.state, values: [setId(set)] })).rows[0];
      if (!row) {
        await c.query({ text: this.sql.insertState, values: [setId(set), set] });
        row = (await c.query({ text: this.sql.state, values: [setId(set)] })).rows[0];
      }
      const current = snapshotOf((await c.query({ text: this.sql.rows, values: [set] })).rows);
      const plan = decide(stateOf(row), current);
      await this.writeRows(c, plan);
      if (plan.records.length) {
        const rows = plan.records.map(rowValues);
        await c.query({ text: this.sql.insert, values: HISTORY_COLUMNS.map((_, i) => rows.map((r) => r[i])) });
        await c.query({ text: this.sql.prune, values: [setId(set), ...pruneBounds(plan)] });
      }
      await c.query({ text: this.sql.saveState, values: [setId(set), plan.revision, snapshotText(plan)] });
      await c.query('COMMIT');
      return plan;
    } catch (e) {
      await c.query('ROLLBACK').catch(() => {
        broken = true;
      });
      throw e;
    } finally {
      c.release(broken);
    }
  }

  async readRecords(set: string, before: number, limit: number, since: number, until: number): Promise<RevisionRecord[]> {
    const res = await this.pool().query<HistoryRow>({ text: this.sql.records, values: [setId(set), before, since, until, limit] });
    return res.rows.map(recordOf);
  }
}
