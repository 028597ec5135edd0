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

/** `open` runs on the first call only; later calls return what it gave. */
function once<T>(open: () => T): () => T {
  let module: T | undefined;
  return () => (module ??= open());
}

export const pgDriver = once(() => load('pg') as typeof PgModule);
export const mysqlDriver = once(() => load('mysql2/promise') as typeof MysqlModule);
export const redisDriver = once(() => load('ioredis') as typeof IoredisModule);
export const etcdDriver = once(() => load('etcd3') as typeof Etcd3Module);
/**
 * The SQLite driver: better-sqlite3, one release line per Node major. Version 12 (a V8-API addon, compiled at install)
 * is the only line that works on Node 20; on Node 24 its native destructors can abort the whole process when the
 * garbage collector finalises a Database or a Statement (`Assertion failed: (env) != nullptr` in
 * node::RemoveEnvironmentCleanupHook; seen in this project's suite, and reproduced in a few lines that prepare
 * statements and drop them). Version 13 is a Node-API addon with prebuilt binaries and declares Node >= 22; on Node 20
 * it crashes. package.json therefore installs 12 as `better-sqlite3` and 13 under the alias `better-sqlite3-node22`
 * (an optional dependency, like the isolated-vm lines), and the loader takes the line that matches the running Node.
 * On Node >= 22 without the alias installed it refuses, rather than fall back to the line that can crash.
 */
export const SQLITE_BUILDS: ReadonlyArray<{ alias: string; minNodeMajor: number; maxNodeMajor: number }> = [
  { alias: 'better-sqlite3-node22', minNodeMajor: 22, maxNodeMajor: Infinity },
  { alias: 'better-sqlite3', minNodeMajor: 0, maxNodeMajor: 21 },
];

/** The package name of the SQLite driver line for this Node (whether or not it is installed). */
export function sqliteBuildName(): string {
  const major = Number(process.versions.node.split('.')[0]);
  return SQLITE_BUILDS.find((b) => major >= b.minNodeMajor && major <= b.maxNodeMajor)!.alias;
}

/** "better-sqlite3 13.2.0 (better-sqlite3-node22)", for the start-up log; names what is missing when it is. */
export function describeSqliteBuild(): string {
  const alias = sqliteBuildName();
  try {
    return `better-sqlite3 ${(load(`${alias}/package.json`) as { version: string }).version} (${alias})`;
  } catch {
    return `unavailable (${alias} is not installed: run npm ci on this Node)`;
  }
}

export const sqliteDriver = once((): typeof SqliteConstructor => {
  const alias = sqliteBuildName();
  try {
    return load(alias) as typeof SqliteConstructor;
  } catch (error) {
    const code = (error as { code?: string }).code;
    throw new Error(
      code === 'MODULE_NOT_FOUND'
        ? `the SQLite driver for Node ${process.versions.node} (${alias}) is not installed: run npm ci on this Node`
        : `the SQLite driver ${alias} does not load on Node ${process.versions.node}: ${(error as Error).message.split('\n')[0]}`,
    );
  }
});
