/**
 * Batches larger than one SQL statement may carry, on each SQL kind (sqlite, and the shared PostgreSQL and MariaDB
 * servers, in tables of this run's own). SQLite binds at most 32,766 values in a statement, PostgreSQL 65,535; a
 * statement with one placeholder per item would fail on the batches below (a delete binds 2 values a config, an upsert
 * 4). MySQL/MariaDB statements carry their values in their text (mysql2's `query`), which the server refuses over its
 * `max_allowed_packet` (16 MiB by default on MariaDB): there the values of the large `set` are 600 bytes each, about
 * 20 MB in all (elsewhere short: the size of the values is not what those limits count). Checked: `set` and `get` of that many configs, `write` (with history) of that many changes to one
 * set, and that a large `set` is still all-or-nothing: a trigger of the test's own refuses the last row of the batch
 * (after every earlier statement of the write ran), and the table must be as it was.
 */
import assert from 'node:assert/strict';
import { describe, test, type TestContext } from 'node:test';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { StoreUnavailableError } from '../../src/core/errors.js';
import type { Config, RevisionedStore } from '../../src/core/ports.js';
import { sqliteDriver } from '../../src/stores/drivers.js';
import { requireService } from '../helpers/services.js';
import { dropHistoryTables, KINDS, makeStore, MY, PG, type Kind } from './kinds.js';

/** One more config than a delete of one statement may carry anywhere (2 bound values each: 65,536 > 65,535). */
const COUNT = Math.floor(65_535 / 2) + 1;

const SETS = ['', 'big', 'big/eu'];
/** A value of the `set` test: 600 bytes and more on MariaDB (see the header). */
const valueOf = (kind: Kind, tag: string, i: number): string => `${tag}${i}`.padEnd(kind.name === 'mariadb' ? 600 : 0, '.');
const configsOf = (value: (i: number) => string): Config[] =>
  Array.from({ length: COUNT }, (_, i) => ({ set: SETS[i % SETS.length]!, key: `K${String(i).padStart(6, '0')}`, value: value(i) }));

const sorted = (configs: readonly Config[]): Config[] =>
  [...configs].sort((a, b) => (a.set === b.set ? (a.key < b.key ? -1 : a.key > b.key ? 1 : 0) : a.set < b.set ? -1 : 1));

/** A trigger on the table that refuses to insert the key POISON with the message "poisoned". */
type Poison = (configuration: Record<string, unknown>) => Promise<{ remove(): Promise<void> }>;

const POISONS: Record<string, Poison> = {
  async sqlite(configuration) {
    const db = new (sqliteDriver())(String(configuration.database));
    const table = String(configuration.tableName);
    db.exec(`CREATE TRIGGER "poison_${table}" BEFORE INSERT ON "${table}" WHEN NEW."key" = 'POISON' BEGIN SELECT RAISE(ABORT, 'poisoned'); END`);
    db.close();
    return { remove: async () => undefined }; // dropped with the database file
  },
  async postgresql(configuration) {
    const table = String(configuration.tableName);
    const c = new pg.Client({ host: PG.host, port: PG.port, user: PG.username, database: PG.database });
    await c.connect();
    try {
      await c.query(
        `CREATE FUNCTION "poison_${table}"() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN ` +
          `IF NEW."key" = 'POISON' THEN RAISE EXCEPTION 'poisoned'; END IF; RETURN NEW; END $$`,
      );
      await c.query(`CREATE TRIGGER "poison_${table}" BEFORE INSERT ON "${table}" FOR EACH ROW EXECUTE FUNCTION "poison_${table}"()`);
    } finally {
      await c.end();
    }
    return {
      async remove() {
        const d = new pg.Client({ host: PG.host, port: PG.port, user: PG.username, database: PG.database });
        await d.connect();
        await d.query(`DROP FUNCTION IF EXISTS "poison_${table}"() CASCADE`);
        await d.end();
      },
    };
  },
  async mariadb(configuration) {
    const table = String(configuration.tableName);
    const c = await mysql.createConnection({ host: MY.host, port: MY.port, user: MY.username, database: MY.database });
    try {
      await c.query(
        `CREATE TRIGGER \`poison_${table}\` BEFORE INSERT ON \`${table}\` FOR EACH ROW BEGIN ` +
          `IF NEW.\`key\` = 'POISON' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'poisoned'; END IF; END`,
      );
    } finally {
      await c.end();
    }
    return { remove: async () => undefined }; // dropped with the table
  },
};

type Run = (store: RevisionedStore, raw: () => Promise<Config[]>, poison: () => Promise<void>) => Promise<void>;

async function withStore(t: TestContext, kind: Kind, tag: string, run: Run): Promise<void> {
  if (kind.service && !(await requireService(t, kind.service.name, kind.service.probe))) return;
  const { configuration, raw, cleanup } = await kind.fresh(tag);
  // A generous statement timeout: these statements are large, and the machine may be loaded (nothing here is timed).
  const store = makeStore(kind.name, { ...configuration, timeout: 120_000 }, 'big') as RevisionedStore;
  let poisoned: { remove(): Promise<void> } | undefined;
  try {
    await store.init();
    await run(store, () => raw.read(), async () => void (poisoned = await POISONS[kind.name]!(configuration)));
  } finally {
    await store.close();
    await poisoned?.remove();
    await dropHistoryTables(kind.name, String(configuration.tableName));
    await cleanup();
  }
}

const refused = (e: unknown) => {
  assert.ok(e instanceof StoreUnavailableError, String(e));
  assert.equal(e.message, 'store "big" is unavailable: poisoned');
  return true;
};

for (const kind of KINDS.filter((k) => k.name in POISONS)) {
  describe(`${kind.name}: batches over one statement's bound values`, () => {
    test(`set, get and delete ${COUNT} configs in one call each; a refused last row undoes the whole set`, async (t) => {
      await withStore(t, kind, 'large_set', async (store, raw, poison) => {
        const configs = configsOf((i) => valueOf(kind, 'v', i));
        await store.set(configs);
        assert.deepEqual(sorted(await raw()), sorted(configs));

        const missing = configs.map((c) => ({ set: c.set, key: `${c.key}_MISSING` }));
        const answer = await store.get([...configs.map((c) => ({ set: c.set, key: c.key })), ...missing]);
        assert.deepEqual(sorted(answer), sorted(configs));

        await poison();
        // Every row updated, then the refused one: the updates (in many statements) are rolled back.
        const updated = configsOf((i) => valueOf(kind, 'w', i));
        await assert.rejects(store.set([...updated, { set: '', key: 'POISON', value: 'x' }]), refused);
        // Every row deleted, then the refused one: the deletes are rolled back.
        const deleted = configs.map((c) => ({ ...c, value: '' }));
        await assert.rejects(store.set([...deleted, { set: '', key: 'POISON', value: 'x' }]), refused);
        assert.deepEqual(sorted(await raw()), sorted(configs));

        await store.set(updated);
        assert.deepEqual(sorted(await store.get(configs.map((c) => ({ set: c.set, key: c.key })))), sorted(updated));
        await store.set(deleted);
        assert.deepEqual(await raw(), []);
        assert.deepEqual(await store.get(configs.slice(0, 10).map((c) => ({ set: c.set, key: c.key }))), []);
      });
    });

    test(`write ${COUNT} changes to one set in one revision`, async (t) => {
      await withStore(t, kind, 'large_write', async (store, raw) => {
        const changes = configsOf((i) => `r${i}`).map((c) => ({ key: c.key, value: c.value }));
        const result = await store.write('rev', changes, { message: 'large' });
        assert.equal(result.revision, 1);
        assert.deepEqual(result.records.map((r) => [r.revision, r.changes.length, r.message]), [[1, COUNT, 'large']]);
        const expected = changes.map((c) => ({ set: 'rev', key: c.key, value: c.value! }));
        assert.deepEqual(sorted(await raw()), sorted(expected));
        assert.deepEqual(sorted(await store.get(expected.map((c) => ({ set: c.set, key: c.key })))), sorted(expected));

        const removed = await store.write('rev', changes.map((c) => ({ key: c.key, value: null })), { expectedRevision: 1 });
        assert.equal(removed.revision, 2);
        assert.deepEqual(await raw(), []);
      });
    });
  });
}
