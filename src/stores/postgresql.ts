/**
 * `postgresql` (alias `postgres`), with a pg Pool: `url`, or `host`, `port`, `username` (or `user`), `password`,
 * `database`; optional `ssl` (passed to pg), `tableName` (default `config`), `timeout` (ms, default 3000: connect,
 * query and statement timeout), `poolSize` (default 10).
 *
 * A batch read is one statement joining the table with `unnest($1::text[], $2::text[])`; a batch write is one
 * statement (a data-modifying CTE deletes the "" values, the INSERT ... ON CONFLICT ("set", "key") upserts the rest).
 * The pool drops broken connections and opens new ones, so the store recovers by itself when the server is back.
 */
import type pg from 'pg';
import { pgDriver } from './drivers.js';
import { configId, indexName, connectionSecrets } from './common.js';
import { SqlConfigStore } from './sql.js';
import type { Config, ConfigQuery } from './types.js';

export interface PostgresStoreOptions {
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
}

const q = (id: string) => `"${id.replace(/"/g, '""')}"`;

export class PostgresConfigStore extends SqlConfigStore {
  readonly type = 'postgresql';
  private pool: pg.Pool | undefined;
  private selectSql = '';
  private writeSql = '';

  constructor(
    name: string,
    private readonly options: PostgresStoreOptions,
  ) {
    super(name, options.tableName ?? 'config', options.timeoutMs ?? 3000);
  }

  protected secrets(): (string | undefined)[] {
    return connectionSecrets(this.options);
  }

  private makePool(): pg.Pool {
    const o = this.options;
    const config: pg.PoolConfig = {
      connectionTimeoutMillis: this.timeoutMs,
      query_timeout: this.timeoutMs,
      statement_timeout: this.timeoutMs,
      idleTimeoutMillis: 10_000,
      max: o.poolSize ?? 10,
      application_name: 'cfgu',
    };
    if (o.url) config.connectionString = o.url;
    else {
      config.host = o.host ?? '127.0.0.1';
      config.port = o.port ?? 5432;
      if (o.username !== undefined) config.user = o.username;
      if (o.password !== undefined) config.password = o.password;
      if (o.database !== undefined) config.database = o.database;
    }
    if (o.ssl !== undefined) config.ssl = o.ssl as pg.PoolConfig['ssl'];
    const pool = new (pgDriver().Pool)(config);
    // An idle connection that dies (server restart) emits 'error' on the pool; the pool discards it. Without a
    // listener the process would crash.
    pool.on('error', () => undefined);
    return pool;
  }

  protected async connect(): Promise<void> {
    if (!this.pool) this.pool = this.makePool();
    const t = q(this.table);
    this.selectSql =
      `SELECT c."set", c."key", c."value" FROM ${t} AS c ` +
      `JOIN unnest($1::text[], $2::text[]) AS w(s, k) ON c."set" = w.s AND c."key" = w.k`;
    this.writeSql =
      `WITH d AS (DELETE FROM ${t} AS c USING unnest($1::text[], $2::text[]) AS w(s, k) ` +
      `WHERE c."set" = w.s AND c."key" = w.k) ` +
      `INSERT INTO ${t} ("id", "set", "key", "value") SELECT * FROM unnest($3::text[], $4::text[], $5::text[], $6::text[]) ` +
      `ON CONFLICT ("set", "key") DO UPDATE SET "value" = EXCLUDED."value"`;
    const statements = [
      `CREATE TABLE IF NOT EXISTS ${t} ("id" varchar(32) NOT NULL PRIMARY KEY, "set" text NOT NULL, ` +
        `"key" text NOT NULL, "value" text NOT NULL)`,
      `CREATE UNIQUE INDEX IF NOT EXISTS ${q(indexName('set_key', this.table))} ON ${t} ("set", "key")`,
      `CREATE INDEX IF NOT EXISTS ${q(indexName('set', this.table))} ON ${t} ("set")`,
    ];
    for (const sql of statements) {
      try {
        await this.pool.query(sql);
      } catch (e) {
        // Two processes creating the same table at once: one of them loses the race on the catalog; that is fine.
        const code = (e as { code?: string }).code;
        if (code !== '23505' && code !== '42P07') throw e;
      }
    }
  }

  protected async select(pairs: readonly ConfigQuery[]): Promise<Config[]> {
    const res = await this.pool!.query<Config>({
      text: this.selectSql,
      values: [pairs.map((p) => p.set), pairs.map((p) => p.key)],
    });
    return res.rows;
  }

  protected async write(upserts: readonly Config[], deletes: readonly ConfigQuery[]): Promise<void> {
    await this.pool!.query({
      text: this.writeSql,
      values: [
        deletes.map((p) => p.set),
        deletes.map((p) => p.key),
        upserts.map((c) => configId(c.set, c.key)),
        upserts.map((c) => c.set),
        upserts.map((c) => c.key),
        upserts.map((c) => c.value),
      ],
    });
  }

  protected isMissingTable(err: unknown): boolean {
    return (err as { code?: string })?.code === '42P01';
  }

  protected async disconnect(): Promise<void> {
    const pool = this.pool;
    this.pool = undefined;
    await pool?.end();
  }
}
