/**
 * ConfigStore.list over every store kind on real servers (the machine's PostgreSQL, MariaDB and Redis under names this
 * run owns, a private etcd), as the contract suite does: whole segments, nesting, an empty answer, deleted keys, odd
 * key names, wildcards in the prefix, the bounds, data written in the layout by others, and that listing changes
 * nothing. The root prefix "" covers everything a store holds, so on Redis and etcd (whose layout has no prefix of
 * its own) it is tested on private servers, which are then stopped for the outage case.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test, type TestContext } from 'node:test';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { StoreUnavailableError } from '../../src/core/errors.js';
import { byCodePoint } from '../../src/stores/listing.js';
import type { Config, ConfigStore, SetListing } from '../../src/core/ports.js';
import { startPrivate, type PrivateKind, type PrivateServer } from '../helpers/private.js';
import { requireService } from '../helpers/services.js';
import { waitFor } from '../helpers/wait.js';
import { KINDS, makeStore, MY, PG, RUN, TMP, type Kind, type Raw } from './kinds.js';

let counter = 0;

interface Ctx {
  store: ConfigStore;
  raw: Raw;
  /** A set path this test owns: every set it writes lies under it. */
  base: string;
  /** The test's unique tag (for root key names). */
  tag: string;
}

async function withStore(t: TestContext, kind: Kind, fn: (c: Ctx) => Promise<void>): Promise<void> {
  if (kind.service && !(await requireService(t, kind.service.name, kind.service.probe))) return;
  const tag = `${RUN}l${++counter}`;
  const { configuration, raw, cleanup } = await kind.fresh(tag);
  const store = makeStore(kind.name, configuration);
  try {
    await store.init();
    await fn({ store, raw, base: `L${tag}`, tag });
  } finally {
    await store.close();
    await cleanup();
  }
}

/** The sets of a listing as [set, keys] pairs. */
const pairs = (l: SetListing) => l.sets.map((s) => [s.set, s.keys]);

/** Configs of `set` with the given keys (value = key name + "!"). */
const configs = (set: string, ...keys: string[]): Config[] => keys.map((key) => ({ set, key, value: `${key}!` }));

/** An oracle independent of listing.ts: sort by the UTF-8 bytes. */
const byUtf8 = (a: string, b: string) => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));

const sortConfigs = (cs: readonly Config[]) => [...cs].sort((a, b) => byUtf8(a.set, b.set) || byUtf8(a.key, b.key) || byUtf8(a.value, b.value));

test('byCodePoint orders as UTF-8 bytes do (characters above U+FFFF after U+E000..U+FFFF)', () => {
  const words = ['', 'a', 'a/', 'a-b', 'a/b', 'a0', 'B', 'é', '\uE000', '\uFFFF', '😀', '😀a', 'a😀', 'a\uE000', '日本'];
  assert.deepEqual([...words].sort(byCodePoint), [...words].sort(byUtf8));
});

for (const kind of KINDS) {
  describe(`store list: ${kind.name}`, () => {
    test('a prefix covers itself and its descendants by whole segments, in code-point order', async (t) => {
      await withStore(t, kind, async ({ store, base }) => {
        await store.set([
          ...configs(`${base}/prod`, 'B', 'A'),
          ...configs(`${base}/prod/eu`, 'C'),
          ...configs(`${base}/prod/eu/x`, 'D'),
          ...configs(`${base}/production`, 'E'),
          ...configs(`${base}/prod-eu`, 'F'),
          ...configs(`${base}/pro`, 'G'),
        ]);
        const prod = await store.list(`${base}/prod`);
        assert.deepEqual(prod, {
          prefix: `${base}/prod`,
          sets: [
            { set: `${base}/prod`, keys: ['A', 'B'] },
            { set: `${base}/prod/eu`, keys: ['C'] },
            { set: `${base}/prod/eu/x`, keys: ['D'] },
          ],
          truncated: false,
          limits: { sets: 1000, keys: 100_000 },
        });
        assert.deepEqual(pairs(await store.list(`${base}/prod/eu`)), [
          [`${base}/prod/eu`, ['C']],
          [`${base}/prod/eu/x`, ['D']],
        ]);
        assert.deepEqual(pairs(await store.list(base)), [
          [`${base}/pro`, ['G']],
          [`${base}/prod`, ['A', 'B']],
          [`${base}/prod-eu`, ['F']],
          [`${base}/prod/eu`, ['C']],
          [`${base}/prod/eu/x`, ['D']],
          [`${base}/production`, ['E']],
        ]);
        // Leading and trailing slashes are dropped, as in set paths.
        assert.deepEqual(await store.list(`/${base}/prod/`), prod);
        // Not a whole segment: nothing.
        assert.deepEqual(await store.list(`${base}/pr`), { prefix: `${base}/pr`, sets: [], truncated: false, limits: { sets: 1000, keys: 100_000 } });
        assert.deepEqual(pairs(await store.list(`${base}/prod/eu/x/y`)), []);
      });
    });

    test('an empty answer; a deleted key is not listed, a set whose keys are all deleted is gone', async (t) => {
      await withStore(t, kind, async ({ store, base }) => {
        assert.deepEqual(await store.list(`${base}/none`), { prefix: `${base}/none`, sets: [], truncated: false, limits: { sets: 1000, keys: 100_000 } });
        await store.set(configs(`${base}/s`, 'A', 'B'));
        await store.set([{ set: `${base}/s`, key: 'B', value: '' }]);
        assert.deepEqual(pairs(await store.list(base)), [[`${base}/s`, ['A']]]);
        await store.set([{ set: `${base}/s`, key: 'A', value: '' }]);
        assert.deepEqual(pairs(await store.list(base)), []);
      });
    });

    test('odd key names are listed as they are, in code-point order', async (t) => {
      await withStore(t, kind, async ({ store, base }) => {
        const keys = ['__proto__', '%', '_', '*', '[', '?', '\\', '!', 'a b', 'ü日本', '\uE000x', '😀', 'constructor', 'KEY', 'key'];
        await store.set(configs(`${base}/odd`, ...keys));
        assert.deepEqual(pairs(await store.list(`${base}/odd`)), [[`${base}/odd`, [...keys].sort(byUtf8)]]);
      });
    });

    test('wildcards of LIKE and of glob patterns in the prefix match only themselves', async (t) => {
      await withStore(t, kind, async ({ store, base }) => {
        const names = ['a%', 'a%/deep', 'a%x', 'axb', 'a_b', 'aXb', 'a*', 'a*z', 'ab', 'a[1]', 'a1', 'a?', 'a\\', 'a\\x', 'a!', 'a!x'];
        await store.set(names.flatMap((n) => configs(`${base}/${n}`, 'K')));
        const listed = async (prefix: string) => (await store.list(`${base}/${prefix}`)).sets.map((s) => s.set.slice(base.length + 1));
        assert.deepEqual(await listed('a%'), ['a%', 'a%/deep']);
        assert.deepEqual(await listed('a_b'), ['a_b']);
        assert.deepEqual(await listed('a*'), ['a*']);
        assert.deepEqual(await listed('a[1]'), ['a[1]']);
        assert.deepEqual(await listed('a?'), ['a?']);
        assert.deepEqual(await listed('a\\'), ['a\\']);
        assert.deepEqual(await listed('a!'), ['a!']);
        assert.deepEqual(await listed('a'), []);
        assert.deepEqual((await store.list(base)).sets.map((s) => s.set.slice(base.length + 1)), [...names].sort(byUtf8));
      });
    });

    test('the bounds: whole sets in order until the next would pass either bound, then truncated', async (t) => {
      await withStore(t, kind, async ({ store, base }) => {
        const n = `${base}/n`;
        await store.set(['s1', 's2', 's3', 's4', 's5'].flatMap((s) => configs(`${n}/${s}`, 'A', 'B')));
        const sets = (l: SetListing) => l.sets.map((s) => s.set.slice(n.length + 1));
        let l = await store.list(n, { sets: 3 });
        assert.deepEqual([sets(l), l.truncated, l.limits], [['s1', 's2', 's3'], true, { sets: 3, keys: 100_000 }]);
        assert.deepEqual(l.sets[2], { set: `${n}/s3`, keys: ['A', 'B'] });
        l = await store.list(n, { sets: 5 });
        assert.deepEqual([sets(l), l.truncated], [['s1', 's2', 's3', 's4', 's5'], false]);
        l = await store.list(n, { keys: 5 });
        assert.deepEqual([sets(l), l.truncated, l.limits], [['s1', 's2'], true, { sets: 1000, keys: 5 }]);
        l = await store.list(n, { keys: 4 });
        assert.deepEqual([sets(l), l.truncated], [['s1', 's2'], true]);
        l = await store.list(n, { sets: 5, keys: 10 });
        assert.deepEqual([sets(l), l.truncated], [['s1', 's2', 's3', 's4', 's5'], false]);
        l = await store.list(n, { keys: 1 });
        assert.deepEqual([sets(l), l.truncated], [[], true]);
        l = await store.list(`${n}/s2`, { sets: 1, keys: 2 });
        assert.deepEqual([sets(l), l.truncated], [['s2'], false]);
        for (const bad of [{ sets: 0 }, { keys: -1 }, { sets: 1.5 }, { keys: Number.NaN }]) {
          await assert.rejects(store.list(n, bad), TypeError);
        }
      });
    });

    if (kind.persistent) {
      test('data written in the layout by others is listed; listing changes nothing', async (t) => {
        await withStore(t, kind, async ({ store, raw, base, tag }) => {
          const data: Config[] = [
            { set: '', key: `R_${tag}`, value: 'root' },
            ...configs(`${base}/ext`, 'B', 'A'),
            ...configs(`${base}/ext/deep`, 'C'),
          ];
          await raw.write(data);
          const before = sortConfigs(await raw.read());
          assert.deepEqual(pairs(await store.list(base)), [
            [`${base}/ext`, ['A', 'B']],
            [`${base}/ext/deep`, ['C']],
          ]);
          await store.list(`${base}/ext`, { sets: 1, keys: 1 });
          assert.deepEqual(sortConfigs(await raw.read()), before);
        });
      });
    }

    if (kind.name !== 'redis' && kind.name !== 'etcd') {
      test('the root prefix "" lists everything, the root set first', async (t) => {
        await withStore(t, kind, async ({ store, base }) => {
          await rootCases(store, base);
        });
      });
    }
  });
}

/** Root-prefix cases on a store that holds nothing else. */
async function rootCases(store: ConfigStore, base: string): Promise<void> {
  assert.deepEqual(await store.list(''), { prefix: '', sets: [], truncated: false, limits: { sets: 1000, keys: 100_000 } });
  await store.set([
    ...configs('', 'ROOT_B', 'ROOT_A'),
    ...configs(base, 'X'),
    ...configs(`${base}/eu`, 'Y', 'Z'),
    ...configs('other', 'W'),
  ]);
  assert.deepEqual(pairs(await store.list('')), [
    ['', ['ROOT_A', 'ROOT_B']],
    [base, ['X']],
    [`${base}/eu`, ['Y', 'Z']],
    ['other', ['W']],
  ]);
  assert.deepEqual(pairs(await store.list('/')), pairs(await store.list('')));
  // A set prefix never lists root configs.
  assert.deepEqual(pairs(await store.list(base)), [
    [base, ['X']],
    [`${base}/eu`, ['Y', 'Z']],
  ]);
  let l = await store.list('', { sets: 2 });
  assert.deepEqual([pairs(l), l.truncated], [[['', ['ROOT_A', 'ROOT_B']], [base, ['X']]], true]);
  l = await store.list('', { keys: 1 });
  assert.deepEqual([pairs(l), l.truncated], [[], true]);
  l = await store.list('', { keys: 3 });
  assert.deepEqual([pairs(l), l.truncated], [[['', ['ROOT_A', 'ROOT_B']], [base, ['X']]], true]);
  await store.set([{ set: '', key: 'ROOT_A', value: '' }]);
  assert.deepEqual(pairs(await store.list(''))[0], ['', ['ROOT_B']]);
}

const unavailable = (store: string) => (e: unknown) => {
  assert.ok(e instanceof StoreUnavailableError, String(e));
  assert.equal(e.store, store);
  assert.match(e.message, new RegExp(`^store "${store}" is unavailable: `));
  assert.doesNotMatch(e.message, /\n/);
  return true;
};

describe('store list on private servers: the root prefix, then an outage', () => {
  const kinds: Array<{ kind: PrivateKind; type: string; configuration(s: PrivateServer): Promise<Record<string, unknown>> }> = [
    { kind: 'redis', type: 'redis', configuration: async (s) => ({ host: s.host, port: s.port, timeout: 1000 }) },
    { kind: 'etcd', type: 'etcd', configuration: async (s) => ({ hosts: s.url, timeout: 1500 }) },
    {
      kind: 'postgresql',
      type: 'postgresql',
      configuration: async (s) => ({ host: s.host, port: s.port, username: 'postgres', database: 'postgres', tableName: `list_${RUN}`, timeout: 1500 }),
    },
    {
      kind: 'mariadb',
      type: 'mariadb',
      async configuration(s) {
        const c = await mysql.createConnection({ host: s.host, port: s.port, user: 'root' });
        await c.query('CREATE DATABASE IF NOT EXISTS cfgu');
        await c.end();
        return { host: s.host, port: s.port, username: 'root', database: 'cfgu', tableName: `list_${RUN}`, timeout: 1500 };
      },
    },
  ];
  for (const k of kinds) {
    test(`${k.kind}: the root prefix "" on a server holding nothing else; StoreUnavailableError while stopped, then recovery`, async (t) => {
      const server = await startPrivate(t, k.kind);
      if (!server) return;
      const store = makeStore(k.type, await k.configuration(server), 'db');
      t.after(() => store.close());
      await store.init();
      await rootCases(store, 'app');

      await server.stop();
      await assert.rejects(store.list(''), unavailable('db'));
      await assert.rejects(store.list('app'), unavailable('db'));

      await server.start();
      await waitFor(`cfgu lists ${k.kind} again`, async () => ((await store.list('app')).prefix === 'app' ? true : undefined));
    });
  }

  test('json-file: a corrupt file is StoreUnavailableError; sqlite: a file that is not a database is too', async () => {
    const path = join(TMP, `list-corrupt-${RUN}.json`);
    writeFileSync(path, '[{"set": "a", "key": ');
    const json = makeStore('json-file', { path }, 'db');
    try {
      await assert.rejects(json.list(''), unavailable('db'));
      writeFileSync(path, JSON.stringify([{ set: 'a', key: 'K', value: 'v' }]));
      assert.deepEqual(pairs(await json.list('')), [['a', ['K']]]);
    } finally {
      await json.close();
    }
    const database = join(TMP, `list-not-a-db-${RUN}.db`);
    writeFileSync(database, 'this is not a SQLite database file, only text long enough to be read as a header'.repeat(20));
    const sqlite = makeStore('sqlite', { database }, 'db');
    try {
      await assert.rejects(sqlite.list(''), unavailable('db'));
    } finally {
      await sqlite.close();
    }
  });
});

describe('store list errors are StoreUnavailableError without secrets', () => {
  const unreachable: Array<[string, Record<string, unknown>]> = [
    ['postgresql', { host: '127.0.0.1', port: 1, username: 'u', password: 'SuperSecret123', database: 'x', timeout: 1000 }],
    ['mysql', { url: 'mysql://u:SuperSecret123@127.0.0.1:1/x', timeout: 1000 }],
    ['redis', { url: 'redis://:SuperSecret123@127.0.0.1:1/0', timeout: 1000 }],
    ['etcd', { hosts: 'http://127.0.0.1:1', password: 'SuperSecret123', username: 'u', timeout: 1000 }],
  ];
  for (const [type, configuration] of unreachable) {
    test(`${type} at a closed port`, async () => {
      const store = makeStore(type, configuration, 'down');
      try {
        for (const prefix of ['', 'prod']) {
          await assert.rejects(store.list(prefix), (e: unknown) => {
            unavailable('down')(e);
            assert.doesNotMatch((e as Error).message, /SuperSecret123/);
            return true;
          });
        }
      } finally {
        await store.close();
      }
    });
  }
});

describe('store list over tables whose columns do not compare by code point (created by someone else)', () => {
  test('postgresql: a set column in an ICU collation is listed exactly, in code-point order (LIKE, no index)', async (t) => {
    const kind = KINDS.find((k) => k.name === 'postgresql')!;
    if (!(await requireService(t, kind.service!.name, kind.service!.probe))) return;
    const tag = `${RUN}l${++counter}`;
    const { configuration, cleanup } = await kind.fresh(tag);
    const table = String(configuration.tableName);
    const c = new pg.Client({ host: PG.host, port: PG.port, user: PG.username, database: PG.database });
    await c.connect();
    try {
      const icu = await c.query(`SELECT 1 FROM pg_collation WHERE collname = 'en-x-icu'`);
      if (!icu.rowCount) {
        t.skip('this PostgreSQL has no ICU collation "en-x-icu"');
        return;
      }
      await c.query(
        `CREATE TABLE "${table}" ("id" varchar(32) PRIMARY KEY, "set" text COLLATE "en-x-icu" NOT NULL, ` +
          `"key" text COLLATE "en-x-icu" NOT NULL, "value" text NOT NULL)`,
      );
    } finally {
      await c.end();
    }
    const store = makeStore('postgresql', configuration);
    try {
      await store.init();
      await caseAndPunctuation(store, `L${tag}`);
      assert.equal((store as unknown as { byteOrder?: boolean }).byteOrder, false, 'the store took the collation for code-point order');
    } finally {
      await store.close();
      await cleanup();
    }
  });

  test('mariadb: a case-insensitive table (utf8mb4_general_ci) is listed exactly, in code-point order', async (t) => {
    const kind = KINDS.find((k) => k.name === 'mariadb')!;
    if (!(await requireService(t, kind.service!.name, kind.service!.probe))) return;
    const tag = `${RUN}l${++counter}`;
    const { configuration, cleanup } = await kind.fresh(tag);
    const table = String(configuration.tableName);
    const c = await mysql.createConnection({ host: MY.host, port: MY.port, user: MY.username, database: MY.database });
    try {
      await c.query(
        `CREATE TABLE \`${table}\` (\`id\` varchar(32) NOT NULL PRIMARY KEY, \`set\` text NOT NULL, \`key\` text NOT NULL, ` +
          `\`value\` text NOT NULL, UNIQUE KEY \`set_key_${table}\` (\`set\`, \`key\`), KEY \`set_${table}\` (\`set\`(255))) ` +
          `DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci`,
      );
    } finally {
      await c.end();
    }
    const store = makeStore('mariadb', configuration);
    try {
      await store.init();
      await caseAndPunctuation(store, `L${tag}`);
    } finally {
      await store.close();
      await cleanup();
    }
  });
});

/**
 * Sets that a linguistic or case-insensitive collation orders (or matches) differently from code points. Every (set,
 * key) pair differs in more than case, as a case-insensitive unique index would merge them.
 */
async function caseAndPunctuation(store: ConfigStore, base: string): Promise<void> {
  const data: Config[] = [
    ...configs(`${base}/prod`, 'b', 'B_', 'a'),
    ...configs(`${base}/PROD`, 'P1'),
    ...configs(`${base}/Prod/x`, 'P2'),
    ...configs(`${base}/prod/eu`, 'E'),
    ...configs(`${base}/prod-eu`, 'F'),
    ...configs(`${base}/prodeu`, 'G'),
    ...configs(`${base}/prod_x`, 'H'),
    ...configs(`${base}/é`, 'I'),
    ...configs(`${base}/z`, 'J'),
  ];
  await store.set(data);
  assert.deepEqual(pairs(await store.list(`${base}/prod`)), [
    [`${base}/prod`, ['B_', 'a', 'b']],
    [`${base}/prod/eu`, ['E']],
  ]);
  assert.deepEqual(pairs(await store.list(`${base}/PROD`)), [[`${base}/PROD`, ['P1']]]);
  const all = await store.list(base);
  assert.deepEqual(
    all.sets.map((s) => s.set),
    [...new Set(data.map((d) => d.set))].sort(byUtf8),
  );
  // The bound cuts in code-point order too.
  assert.deepEqual(
    (await store.list(base, { sets: 2 })).sets.map((s) => s.set),
    [`${base}/PROD`, `${base}/Prod/x`],
  );
}
