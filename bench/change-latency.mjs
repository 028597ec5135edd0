// Change-feed latency per store kind: the time from a write made by another client (its own connection, or a file
// renamed into place) to the store feed's notice, p50 / p99 over --changes writes per kind.
//
//   node --import tsx bench/change-latency.mjs [--changes 100] [--interval 250] [--only redis]
//   node --import tsx bench/change-latency.mjs --cost      # what one periodic check costs the database
//
// --interval sets `feedIntervalMs` of the kinds that poll (PostgreSQL without notify, MariaDB, Redis without keyspace
// notifications); sqlite and the json-file safety net keep their defaults. Between two writes the script waits a
// random time of up to one interval, so that writes land at every phase of a polling period.
// Redis and etcd are private servers started here (Redis twice: with and without keyspace notifications); PostgreSQL
// and MariaDB are the machine's servers (database `test`), under a table made for the run and dropped at the end.
import { randomBytes, createHash } from 'node:crypto';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { execFileSync } from 'node:child_process';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import { Etcd3 } from 'etcd3';
import { Redis } from 'ioredis';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { createStore } from '../src/stores/index.ts';
import { launchPrivate } from '../test/helpers/private.ts';

const { values: args } = parseArgs({
  options: {
    changes: { type: 'string', default: '100' },
    interval: { type: 'string', default: '250' },
    only: { type: 'string' },
    cost: { type: 'boolean', default: false },
  },
});
const CHANGES = Number(args.changes);
const INTERVAL = Number(args.interval);
const RUN = `${Date.now().toString(36)}${randomBytes(2).toString('hex')}`;
const md5 = (s) => createHash('md5').update(s).digest('hex');
const pause = (ms) => new Promise((r) => setTimeout(r, ms));

/** Measure one kind: `write(i)` makes change i by another client; the feed's first notice after it ends the sample. */
async function measure(name, store, write, { live = true, jitter = 0 } = {}) {
  let waiter;
  let errors = 0;
  const first = new Promise((r) => (waiter = r));
  const feed = store.watch({
    change: () => {
      const w = waiter;
      waiter = undefined;
      w?.(performance.now());
    },
    error: () => {
      errors++;
    },
  });
  if (live) await first; // the feed's first change({}): it is live
  const samples = [];
  for (let i = 0; i < CHANGES; i++) {
    if (jitter) await pause(Math.random() * jitter);
    waiter = undefined;
    const seen = new Promise((r) => (waiter = r));
    const t0 = performance.now();
    await write(i);
    samples.push((await seen) - t0);
  }
  await feed.close();
  samples.sort((a, b) => a - b);
  const q = (p) => samples[Math.min(samples.length - 1, Math.ceil((p / 100) * samples.length) - 1)];
  const row = { kind: name, n: samples.length, p50: q(50).toFixed(1), p99: q(99).toFixed(1), max: samples.at(-1).toFixed(1), errors };
  console.log(JSON.stringify(row));
  return row;
}

const kinds = {
  async 'json-file'() {
    const dir = mkdtempSync(join(tmpdir(), 'cfgu-feed-bench-'));
    const path = join(dir, 'c.json');
    writeFileSync(path, '[]');
    const store = createStore('json-file', { path }, 'bench');
    await store.init();
    try {
      return await measure('json-file (fs events + 1 s check)', store, async (i) => {
        writeFileSync(`${path}.tmp`, JSON.stringify([{ set: 'app', key: 'K', value: `v${i}` }]));
        renameSync(`${path}.tmp`, path);
      }, { live: false, jitter: 20 });
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  },
  async sqlite() {
    const dir = mkdtempSync(join(tmpdir(), 'cfgu-feed-bench-'));
    const database = join(dir, 'c.db');
    const store = createStore('sqlite', { database }, 'bench');
    await store.init();
    const other = new Database(database);
    const put = other.prepare(`INSERT INTO config (id, "set", key, value) VALUES (?, 'app', 'K', ?) ON CONFLICT ("set", key) DO UPDATE SET value = excluded.value`);
    try {
      return await measure('sqlite (data_version, 100 ms)', store, async (i) => void put.run(md5('appK'), `v${i}`), { jitter: 100 });
    } finally {
      other.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  },
  async postgresql() {
    const rows = [];
    for (const notify of [true, false]) {
      const tableName = `cfgu_bench_${RUN}_${notify ? 'n' : 'p'}`;
      const conf = { host: '127.0.0.1', port: 5432, username: 'postgres', database: 'test', tableName, notify, feedIntervalMs: INTERVAL };
      const store = createStore('postgresql', conf, 'bench');
      await store.init();
      const other = new pg.Client({ host: '127.0.0.1', port: 5432, user: 'postgres', database: 'test' });
      await other.connect();
      const sql = `INSERT INTO "${tableName}" (id, "set", key, value) VALUES ($1, 'app', 'K', $2) ON CONFLICT ("set", key) DO UPDATE SET value = EXCLUDED.value`;
      try {
        rows.push(
          await measure(notify ? 'postgresql notify: true (LISTEN/NOTIFY)' : `postgresql (aggregate, ${INTERVAL} ms)`, store, (i) => other.query(sql, [md5('appK'), `v${i}`]), {
            jitter: notify ? 20 : INTERVAL,
          }),
        );
      } finally {
        await store.close();
        await other.query(`DROP TABLE IF EXISTS "${tableName}"`);
        await other.end();
      }
    }
    return rows;
  },
  async mariadb() {
    const tableName = `cfgu_bench_${RUN}`;
    const store = createStore('mariadb', { host: '127.0.0.1', port: 3306, username: 'root', database: 'test', tableName, feedIntervalMs: INTERVAL }, 'bench');
    await store.init();
    const other = await mysql.createConnection({ host: '127.0.0.1', port: 3306, user: 'root', database: 'test' });
    const sql = `INSERT INTO \`${tableName}\` (id, \`set\`, \`key\`, value) VALUES (?, 'app', 'K', ?) ON DUPLICATE KEY UPDATE value = VALUES(value)`;
    try {
      return await measure(`mariadb (checksum aggregate, ${INTERVAL} ms)`, store, (i) => other.query(sql, [md5('appK'), `v${i}`]), { jitter: INTERVAL });
    } finally {
      await store.close();
      await other.query(`DROP TABLE IF EXISTS \`${tableName}\``);
      await other.end();
    }
  },
  async redis() {
    const rows = [];
    for (const keyspace of [true, false]) {
      const server = await launchPrivate('redis', keyspace ? ['--notify-keyspace-events', 'KA'] : []);
      const store = createStore('redis', { host: server.host, port: server.port, feedIntervalMs: INTERVAL }, 'bench');
      await store.init();
      await store.get([{ set: 'app', key: 'K' }]);
      const other = new Redis({ host: server.host, port: server.port });
      try {
        rows.push(
          await measure(keyspace ? 'redis (keyspace notifications)' : `redis (MGET check, ${INTERVAL} ms)`, store, (i) => other.set('app', JSON.stringify({ K: `v${i}` })), {
            jitter: keyspace ? 20 : INTERVAL,
          }),
        );
      } finally {
        other.disconnect();
        await store.close();
        await server.destroy();
      }
    }
    return rows;
  },
  async etcd() {
    const server = await launchPrivate('etcd');
    const store = createStore('etcd', { hosts: server.url }, 'bench');
    await store.init();
    await store.get([{ set: 'app', key: 'K' }]); // feeds report the keys reads have asked for
    const other = new Etcd3({ hosts: server.url });
    try {
      return await measure('etcd (watch)', store, (i) => other.put('app').value(JSON.stringify({ K: `v${i}` })), { jitter: 20 });
    } finally {
      other.close();
      await store.close();
      await server.destroy();
    }
  },
};

/**
 * --cost: the time of one periodic check (the very statement the feed runs, taken from the store through a feed)
 * on tables of 1,000 and 10,000 rows in 100 sets, median and p90 of 50 checks, and what the store's query costs
 * compared with an ordinary 10-key read.
 */
async function cost() {
  const rows = [];
  for (const size of [1000, 10000]) {
    for (const kind of ['postgresql', 'mariadb']) {
      const tableName = `cfgu_cost_${RUN}_${size}`;
      const conf =
        kind === 'postgresql'
          ? { host: '127.0.0.1', port: 5432, username: 'postgres', database: 'test', tableName, feedIntervalMs: 3_600_000 }
          : { host: '127.0.0.1', port: 3306, username: 'root', database: 'test', tableName, feedIntervalMs: 3_600_000 };
      const store = createStore(kind, conf, 'bench');
      await store.init();
      const configs = Array.from({ length: size }, (_, i) => ({ set: `s${i % 100}`, key: `K${i}`, value: `value-${i}-${'x'.repeat(40)}` }));
      for (let i = 0; i < configs.length; i += 500) await store.set(configs.slice(i, i + 500));
      // Time the feed's own check: each set() makes a polling feed look at once, and the look's end is its notice.
      const times = [];
      let done;
      const feed = store.watch({ change: () => done?.(), error: () => undefined });
      await new Promise((r) => (done = r));
      for (let i = 0; i < 50; i++) {
        const seen = new Promise((r) => (done = r));
        await store.set([{ set: 's0', key: 'K0', value: `v${i}` }]);
        const t0 = performance.now();
        await seen;
        times.push(performance.now() - t0);
      }
      await feed.close();
      const reads = [];
      for (let i = 0; i < 50; i++) {
        const t0 = performance.now();
        await store.get(Array.from({ length: 10 }, (_, k) => ({ set: 's0', key: `K${k * 100}` })));
        reads.push(performance.now() - t0);
      }
      await store.close();
      const drop = kind === 'postgresql' ? new pg.Client({ host: '127.0.0.1', port: 5432, user: 'postgres', database: 'test' }) : undefined;
      if (drop) {
        await drop.connect();
        await drop.query(`DROP TABLE IF EXISTS "${tableName}"`);
        await drop.end();
      } else {
        const c = await mysql.createConnection({ host: '127.0.0.1', port: 3306, user: 'root', database: 'test' });
        await c.query(`DROP TABLE IF EXISTS \`${tableName}\``);
        await c.end();
      }
      const med = (a) => a.sort((x, y) => x - y)[Math.floor(a.length / 2)].toFixed(2);
      const p90 = (a) => a.sort((x, y) => x - y)[Math.floor(a.length * 0.9)].toFixed(2);
      const row = { kind, rows: size, checkMedianMs: med(times), checkP90Ms: p90(times), read10Ms: med(reads) };
      console.log(JSON.stringify(row));
      rows.push(row);
    }
  }
  console.log('\n| kind | rows (100 sets) | one check, median / p90 ms | a 10-key read, median ms |\n|---|---|---|---|');
  for (const r of rows) console.log(`| ${r.kind} | ${r.rows} | ${r.checkMedianMs} / ${r.checkP90Ms} | ${r.read10Ms} |`);
}

// The feeds' timers and watchers never keep a process alive (a server has its socket for that): this script must.
setInterval(() => undefined, 1000);
const load = () => execFileSync('uptime', { encoding: 'utf8' }).trim();
console.log(`# ${new Date().toISOString()} changes=${CHANGES} interval=${INTERVAL} ms; before: ${load()}`);
if (args.cost) {
  await cost();
  console.log(`# after: ${load()}`);
  process.exit(0);
}
const table = [];
for (const [name, fn] of Object.entries(kinds)) {
  if (args.only && !name.includes(args.only)) continue;
  const r = await fn();
  table.push(...(Array.isArray(r) ? r : [r]));
  console.log(`# after ${name}: ${load()}`);
}
console.log('\n| kind | changes | p50 ms | p99 ms | max ms |\n|---|---|---|---|---|');
for (const r of table) console.log(`| ${r.kind} | ${r.n} | ${r.p50} | ${r.p99} | ${r.max} |`);
process.exit(0);
