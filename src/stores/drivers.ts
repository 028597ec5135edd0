/**
 * Database drivers, loaded on first use. Loading all of them costs ~165 ms (etcd3 alone ~70 ms), which every `cfgu`
 * command paid before doing anything; a store now loads only its own driver, when it is built.
 */
import { createRequire } from 'node:module';
import type PgModule from 'pg';
import type MysqlModule from 'mysql2/promise';
import type * as IoredisModule from 'ioredis';
import type * as Etcd3Module from 'etcd3';
import type SqliteConstructor from 'better-sqlite3';

const load = createRequire(import.meta.url);

function once<T>(name: string, wrap: (module: T) => T = (m) => m): () => T {
  let module: T | undefined;
  return () => (module ??= wrap(load(name) as T));
}

export const pgDriver = once<typeof PgModule>('pg');
export const mysqlDriver = once<typeof MysqlModule>('mysql2/promise');
export const redisDriver = once<typeof IoredisModule>('ioredis');
export const etcdDriver = once<typeof Etcd3Module>('etcd3');
/**
 * better-sqlite3 12 on Node 24 can abort the process when the garbage collector finalises one of its objects: the
 * native destructor of a Database or a Statement calls node::RemoveEnvironmentCleanupHook at a moment Node has no
 * current environment (`Assertion failed: (env) != nullptr`). Seen in this project's suite on Node 24.21.0, and
 * reported by others. Until the driver is replaced by version 13 on Node >= 22, none of its objects is left to the
 * garbage collector: every Database is kept for the life of the process, and every Statement it prepares for the life
 * of its Database. Bounded in cfgu: a server opens one database per SQLite store and one for backups, and prepares a
 * statement per distinct SQL text (kind and batch size), which its own cache reuses; closing a database still frees
 * SQLite's own memory.
 */
const pinnedDatabases = new Set<object>();
const pinnedStatements = new WeakMap<object, object[]>();

function pinned(Driver: typeof SqliteConstructor): typeof SqliteConstructor {
  const prepare = Driver.prototype.prepare;
  Driver.prototype.prepare = function (this: object, ...args: Parameters<typeof prepare>) {
    const statement = prepare.apply(this as never, args);
    let held = pinnedStatements.get(this);
    if (!held) pinnedStatements.set(this, (held = []));
    held.push(statement);
    return statement;
  } as typeof prepare;
  // A subclass, so that every `new` goes through here; static members are inherited.
  const Pinned = class extends (Driver as unknown as new (...args: unknown[]) => object) {
    constructor(...args: unknown[]) {
      super(...args);
      pinnedDatabases.add(this);
    }
  };
  return Pinned as unknown as typeof SqliteConstructor;
}

export const sqliteDriver = once<typeof SqliteConstructor>('better-sqlite3', pinned);
