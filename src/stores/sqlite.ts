/**
 * `sqlite` (better-sqlite3): `database` (file path, or `:memory:`), `tableName` (default `config`), `timeout` (ms),
 * `feedIntervalMs` (change feed check period, default 100).
 *
 * Change feed: `PRAGMA data_version` on the store's own connection, every `feedIntervalMs`. SQLite changes that
 * number on a connection whenever ANOTHER connection (another process, another store object) committed to the
 * database file; it costs a few microseconds and no I/O beyond a shared-memory read in WAL mode. Writes through this
 * store object do not move it, so they are reported directly. The number covers the whole database file: a commit to
 * another table of the same file gives a spurious notice (of any set).
 */
import type Database from 'better-sqlite3';
import { sqliteDriver } from './drivers.js';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { configId, indexName, unavailable } from './common.js';
import { descendantRange } from './listing.js';
import { DEFAULT_FEED_INTERVAL_MS, FeedSink, Poller, setsOf } from './feed.js';
import { SqlConfigStore, statementChunks } from './sql.js';
import type { HistorySettings } from './history.js';
import type { SqlHistoryDriver } from './sql-history.js';
import { SqliteHistory } from './sqlite-history.js';
import type { ChangeFeed, ChangeListener, Config, ConfigQuery } from '../core/ports.js';

export interface SqliteStoreOptions {
  database: string;
  tableName?: string;
  timeoutMs?: number;
  feedIntervalMs?: number;
  /** Revisions and history (docs/stores.md, "Revisions and history"); default DEFAULT_HISTORY. */
  history?: HistorySettings;
}

const q = (id: string) => `"${id.replace(/"/g, '""')}"`;

/** Create the Cfgu v1 table in a better-sqlite3 database when absent (also used for the backup database). */
export function createSqliteTable(db: Database.Database, table: string): void {
  db.exec(
    `CREATE TABLE IF NOT EXISTS ${q(table)} (` +
      `"id" varchar(32) PRIMARY KEY NOT NULL, "set" text NOT NULL, "key" text NOT NULL, "value" text NOT NULL)`,
  );
  db.exec(`CREATE UNIQUE INDEX IF NOT EXISTS ${q(indexName('set_key', table))} ON ${q(table)} ("set", "key")`);
  db.exec(`CREATE INDEX IF NOT EXISTS ${q(indexName('set', table))} ON ${q(table)} ("set")`);
}

/** Prepared SELECT / DELETE / UPSERT statements of one table, by batch size (a small cache). */
export class SqliteStatements {
  private readonly cache = new Map<string, Database.Statement>();
  constructor(
    private readonly db: Database.Database,
    private readonly table: string,
  ) {}

  private stmt(kind: 'select' | 'delete' | 'upsert', n: number): Database.Statement {
    const k = `${kind}:${n}`;
    let s = this.cache.get(k);
    if (!s) {
      const t = q(this.table);
      const pairs = Array.from({ length: n }, () => '(?, ?)').join(', ');
      const sql =
        kind === 'select'
          ? `SELECT "set", "key", "value" FROM ${t} WHERE ("set", "key") IN (VALUES ${pairs})`
          : kind === 'delete'
            ? `DELETE FROM ${t} WHERE ("set", "key") IN (VALUES ${pairs})`
            : `INSERT INTO ${t} ("id", "set", "key", "value") VALUES ${Array.from({ length: n }, () => '(?, ?, ?, ?)').join(', ')} ` +
              `ON CONFLICT ("set", "key") DO UPDATE SET "value" = excluded."value"`;
      s = this.db.prepare(sql);
      // Bounded: a request mix with many distinct batch sizes starts over rather than grow; dropped statements are
      // freed by the garbage collector (safe with the driver line drivers.ts picks for each Node).
      if (this.cache.size > 200) this.cache.clear();
      this.cache.set(k, s);
    }
    return s;
  }

  /** The rows of the pairs (given without repeats), in statements of at most MAX_PAIRS_PER_STATEMENT pairs each. */
  select(pairs: readonly ConfigQuery[]): Config[] {
    return statementChunks(pairs).flatMap(
      (chunk) => this.stmt('select', chunk.length).all(...chunk.flatMap((p) => [p.set, p.key])) as Config[],
    );
  }

  /**
   * The (set, key) rows under a prefix, ordered, at most `rows` (SqlConfigStore.selectUnder). Under a prefix: the range
   * [prefix, prefix + '0') of the (set, key) index, read in index order, less the sets between the prefix and its
   * descendants (`prefix-eu`); the table's BINARY collation is code-point order, so the range is exact.
   */
  under(prefix: string, rows: number): Array<{ set: string; key: string }> {
    const t = q(this.table);
    if (prefix === '') {
      this.underAll ??= this.db.prepare(`SELECT "set", "key" FROM ${t} WHERE "value" <> '' ORDER BY "set", "key" LIMIT ?`);
      return this.underAll.all(rows) as Array<{ set: string; key: string }>;
    }
    this.underPrefix ??= this.db.prepare(
      `SELECT "set", "key" FROM ${t} WHERE "set" >= @prefix AND "set" < @to AND ("set" = @prefix OR "set" >= @from) ` +
        `AND "value" <> '' ORDER BY "set", "key" LIMIT @rows`,
    );
    const { from, to } = descendantRange(prefix);
    return this.underPrefix.all({ prefix, to, from, rows }) as Array<{ set: string; key: string }>;
  }
  private underAll: Database.Statement | undefined;
  private underPrefix: Database.Statement | undefined;

  /** Deletes, then upserts, in one transaction (statements of at most MAX_PAIRS_PER_STATEMENT rows each). */
  write(upserts: readonly Config[], deletes: readonly ConfigQuery[]): void {
    this.db.transaction(() => {
      for (const chunk of statementChunks(deletes)) this.stmt('delete', chunk.length).run(...chunk.flatMap((p) => [p.set, p.key]));
      for (const chunk of statementChunks(upserts)) {
        this.stmt('upsert', chunk.length).run(...chunk.flatMap((c) => [configId(c.set, c.key), c.set, c.key, c.value]));
      }
    })();
  }
}

export class SqliteConfigStore extends SqlConfigStore {
  readonly type = 'sqlite';
  private db: Database.Database | undefined;
  private statements: SqliteStatements | undefined;
  private readonly database: string;
  private readonly feedIntervalMs: number;
  private readonly historyStatements: SqliteHistory;

  constructor(name: string, options: SqliteStoreOptions) {
    super(name, options.tableName ?? 'config', options.timeoutMs ?? 3000, options.history);
    this.database = options.database;
    this.historyStatements = new SqliteHistory(() => this.db!, () => this.statements!, this.table);
    this.feedIntervalMs = options.feedIntervalMs ?? DEFAULT_FEED_INTERVAL_MS.sqlite;
  }

  watch(listener: ChangeListener): ChangeFeed {
    const sink = new FeedSink(listener);
    let version: unknown;
    let connection: Database.Database | undefined;
    let dataVersion: Database.Statement | undefined; // prepared once per connection, not once per poll
    const poller = new Poller(this.feedIntervalMs, async () => {
      try {
        if (!this.db) await this.ready.ensure();
        const db = this.db!;
        if (connection !== db || !dataVersion) dataVersion = db.prepare('PRAGMA data_version').pluck();
        const now = dataVersion.get();
        const before = connection === db ? version : undefined;
        connection = db;
        version = now;
        if (before === undefined) sink.change({}); // first look (or a new connection): anything may have changed
        else if (now !== before) sink.change({});
      } catch (e) {
        version = undefined;
        sink.fail(unavailable(this.name, e));
      }
    });
    const remove = this.feeds.add((configs) => sink.change({ sets: setsOf(configs) }));
    poller.start();
    return this.openFeeds.add(async () => {
      sink.close();
      remove();
      await poller.stop();
    });
  }

  /** Not used by this kind's feed (it reads `data_version` on the store's own connection, see watch). */
  protected async openConnection(): Promise<void> {
    await this.ready.ensure();
  }

  protected async connect(): Promise<void> {
    if (!this.db) {
      if (this.database !== ':memory:' && !this.database.startsWith('file:')) {
        mkdirSync(dirname(this.database), { recursive: true });
      }
      const db = new (sqliteDriver())(this.database, { timeout: this.timeoutMs });
      try {
        if (this.database !== ':memory:') db.pragma('journal_mode = WAL');
      } catch {
        /* read-only media: keep the default journal */
      }
      this.db = db;
    }
    createSqliteTable(this.db, this.table);
    this.statements = new SqliteStatements(this.db, this.table);
  }

  protected async select(pairs: readonly ConfigQuery[]): Promise<Config[]> {
    return this.statements!.select(pairs);
  }

  protected async selectUnder(prefix: string, rows: number): Promise<ReadonlyArray<{ set: string; key: string }>> {
    return this.statements!.under(prefix, rows);
  }

  protected historyDriver(): SqlHistoryDriver {
    return this.historyStatements;
  }

  protected async writeRows(upserts: readonly Config[], deletes: readonly ConfigQuery[]): Promise<void> {
    this.statements!.write(upserts, deletes);
  }

  protected isMissingTable(err: unknown): boolean {
    return /no such table/i.test((err as Error)?.message ?? '');
  }

  protected async disconnect(): Promise<void> {
    const db = this.db;
    this.db = undefined;
    this.statements = undefined;
    db?.close();
  }
}
