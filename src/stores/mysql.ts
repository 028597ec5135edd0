/**
 * `mysql` and `mariadb` (mysql2 pool): `url`, or `host`, `port`, `username` (or `user`), `password`, `database`;
 * `tableName` (default `config`), `timeout` (ms, default 3000: connect and query timeout), `poolSize` (default 10).
 *
 * Tables cfgu creates use the binary collation (`utf8mb4_bin`) so keys differing only in case stay distinct; a
 * table created by someone else with a case-insensitive collation treats them as one row (reads still filter
 * exactly). The unique (set, key) index is a full index on MariaDB >= 10.4 (hash-based long unique); MySQL, which
 * cannot index whole TEXT columns, gets a 255-character prefix index instead.
 *
 * Change feed: MySQL and MariaDB have no notifications, so every `feedIntervalMs` (default 1000) the feed runs one
 * aggregate over the whole table, without GROUP BY (so without any temporary table): the row count, a sum and an XOR
 * of CRC32 checksums of each row's key and value. When that moved, it reads one (set, checksums) row per table row and
 * reports exactly the sets whose figures moved. It reads the whole table (values included) once per period. (`CHECKSUM TABLE` cannot say which set changed, and InnoDB's `UPDATE_TIME` is kept in memory only, may be
 * NULL and has a one-second resolution.)
 */
import type mysql from 'mysql2/promise';
import { mysqlDriver } from './drivers.js';
import { LimitError } from '../core/errors.js';
import { causeOf, configId, indexName, connectionSecrets } from './common.js';
import { DEFAULT_FEED_INTERVAL_MS } from './feed.js';
import { likeEscape } from './listing.js';
import { SqlConfigStore, statementChunks } from './sql.js';
import type { HistorySettings, WritePlan } from './history.js';
import { MysqlHistory } from './mysql-history.js';
import type { SqlHistoryDriver } from './sql-history.js';
import type { ChangeFeed, ChangeListener, Config, ConfigQuery } from '../core/ports.js';

export interface MysqlStoreOptions {
  url?: string;
  host?: string;
  port?: number;
  username?: string;
  password?: string;
  database?: string;
  ssl?: unknown;
  tableName?: string;
  timeoutMs?: number;
  poolSize?: number;
  /** Period of the change feed's check (ms). */
  feedIntervalMs?: number;
  /** Revisions and history (docs/stores.md, "Revisions and history"); default DEFAULT_HISTORY. */
  history?: HistorySettings;
}

const q = (id: string) => `\`${id.replace(/`/g, '``')}\``;

/**
 * mysql2's `query` writes the values into the statement's text, which the server refuses over its
 * `max_allowed_packet` (16 MiB by default on MariaDB, 64 MiB on MySQL 8): a write's statements carry at most 4 MiB of
 * text each (twice that once escaped, at worst), besides at most MAX_PAIRS_PER_STATEMENT rows.
 */
const STATEMENT_BYTES = {
  max: 4 * 1024 * 1024,
  of: (c: ConfigQuery & { value?: string }): number =>
    Buffer.byteLength(c.set) + Buffer.byteLength(c.key) + (c.value === undefined ? 0 : Buffer.byteLength(c.value)) + 48,
};

/** The change feed's two statements over `table` (see SqlConfigStore.pollingFeed): no GROUP BY, no sorting. */
export function mysqlFeedChecks(table: string): { total: string; rows: string } {
  const a = `CRC32(CONCAT_WS(0x1f, \`key\`, \`value\`))`;
  const b = `CRC32(CONCAT_WS(0x1f, \`value\`, \`key\`))`;
  return {
    total: `SELECT CONCAT(COUNT(*), ':', COALESCE(SUM(${a}), 0), ':', COALESCE(BIT_XOR(${b}), 0)) AS v FROM ${q(table)}`,
    rows: `SELECT \`set\` AS s, ${a} AS a, ${b} AS b FROM ${q(table)}`,
  };
}

export class MysqlConfigStore extends SqlConfigStore {
  readonly type: 'mysql' | 'mariadb';
  private pool: mysql.Pool | undefined;

  constructor(
    name: string,
    private readonly options: MysqlStoreOptions,
    type: 'mysql' | 'mariadb' = 'mysql',
  ) {
    super(name, options.tableName ?? 'config', options.timeoutMs ?? 3000, options.history);
    this.type = type;
    this.historyStatements = new MysqlHistory(() => this.pool!, this.table, this.timeoutMs, (plan: WritePlan) => this.rowStatements(plan.upserts, plan.deletes));
  }

  private readonly historyStatements: MysqlHistory;

  protected historyDriver(): SqlHistoryDriver {
    return this.historyStatements;
  }

  protected secrets(): (string | undefined)[] {
    return connectionSecrets(this.options);
  }

  private makePool(): mysql.Pool {
    const o = this.options;
    const config: mysql.PoolOptions = {
      connectTimeout: this.timeoutMs,
      connectionLimit: o.poolSize ?? 10,
      waitForConnections: true,
      queueLimit: 0,
      enableKeepAlive: true,
      charset: 'utf8mb4',
    };
    if (o.url) config.uri = o.url;
    else {
      config.host = o.host ?? '127.0.0.1';
      config.port = o.port ?? 3306;
      if (o.username !== undefined) config.user = o.username;
      if (o.password !== undefined) config.password = o.password;
      if (o.database !== undefined) config.database = o.database;
    }
    if (o.ssl !== undefined) config.ssl = o.ssl as mysql.PoolOptions['ssl'];
    const pool = mysqlDriver().createPool(config);
    // Errors of idle connections (server restart) must not crash the process; the pool replaces them.
    (pool as unknown as { on(ev: string, fn: () => void): void }).on('error', () => undefined);
    return pool;
  }

  private exec(sql: string, values: unknown[] = []) {
    return this.pool!.query({ sql, values, timeout: this.timeoutMs });
  }

  protected async connect(): Promise<void> {
    await this.openConnection();
    const t = q(this.table);
    const columns =
      `\`id\` varchar(32) NOT NULL, \`set\` text NOT NULL, \`key\` text NOT NULL, \`value\` text NOT NULL, ` +
      `PRIMARY KEY (\`id\`)`;
    const tail = ` DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`;
    const setIndex = `KEY ${q(indexName('set', this.table))} (\`set\`(255))`;
    try {
      await this.exec(
        `CREATE TABLE IF NOT EXISTS ${t} (${columns}, UNIQUE KEY ${q(indexName('set_key', this.table))} (\`set\`, \`key\`), ${setIndex})${tail}`,
      );
    } catch (e) {
      // MySQL (and MariaDB < 10.4): "BLOB/TEXT column used in key specification without a key length".
      if ((e as { errno?: number }).errno !== 1170) throw e;
      await this.exec(
        `CREATE TABLE IF NOT EXISTS ${t} (${columns}, UNIQUE KEY ${q(indexName('set_key', this.table))} (\`set\`(255), \`key\`(255)), ${setIndex})${tail}`,
      );
    }
  }

  protected async select(pairs: readonly ConfigQuery[]): Promise<Config[]> {
    const placeholders = pairs.map(() => '(?, ?)').join(', ');
    const [rows] = await this.exec(
      `SELECT \`set\`, \`key\`, \`value\` FROM ${q(this.table)} WHERE (\`set\`, \`key\`) IN (${placeholders})`,
      pairs.flatMap((p) => [p.set, p.key]),
    );
    return rows as Config[];
  }

  /**
   * SqlConfigStore.selectUnder: one SELECT. The first condition (`set` = prefix OR `set` LIKE 'prefix/%', wildcards
   * escaped) is what the (set) prefix index can serve as a range, in whatever collation the table has (a
   * case-insensitive one matches more); the same test on the binary strings keeps the exact matches only, and the
   * ORDER BY on them is code-point order. Neither index can deliver that order, so the server sorts the matching rows
   * (a top-N sort keeps only LIMIT rows); the whole table is read for the prefix "".
   */
  protected async selectUnder(prefix: string, rows: number): Promise<ReadonlyArray<{ set: string; key: string }>> {
    const t = q(this.table);
    const tail = `\`value\` <> CAST('' AS BINARY) ORDER BY CAST(\`set\` AS BINARY), CAST(\`key\` AS BINARY) LIMIT ?`;
    const [result] =
      prefix === ''
        ? await this.exec(`SELECT \`set\`, \`key\` FROM ${t} WHERE ${tail}`, [rows])
        : await this.exec(
            `SELECT \`set\`, \`key\` FROM ${t} WHERE (\`set\` = ? OR \`set\` LIKE ? ESCAPE '!') ` +
              `AND (CAST(\`set\` AS BINARY) = ? OR CAST(\`set\` AS BINARY) LIKE ? ESCAPE '!') AND ${tail}`,
            [prefix, `${likeEscape(prefix)}/%`, prefix, `${likeEscape(prefix)}/%`, rows],
          );
    return (result as Array<{ set: string | Buffer; key: string | Buffer }>).map((r) => ({ set: String(r.set), key: String(r.key) }));
  }

  protected async writeRows(upserts: readonly Config[], deletes: readonly ConfigQuery[]): Promise<void> {
    const statements = this.rowStatements(upserts, deletes);
    if (statements.length === 1) {
      const [sql, values] = statements[0]!;
      await this.exec(sql, values);
      return;
    }
    const conn = await this.pool!.getConnection();
    try {
      await conn.beginTransaction();
      for (const [sql, values] of statements) await conn.query({ sql, values, timeout: this.timeoutMs });
      await conn.commit();
    } catch (e) {
      await conn.rollback().catch(() => undefined);
      throw e;
    } finally {
      conn.release();
    }
  }

  /**
   * The DELETEs of the "" values, then the upserts of the others (none for nothing to do), each of at most
   * MAX_PAIRS_PER_STATEMENT rows and STATEMENT_BYTES.
   */
  private rowStatements(upserts: readonly Config[], deletes: readonly ConfigQuery[]): Array<[string, unknown[]]> {
    const t = q(this.table);
    const statements: Array<[string, unknown[]]> = [];
    for (const chunk of statementChunks(deletes, STATEMENT_BYTES)) {
      statements.push([
        `DELETE FROM ${t} WHERE (\`set\`, \`key\`) IN (${chunk.map(() => '(?, ?)').join(', ')})`,
        chunk.flatMap((p) => [p.set, p.key]),
      ]);
    }
    for (const chunk of statementChunks(upserts, STATEMENT_BYTES)) {
      statements.push([
        `INSERT INTO ${t} (\`id\`, \`set\`, \`key\`, \`value\`) VALUES ${chunk.map(() => '(?, ?, ?, ?)').join(', ')} ` +
          `ON DUPLICATE KEY UPDATE \`value\` = VALUES(\`value\`)`,
        chunk.flatMap((c) => [configId(c.set, c.key), c.set, c.key, c.value]),
      ]);
    }
    return statements;
  }

  protected async guard<T>(what: string, fn: () => Promise<T>, statements = 1): Promise<T> {
    try {
      return await super.guard(what, fn, statements);
    } catch (e) {
      // ER_DATA_TOO_LONG (1406): the request is over what the column holds; not an outage.
      if ((causeOf(e) as { errno?: number } | undefined)?.errno === 1406) {
        throw new LimitError(`a value is too long for store "${this.name}" (a ${this.type} TEXT column holds at most 65,535 bytes)`);
      }
      throw e;
    }
  }

  watch(listener: ChangeListener): ChangeFeed {
    // No GROUP BY: grouping by a TEXT column makes MariaDB build an internal (Aria) temporary table, and a DROP TABLE
    // under a running check has crashed MariaDB 10.11 while freeing one. Both statements are plain scans.
    const { total, rows } = mysqlFeedChecks(this.table);
    return this.pollingFeed(listener, this.options.feedIntervalMs ?? DEFAULT_FEED_INTERVAL_MS.sql, {
      total: async () => {
        const [r] = await this.exec(total);
        return String((r as Array<{ v: string | Buffer }>)[0]!.v);
      },
      rows: async () => (await this.exec(rows))[0] as Array<{ s: string | Buffer; a: number; b: number }>,
    });
  }

  protected async openConnection(): Promise<void> {
    if (!this.pool) this.pool = this.makePool();
  }

  protected isMissingTable(err: unknown): boolean {
    return (err as { errno?: number })?.errno === 1146;
  }

  protected async disconnect(): Promise<void> {
    const pool = this.pool;
    this.pool = undefined;
    await pool?.end();
  }
}
