/**
 * The backup database (SQLite, better-sqlite3). For a store declared with `backup: true`, every answer the store
 * gives is copied here, off the request's critical path (queued, flushed in one transaction on `setImmediate`), and
 * when the store cannot be reached its reads are answered from here instead.
 *
 * Layout: one table per backed-up store, named after the store, in the same Cfgu v1 layout as the `sqlite` store
 * (`id`, `set`, `key`, `value`), so a backup can be opened as a `sqlite` store with `tableName` = the store name.
 * A query the store answered without a value removes the (set, key) from the backup, so the backup never answers
 * with a value the store no longer has.
 */
import type Database from 'better-sqlite3';
import { sqliteDriver } from './drivers.js';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { pairKey } from './common.js';
import { createSqliteTable, SqliteStatements } from './sqlite.js';
import type { Config, ConfigQuery } from '../core/ports.js';

interface Pending {
  store: string;
  upserts: Config[];
  deletes: ConfigQuery[];
}

export class BackupDatabase {
  private db: Database.Database | undefined;
  private readonly tables = new Map<string, SqliteStatements>();
  private queue: Pending[] = [];
  private scheduled: NodeJS.Immediate | undefined;
  private broken: string | undefined;

  constructor(
    readonly path: string,
    private readonly onError: (message: string) => void = () => undefined,
  ) {}

  /** Why the backup is disabled (it could not be opened or written), if it is. */
  get problem(): string | undefined {
    return this.broken;
  }

  private open(): Database.Database {
    if (!this.db) {
      if (this.path !== ':memory:') mkdirSync(dirname(this.path), { recursive: true });
      const db = new (sqliteDriver())(this.path, { timeout: 2000 });
      try {
        if (this.path !== ':memory:') db.pragma('journal_mode = WAL');
      } catch {
        /* keep the default journal */
      }
      this.db = db;
    }
    return this.db;
  }

  private statements(store: string, create: boolean): SqliteStatements | undefined {
    let s = this.tables.get(store);
    if (s) return s;
    const db = this.open();
    if (!create) {
      const exists = db.prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?`).get(store);
      if (!exists) return undefined;
    } else {
      createSqliteTable(db, store);
    }
    s = new SqliteStatements(db, store);
    this.tables.set(store, s);
    return s;
  }

  /** Record what a store answered for a batch (values kept, missing ones removed). Never throws. */
  recordRead(store: string, queries: readonly ConfigQuery[], answer: readonly Config[]): void {
    const have = new Set(answer.map((c) => pairKey(c.set, c.key)));
    const deletes = queries.filter((q) => !have.has(pairKey(q.set, q.key)));
    this.enqueue({ store, upserts: [...answer], deletes });
  }

  /** Record a successful write ("" values remove). Never throws. */
  recordWrite(store: string, configs: readonly Config[]): void {
    const upserts = configs.filter((c) => c.value !== '');
    const deletes = configs.filter((c) => c.value === '');
    this.enqueue({ store, upserts, deletes });
  }

  private enqueue(p: Pending): void {
    if (this.broken || (!p.upserts.length && !p.deletes.length)) return;
    this.queue.push(p);
    if (!this.scheduled) {
      this.scheduled = setImmediate(() => {
        this.scheduled = undefined;
        this.flush();
      });
      this.scheduled.unref?.();
    }
  }

  /** Write everything queued, in one transaction. Never throws. */
  flush(): void {
    if (this.scheduled) {
      clearImmediate(this.scheduled);
      this.scheduled = undefined;
    }
    const queue = this.queue;
    this.queue = [];
    if (!queue.length || this.broken) return;
    try {
      const db = this.open();
      db.transaction(() => {
        for (const p of queue) {
          const s = this.statements(p.store, true)!;
          // Upserts and deletes of one entry are disjoint; apply in order of arrival across entries.
          const upKeys = new Set(p.upserts.map((c) => pairKey(c.set, c.key)));
          const deletes = dedupe(p.deletes.filter((q) => !upKeys.has(pairKey(q.set, q.key))));
          s.write(lastWins(p.upserts), deletes);
        }
      })();
    } catch (e) {
      this.broken = `backup database cannot be written: ${(e as Error)?.message ?? String(e)}`;
      this.onError(this.broken);
    }
  }

  /** Answer a batch from the backup; undefined when the backup holds nothing for this store. Throws on I/O errors. */
  read(store: string, queries: readonly ConfigQuery[]): Config[] | undefined {
    this.flush();
    if (this.broken) return undefined;
    const s = this.statements(store, false);
    if (!s) return undefined;
    const out = s.select(dedupe(queries));
    const wanted = new Set(queries.map((q) => pairKey(q.set, q.key)));
    return out.filter((c) => wanted.has(pairKey(c.set, c.key)) && c.value !== '');
  }

  close(): void {
    this.flush();
    this.tables.clear();
    const db = this.db;
    this.db = undefined;
    try {
      db?.close();
    } catch {
      /* already closed */
    }
  }
}

function dedupe(queries: readonly ConfigQuery[]): ConfigQuery[] {
  const m = new Map<string, ConfigQuery>();
  for (const q of queries) m.set(pairKey(q.set, q.key), { set: q.set, key: q.key });
  return [...m.values()];
}

function lastWins(configs: readonly Config[]): Config[] {
  const m = new Map<string, Config>();
  for (const c of configs) m.set(pairKey(c.set, c.key), c);
  return [...m.values()];
}
