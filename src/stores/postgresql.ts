/**
 * `postgresql` (alias `postgres`), with a pg Pool: `url`, or `host`, `port`, `username` (or `user`), `password`,
 * `database`; optional `ssl` (passed to pg), `tableName` (default `config`), `timeout` (ms, default 3000: connect,
 * query and statement timeout), `poolSize` (default 10).
 *
 * A batch read is one statement joining the table with `unnest($1::text[], $2::text[])`; a batch write is one
 * statement (a data-modifying CTE deletes the "" values, the INSERT ... ON CONFLICT ("set", "key") upserts the rest).
 * The pool drops broken connections and opens new ones, so the store recovers by itself when the server is back.
 *
 * Change feed, two ways:
 *   - `notify: true`: the feed installs (when absent) a trigger on the table that calls `pg_notify` for every inserted,
 *     updated or deleted row (and on TRUNCATE), with the row's set as payload, on the channel `cfgu_<tableName>`; the
 *     feed LISTENs on one dedicated connection. Any client's writes are seen at commit, whatever wrote them.
 *     PostgreSQL folds identical notices of one transaction into one, so a batch costs one notice per set.
 *   - otherwise, every `feedIntervalMs` (default 1000): one aggregate over the whole table (no GROUP BY) of the row
 *     count and the sum and XOR of hashes of each row's id and xmin (the transaction that wrote that row version);
 *     when it moved, one (set, hash) row per table row, from which the feed reports exactly the sets that moved. It
 *     reads tuple headers and ids only (never the values).
 * With `notify: true` the feed also checks every `feedIntervalMs` that the table and its trigger are still there (a
 * dropped table sends no notice). A feed never creates the table: on a dropped table it reports error() and comes
 * back with change({}) once the table exists again.
 */
import type pg from 'pg';
import { pgDriver } from './drivers.js';
import { StoreUnavailableError } from '../core/errors.js';
import { configId, indexName, connectionSecrets, unavailable } from './common.js';
import { backoff, DEFAULT_FEED_INTERVAL_MS, FeedLife, FeedSink } from './feed.js';
import { descendantRange, likeEscape } from './listing.js';
import { SqlConfigStore } from './sql.js';
import type { HistorySettings, WritePlan } from './history.js';
import { PostgresHistory } from './postgresql-history.js';
import type { SqlHistoryDriver } from './sql-history.js';
import type { ChangeFeed, ChangeListener, Config, ConfigQuery } from '../core/ports.js';

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
  /** Install the NOTIFY trigger and LISTEN (default false: periodic check). */
  notify?: boolean;
  /** Period of the periodic check (without `notify`), or of the trigger check (with it), in ms. */
  feedIntervalMs?: number;
  /** Revisions and history (docs/stores.md, "Revisions and history"); default DEFAULT_HISTORY. */
  history?: HistorySettings;
}

const q = (id: string) => `"${id.replace(/"/g, '""')}"`;

/** The periodic feed's two statements over `table` (see SqlConfigStore.pollingFeed): no GROUP BY. */
export function postgresFeedChecks(table: string): { total: string; rows: string } {
  const h = `hashtextextended("id" || ':' || xmin::text, 0)`;
  return {
    total: `SELECT count(*) || ':' || coalesce(sum(h), 0) || ':' || coalesce(bit_xor(h), 0) AS v FROM (SELECT ${h} AS h FROM ${q(table)}) AS r`,
    rows: `SELECT "set" AS s, ${h} AS a FROM ${q(table)}`,
  };
}

export class PostgresConfigStore extends SqlConfigStore {
  readonly type = 'postgresql';
  private pool: pg.Pool | undefined;
  private selectSql = '';
  private writeSql = '';

  constructor(
    name: string,
    private readonly options: PostgresStoreOptions,
  ) {
    super(name, options.tableName ?? 'config', options.timeoutMs ?? 3000, options.history);
    this.historyStatements = new PostgresHistory(() => this.pool!, this.table, (c, plan) => this.writePlan(c, plan));
  }

  private readonly historyStatements: PostgresHistory;

  protected historyDriver(): SqlHistoryDriver {
    return this.historyStatements;
  }

  protected secrets(): (string | undefined)[] {
    return connectionSecrets(this.options);
  }

  /** The NOTIFY channel of this table (at most 63 bytes, PostgreSQL's identifier limit). */
  get channel(): string {
    return `cfgu_${this.table}`.slice(0, 63);
  }

  private clientConfig(): pg.PoolConfig {
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
    return config;
  }

  private makePool(): pg.Pool {
    const pool = new (pgDriver().Pool)(this.clientConfig());
    // An idle connection that dies (server restart) emits 'error' on the pool; the pool discards it. Without a
    // listener the process would crash.
    pool.on('error', () => undefined);
    return pool;
  }

  protected async openConnection(): Promise<void> {
    if (!this.pool) this.pool = this.makePool();
  }

  protected async connect(): Promise<void> {
    await this.openConnection();
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
        await this.pool!.query(sql);
      } catch (e) {
        // Two processes creating the same table at once: one of them loses the race on the catalog; that is fine.
        const code = (e as { code?: string }).code;
        if (code !== '23505' && code !== '42P07') throw e;
      }
    }
  }

  /**
   * The NOTIFY trigger (see the header); installed once, kept when present. Installed by the feed, not at connect:
   * a role without the right to create it can still read and write; its feed reports the refusal as error().
   */
  private async installTrigger(): Promise<void> {
    const trigger = indexName('cfgu_notify', this.table);
    const found = await this.pool!.query({
      text: `SELECT 1 FROM pg_trigger WHERE tgrelid = $1::regclass AND tgname = $2`,
      values: [q(this.table), trigger],
    });
    if (found.rowCount) return;
    const channel = this.channel.replace(/'/g, "''");
    const statements = [
      // One function for every table: the channel is the trigger's argument. A set longer than a notice payload
      // can carry is sent as "*" (any set); a set is sent with an "s" in front so that "*" stays unambiguous.
      `CREATE FUNCTION cfgu_notify_change() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  IF TG_LEVEL = 'STATEMENT' THEN
    PERFORM pg_notify(TG_ARGV[0], '*');
    RETURN NULL;
  END IF;
  IF TG_OP <> 'INSERT' THEN
    PERFORM pg_notify(TG_ARGV[0], CASE WHEN octet_length(OLD."set") < 7000 THEN 's' || OLD."set" ELSE '*' END);
  END IF;
  IF TG_OP <> 'DELETE' THEN
    PERFORM pg_notify(TG_ARGV[0], CASE WHEN octet_length(NEW."set") < 7000 THEN 's' || NEW."set" ELSE '*' END);
  END IF;
  RETURN NULL;
END
$fn$`,
      `CREATE TRIGGER ${q(trigger)} AFTER INSERT OR UPDATE OR DELETE ON ${q(this.table)} ` +
        `FOR EACH ROW EXECUTE FUNCTION cfgu_notify_change('${channel}')`,
      `CREATE TRIGGER ${q(indexName('cfgu_notify_truncate', this.table))} AFTER TRUNCATE ON ${q(this.table)} ` +
        `FOR EACH STATEMENT EXECUTE FUNCTION cfgu_notify_change('${channel}')`,
    ];
    // The function is shared by every table (and role): created only when absent, since replacing it needs its owner.
    const fn = await this.pool!.query<{ present: boolean }>(`SELECT to_regprocedure('cfgu_notify_change()') IS NOT NULL AS present`);
    if (fn.rows[0]?.present) statements.shift();
    for (const sql of statements) {
      try {
        await this.pool!.query(sql);
      } catch (e) {
        // Another process installing the same function or trigger at the same moment: theirs is as good as ours.
        const code = (e as { code?: string }).code;
        if (code !== '42710' && code !== '42723' && code !== '23505') throw e;
      }
    }
  }

  /** True when the table exists and carries the notify trigger (on the feed's own connection). */
  private async triggerPresent(c: pg.Client): Promise<boolean> {
    const found = await c.query({
      text: `SELECT 1 FROM pg_trigger WHERE tgrelid = to_regclass($1) AND tgname = $2`,
      values: [q(this.table), indexName('cfgu_notify', this.table)],
    });
    return !!found.rowCount;
  }

  watch(listener: ChangeListener): ChangeFeed {
    const interval = this.options.feedIntervalMs ?? DEFAULT_FEED_INTERVAL_MS.sql;
    if (!this.options.notify) {
      const { total, rows } = postgresFeedChecks(this.table);
      return this.pollingFeed(listener, interval, {
        total: async () => (await this.pool!.query<{ v: string }>(total)).rows[0]!.v,
        rows: async () => (await this.pool!.query<{ s: string; a: string }>(rows)).rows.map((r) => ({ ...r, b: r.a })),
      });
    }
    const sink = new FeedSink(listener);
    const life = new FeedLife();
    const run = async () => {
      for (let attempt = 0; !life.closed; attempt++) {
        const c = new (pgDriver().Client)({ ...this.clientConfig(), keepAlive: true, query_timeout: undefined, statement_timeout: undefined });
        let gone!: (e: Error) => void;
        const lost = new Promise<Error | undefined>((resolve) => {
          gone = resolve;
          c.on('error', (e) => resolve(e));
          c.on('end', () => resolve(new Error('connection closed')));
          void life.ended().then(() => resolve(undefined));
        });
        try {
          await this.openConnection(); // never the table: a feed does not create it
          await this.guard('install the notify trigger', () => this.installTrigger());
          await c.connect();
          c.on('notification', (m) => {
            const p = m.payload ?? '*';
            sink.change(p.startsWith('s') ? { sets: [p.slice(1)] } : {});
          });
          await c.query(`LISTEN ${q(this.channel)}`);
        } catch (e) {
          c.end().catch(() => undefined);
          if (life.closed) return;
          sink.fail(unavailable(this.name, e, this.secrets()));
          await life.pause(backoff(attempt));
          continue;
        }
        attempt = 0;
        sink.change({}); // listening (first time, or again after an outage): anything may have changed meanwhile
        // A dropped table (or trigger) sends no notice: check every period that the trigger is still there.
        const probe = setInterval(() => {
          this.triggerPresent(c).then(
            (present) => present || gone(new Error(`table "${this.table}" or its notify trigger is gone`)),
            (e: Error) => gone(e),
          );
        }, interval);
        probe.unref?.();
        const why = await lost;
        clearInterval(probe);
        await c.end().catch(() => undefined);
        if (life.closed || !why) return;
        sink.fail(why instanceof StoreUnavailableError ? why : unavailable(this.name, why, this.secrets()));
        await life.pause(backoff(0));
      }
    };
    const running = run();
    return this.openFeeds.add(async () => {
      sink.close();
      life.close();
      await running;
    });
  }

  protected async select(pairs: readonly ConfigQuery[]): Promise<Config[]> {
    const res = await this.pool!.query<Config>({
      text: this.selectSql,
      values: [pairs.map((p) => p.set), pairs.map((p) => p.key)],
    });
    return res.rows;
  }

  /**
   * SqlConfigStore.selectUnder. When the `set` column's collation orders by code point (C, POSIX, C.UTF-8, ucs_basic:
   * byteOrder), one SELECT walks the range [prefix, prefix + '0') of the (set, key) index in order and stops at the
   * LIMIT. Under any other collation a range in it would not hold exactly the prefix's sets, so the statement matches
   * `set LIKE 'prefix/%'` (wildcards escaped) and orders by "C": PostgreSQL cannot use the index for either, and scans
   * the table's set and key columns (a top-N sort keeps only LIMIT rows).
   */
  protected async selectUnder(prefix: string, rows: number): Promise<ReadonlyArray<{ set: string; key: string }>> {
    const t = q(this.table);
    const byteOrder = (this.byteOrder ??= await this.setColumnByteOrder());
    const order = byteOrder ? `ORDER BY "set", "key"` : `ORDER BY "set" COLLATE "C", "key" COLLATE "C"`;
    if (prefix === '') {
      return (await this.pool!.query({ text: `SELECT "set", "key" FROM ${t} WHERE "value" <> '' ${order} LIMIT $1`, values: [rows] })).rows;
    }
    const { from, to } = descendantRange(prefix);
    const res = byteOrder
      ? await this.pool!.query({
          text: `SELECT "set", "key" FROM ${t} WHERE "set" >= $1 AND "set" < $2 AND ("set" = $1 OR "set" >= $3) AND "value" <> '' ${order} LIMIT $4`,
          values: [prefix, to, from, rows],
        })
      : await this.pool!.query({
          text: `SELECT "set", "key" FROM ${t} WHERE ("set" = $1 OR "set" COLLATE "C" LIKE $2 ESCAPE '!') AND "value" <> '' ${order} LIMIT $3`,
          values: [prefix, `${likeEscape(prefix)}/%`, rows],
        });
    return res.rows;
  }

  /** Whether the table's `set` column compares by code point (asked once per store object; see selectUnder). */
  private byteOrder: boolean | undefined;

  private async setColumnByteOrder(): Promise<boolean> {
    const res = await this.pool!.query<{ coll: string; provider: string | null; locale: string | null }>({
      // The column's own collation, or the database's when it uses the default (its provider column is new in 15).
      text:
        `SELECT c.collname AS coll, ` +
        `CASE WHEN c.collname = 'default' THEN to_jsonb(d) ->> 'datlocprovider' ELSE c.collprovider::text END AS provider, ` +
        `CASE WHEN c.collname = 'default' THEN d.datcollate ELSE to_jsonb(c) ->> 'collcollate' END AS locale ` +
        `FROM pg_attribute a JOIN pg_collation c ON c.oid = a.attcollation ` +
        `JOIN pg_database d ON d.datname = current_database() ` +
        `WHERE a.attrelid = to_regclass($1) AND a.attname = 'set'`,
      values: [q(this.table)],
    });
    const r = res.rows[0];
    if (!r) return false;
    if (r.coll === 'C' || r.coll === 'POSIX' || r.coll === 'ucs_basic') return true;
    // libc ('c') or builtin ('b') C locales order by code point; an ICU ('i') locale never does.
    return (r.provider === null || r.provider === 'c' || r.provider === 'b') && /^(C|POSIX)(\.UTF-?8)?$/i.test(r.locale ?? '');
  }

  protected async writeRows(upserts: readonly Config[], deletes: readonly ConfigQuery[]): Promise<void> {
    await this.pool!.query(this.writeQuery(upserts, deletes));
  }

  /** A write's config rows, on the connection of its transaction. */
  private async writePlan(c: pg.PoolClient, plan: WritePlan): Promise<void> {
    await c.query(this.writeQuery(plan.upserts, plan.deletes));
  }

  private writeQuery(upserts: readonly Config[], deletes: readonly ConfigQuery[]): pg.QueryConfig {
    return {
      text: this.writeSql,
      values: [
        deletes.map((p) => p.set),
        deletes.map((p) => p.key),
        upserts.map((c) => configId(c.set, c.key)),
        upserts.map((c) => c.set),
        upserts.map((c) => c.key),
        upserts.map((c) => c.value),
      ],
    };
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
