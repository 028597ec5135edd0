/**
 * Writes per second per store kind: one writer, writes of 3 keys to a set of 20, each with its expected revision
 * (RevisionedStore.write), with history on (the default retention) and off (`history: false`: revisions only), and
 * plain set() of the same 3 keys for comparison (no revision, no history). Sequential writes: the figure is the
 * inverse of one write's latency, the atomic step included (a transaction, WATCH/MULTI/EXEC, an etcd transaction, the
 * file lock and two fsynced renames).
 *
 *   node --import tsx bench/writes.ts [--writes 300] [--only sqlite,postgresql]
 *
 * Uses the machine's PostgreSQL (127.0.0.1:5432, user postgres, database test), MariaDB (127.0.0.1:3306, root, test)
 * and Redis (127.0.0.1:6379) under names of its own, removed afterwards, and a private etcd (test/helpers/private.ts).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { Redis } from 'ioredis';
import { createStore } from '../src/stores/index.js';
import { isRevisioned, type RevisionedStore } from '../src/core/ports.js';
import { sharedPrivate } from '../test/helpers/private.js';

const { values: args } = parseArgs({ options: { writes: { type: 'string', default: '300' }, only: { type: 'string' } } });
const WRITES = Number(args.writes);
const only = args.only?.split(',');
const run = `b${Date.now().toString(36)}`;
const dir = mkdtempSync(join(tmpdir(), 'cfgu-writes-'));

const kinds: Array<[string, () => Promise<Record<string, unknown>>]> = [
  ['in-memory', async () => ({})],
  ['json-file', async () => ({ path: join(dir, `${run}.json`) })],
  ['sqlite', async () => ({ database: join(dir, `${run}.db`), tableName: run })],
  ['postgresql', async () => ({ host: '127.0.0.1', port: 5432, username: 'postgres', database: 'test', tableName: `cfgu_${run}` })],
  ['mariadb', async () => ({ host: '127.0.0.1', port: 3306, username: 'root', database: 'test', tableName: `cfgu_${run}` })],
  ['redis', async () => ({ host: '127.0.0.1', port: 6379 })],
  ['etcd', async () => ({ hosts: (await sharedPrivate('etcd')).url })],
];

async function measure(store: RevisionedStore, set: string, mode: 'history' | 'revisions' | 'set()'): Promise<number> {
  await store.set(Array.from({ length: 20 }, (_, i) => ({ set, key: `K${i}`, value: `initial-${i}` })));
  let revision = (await store.revision(set)).revision;
  const started = process.hrtime.bigint();
  for (let i = 0; i < WRITES; i++) {
    const changes = [0, 1, 2].map((k) => ({ key: `K${(i + k) % 20}`, value: `${mode}-${i}-${k}` }));
    if (mode === 'set()') await store.set(changes.map((c) => ({ set, ...c })));
    else revision = (await store.write(set, changes, { expectedRevision: revision, subject: 'bench', requestId: `r${i}` })).revision;
  }
  return WRITES / (Number(process.hrtime.bigint() - started) / 1e9);
}

async function cleanup(): Promise<void> {
  const tables = [`cfgu_${run}`, `cfgu_${run}_revisions`, `cfgu_${run}_history`];
  if (!only || only.includes('postgresql')) {
    const c = new pg.Client({ host: '127.0.0.1', port: 5432, user: 'postgres', database: 'test' });
    await c.connect();
    for (const t of tables) await c.query(`DROP TABLE IF EXISTS "${t}"`);
    await c.end();
  }
  if (!only || only.includes('mariadb')) {
    const c = await mysql.createConnection({ host: '127.0.0.1', port: 3306, user: 'root', database: 'test' });
    for (const t of tables) await c.query(`DROP TABLE IF EXISTS \`${t}\``);
    await c.end();
  }
  if (!only || only.includes('redis')) {
    const r = new Redis({ host: '127.0.0.1', port: 6379 });
    const keys = await r.keys(`*${run}*`);
    if (keys.length) await r.del(...keys);
    r.disconnect();
  }
  rmSync(dir, { recursive: true, force: true });
}

const rows: string[] = [];
try {
  for (const [kind, configure] of kinds) {
    if (only && !only.includes(kind)) continue;
    const base = await configure();
    const figures: string[] = [];
    for (const mode of ['history', 'revisions', 'set()'] as const) {
      const configuration = kind === 'in-memory' ? {} : { ...base, ...(mode === 'revisions' ? { history: false } : {}) };
      const store = createStore(kind, configuration, `${kind}-bench`);
      if (!isRevisioned(store)) throw new Error(`${kind} keeps no revisions`);
      await store.init();
      // in-memory takes no settings: its "revisions" row is measured with history on as well.
      figures.push((await measure(store, `${run}/${mode.replace(/\W/g, '')}`, mode)).toFixed(0));
      await store.close();
    }
    rows.push(`| ${kind} | ${figures.join(' | ')} |`);
    process.stderr.write(`${kind}: ${figures.join(', ')}\n`);
  }
} finally {
  await cleanup();
}
console.log(`Writes per second, one writer, ${WRITES} writes of 3 keys to a set of 20:\n`);
console.log('| kind | write(), history on | write(), history off | set() |');
console.log('|---|---|---|---|');
for (const r of rows) console.log(r);
process.exit(0);
