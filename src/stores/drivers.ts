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

function once<T>(name: string): () => T {
  let module: T | undefined;
  return () => (module ??= load(name) as T);
}

export const pgDriver = once<typeof PgModule>('pg');
export const mysqlDriver = once<typeof MysqlModule>('mysql2/promise');
export const redisDriver = once<typeof IoredisModule>('ioredis');
export const etcdDriver = once<typeof Etcd3Module>('etcd3');
export const sqliteDriver = once<typeof SqliteConstructor>('better-sqlite3');
