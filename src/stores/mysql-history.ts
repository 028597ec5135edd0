/**
 * Revisions and history of the `mysql`/`mariadb` kind (sql-history.ts). A write is one InnoDB transaction on one pooled
 * connection: SELECT the set's revision row FOR UPDATE (inserting it at revision 0 first when absent, INSERT IGNORE:
 * two first writers may deadlock there once, and the store retries), read the set's config rows with FOR UPDATE too
 * (a locking read sees the latest committed rows, not the transaction's snapshot), then the config rows, the records,
 * the revision row and the retention delete. JSON columns are LONGTEXT (a TEXT column holds only 64 KiB).
 */
import type mysql from 'mysql2/promise';
import type { SetState, Snapshot, WritePlan } from './history.js';
import { HISTORY_COLUMNS, historyTables, pruneBounds, recordOf, rowValues, setId, snapshotOf, snapshotText, stateOf, type HistoryRow, type SqlHistoryDriver } from './sql-history.js';
import type { RevisionRecord } from '../core/ports.js';

const q = (id: string) => `\`${id.replace(/`/g, '``')}\``;

type Exec = (sql: string, values?: unknown[]) => Promise<unknown[]>;

export class MysqlHistory implements SqlHistoryDriver {
  private readonly sql: Record<'state' | 'insertState' | 'rows' | 'saveState' | 'prune' | 'records', string>;
  private readonly names: { revisions: string; history: string };

  constructor(
    private readonly pool: () => mysql.Pool,
    table: string,
    private readonly timeoutMs: number,
    /** The config rows' statements of a plan (the store's own), run on the transaction's connection. */
    private readonly rowStatements: (plan: WritePlan) => Array<[string, unknown[]]>,
  ) {
    this.names = historyTables(table);
    const r = q(this.names.revisions);
    const h = q(this.names.history);
    const cols = HISTORY_COLUMNS.map(q).join(', ');
    this.sql = {
      state: `SELECT \`revision\`, \`snapshot\` FROM ${r} WHERE \`set_id\` = ?`,
      insertState: `INSERT IGNORE INTO ${r} (\`set_id\`, \`set\`, \`revision\`, \`snapshot\`) VALUES (?, ?, 0, NULL)`,
      rows: `SELECT \`key\`, \`value\` FROM ${q(table)} WHERE \`set\` = ?`,
      saveState: `UPDATE ${r} SET \`revision\` = ?, \`snapshot\` = ? WHERE \`set_id\` = ?`,
      prune: `DELETE FROM ${h} WHERE \`set_id\` = ? AND \`revision\` < ? AND (\`revision\` <= ? OR \`time_ms\` < ?)`,
      records:
        `SELECT ${cols} FROM ${h} WHERE \`set_id\` = ? AND \`revision\` < ? AND \`time_ms\` >= ? AND \`time_ms\` < ? ` +
        `ORDER BY \`revision\` DESC LIMIT ?`,
    };
  }

  private exec(c: mysql.Pool | mysql.PoolConnection): Exec {
    return async (sql, values = []) => (await c.query({ sql, values, timeout: this.timeoutMs }))[0] as unknown[];
  }

  async createTables(): Promise<void> {
    const tail = ` DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`;
    const run = this.exec(this.pool());
    await run(
      `CREATE TABLE IF NOT EXISTS ${q(this.names.revisions)} (\`set_id\` varchar(32) NOT NULL, \`set\` text NOT NULL, ` +
        `\`revision\` bigint NOT NULL, \`snapshot\` longtext NULL, PRIMARY KEY (\`set_id\`))${tail}`,
    );
    await run(
      `CREATE TABLE IF NOT EXISTS ${q(this.names.history)} (\`set_id\` varchar(32) NOT NULL, \`revision\` bigint NOT NULL, ` +
        `\`set\` text NOT NULL, \`time_ms\` bigint NOT NULL, \`subject\` text NULL, \`request_id\` text NULL, \`message\` text NULL, ` +
        `\`recorded\` tinyint NOT NULL, \`changes\` longtext NOT NULL, PRIMARY KEY (\`set_id\`, \`revision\`))${tail}`,
    );
  }

  async readState(set: string): Promise<{ state: SetState; current: Snapshot }> {
    const c = await this.pool().getConnection();
    const run = this.exec(c);
    try {
      await c.query('START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY');
      const [row] = (await run(this.sql.state, [setId(set)])) as Array<{ revision: unknown; snapshot: string | null }>;
      const rows = (await run(this.sql.rows, [set])) as Array<{ key: unknown; value: unknown }>;
      await c.commit();
      return { state: stateOf(row), current: snapshotOf(rows) };
    } catch (e) {
      await c.rollback().catch(() => undefined);
      throw e;
    } finally {
      c.release();
    }
  }

  async transact(set: string, decide: (state: SetState, current: Snapshot) => WritePlan): Promise<WritePlan> {
    const c = await this.pool().getConnection();
    const run = this.exec(c);
    try {
      await c.beginTransaction();
      const lock = `${this.sql.state} FOR UPDATE`;
      let [row] = (await run(lock, [setId(set)])) as Array<{ revision: unknown; snapshot: string | null }>;
      if (!row) {
        await run(this.sql.insertState, [setId(set), set]);
        [row] = (await run(lock, [setId(set)])) as Array<{ revision: unknown; snapshot: string | null }>;
      }
      const current = snapshotOf((await run(`${this.sql.rows} FOR UPDATE`, [set])) as Array<{ key: unknown; value: unknown }>);
      const plan = decide(stateOf(row), current);
      for (const [sql, values] of this.rowStatements(plan)) await run(sql, values);
      if (plan.records.length) {
        const placeholders = plan.records.map(() => `(${HISTORY_COLUMNS.map(() => '?').join(', ')})`).join(', ');
        await run(`INSERT INTO ${q(this.names.history)} (${HISTORY_COLUMNS.map(q).join(', ')}) VALUES ${placeholders}`, plan.records.flatMap(rowValues));
        await run(this.sql.prune, [setId(set), ...pruneBounds(plan)]);
      }
      await run(this.sql.saveState, [plan.revision, snapshotText(plan), setId(set)]);
      await c.commit();
      return plan;
    } catch (e) {
      await c.rollback().catch(() => undefined);
      throw e;
    } finally {
      c.release();
    }
  }

  async readRecords(set: string, before: number, limit: number, since: number, until: number): Promise<RevisionRecord[]> {
    const rows = (await this.exec(this.pool())(this.sql.records, [setId(set), before, since, until, limit])) as HistoryRow[];
    return rows.map((r) => recordOf({ ...r, set: String(r.set), changes: String(r.changes) }));
  }
}
