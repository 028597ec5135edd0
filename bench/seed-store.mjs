// A store of a chosen kind holding given configs, for the write benchmarks: json-file (a file in the fixture's folder),
// sqlite (a database file there) or postgresql (a table `bench_<tag>_<pid>_<n>` in the PostgreSQL at 127.0.0.1:5432,
// user postgres, database test). Each is filled in Configu's layout directly (not through cfgu), and `dropSeeded()`
// removes the PostgreSQL tables made (with the history tables cfgu adds beside them).
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

const require = createRequire(import.meta.url);
export const KINDS = ['json-file', 'sqlite', 'postgresql'];
const PG = { host: '127.0.0.1', port: 5432, user: 'postgres', database: 'test' };
const tables = [];

const row = (c) => [createHash('md5').update(c.set + c.key).digest('hex'), c.set, c.key, c.value];

/** The `.configu` store definition (with `default: true`) of a store of `kind` holding `configs`. */
export async function seedStore(kind, dir, name, configs) {
  if (kind === 'json-file') {
    writeFileSync(join(dir, `${name}.json`), JSON.stringify(configs));
    return { type: 'json-file', configuration: { path: `./${name}.json` }, default: true };
  }
  if (kind === 'sqlite') {
    const Database = require('better-sqlite3');
    const file = join(dir, `${name}.db`);
    const db = new Database(file);
    db.exec('DROP TABLE IF EXISTS config; DROP TABLE IF EXISTS config_revisions; DROP TABLE IF EXISTS config_history');
    db.exec('CREATE TABLE config ("id" varchar(32) PRIMARY KEY NOT NULL, "set" text NOT NULL, "key" text NOT NULL, "value" text NOT NULL)');
    const insert = db.prepare('INSERT INTO config VALUES (?, ?, ?, ?)');
    db.transaction(() => configs.forEach((c) => insert.run(...row(c))))();
    db.close();
    return { type: 'sqlite', configuration: { database: file, tableName: 'config' }, default: true };
  }
  if (kind !== 'postgresql') throw new Error(`unknown kind ${kind} (${KINDS.join(', ')})`);
  const pg = require('pg');
  const table = `bench_${name.replace(/[^a-z0-9]/gi, '_')}_${process.pid}_${tables.length}`;
  tables.push(table);
  const c = new pg.Client(PG);
  await c.connect();
  try {
    await c.query(`CREATE TABLE "${table}" ("id" varchar(32) NOT NULL PRIMARY KEY, "set" text NOT NULL, "key" text NOT NULL, "value" text NOT NULL)`);
    for (let i = 0; i < configs.length; i += 500) {
      const part = configs.slice(i, i + 500);
      await c.query(`INSERT INTO "${table}" VALUES ${part.map((_, j) => `($${j * 4 + 1}, $${j * 4 + 2}, $${j * 4 + 3}, $${j * 4 + 4})`).join(', ')}`, part.flatMap(row));
    }
  } finally {
    await c.end();
  }
  return { type: 'postgresql', configuration: { host: PG.host, port: PG.port, username: PG.user, database: PG.database, tableName: table }, default: true };
}

/** Drop the PostgreSQL tables made by seedStore, with cfgu's history tables beside them. */
export async function dropSeeded() {
  if (!tables.length) return;
  const pg = require('pg');
  const c = new pg.Client(PG);
  await c.connect();
  try {
    for (const t of tables.splice(0)) for (const name of [t, `${t}_revisions`, `${t}_history`]) await c.query(`DROP TABLE IF EXISTS "${name}"`);
  } finally {
    await c.end();
  }
}
