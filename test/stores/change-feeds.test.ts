/**
 * Change feeds (ConfigStore.watch) of every store kind, against real servers: a change written by another program
 * (psql, mariadb, redis-cli, etcdctl, sqlite3, a file renamed into place; a separate driver connection when the tool
 * is missing) reaches the listener with the sets it touched; a change elsewhere (another table, another file, a key
 * the store never read) does not; a server stopped and restarted during a watch gives error() then change({}); two
 * store objects on the same server (two "replicas") both hear a third program's write.
 *
 * "Does not" is checked without a clock: the unrelated change is made first, the related one second, and the first
 * notice after the unrelated change must be the related one (the feeds report in order).
 *
 * Servers that are stopped are PRIVATE instances (test/helpers/private.ts); the shared PostgreSQL and MariaDB are only
 * written under tables this file creates and drops.
 */
import assert from 'node:assert/strict';
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { join } from 'node:path';
import { after, describe, test, type TestContext } from 'node:test';
import { createStoreRegistry } from '../../src/stores/registry.js';
import { createStore } from '../../src/stores/index.js';
import { mysqlFeedChecks } from '../../src/stores/mysql.js';
import { postgresFeedChecks } from '../../src/stores/postgresql.js';
import { digestRows } from '../../src/stores/sql.js';
import type { ChangeFeed, ChangeListener, ChangeNotice, ConfigStore, RevisionedStore } from '../../src/core/ports.js';
import { dropMariadbTables, dropPostgresTables, etcdPut, mariadb, md5, myUpsert, pgUpsert, psql, redisCli, sqlite3 } from '../helpers/plain-clients.js';
import { startPrivate, type PrivateServer } from '../helpers/private.js';
import { probeTcp, requireService } from '../helpers/services.js';
import { waitFor } from '../helpers/wait.js';
import { MY, PG, RUN, TMP } from './kinds.js';

// ------------------------------------------------------------------------------------------------ recording

type Event = { change: ChangeNotice } | { error: string };

class Recorder implements ChangeListener {
  readonly events: Event[] = [];
  change(notice: ChangeNotice): void {
    this.events.push({ change: notice });
  }
  error(error: Error): void {
    assert.ok(error instanceof Error);
    this.events.push({ error: error.message });
  }
  /** Index of the first event at or after `from` matching `test`, once there is one. */
  next(what: string, test: (e: Event) => boolean, from = 0): Promise<number> {
    return waitFor(what, () => {
      const i = this.events.findIndex((e, j) => j >= from && test(e));
      return i >= 0 ? i : undefined;
    });
  }
  /** The first change notice at or after `from`. */
  async nextChange(what: string, from = 0): Promise<{ index: number; notice: ChangeNotice }> {
    const index = await this.next(what, (e) => 'change' in e, from);
    return { index, notice: (this.events[index] as { change: ChangeNotice }).change };
  }
}


const isError = (e: Event) => 'error' in e;
const sorted = (n: ChangeNotice) => (n.sets ? [...n.sets].sort() : undefined);

/** Start watching and wait until the feed is live (its first `change({})`, for kinds that start asynchronously). */
async function watching(t: TestContext, store: ConfigStore, live = true): Promise<{ rec: Recorder; feed: ChangeFeed }> {
  const rec = new Recorder();
  const feed = store.watch!(rec);
  t.after(() => feed.close());
  if (live) {
    const { notice } = await rec.nextChange(`${store.type} feed is live`);
    assert.deepEqual(notice, {});
  }
  return { rec, feed };
}

/** A store built and connected, closed after the test. */
async function open(t: TestContext, type: string, configuration: Record<string, unknown>, name = `${type}-feed`): Promise<ConfigStore> {
  const store = createStore(type, configuration, name);
  t.after(() => store.close());
  await store.init();
  return store;
}

/** Two store objects ("replicas") on the same data, each watching, both live. */
async function replicas(t: TestContext, type: string, configuration: Record<string, unknown>) {
  const one = await open(t, type, configuration, `${type}-one`);
  const two = await open(t, type, configuration, `${type}-two`);
  const recs = [(await watching(t, one)).rec, (await watching(t, two)).rec];
  return { one, two, recs };
}

/** Make the writes; each recorder's first notice after them must be the first event since, with these sets. */
async function firstNotice(recs: Recorder[], what: string, writes: () => Promise<unknown>, sets: string[]): Promise<void> {
  const marks = recs.map((r) => r.events.length);
  await writes();
  for (const [i, rec] of recs.entries()) {
    const seen = await rec.nextChange(what, marks[i]);
    assert.equal(seen.index, marks[i], `${what}: no notice before it`);
    assert.deepEqual(sorted(seen.notice), [...sets].sort(), what);
  }
}

/**
 * A key-value kind whose feed follows only the keys its store object asked for (Redis with keyspace notifications,
 * etcd): the store's own writes (a revisioned write, a plain batch) of sets it never read reach its feed too, and
 * nothing comes before them.
 */
async function ownWritesReported(store: ConfigStore, rec: Recorder): Promise<void> {
  const revisioned = store as ConfigStore & RevisionedStore;
  await firstNotice([rec], 'its own revisioned write of a set it never read', () => revisioned.write('own/written', [{ key: 'K', value: 'v' }]), ['own/written']);
  await firstNotice([rec], 'its own batch of a set it never read', () => store.set([{ set: 'own/batch', key: 'K', value: 'v' }]), ['own/batch']);
}

/**
 * The table dropped under a live feed: error(); a second feed opened after the drop also reports error() (a feed
 * never creates the table; before, the next check re-created it) and the table is still absent; once another store
 * object's init creates it again, the first feed sends change({}) and hears a plain client's write with its set.
 */
async function droppedUnderFeed(
  t: TestContext,
  o: { type: string; configuration: Record<string, unknown>; drop(): Promise<unknown>; exists(): Promise<boolean>; write(set: string): Promise<unknown> },
): Promise<void> {
  const store = await open(t, o.type, o.configuration, `${o.type}-dropped`);
  const { rec } = await watching(t, store);
  const mark = rec.events.length;
  await o.drop();
  const e = await rec.next('error() once the table is dropped', isError, mark);
  assert.match((rec.events[e] as { error: string }).error, new RegExp(`^store "${o.type}-dropped" is unavailable: `));
  const second = await watching(t, store, false);
  await second.rec.next('a feed opened after the drop reports error()', isError);
  assert.equal(await o.exists(), false, 'no feed created the table again');
  await open(t, o.type, o.configuration, `${o.type}-recreate`); // init: the one place that creates the table
  const back = await rec.nextChange('change({}) once the table is back', e + 1);
  assert.deepEqual(back.notice, {});
  assert.ok(rec.events.slice(e + 1, back.index).every(isError), 'nothing but errors in between');
  await o.write('back');
  await rec.next('a write after the table is back', (ev) => 'change' in ev && !!ev.change.sets?.includes('back'), back.index + 1);
}

/** One statement on the shared PostgreSQL / MariaDB test database, on a connection of its own. */
async function pgQuery(sql: string, values: unknown[] = []): Promise<Array<Record<string, unknown>>> {
  const c = new pg.Client({ host: PG.host, port: PG.port, user: PG.username, database: PG.database });
  await c.connect();
  try {
    return (await c.query(sql, values)).rows;
  } finally {
    await c.end();
  }
}

async function myQuery(sql: string, values: unknown[] = []): Promise<Array<Record<string, unknown>>> {
  const c = await mysql.createConnection({ host: MY.host, port: MY.port, user: MY.username, database: MY.database });
  try {
    return (await c.query(sql, values))[0] as Array<Record<string, unknown>>;
  } finally {
    await c.end();
  }
}

// ------------------------------------------------------------------------------------------------ json-file

describe('json-file change feed', () => {
  test('a file renamed into place (an editor save) reaches the listener with its sets; a sibling file does not; in-place edits and own writes too', async (t) => {
    const path = join(TMP, `feed-${RUN}.json`);
    writeFileSync(path, JSON.stringify([{ set: 'app', key: 'A', value: '1' }]));
    const store = await open(t, 'json-file', { path });
    const { rec } = await watching(t, store, false);

    writeFileSync(join(TMP, `feed-${RUN}-sibling.json`), '[]');
    const from = rec.events.length;
    writeFileSync(`${path}.edit`, JSON.stringify([{ set: 'app', key: 'A', value: '1' }, { set: 'app/prod', key: 'B', value: '2' }]));
    renameSync(`${path}.edit`, path);
    const first = await rec.nextChange('the renamed file is reported', from);
    assert.equal(first.index, from, 'nothing before the rename');
    assert.deepEqual(first.notice, { sets: ['app/prod'] });

    const n = rec.events.length;
    writeFileSync(path, JSON.stringify([{ set: 'app', key: 'A', value: 'one' }, { set: 'app/prod', key: 'B', value: '2' }]));
    // An in-place write truncates, then writes: a look in between may see an empty or partial file first.
    await rec.next('an in-place edit is reported', (e) => 'change' in e && (e.change.sets === undefined || e.change.sets.includes('app')), n);
    await waitFor('the feed settles on the edited file', () => {
      const last = rec.events.at(-1);
      return last !== undefined && 'change' in last && (last.change.sets === undefined || last.change.sets.includes('app'));
    });

    const m = rec.events.length;
    await store.set([{ set: 'other', key: 'C', value: '3' }]);
    assert.deepEqual((await rec.nextChange('a write through the store is reported', m)).notice, { sets: ['other'] });
  });

  test('own writes are reported with exactly their sets (taken from the store, not read back), interleaved with another process\'s writes and an editor\'s save', async (t) => {
    const path = join(TMP, `feed-own-${RUN}.json`);
    writeFileSync(path, JSON.stringify([{ set: 'a', key: 'A', value: '1' }, { set: 'b', key: 'B', value: '1' }]));
    const store = await open(t, 'json-file', { path });
    const other = await open(t, 'json-file', { path }, 'json-file-other'); // another process writing the same file
    const { rec } = await watching(t, store, false);
    const step = async (what: string, write: () => Promise<unknown>) => {
      const from = rec.events.length;
      await write();
      return sorted((await rec.nextChange(what, from)).notice);
    };
    const own = store as RevisionedStore;
    assert.deepEqual(await step('a revisioned write', () => own.write('a', [{ key: 'A', value: '2' }])), ['a']);
    assert.deepEqual(await step('a plain write of two sets', () => store.set([{ set: 'b', key: 'B', value: '2' }, { set: 'c', key: 'C', value: '1' }])), ['b', 'c']);
    assert.deepEqual(await step('the last key of a set removed', () => own.write('c', [{ key: 'C', value: null }])), ['c']);
    assert.deepEqual(await step('another process\'s write', () => other.set([{ set: 'd', key: 'D', value: '1' }])), ['d']);
    // The store's copy is older than the file now: its next write reads the file first, and is reported alone.
    assert.deepEqual(await step('an own write after another process\'s', () => own.write('a', [{ key: 'A', value: '3' }])), ['a']);
    assert.deepEqual(await step('an own write', () => own.write('b', [{ key: 'B', value: '3' }])), ['b']);
    const edited = [...(JSON.parse(readFileSync(path, 'utf8')) as unknown[]), { set: 'e', key: 'E', value: '1' }];
    const save = async () => {
      writeFileSync(`${path}.edit`, JSON.stringify(edited));
      renameSync(`${path}.edit`, path);
    };
    assert.deepEqual(await step('an editor\'s save after it', save), ['e']);
  });

  test('a corrupt file gives error(), the repaired file change({})', async (t) => {
    const path = join(TMP, `feed-corrupt-${RUN}.json`);
    writeFileSync(path, '[]');
    const store = await open(t, 'json-file', { path, feedIntervalMs: 50 });
    const { rec } = await watching(t, store, false);
    writeFileSync(path, '[{"set": "a", ');
    const e = await rec.next('the corrupt file is an error', isError);
    assert.deepEqual(rec.events[e], { error: 'store "json-file-feed" is unavailable: the file is not valid JSON' });
    writeFileSync(path, JSON.stringify([{ set: 'a', key: 'K', value: 'v' }]));
    assert.deepEqual((await rec.nextChange('the repaired file', e + 1)).notice, {});
  });

  test('the registry hands out the store\'s feed for a declared store name', async (t) => {
    const path = join(TMP, `feed-registry-${RUN}.json`);
    const registry = createStoreRegistry(
      {
        file: undefined,
        stores: [
          { name: 'files', type: 'json-file', configuration: { path }, default: true, backup: false },
          { name: 'memory', type: 'in-memory', configuration: {}, default: false, backup: false },
        ],
        defaultStore: 'files',
        backup: join(TMP, `feed-backup-${RUN}.db`),
        schemas: {},
        scripts: {},
        interface: {},
      },
      { logger: { warn: () => undefined } },
    );
    await registry.init();
    t.after(() => registry.close());
    for (const name of ['files', 'memory']) {
      const resolved = registry.resolve(name);
      assert.equal(typeof resolved.watch, 'function', name);
      const rec = new Recorder();
      const feed = resolved.watch!(rec);
      t.after(() => feed.close());
      await resolved.write([{ set: `s_${name}`, key: 'K', value: 'v' }]);
      assert.deepEqual((await rec.nextChange(`a write to ${name}`)).notice, { sets: [`s_${name}`] });
    }
  });
});

// ------------------------------------------------------------------------------------------------ sqlite

describe('sqlite change feed', () => {
  test('a commit by another program (sqlite3) is seen; a commit to another database file is not; own writes are reported with their sets', async (t) => {
    const database = join(TMP, `feed-${RUN}.db`);
    const store = await open(t, 'sqlite', { database, tableName: 'config', feedIntervalMs: 20 });
    const { rec } = await watching(t, store);

    await sqlite3(join(TMP, `feed-other-${RUN}.db`), `CREATE TABLE IF NOT EXISTS x (a); INSERT INTO x VALUES (1);`);
    const from = rec.events.length;
    await sqlite3(database, `INSERT INTO config ("id", "set", "key", "value") VALUES ('${md5('appK')}', 'app', 'K', 'v');`);
    const seen = await rec.nextChange('the other program\'s commit', from);
    assert.equal(seen.index, from);
    assert.deepEqual(seen.notice, {}, 'data_version cannot tell which set');

    const n = rec.events.length;
    await store.set([{ set: 'mine', key: 'K', value: 'v' }]);
    assert.deepEqual((await rec.nextChange('own write', n)).notice, { sets: ['mine'] });
  });
});

// ------------------------------------------------------------------------------------------------ PostgreSQL

const pgAvailable = (t: TestContext) => requireService(t, 'postgresql', probeTcp(PG.port));

describe('postgresql change feed', () => {
  const tables: string[] = [];
  after(() => dropPostgresTables(PG, tables));
  const table = (tag: string) => {
    const name = `cfgu_feed_${RUN}_${tag}`.slice(0, 60);
    tables.push(name);
    return name;
  };

  for (const notify of [true, false]) {
    test(`${notify ? 'notify: true (LISTEN/NOTIFY trigger)' : 'without notify (periodic aggregate)'}: psql's write reaches two replicas with its set; a write to another table does not`, async (t) => {
      if (!(await pgAvailable(t))) return;
      const tableName = table(notify ? 'n' : 'p');
      const unrelated = table(notify ? 'un' : 'up');
      await psql(PG.port, PG.database, `CREATE TABLE "${unrelated}" ("set" text, "key" text, "value" text)`);
      const { one, recs } = await replicas(t, 'postgresql', { ...PG, tableName, notify, feedIntervalMs: 50 });
      const [a] = recs as [Recorder];
      await firstNotice(recs, "psql's write", async () => {
        await psql(PG.port, PG.database, `INSERT INTO "${unrelated}" VALUES ('app', 'K', 'v')`);
        await psql(PG.port, PG.database, pgUpsert(tableName, 'app/prod', 'K', 'v1'));
      }, ['app/prod']);
      // A write through one replica reaches the other.
      await firstNotice(recs, 'a write through one replica (both hear it)', () => one.set([{ set: 'svc', key: 'K', value: 'v' }]), ['svc']);
      await firstNotice([a], "psql's delete", () => psql(PG.port, PG.database, `DELETE FROM "${tableName}" WHERE "set" = 'app/prod'`), ['app/prod']);
    });
  }

  for (const notify of [false, true]) {
    test(`${notify ? 'notify: true' : 'without notify'}: the table dropped under a running feed gives error(), is not created again by any feed, and the feed recovers once init creates it`, async (t) => {
      if (!(await pgAvailable(t))) return;
      const tableName = table(notify ? 'dn' : 'dp');
      await droppedUnderFeed(t, {
        type: 'postgresql',
        configuration: { ...PG, tableName, notify, feedIntervalMs: 50 },
        drop: () => psql(PG.port, PG.database, `DROP TABLE "${tableName}"`),
        exists: () => pgQuery(`SELECT to_regclass($1) IS NOT NULL AS e`, [`"${tableName}"`]).then((r) => r[0]!.e === true),
        write: (set) => psql(PG.port, PG.database, pgUpsert(tableName, set, 'K', 'v')),
      });
    });
  }

  test('the periodic check: one aggregate without GROUP BY, and the per-row digest gives the same figures', async (t) => {
    if (!(await pgAvailable(t))) return;
    const tableName = table('agg');
    const store = await open(t, 'postgresql', { ...PG, tableName });
    await store.set([{ set: 'a', key: 'K', value: '1' }, { set: 'a', key: 'L', value: '2' }, { set: 'b', key: 'K', value: '3' }]);
    const checks = postgresFeedChecks(tableName);
    assert.doesNotMatch(checks.total, /GROUP BY/i);
    assert.doesNotMatch(checks.rows, /GROUP BY|ORDER BY/i);
    const [total] = await pgQuery(checks.total);
    const digest = digestRows((await pgQuery(checks.rows)).map((r) => ({ s: r.s, a: r.a, b: r.a })));
    assert.equal(digest.total, total!.v);
    assert.deepEqual([...digest.sets.keys()].sort(), ['a', 'b']);
    assert.match(digest.sets.get('a')!, /^2:-?\d+:-?\d+$/);
  });

  test('a private server stopped and restarted during a watch: error(), then change({}), then writes are seen again (both modes)', async (t) => {
    const server = await startPrivate(t, 'postgresql');
    if (!server) return;
    const conf = { host: server.host, port: server.port, username: 'postgres', database: 'postgres', timeout: 1000, feedIntervalMs: 50 };
    const notifying = await open(t, 'postgresql', { ...conf, notify: true }, 'pg-notify');
    const polling = await open(t, 'postgresql', { ...conf, tableName: 'polled' }, 'pg-poll');
    const feeds = [await watching(t, notifying), await watching(t, polling)];
    await outage(server, feeds.map((f) => f.rec));
    await psql(server.port, 'postgres', pgUpsert('config', 'back', 'K', 'v'));
    await psql(server.port, 'postgres', pgUpsert('polled', 'back', 'K', 'v'));
    for (const { rec } of feeds) {
      await rec.next('a write after the restart', (e) => 'change' in e && e.change.sets?.[0] === 'back');
    }
  });
});

describe('postgresql notify: true, two roles each owning its table', () => {
  test('the second role installs its trigger with the function the first one created; each feed hears its own table only', async (t) => {
    const server = await startPrivate(t, 'postgresql');
    if (!server) return;
    await psql(server.port, 'postgres', `CREATE ROLE alice LOGIN; CREATE ROLE bob LOGIN; GRANT CREATE ON SCHEMA public TO alice, bob`);
    const base = { host: server.host, port: server.port, database: 'postgres', notify: true, feedIntervalMs: 50 };
    const alice = await open(t, 'postgresql', { ...base, username: 'alice', tableName: 'alice_config' }, 'pg-alice');
    const a = await watching(t, alice); // creates the shared function, owned by alice
    const bob = await open(t, 'postgresql', { ...base, username: 'bob', tableName: 'bob_config' }, 'pg-bob');
    const b = await watching(t, bob);
    assert.ok(!b.rec.events.some(isError), 'bob\'s feed came up without an error');
    const write = (table: string, set: string, value: string) => psql(server.port, 'postgres', pgUpsert(table, set, 'K', value));
    await firstNotice([a.rec], "bob's write, then alice's", async () => {
      await write('bob_config', 'b', '1');
      await write('alice_config', 'a', '1');
    }, ['a']);
    await b.rec.next("bob's first write", (e) => 'change' in e && e.change.sets?.[0] === 'b');
    await firstNotice([b.rec], "alice's write, then bob's", async () => {
      await write('alice_config', 'a', '2');
      await write('bob_config', 'b', '2');
    }, ['b']);
  });
});

/** Stop the server: every recorder gets error(); start it: each gets change({}) after its error. */
async function outage(server: PrivateServer, recs: Recorder[]): Promise<void> {
  const marks = recs.map((r) => r.events.length);
  await server.stop();
  const errors = await Promise.all(recs.map((r, i) => r.next('error() while the server is down', isError, marks[i])));
  for (const [i, r] of recs.entries()) {
    assert.match((r.events[errors[i]!] as { error: string }).error, /^store "[^"]+" is unavailable: /);
  }
  await server.start();
  for (const [i, r] of recs.entries()) {
    const back = await r.nextChange('change({}) once the server is back', errors[i]! + 1);
    assert.deepEqual(back.notice, {});
    assert.ok(r.events.slice(errors[i]! + 1, back.index).every(isError), 'nothing but errors in between');
  }
}

// ------------------------------------------------------------------------------------------------ MariaDB

describe('mariadb change feed (periodic checksum)', () => {
  const tables: string[] = [];
  after(() => dropMariadbTables(MY, tables));

  test('the mariadb client\'s write reaches two replicas with its set; a write to another table does not', async (t) => {
    if (!(await requireService(t, 'mariadb', probeTcp(MY.port)))) return;
    const tableName = `cfgu_feed_${RUN}`;
    const unrelated = `cfgu_feed_${RUN}_u`;
    tables.push(tableName, unrelated);
    await mariadb(MY.port, MY.database, `CREATE TABLE \`${unrelated}\` (\`set\` text, \`key\` text, \`value\` text)`);
    const { recs } = await replicas(t, 'mariadb', { ...MY, tableName, feedIntervalMs: 50 });
    await firstNotice(recs, "the mariadb client's write", async () => {
      await mariadb(MY.port, MY.database, `INSERT INTO \`${unrelated}\` VALUES ('app', 'K', 'v')`);
      await mariadb(MY.port, MY.database, myUpsert(tableName, 'app/prod', 'K', 'v1'));
    }, ['app/prod']);
    await firstNotice(recs.slice(0, 1), 'an update of the value', () => mariadb(MY.port, MY.database, myUpsert(tableName, 'app/prod', 'K', 'v2')), ['app/prod']);
  });

  test('the check needs no temporary table (EXPLAIN: no GROUP BY, no "Using temporary"), and the per-row digest gives the aggregate\'s figures', async (t) => {
    if (!(await requireService(t, 'mariadb', probeTcp(MY.port)))) return;
    const tableName = `cfgu_feed_${RUN}_agg`;
    tables.push(tableName);
    const store = await open(t, 'mariadb', { ...MY, tableName });
    await store.set([{ set: 'a', key: 'K', value: '1' }, { set: 'a', key: 'L', value: '2' }, { set: 'b', key: 'K', value: '3' }]);
    const checks = mysqlFeedChecks(tableName);
    for (const sql of [checks.total, checks.rows]) {
      assert.doesNotMatch(sql, /GROUP BY|ORDER BY/i);
      const plan = await myQuery(`EXPLAIN ${sql}`);
      assert.ok(plan.length > 0);
      for (const row of plan) assert.doesNotMatch(String(row.Extra ?? ''), /temporary|filesort/i, sql);
    }
    const [total] = await myQuery(checks.total);
    const digest = digestRows((await myQuery(checks.rows)).map((r) => ({ s: r.s, a: r.a, b: r.b })));
    assert.equal(digest.total, String(total!.v));
    assert.deepEqual([...digest.sets.keys()].sort(), ['a', 'b']);
    assert.match(digest.sets.get('a')!, /^2:\d+:\d+$/);
  });

  test('the table dropped under a running feed gives error(), is not created again by the feed, and the feed recovers once init creates it', async (t) => {
    if (!(await requireService(t, 'mariadb', probeTcp(MY.port)))) return;
    const tableName = `cfgu_feed_${RUN}_drop`;
    tables.push(tableName);
    await droppedUnderFeed(t, {
      type: 'mariadb',
      configuration: { ...MY, tableName, feedIntervalMs: 50 },
      drop: () => mariadb(MY.port, MY.database, `DROP TABLE \`${tableName}\``),
      exists: async () =>
        (await myQuery(`SELECT COUNT(*) AS n FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?`, [MY.database, tableName]))[0]!.n === 1,
      write: (set) => mariadb(MY.port, MY.database, myUpsert(tableName, set, 'K', 'v')),
    });
  });

  test('a private server stopped and restarted during a watch: error(), then change({})', async (t) => {
    const server = await startPrivate(t, 'mariadb');
    if (!server) return;
    await mariadb(server.port, 'mysql', 'CREATE DATABASE IF NOT EXISTS feeds');
    const store = await open(t, 'mariadb', { host: server.host, port: server.port, username: 'root', database: 'feeds', timeout: 1000, feedIntervalMs: 50 });
    const { rec } = await watching(t, store);
    await outage(server, [rec]);
    await mariadb(server.port, 'feeds', myUpsert('config', 'back', 'K', 'v'));
    await rec.next('a write after the restart', (e) => 'change' in e && e.change.sets?.[0] === 'back');
  });
});

// ------------------------------------------------------------------------------------------------ Redis

describe('redis change feed', () => {
  test('without keyspace notifications: redis-cli\'s write to a key the store read is seen; an unrelated key is not; cfgu\'s writes reach a replica that never read', async (t) => {
    const server = await startPrivate(t, 'redis');
    if (!server) return;
    const conf = { host: server.host, port: server.port, feedIntervalMs: 50 };
    const { one, two, recs } = await replicas(t, 'redis', conf);
    // Reads made after watch() began are followed too (compared from the value they found).
    await one.get([{ set: 'app/prod', key: 'K' }, { set: '', key: 'ROOT' }]);
    await two.get([{ set: 'app/prod', key: 'K' }]);
    await firstNotice(recs, "redis-cli's write", async () => {
      await redisCli(server.port, 'SET', 'unrelated', 'x');
      await redisCli(server.port, 'SET', 'app/prod', '{"K":"v"}');
    }, ['app/prod']);
    await firstNotice(recs.slice(0, 1), 'a root key', async () => {
      await redisCli(server.port, 'DEL', 'ROOT'); // absent already: nothing changes
      await redisCli(server.port, 'SET', 'ROOT', 'r');
    }, ['']);

    // cfgu publishes its writes: a third store object that never read anything hears them.
    const three = await open(t, 'redis', conf, 'redis-three');
    const c = await watching(t, three);
    await firstNotice([c.rec], "cfgu's published write", () => one.set([{ set: 'svc', key: 'K', value: 'v' }]), ['svc']);
  });

  test('with keyspace notifications (a private server started with them): redis-cli\'s writes reach two replicas; a key never read does not', async (t) => {
    const server = await startPrivate(t, 'redis', ['--notify-keyspace-events', 'KA']);
    if (!server) return;
    const conf = { host: server.host, port: server.port, feedIntervalMs: 3_600_000 }; // no polling can help here
    const { one, two, recs } = await replicas(t, 'redis', conf);
    await one.get([{ set: 'app/prod', key: 'K' }, { set: '', key: 'ROOT' }]);
    await two.get([{ set: 'app/prod', key: 'K' }]);
    await firstNotice(recs, 'keyspace event', async () => {
      await redisCli(server.port, 'SET', 'unrelated', 'x'); // never read: not reported
      await redisCli(server.port, 'SET', 'app/prod', '{"K":"v"}');
    }, ['app/prod']);
    await firstNotice(recs.slice(0, 1), 'a root key deleted', () => redisCli(server.port, 'DEL', 'ROOT').then(() => redisCli(server.port, 'SET', 'ROOT', 'r')), ['']);
    await ownWritesReported(one, recs[0]!);
  });

  test('a private server stopped and restarted during a watch: error(), then change({}), then writes are seen again', async (t) => {
    const server = await startPrivate(t, 'redis');
    if (!server) return;
    const store = await open(t, 'redis', { host: server.host, port: server.port, timeout: 1000, feedIntervalMs: 50 });
    await store.get([{ set: 'back', key: 'K' }]);
    const { rec } = await watching(t, store);
    await outage(server, [rec]);
    await redisCli(server.port, 'SET', 'back', '{"K":"v"}');
    await rec.next('a write after the restart', (e) => 'change' in e && e.change.sets?.[0] === 'back');
  });
});

// ------------------------------------------------------------------------------------------------ etcd

describe('etcd change feed (native watch)', () => {
  test('etcdctl\'s put reaches two replicas, a key never read does not; a stop and restart gives error(), change({}), and puts are seen again', async (t) => {
    const server = await startPrivate(t, 'etcd');
    if (!server) return;
    const { one, two, recs } = await replicas(t, 'etcd', { hosts: server.url, timeout: 1000 });
    await one.get([{ set: 'app/prod', key: 'K' }, { set: 'back', key: 'K' }]);
    await two.get([{ set: 'app/prod', key: 'K' }, { set: 'back', key: 'K' }]);
    await firstNotice(recs, "etcdctl's put", async () => {
      await etcdPut(server.url, 'unrelated', 'x'); // never read: not reported
      await etcdPut(server.url, 'app/prod', '{"K":"v"}');
    }, ['app/prod']);
    await outage(server, recs);
    await etcdPut(server.url, 'back', '{"K":"v"}');
    for (const rec of recs) await rec.next('a put after the restart', (e) => 'change' in e && !!e.change.sets?.includes('back'));
    await ownWritesReported(one, recs[0]!);
  });
});


