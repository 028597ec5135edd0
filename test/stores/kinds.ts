/**
 * Every store kind for the shared contract suite, against the real servers, with "raw" access that reads and writes
 * the data layout directly (plain SQL, raw Redis commands, plain etcd puts, the JSON file itself) the way the
 * existing ecosystem's stores do. Each run uses unique table names / set and key prefixes so suites never collide, and
 * removes what it wrote. PostgreSQL, MariaDB and Redis are the machine's shared servers, only read and written under
 * those names; etcd is a private server started for the test process (its whole key space is read).
 */
import { Etcd3 } from 'etcd3';
import { Redis } from 'ioredis';
import mysql from 'mysql2/promise';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { createStore } from '../../src/stores/index.js';
import type { Config, ConfigStore } from '../../src/core/ports.js';
import { privateMissing, sharedPrivate } from '../helpers/private.js';
import { probeTcp, type Probe } from '../helpers/services.js';
import { sqliteDriver } from '../../src/stores/drivers.js';

const Database = sqliteDriver();

export const RUN = `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
export const TMP = join(dirname(fileURLToPath(import.meta.url)), '..', '.tmp', `stores-${RUN}`);
mkdirSync(TMP, { recursive: true });
process.on('exit', () => rmSync(TMP, { recursive: true, force: true }));

export const md5 = (s: string) => createHash('md5').update(s).digest('hex');

export const PG = { host: '127.0.0.1', port: 5432, username: 'postgres', database: 'test' };
export const MY = { host: '127.0.0.1', port: 3306, username: 'root', database: 'test' };
/** etcd: a private server for this test process (test/helpers/private.ts), started on first use. */
export const etcdHost = async (): Promise<string> => (await sharedPrivate('etcd')).url;

export interface Kind {
  name: string;
  /** Service needed (undefined: none). */
  service?: { name: string; probe: Probe };
  /** Persistent: a second store instance over the same data sees it. */
  persistent: boolean;
  /** A fresh, empty store configuration for one test (unique table/file/prefix). */
  fresh(tag: string): Promise<{ configuration: Record<string, unknown>; raw: Raw; cleanup(): Promise<void> }>;
}

/** Direct access to the layout, bypassing cfgu. */
export interface Raw {
  /** Write configs in the layout the existing stores use (before cfgu has touched the data). */
  write(configs: Config[]): Promise<void>;
  /** Everything in the layout, as `{set,key,value}` (order-free). For SQL also checks `id`. */
  read(): Promise<Config[]>;
}

export function makeStore(type: string, configuration: Record<string, unknown>, name = `${type}-test`): ConfigStore {
  return createStore(type, configuration, name);
}

/**
 * Drop the history tables a SQL kind made next to `tableName` (a kind's cleanup drops the config table only; sqlite's
 * go with its file).
 */
export async function dropHistoryTables(kind: string, tableName: string): Promise<void> {
  const names = [`${tableName}_revisions`, `${tableName}_history`];
  if (kind === 'postgresql') {
    const c = new pg.Client({ host: PG.host, port: PG.port, user: PG.username, database: PG.database });
    await c.connect();
    for (const n of names) await c.query(`DROP TABLE IF EXISTS "${n}"`);
    await c.end();
  } else if (kind === 'mariadb') {
    const c = await mysql.createConnection({ host: MY.host, port: MY.port, user: MY.username, database: MY.database });
    for (const n of names) await c.query(`DROP TABLE IF EXISTS \`${n}\``);
    await c.end();
  }
}

const pgProbe: Probe = async () => {
  const c = new pg.Client({ host: PG.host, port: PG.port, user: PG.username, database: PG.database, connectionTimeoutMillis: 2000 });
  await c.connect();
  await c.end();
};
const myProbe: Probe = async () => {
  const c = await mysql.createConnection({ host: MY.host, port: MY.port, user: MY.username, database: MY.database, connectTimeout: 2000 });
  await c.end();
};

const sqlRows = (rows: Array<{ id: string; set: string; key: string; value: string }>): Config[] =>
  rows.map((r) => {
    if (r.id !== md5(r.set + r.key)) throw new Error(`row ${r.set}/${r.key} has id ${r.id}, expected md5(set+key)`);
    return { set: r.set, key: r.key, value: r.value };
  });

export const KINDS: Kind[] = [
  {
    name: 'in-memory',
    persistent: false,
    async fresh() {
      return {
        configuration: {},
        raw: {
          write: async () => {
            throw new Error('no layout');
          },
          read: async () => [],
        },
        cleanup: async () => undefined,
      };
    },
  },
  {
    name: 'json-file',
    persistent: true,
    async fresh(tag) {
      const path = join(TMP, `${tag}.json`);
      return {
        configuration: { path },
        raw: {
          async write(configs) {
            writeFileSync(path, JSON.stringify(configs, null, 2));
          },
          async read() {
            try {
              return JSON.parse(readFileSync(path, 'utf8')) as Config[];
            } catch {
              return [];
            }
          },
        },
        cleanup: async () => rmSync(path, { force: true }),
      };
    },
  },
  {
    name: 'sqlite',
    persistent: true,
    async fresh(tag) {
      const database = join(TMP, `${tag}.db`);
      const tableName = `t_${tag}`.replace(/[^A-Za-z0-9_]/g, '_');
      const open = () => new Database(database);
      return {
        configuration: { database, tableName },
        raw: {
          async write(configs) {
            const db = open();
            db.exec(
              `CREATE TABLE IF NOT EXISTS "${tableName}" ("id" varchar(32) PRIMARY KEY NOT NULL, "set" text NOT NULL, "key" text NOT NULL, "value" text NOT NULL)`,
            );
            db.exec(`CREATE UNIQUE INDEX IF NOT EXISTS "set_key_${tableName}" ON "${tableName}" ("set", "key")`);
            const ins = db.prepare(`INSERT INTO "${tableName}" ("id", "set", "key", "value") VALUES (?, ?, ?, ?)`);
            for (const c of configs) ins.run(md5(c.set + c.key), c.set, c.key, c.value);
            db.close();
          },
          async read() {
            const db = open();
            try {
              return sqlRows(db.prepare(`SELECT "id", "set", "key", "value" FROM "${tableName}"`).all() as never);
            } finally {
              db.close();
            }
          },
        },
        cleanup: async () => {
          rmSync(database, { force: true });
          rmSync(`${database}-wal`, { force: true });
          rmSync(`${database}-shm`, { force: true });
        },
      };
    },
  },
  {
    name: 'postgresql',
    service: { name: 'postgresql', probe: pgProbe },
    persistent: true,
    async fresh(tag) {
      const tableName = `cfgu_${RUN}_${tag}`.replace(/[^A-Za-z0-9_]/g, '_').slice(0, 60);
      const client = async () => {
        const c = new pg.Client({ host: PG.host, port: PG.port, user: PG.username, database: PG.database });
        await c.connect();
        return c;
      };
      return {
        configuration: { ...PG, tableName, timeout: 2000 },
        raw: {
          async write(configs) {
            const c = await client();
            try {
              await c.query(
                `CREATE TABLE IF NOT EXISTS "${tableName}" ("id" character varying(32) NOT NULL, "set" text NOT NULL, "key" text NOT NULL, "value" text NOT NULL, CONSTRAINT "PK_${tableName}" PRIMARY KEY ("id"))`,
              );
              await c.query(`CREATE UNIQUE INDEX IF NOT EXISTS "set_key_${tableName}" ON "${tableName}" ("set", "key")`);
              for (const x of configs) {
                await c.query(`INSERT INTO "${tableName}" ("id", "set", "key", "value") VALUES ($1, $2, $3, $4)`, [
                  md5(x.set + x.key),
                  x.set,
                  x.key,
                  x.value,
                ]);
              }
            } finally {
              await c.end();
            }
          },
          async read() {
            const c = await client();
            try {
              return sqlRows((await c.query(`SELECT "id", "set", "key", "value" FROM "${tableName}"`)).rows);
            } finally {
              await c.end();
            }
          },
        },
        async cleanup() {
          const c = await client();
          await c.query(`DROP TABLE IF EXISTS "${tableName}"`);
          await c.end();
        },
      };
    },
  },
  {
    name: 'mariadb',
    service: { name: 'mariadb', probe: myProbe },
    persistent: true,
    async fresh(tag) {
      const tableName = `cfgu_${RUN}_${tag}`.replace(/[^A-Za-z0-9_]/g, '_').slice(0, 60);
      const conn = () => mysql.createConnection({ host: MY.host, port: MY.port, user: MY.username, database: MY.database });
      return {
        configuration: { ...MY, tableName, timeout: 2000 },
        raw: {
          async write(configs) {
            const c = await conn();
            try {
              await c.query(
                `CREATE TABLE IF NOT EXISTS \`${tableName}\` (\`id\` varchar(32) NOT NULL PRIMARY KEY, \`set\` text NOT NULL, \`key\` text NOT NULL, \`value\` text NOT NULL, UNIQUE KEY \`set_key_${tableName}\` (\`set\`, \`key\`)) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
              );
              for (const x of configs) {
                await c.query(`INSERT INTO \`${tableName}\` (\`id\`, \`set\`, \`key\`, \`value\`) VALUES (?, ?, ?, ?)`, [
                  md5(x.set + x.key),
                  x.set,
                  x.key,
                  x.value,
                ]);
              }
            } finally {
              await c.end();
            }
          },
          async read() {
            const c = await conn();
            try {
              const [rows] = await c.query(`SELECT \`id\`, \`set\`, \`key\`, \`value\` FROM \`${tableName}\``);
              return sqlRows(rows as never);
            } finally {
              await c.end();
            }
          },
        },
        async cleanup() {
          const c = await conn();
          await c.query(`DROP TABLE IF EXISTS \`${tableName}\``);
          await c.end();
        },
      };
    },
  },
  {
    name: 'redis',
    service: { name: 'redis', probe: probeTcp(6379) },
    persistent: true,
    async fresh(tag) {
      // Redis keys are the set names and the root key names: tests use prefixed names (see `names`).
      const touched = new Set<string>();
      const client = () => new Redis({ host: '127.0.0.1', port: 6379, lazyConnect: false, maxRetriesPerRequest: 1 });
      return {
        configuration: { host: '127.0.0.1', port: 6379, timeout: 1500 },
        raw: {
          async write(configs) {
            const r = client();
            try {
              const sets = new Map<string, Record<string, string>>();
              for (const c of configs) {
                if (c.set === '') {
                  touched.add(c.key);
                  await r.call('SET', c.key, c.value);
                } else {
                  const o = sets.get(c.set) ?? {};
                  o[c.key] = c.value;
                  sets.set(c.set, o);
                }
              }
              for (const [s, o] of sets) {
                touched.add(s);
                await r.call('SET', s, JSON.stringify(o));
              }
            } finally {
              r.disconnect();
            }
          },
          async read() {
            const r = client();
            try {
              const keys = (await r.call('KEYS', `*${tag}*`)) as string[];
              const out: Config[] = [];
              for (const k of keys) {
                touched.add(k);
                const v = (await r.call('GET', k)) as string;
                if (v.startsWith('{')) {
                  for (const [key, value] of Object.entries(JSON.parse(v) as Record<string, string>)) out.push({ set: k, key, value });
                } else out.push({ set: '', key: k, value: v });
              }
              return out;
            } finally {
              r.disconnect();
            }
          },
        },
        async cleanup() {
          const r = client();
          try {
            const keys = (await r.call('KEYS', `*${tag}*`)) as string[];
            if (keys.length) await r.call('DEL', ...keys);
          } finally {
            r.disconnect();
          }
        },
      };
    },
  },
  {
    name: 'etcd',
    service: {
      name: 'etcd',
      probe: async () => {
        const missing = privateMissing('etcd');
        if (missing) throw new Error(missing);
        const res = await fetch(`${await etcdHost()}/health`, { signal: AbortSignal.timeout(10_000) });
        if (!res.ok) throw new Error(`etcd /health answered ${res.status}`);
      },
    },
    persistent: true,
    async fresh(tag) {
      const hosts = await etcdHost();
      const client = () => new Etcd3({ hosts });
      return {
        configuration: { hosts, timeout: 2000 },
        raw: {
          async write(configs) {
            const e = client();
            try {
              const sets = new Map<string, Record<string, string>>();
              for (const c of configs) {
                if (c.set === '') await e.put(c.key).value(c.value);
                else {
                  const o = sets.get(c.set) ?? {};
                  o[c.key] = c.value;
                  sets.set(c.set, o);
                }
              }
              for (const [s, o] of sets) await e.put(s).value(JSON.stringify(o));
            } finally {
              e.close();
            }
          },
          async read() {
            const e = client();
            try {
              const all = await e.getAll().strings();
              const out: Config[] = [];
              for (const [k, v] of Object.entries(all)) {
                if (!k.includes(tag)) continue;
                if (v.startsWith('{')) {
                  for (const [key, value] of Object.entries(JSON.parse(v) as Record<string, string>)) out.push({ set: k, key, value });
                } else out.push({ set: '', key: k, value: v });
              }
              return out;
            } finally {
              e.close();
            }
          },
        },
        async cleanup() {
          const e = client();
          try {
            const keys = await e.getAll().keys();
            for (const k of keys.filter((k) => k.includes(tag))) await e.delete().key(k);
          } finally {
            e.close();
          }
        },
      };
    },
  },
];
