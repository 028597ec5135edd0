/** Every store kind's `configuration` is validated at load time: an unknown property names itself and the closest known name. */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { loadConfiguration } from '../../src/config/index.js';
import { closestName } from '../../src/core/suggest.js';
import { ConfigurationError } from '../../src/core/errors.js';
import {
  createStore,
  createStoreRegistry,
  DEFAULT_TIMEOUT_MS,
  JsonFileConfigStore,
  parseStoreSettings,
  STORE_SCHEMAS,
  STORE_SETTINGS,
  STORE_TYPES,
  type StoreType,
} from '../../src/stores/index.js';

const TMP = join(fileURLToPath(new URL('.', import.meta.url)), '..', '.tmp', `settings-${Date.now().toString(36)}${randomBytes(3).toString('hex')}`);
mkdirSync(TMP, { recursive: true });
after(() => rmSync(TMP, { recursive: true, force: true }));

let n = 0;
function fileWith(stores: unknown): string {
  const dir = join(TMP, `c${++n}`);
  mkdirSync(dir, { recursive: true });
  const path = join(dir, '.configu');
  writeFileSync(path, JSON.stringify({ stores }));
  return path;
}

async function rejectsWith(stores: unknown, message: string, property: string) {
  const file = fileWith(stores);
  await assert.rejects(loadConfiguration({ file, env: {} }), (e: unknown) => {
    assert.ok(e instanceof ConfigurationError, String(e));
    assert.equal(e.message, `${file}: ${message}`);
    assert.equal(e.property, property);
    return true;
  });
}

const SQL = 'url, host, port, username, user, password, database, ssl, tableName, timeout, poolSize, feedIntervalMs, history';

describe('store configuration: unknown properties are start-up errors', () => {
  test('sql servers (postgresql, mysql, mariadb): `tablename` and `timout` are named with the right spelling', async () => {
    for (const type of ['postgresql', 'postgres', 'mysql', 'mariadb']) {
      const allowed = type.startsWith('postgres') ? `${SQL}, notify` : SQL;
      await rejectsWith(
        { db: { type, configuration: { host: '127.0.0.1', tablename: 'mine' } } },
        `unknown property "stores.db.configuration.tablename" (did you mean "tableName"? allowed here: ${allowed})`,
        'stores.db.configuration.tablename',
      );
      await rejectsWith(
        { db: { type, configuration: { host: '127.0.0.1', timout: 500 } } },
        `unknown property "stores.db.configuration.timout" (did you mean "timeout"? allowed here: ${allowed})`,
        'stores.db.configuration.timout',
      );
    }
  });

  test('json-file, sqlite, redis, etcd', async () => {
    await rejectsWith(
      { files: { type: 'json-file', configuration: { path: './c.json', staleLockMS: 1000 } } },
      'unknown property "stores.files.configuration.staleLockMS" (did you mean "staleLockMs"? allowed here: path, watch, recheckMs, lockTimeoutMs, staleLockMs, feedIntervalMs, history)',
      'stores.files.configuration.staleLockMS',
    );
    await rejectsWith(
      { local: { type: 'sqlite', configuration: { database: './c.db', table: 'x' } } },
      'unknown property "stores.local.configuration.table" (allowed here: database, tableName, timeout, feedIntervalMs, history)',
      'stores.local.configuration.table',
    );
    await rejectsWith(
      { cache: { type: 'redis', configuration: { url: 'redis://127.0.0.1:6379', database: 2 } } },
      'unknown property "stores.cache.configuration.database" (allowed here: url, host, port, username, password, db, timeout, feedIntervalMs, history)',
      'stores.cache.configuration.database',
    );
    await rejectsWith(
      { kv: { type: 'etcd', configuration: { hosts: 'http://127.0.0.1:2379', hots: 'x' } } },
      'unknown property "stores.kv.configuration.hots" (did you mean "hosts"? allowed here: hosts, host, url, username, password, timeout, history)',
      'stores.kv.configuration.hots',
    );
  });

  test('change feed settings: feedIntervalMs is 10 ms to 1 hour, notify (postgresql) a boolean', async () => {
    for (const [type, base] of [
      ['json-file', { path: './c.json' }],
      ['sqlite', { database: './c.db' }],
      ['postgresql', { host: '127.0.0.1' }],
      ['mariadb', { host: '127.0.0.1' }],
      ['redis', { host: '127.0.0.1' }],
    ] as const) {
      for (const bad of [5, -1, 'soon', 3_600_001]) {
        await rejectsWith(
          { s: { type, configuration: { ...base, feedIntervalMs: bad } } },
          'store "s": configuration.feedIntervalMs must be a number of milliseconds from 10 to 3600000',
          'stores.s.configuration.feedIntervalMs',
        );
      }
    }
    await rejectsWith(
      { s: { type: 'postgresql', configuration: { host: '127.0.0.1', notify: 'yes' } } },
      'store "s": configuration.notify must be a boolean',
      'stores.s.configuration.notify',
    );
  });

  test('in-memory takes no configuration; store names that are not identifiers are quoted in the path', async () => {
    await rejectsWith(
      { 'my store': { type: 'in-memory', configuration: { path: 'x' } } },
      'unknown property "stores["my store"].configuration.path" (nothing is allowed here)',
      'stores["my store"].configuration.path',
    );
  });

  test('the rest of .configu suggests the closest name too', async () => {
    await rejectsWith(
      { a: { type: 'in-memory', defualt: true } },
      'unknown property "stores.a.defualt" (did you mean "default"? allowed here: type, configuration, default, backup, readOnly)',
      'stores.a.defualt',
    );
  });

  test('every documented setting is accepted', async () => {
    const values: Record<string, unknown> = {
      path: './c.json', watch: false, recheckMs: 100, lockTimeoutMs: 100, staleLockMs: 100, database: './c.db', tableName: 'cfg',
      timeout: 100, url: 'postgres://127.0.0.1/x', host: '127.0.0.1', port: 1, username: 'u', user: 'u', password: 'p',
      ssl: false, poolSize: 2, db: 0, hosts: ['http://127.0.0.1:2379'], feedIntervalMs: 500, notify: true,
      history: { keep: 10, maxAgeDays: 30 },
    };
    for (const type of STORE_TYPES) {
      const configuration = Object.fromEntries(STORE_SETTINGS[type].map((s) => [s, type === 'redis' && s === 'url' ? 'redis://127.0.0.1' : values[s]]));
      const loaded = await loadConfiguration({ file: fileWith({ s: { type, configuration } }), env: {} });
      assert.deepEqual(Object.keys(loaded.stores[0]!.configuration), STORE_SETTINGS[type], type);
    }
  });

  test('loading parses the settings once, typed by kind; the registry builds the stores from them', async () => {
    const file = fileWith({
      db: { type: 'postgres', configuration: { host: '127.0.0.1', port: '5433', notify: 'true' } },
      files: { type: 'JsonFile', configuration: { path: 'c.json', watch: 'false' }, default: true },
    });
    const loaded = await loadConfiguration({ file, env: {} });
    const [db, files] = loaded.stores;
    assert.ok(db?.type === 'postgresql' && files?.type === 'json-file');
    assert.deepEqual(
      { port: db.settings?.port, notify: db.settings?.notify, tableName: db.settings?.tableName, timeout: db.settings?.timeout },
      { port: 5433, notify: true, tableName: 'config', timeout: DEFAULT_TIMEOUT_MS },
    );
    assert.deepEqual(files.settings, { path: join(file, '..', 'c.json'), watch: false });
    // The registry takes the parsed settings as they are: a `configuration` it would have to parse is not read.
    const registry = createStoreRegistry({ ...loaded, stores: [{ ...files, configuration: { path: 5, unknown: true } }] });
    const store = registry.store('files');
    assert.ok(store instanceof JsonFileConfigStore);
    await registry.close();
  });
});

describe('the settings as the store kinds receive them (src/stores/settings.ts)', () => {
  test('history: true, false, or { keep, maxAgeDays }, read from text too; absent is the kind\'s default', () => {
    const h = (history: unknown) => parseStoreSettings('sqlite', { database: './c.db', history }, 's').history;
    assert.equal(h(undefined), undefined);
    assert.deepEqual(h(true), { enabled: true, keep: 1000, maxAgeDays: undefined });
    assert.deepEqual(h('false'), { enabled: false, keep: 1000, maxAgeDays: undefined });
    assert.deepEqual(h({ keep: '7', maxAgeDays: '1.5' }), { enabled: true, keep: 7, maxAgeDays: 1.5 });
    const refused = (history: unknown, message: string, property: string) =>
      assert.throws(() => h(history), (e: unknown) => e instanceof ConfigurationError && e.message === message && e.property === property);
    refused('yes', 'store "s": configuration.history must be true, false or an object { keep, maxAgeDays }', 'stores.s.configuration.history');
    refused({ keep: 0 }, 'store "s": configuration.history.keep must be a whole number of records from 1', 'stores.s.configuration.history.keep');
    refused({ keep: 2.5 }, 'store "s": configuration.history.keep must be a whole number of records from 1', 'stores.s.configuration.history.keep');
    refused({ maxAgeDays: 0 }, 'store "s": configuration.history.maxAgeDays must be a number of days above 0', 'stores.s.configuration.history.maxAgeDays');
    refused(
      { kep: 1 },
      'unknown property "stores.s.configuration.history.kep" (did you mean "keep"? allowed here: keep, maxAgeDays)',
      'stores.s.configuration.history.kep',
    );
  });

  test('the list of settings is the schema of each kind', () => {
    for (const type of STORE_TYPES) assert.deepEqual(STORE_SETTINGS[type], Object.keys(STORE_SCHEMAS[type].shape), type);
  });

  test('numbers and booleans from their text (a rendered variable), defaults, and the other names of a setting', () => {
    const pg = parseStoreSettings('postgresql', { host: '127.0.0.1', port: '5433', user: 'me', notify: 'true', poolSize: '', feedIntervalMs: '250' }, 's');
    assert.deepEqual(
      { port: pg.port, user: pg.user, notify: pg.notify, poolSize: pg.poolSize, feedIntervalMs: pg.feedIntervalMs, tableName: pg.tableName, timeout: pg.timeout },
      { port: 5433, user: 'me', notify: true, poolSize: undefined, feedIntervalMs: 250, tableName: 'config', timeout: DEFAULT_TIMEOUT_MS },
    );
    const json = parseStoreSettings('json-file', { path: '/tmp/c.json', watch: 'false', staleLockMs: 0 }, 's');
    assert.deepEqual(json, { path: '/tmp/c.json', watch: false, staleLockMs: 0 });
    assert.equal(parseStoreSettings('redis', { password: 1234 }, 's').password, '1234', 'a number where text is expected is its text');
    assert.deepEqual(parseStoreSettings('etcd', { host: 'http://127.0.0.1:2379' }, 's').host, ['http://127.0.0.1:2379']);
    assert.deepEqual(parseStoreSettings('etcd', { url: ['http://a:2379', 'http://b:2379'] }, 's').url, ['http://a:2379', 'http://b:2379']);
  });

  test('values of the wrong kind: the message names the store, the setting and what it must be', () => {
    const cases: [StoreType, Record<string, unknown>, string, string][] = [
      ['redis', { port: 'six' }, 'port', 'must be a non-negative number'],
      ['redis', { db: -1 }, 'db', 'must be a non-negative number'],
      ['redis', { timeout: Infinity }, 'timeout', 'must be a non-negative number'],
      ['redis', { host: { name: 'x' } }, 'host', 'must be a string'],
      ['json-file', { path: '' }, 'path', 'must be a non-empty string'],
      ['json-file', { path: './c.json', watch: 'yes' }, 'watch', 'must be a boolean'],
      ['sqlite', { database: './c.db', tableName: '1x' }, 'tableName', '"1x" is not a valid table name (letters, digits and _, not starting with a digit, at most 63 characters)'],
      ['etcd', {}, 'hosts', 'must be a URL or a list of URLs (e.g. http://127.0.0.1:2379)'],
      ['etcd', { hosts: [''] }, 'hosts', 'must be a URL or a list of URLs (e.g. http://127.0.0.1:2379)'],
      ['etcd', { hosts: 5 }, 'hosts', 'must be a URL or a list of URLs (e.g. http://127.0.0.1:2379)'],
    ];
    for (const [type, configuration, property, message] of cases) {
      assert.throws(
        () => createStore(type, configuration, 's'),
        (e: unknown) => {
          assert.ok(e instanceof ConfigurationError, String(e));
          assert.equal(e.message, `store "s": configuration.${property} ${message}`);
          assert.equal(e.property, `stores.s.configuration.${property}`);
          return true;
        },
        `${type} ${JSON.stringify(configuration)}`,
      );
    }
  });
});

describe('closestName', () => {
  test('a slip of the keyboard finds the name; something else finds nothing', () => {
    const known = ['url', 'host', 'port', 'tableName', 'timeout', 'poolSize'];
    assert.equal(closestName('TABLENAME', known), 'tableName');
    assert.equal(closestName('timout', known), 'timeout');
    assert.equal(closestName('tiemout', known), 'timeout', 'a transposition is one edit');
    assert.equal(closestName('prot', known), 'port');
    assert.equal(closestName('hots', known), 'host');
    assert.equal(closestName('extra', known), undefined);
    assert.equal(closestName('x', known), undefined);
    assert.equal(closestName('anything', []), undefined);
  });
});
