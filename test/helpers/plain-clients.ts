/**
 * Other programs writing to a store's data: the plain clients of each kind (psql, mariadb, redis-cli, etcdctl,
 * sqlite3), as the change-feed suites use them. When a tool is missing, a separate driver connection stands in
 * (still another program's connection, not cfgu's); a suite that must use the real tool calls `requireTool` first.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { promisify } from 'node:util';
import { Etcd3 } from 'etcd3';
import { Redis } from 'ioredis';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { findBinary } from './private.js';
import { requireOrSkip } from './services.js';
import { sqliteDriver } from '../../src/stores/drivers.js';

const Database = sqliteDriver();

const run = promisify(execFile);
export const md5 = (s: string) => createHash('md5').update(s).digest('hex');
const ETCD_CACHE = join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'cfgu-test', 'etcd', 'usr', 'bin');
export const TOOLS = {
  psql: findBinary(['psql']),
  mariadb: findBinary(['mariadb', 'mysql']),
  redisCli: findBinary(['redis-cli']),
  etcdctl: process.env.CFGU_TEST_ETCDCTL ?? findBinary(['etcdctl'], [ETCD_CACHE]),
  sqlite3: findBinary(['sqlite3']),
};

/** True when the plain client is installed; otherwise skips `t` loudly (fails under CI=true). */
export function requireTool(t: TestContext, tool: keyof typeof TOOLS): boolean {
  return TOOLS[tool] !== undefined || requireOrSkip(t, `the command-line client ${tool}`, 'not found on PATH');
}

export async function psql(port: number, database: string, sql: string): Promise<void> {
  if (TOOLS.psql) {
    await run(TOOLS.psql, ['-h', '127.0.0.1', '-p', String(port), '-U', 'postgres', '-d', database, '-v', 'ON_ERROR_STOP=1', '-qAtc', sql], {
      env: { ...process.env, PGCONNECT_TIMEOUT: '10' },
    });
    return;
  }
  const c = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', database });
  await c.connect();
  try {
    await c.query(sql);
  } finally {
    await c.end();
  }
}

export async function mariadb(port: number, database: string, sql: string): Promise<void> {
  if (TOOLS.mariadb) {
    await run(TOOLS.mariadb, ['--no-defaults', '-h', '127.0.0.1', '-P', String(port), '-u', 'root', database, '-e', sql]);
    return;
  }
  const c = await mysql.createConnection({ host: '127.0.0.1', port, user: 'root', database });
  try {
    await c.query(sql);
  } finally {
    await c.end();
  }
}

export async function redisCli(port: number, ...args: string[]): Promise<void> {
  if (TOOLS.redisCli) {
    await run(TOOLS.redisCli, ['-h', '127.0.0.1', '-p', String(port), ...args]);
    return;
  }
  const c = new Redis({ host: '127.0.0.1', port, lazyConnect: true });
  await c.connect();
  try {
    await c.call(args[0]!, ...args.slice(1));
  } finally {
    c.disconnect();
  }
}

export async function etcdPut(url: string, key: string, value: string): Promise<void> {
  if (TOOLS.etcdctl) {
    await run(TOOLS.etcdctl, ['--endpoints', url, 'put', key, value], { env: { ...process.env, ETCDCTL_API: '3' } });
    return;
  }
  const c = new Etcd3({ hosts: url });
  try {
    await c.put(key).value(value);
  } finally {
    c.close();
  }
}

export function sqlite3(database: string, sql: string): Promise<unknown> {
  if (TOOLS.sqlite3) return run(TOOLS.sqlite3, [database, sql]);
  const db = new Database(database);
  try {
    db.exec(sql);
  } finally {
    db.close();
  }
  return Promise.resolve();
}

export const pgUpsert = (table: string, set: string, key: string, value: string) =>
  `INSERT INTO "${table}" ("id", "set", "key", "value") VALUES ('${md5(set + key)}', '${set}', '${key}', '${value}') ` +
  `ON CONFLICT ("set", "key") DO UPDATE SET "value" = EXCLUDED."value"`;
export const myUpsert = (table: string, set: string, key: string, value: string) =>
  `INSERT INTO \`${table}\` (\`id\`, \`set\`, \`key\`, \`value\`) VALUES ('${md5(set + key)}', '${set}', '${key}', '${value}') ` +
  `ON DUPLICATE KEY UPDATE \`value\` = VALUES(\`value\`)`;


interface Server {
  host: string;
  port: number;
  username: string;
  database: string;
}

/** Drop the tables a suite created on a (shared) PostgreSQL; nothing to do when the server is not there. */
export async function dropPostgresTables(server: Server, tables: readonly string[]): Promise<void> {
  if (!tables.length) return;
  const c = new pg.Client({ host: server.host, port: server.port, user: server.username, database: server.database });
  try {
    await c.connect();
    for (const table of tables) await c.query(`DROP TABLE IF EXISTS "${table}"`);
  } catch {
    /* the server is not there: nothing was created */
  } finally {
    await c.end().catch(() => undefined);
  }
}

/** Drop the tables a suite created on a (shared) MariaDB; nothing to do when the server is not there. */
export async function dropMariadbTables(server: Server, tables: readonly string[]): Promise<void> {
  if (!tables.length) return;
  const c = await mysql.createConnection({ host: server.host, port: server.port, user: server.username, database: server.database }).catch(() => undefined);
  if (!c) return;
  for (const table of tables) await c.query(`DROP TABLE IF EXISTS \`${table}\``).catch(() => undefined);
  await c.end();
}
