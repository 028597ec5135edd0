/** `.configu`: finding, rendering, parsing, validation messages, path resolution, registry and backup. */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { defaultBackupPath, findConfigFile, loadConfiguration } from '../../src/config/index.js';
import { createStoreRegistry } from '../../src/stores/index.js';
import type { LoadedConfiguration } from '../../src/config/types.js';
import { ConfigurationError, StoreUnavailableError, UnknownStoreError } from '../../src/core/errors.js';
import type { Config, ConfigQuery, ConfigStore, SetListing } from '../../src/core/ports.js';
import { SCHEMA as CONFIGU_SHAPE } from '../../src/config/load.js';
import { assertValidJsonSchema } from '../helpers/meta-schema.js';

const TMP = join(fileURLToPath(new URL('.', import.meta.url)), '..', '.tmp', `config-${Date.now().toString(36)}${randomBytes(3).toString('hex')}`);
mkdirSync(TMP, { recursive: true });
after(() => rmSync(TMP, { recursive: true, force: true }));

let n = 0;
function fileWith(text: string, name = '.configu'): string {
  const dir = join(TMP, `c${++n}`);
  mkdirSync(dir, { recursive: true });
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}
const env = { HOME: '/home/someone' };

async function rejectsWith(text: string, message: string, property?: string) {
  const file = fileWith(text);
  await assert.rejects(loadConfiguration({ file, env }), (e: unknown) => {
    assert.ok(e instanceof ConfigurationError, String(e));
    assert.equal(e.message, `${file}: ${message}`);
    assert.equal(e.file, file);
    if (property !== undefined) assert.equal(e.property, property);
    return true;
  });
}

describe('findConfigFile', () => {
  test('explicit path, then CONFIGU_CONFIG / CONFIGU_CONFIGURATION, then the nearest .configu walking up', () => {
    const top = join(TMP, 'walk');
    const deep = join(top, 'a', 'b', 'c');
    mkdirSync(deep, { recursive: true });
    writeFileSync(join(top, '.configu'), '{}');
    mkdirSync(join(top, 'a', '.configu-not-a-file'), { recursive: true });
    assert.equal(findConfigFile({ cwd: deep, env: {} }), join(top, '.configu'));
    writeFileSync(join(top, 'a', '.configu'), '{}');
    assert.equal(findConfigFile({ cwd: deep, env: {} }), join(top, 'a', '.configu'), 'nearest wins');
    assert.equal(findConfigFile({ cwd: deep, env: { CONFIGU_CONFIG: 'x.yaml' } }), join(deep, 'x.yaml'));
    assert.equal(findConfigFile({ cwd: deep, env: { CONFIGU_CONFIGURATION: '/abs/y' } }), '/abs/y');
    assert.equal(findConfigFile({ cwd: deep, env: { CONFIGU_CONFIG: 'x' }, explicit: '../z' }), join(top, 'a', 'b', 'z'));
    // A folder named .configu is not the file; walking stops at the root with nothing.
    const lonely = join(TMP, 'lonely');
    mkdirSync(join(lonely, '.configu'), { recursive: true });
    const found = findConfigFile({ cwd: lonely, env: {} });
    assert.notEqual(found, join(lonely, '.configu'));
  });
});

describe('loadConfiguration', () => {
  test('YAML with env rendering, type normalisation, default store, relative paths against the file folder', async () => {
    const file = fileWith(
      [
        'stores:',
        '  files:',
        '    type: JsonFile',
        '    configuration: { path: "data/{{ FILE_NAME }}.json" }',
        '  db:',
        '    type: postgres',
        '    default: true',
        '    backup: true',
        '    configuration:',
        '      url: "postgres://app:<% DB_PASSWORD %>@db:5432/app"',
        '  local:',
        '    type: sqlite_store',
        '    configuration: { database: ../shared/local.db, tableName: cfg }',
        '  maria: { type: MariaDB, configuration: { host: db } }',
        'backup: cache/backup.db',
        'schemas: { app: ./app.cfgu.json, remote: "https://example.com/s.cfgu.json" }',
        'scripts: { hello: echo hi }',
        'interface: { proxy: { http: { port: 8080 } } }',
      ].join('\n'),
    );
    const dir = join(file, '..');
    const loaded = await loadConfiguration({ file, env: { ...env, FILE_NAME: 'configs', DB_PASSWORD: 's3cret' } });
    assert.equal(loaded.file, file);
    assert.deepEqual(
      loaded.stores.map((s) => [s.name, s.type, s.default, s.backup]),
      [
        ['files', 'json-file', false, false],
        ['db', 'postgresql', true, true],
        ['local', 'sqlite', false, false],
        ['maria', 'mariadb', false, false],
      ],
    );
    assert.equal(loaded.stores[0]!.configuration.path, join(dir, 'data', 'configs.json'));
    assert.equal(loaded.stores[1]!.configuration.url, 'postgres://app:s3cret@db:5432/app');
    assert.equal(loaded.stores[2]!.configuration.database, join(dir, '..', 'shared', 'local.db'));
    assert.equal(loaded.stores[3]!.configuration.host, 'db', 'not a path');
    assert.equal(loaded.defaultStore, 'db');
    assert.equal(loaded.backup, join(dir, 'cache', 'backup.db'));
    assert.deepEqual(loaded.schemas, { app: join(dir, 'app.cfgu.json'), remote: 'https://example.com/s.cfgu.json' });
    assert.deepEqual(loaded.scripts, { hello: 'echo hi' });
    assert.deepEqual(loaded.interface, { proxy: { http: { port: 8080 } } });
  });

  test('JSON is accepted; the sole store is the default; default backup path is the user cache folder', async () => {
    const file = fileWith(JSON.stringify({ $schema: 'https://example/.configu.json', stores: { only: { type: 'in-memory' } } }));
    const loaded = await loadConfiguration({ file, env });
    assert.equal(loaded.defaultStore, 'only');
    assert.equal(loaded.backup, '/home/someone/.cache/configu/config.db');
    assert.equal(defaultBackupPath({ XDG_CACHE_HOME: '/xdg', HOME: '/h' }), '/xdg/configu/config.db');
    const two = await loadConfiguration({ file: fileWith('stores: { a: { type: in-memory }, b: { type: in-memory } }'), env });
    assert.equal(two.defaultStore, undefined, 'two stores and none marked default: no default');
  });

  test('found by walking up from cwd when no file is given; CONFIGU_CONFIG wins', async () => {
    const file = fileWith('stores: { here: { type: in-memory } }');
    const deep = join(file, '..', 'x', 'y');
    mkdirSync(deep, { recursive: true });
    assert.equal((await loadConfiguration({ cwd: deep, env })).file, file);
    const other = fileWith('stores: { there: { type: in-memory } }', 'custom.yaml');
    assert.equal((await loadConfiguration({ cwd: deep, env: { ...env, CONFIGU_CONFIG: other } })).stores[0]!.name, 'there');
  });

  test('an injected renderer (the sandbox renderTrusted) renders before parsing', async () => {
    const file = fileWith('stores: { s: { type: "{{ kind() }}" } }');
    const loaded = await loadConfiguration({
      file,
      env,
      render: async (text, vars) => {
        assert.equal(vars.HOME, '/home/someone');
        return text.replace('{{ kind() }}', 'in-memory');
      },
    });
    assert.equal(loaded.stores[0]!.type, 'in-memory');
  });

  test('unset variables render empty; expressions need the sandbox renderer', async () => {
    const ok = await loadConfiguration({ file: fileWith('stores: { s: { type: "in-memory{{ UNSET_VAR }}" } }'), env });
    assert.equal(ok.stores[0]!.type, 'in-memory');
    await rejectsWith(
      'stores: { s: { type: "{{ process.exit() }}" } }',
      'cannot render the file with the environment: only variable names can be rendered here: "{{ process.exit() }}" is an expression',
    );
  });

  test('a .configu written for Configu\'s tools loads: `register` is ignored with a notice; a kind only a module provides is refused saying so (issue 31)', async () => {
    const text = [
      '$schema: https://raw.githubusercontent.com/configu/configu/main/packages/schema/.configu.json',
      'stores:',
      '  main: { type: json-file, configuration: { path: data.json }, default: true, backup: true }',
      '  scratch: { type: in-memory }',
      'backup: cache/backup.db',
      'schemas: { app: ./app.cfgu.json }',
      'scripts: { deploy: "configu eval --schema app | configu export" }',
      'register: ["@acme/configu-vault-store", "./stores/custom.js"]',
    ].join('\n');
    const loaded = await loadConfiguration({ file: fileWith(text), env });
    assert.deepEqual(loaded.stores.map((s) => [s.name, s.type]), [['main', 'json-file'], ['scratch', 'in-memory']]);
    assert.deepEqual(loaded.scripts, { deploy: 'configu eval --schema app | configu export' });
    assert.deepEqual(loaded.notices, [
      'register: 2 store modules ignored ("@acme/configu-vault-store", "./stores/custom.js"): cfgu never loads code named in .configu; its stores are built in',
    ]);
    // Without `register`, nothing to say.
    assert.equal((await loadConfiguration({ file: fileWith('stores: { a: { type: in-memory } }'), env })).notices, undefined);
    // A store of a kind no built-in store has, in a file that registers modules: the error says where it would come from.
    await rejectsWith(
      'register: [./vault-store.js]\nstores: { v: { type: hashicorp-vault } }',
      'stores.v.type: unknown store type "hashicorp-vault" (it may come from a module under `register`, which cfgu does not load); known types: json-file, in-memory, sqlite, postgresql, mysql, mariadb, redis, etcd',
      'stores.v.type',
    );
    await rejectsWith('register: ./one.js', 'register must be a list, not string "./one.js"', 'register');
  });

  test('errors: each is one ConfigurationError naming the file and the property', async () => {
    await rejectsWith('cache: /tmp/x.db\nstores: {}', 'property "cache" was renamed `backup` in v1: rename it to "backup"', 'cache');
    await rejectsWith(
      'stores: { main: { type: mongo } }',
      'stores.main.type: unknown store type "mongo"; known types: json-file, in-memory, sqlite, postgresql, mysql, mariadb, redis, etcd',
      'stores.main.type',
    );
    await rejectsWith(
      'stores:\n  a: { type: in-memory, default: true }\n  b: { type: in-memory }\n  c: { type: in-memory, default: true }',
      'stores "a" and "c" both have default: true; only one store can be the default',
      'stores',
    );
    await rejectsWith(
      'stores: { a: { type: in-memory, default: true }, b: { type: in-memory, default: true }, c: { type: in-memory, default: true } }',
      'stores "a", "b" and "c" all have default: true; only one store can be the default',
    );
    await rejectsWith(
      'stores: {}\nextra: 1',
      'unknown property "extra" (allowed here: $schema, stores, backup, schemas, scripts, register, interface)',
      'extra',
    );
    await rejectsWith(
      'stores: { a: { type: in-memory, cache: true } }',
      'unknown property "stores.a.cache" (allowed here: type, configuration, default, backup, readOnly)',
      'stores.a.cache',
    );
    await rejectsWith('stores: { a: { type: in-memory, default: "yes" } }', 'stores.a.default must be a boolean (true or false), not string "yes"', 'stores.a.default');
    await rejectsWith('stores: { a: { configuration: {} } }', 'stores.a.type is required', 'stores.a.type');
    await rejectsWith('stores: [1, 2]', 'stores must be a mapping (object), not a list', 'stores');
    await rejectsWith('interface: 3', 'interface must be a mapping (object), not number 3', 'interface');
    await rejectsWith('stores: { "my store": { type: in-memory, backup: 1 } }', 'stores["my store"].backup must be a boolean (true or false), not number 1');
    await rejectsWith('- a\n- b', 'the file must hold a mapping (object) with stores, backup, schemas, scripts, register, interface; found a list');
    await rejectsWith('stores: {\n  a: [\n', 'invalid YAML/JSON at line 3, column 1: Flow sequence in block collection must be sufficiently indented and end with a ]');
    await rejectsWith('stores: {}\nstores: {}', 'invalid YAML/JSON at line 2, column 1: Map keys must be unique');
    await rejectsWith('stores: { f: { type: json-file } }', 'store "f": configuration.path must be a non-empty string', 'stores.f.configuration.path');
    await rejectsWith(
      'stores: { p: { type: postgresql, configuration: { tableName: "x; drop table y" } } }',
      'store "p": configuration.tableName "x; drop table y" is not a valid table name (letters, digits and _, not starting with a digit, at most 63 characters)',
      'stores.p.configuration.tableName',
    );
  });

  test('an unreadable or missing file is a clear error', async () => {
    const missing = join(TMP, 'nope', '.configu');
    await assert.rejects(loadConfiguration({ file: missing, env }), { message: `${missing}: cannot read the file: no such file` });
    const folder = join(TMP, 'folder.configu');
    mkdirSync(folder, { recursive: true });
    await assert.rejects(loadConfiguration({ file: folder, env }), { message: `${folder}: cannot read the file: is a folder, not a file` });
    if (process.getuid?.() !== 0) {
      const locked = fileWith('{}');
      chmodSync(locked, 0);
      await assert.rejects(loadConfiguration({ file: locked, env }), { message: `${locked}: cannot read the file: permission denied` });
    }
    const lonely = join(TMP, 'no-configu-anywhere');
    mkdirSync(lonely, { recursive: true });
    // Only when no parent of TMP has a .configu (the repository has none).
    if (!findConfigFile({ cwd: lonely, env: {} })) {
      await assert.rejects(loadConfiguration({ cwd: lonely, env: {} }), /^ConfigurationError: no \.configu file found/);
    }
  });
});

/** A store whose reachability a test switches. */
class FlakyStore implements ConfigStore {
  readonly type = 'in-memory';
  up = true;
  inits = 0;
  data = new Map<string, string>();
  constructor(readonly name: string) {}
  async init() {
    this.inits++;
    if (!this.up) throw new StoreUnavailableError(this.name, 'connection refused');
  }
  async get(queries: readonly ConfigQuery[]): Promise<Config[]> {
    if (!this.up) throw new StoreUnavailableError(this.name, 'connection refused');
    return queries.flatMap((q) => {
      const v = this.data.get(`${q.set}|${q.key}`);
      return v ? [{ ...q, value: v }] : [];
    });
  }
  async set(configs: readonly Config[]) {
    if (!this.up) throw new StoreUnavailableError(this.name, 'connection refused');
    for (const c of configs) c.value ? this.data.set(`${c.set}|${c.key}`, c.value) : this.data.delete(`${c.set}|${c.key}`);
  }
  async list(prefix: string): Promise<SetListing> {
    if (!this.up) throw new StoreUnavailableError(this.name, 'connection refused');
    return { prefix, sets: [], truncated: false, limits: { sets: 1, keys: 1 } };
  }
  async close() {}
}

describe('createStoreRegistry', () => {
  const loaded = (backup: string): LoadedConfiguration => ({
    file: undefined,
    stores: [
      { name: 'main', type: 'in-memory', configuration: {}, default: true, backup: true },
      { name: 'other', type: 'in-memory', configuration: {}, default: false, backup: false },
    ],
    defaultStore: 'main',
    backup,
    schemas: {},
    scripts: {},
    interface: {},
  });

  test('builds stores once, resolves names and the default, unknown names list the known ones', async () => {
    const built: string[] = [];
    const registry = createStoreRegistry(loaded(join(TMP, 'r1.db')), {
      createStore: (d) => {
        built.push(d.name);
        return new FlakyStore(d.name);
      },
    });
    await registry.init();
    assert.deepEqual(built, ['main', 'other']);
    assert.equal(registry.resolve(undefined).name, 'main');
    assert.equal(registry.resolve('other').name, 'other');
    assert.equal(registry.resolve('other'), registry.resolve('other'), 'same object every time');
    assert.deepEqual(registry.names(), ['main', 'other']);
    assert.throws(() => registry.resolve('in-memory'), (e: unknown) => e instanceof UnknownStoreError && e.message === 'unknown store "in-memory"; known stores: "main", "other"');
    const none = createStoreRegistry({ ...loaded(join(TMP, 'r2.db')), defaultStore: undefined });
    assert.throws(() => none.resolve(undefined), { message: 'no store was given and there is no default store; known stores: "main", "other"' });
    await registry.close();
    await none.close();
  });

  test('a store with a backup that is down at start-up holds nothing: its backup answers', async () => {
    const warnings: string[] = [];
    const registry = createStoreRegistry(loaded(join(TMP, 'backup', 'c.db')), {
      logger: { warn: (_d, m) => warnings.push(m) },
      createStore: (d) => Object.assign(new FlakyStore(d.name), { up: d.name !== 'main' }),
    });
    await registry.init();
    assert.deepEqual(warnings, ['store "main" is unavailable: connection refused; its backup answers meanwhile, and the store is retried when a request uses it']);
    assert.deepEqual(registry.awaiting(), []);
    await registry.close();
  });

  test('a store down at start-up does not prevent start-up; backup answers while down; recovery is automatic', async () => {
    const stores = new Map<string, FlakyStore>();
    const warnings: string[] = [];
    const registry = createStoreRegistry(loaded(join(TMP, 'backup', 'b.db')), {
      logger: { warn: (_d, m) => warnings.push(m) },
      createStore: (d) => {
        const s = new FlakyStore(d.name);
        stores.set(d.name, s);
        return s;
      },
    });
    stores.get('other')!.up = false;
    await registry.init(); // does not throw
    assert.equal(warnings.length, 1);
    assert.equal(warnings[0]!, 'store "other" is unavailable: connection refused; retried until it answers');
    assert.deepEqual(registry.status().map((s) => s.available), [true, false]);
    assert.deepEqual(registry.awaiting(), ['other'], 'a store without a backup that never answered holds readiness');
    await registry.init(); // again: only the stores that have not answered are tried
    assert.deepEqual([stores.get('main')!.inits, stores.get('other')!.inits], [1, 2]);
    warnings.length = 1;

    const main = registry.resolve('main');
    await main.write([{ set: 's', key: 'A', value: 'a' }, { set: 's', key: 'B', value: 'b' }]);
    assert.deepEqual(await main.read([{ set: 's', key: 'A' }]), { configs: [{ set: 's', key: 'A', value: 'a' }], fromBackup: false });
    await new Promise((r) => setImmediate(r));
    stores.get('main')!.up = false;
    assert.deepEqual(await main.read([{ set: 's', key: 'A' }, { set: 's', key: 'B' }, { set: 's', key: 'C' }]), {
      configs: [
        { set: 's', key: 'A', value: 'a' },
        { set: 's', key: 'B', value: 'b' },
      ],
      fromBackup: true,
    });
    // No backup for `other`: its StoreUnavailableError goes through.
    await assert.rejects(registry.resolve('other').read([{ set: 's', key: 'A' }]), StoreUnavailableError);
    stores.get('main')!.up = true;
    stores.get('other')!.up = true;
    // A value deleted in the store is removed from the backup when the store answers without it.
    await main.write([{ set: 's', key: 'B', value: '' }]);
    assert.deepEqual((await main.read([{ set: 's', key: 'B' }])).configs, []);
    assert.deepEqual((await registry.resolve('other').read([{ set: 's', key: 'A' }])).fromBackup, false);
    assert.deepEqual(registry.awaiting(), [], 'answering a request counts');
    stores.get('main')!.up = false;
    assert.deepEqual(await main.read([{ set: 's', key: 'B' }]), { configs: [], fromBackup: true });
    await registry.close();
    // The backup is a SQLite database in the sqlite store's layout, readable as a `sqlite` store.
    const { createStore } = await import('../../src/stores/index.js');
    const asSqlite = createStore('sqlite', { database: join(TMP, 'backup', 'b.db'), tableName: 'main' }, 'backup-reader');
    assert.deepEqual(await asSqlite.get([{ set: 's', key: 'A' }]), [{ set: 's', key: 'A', value: 'a' }]);
    await asSqlite.close();
  });
});

test('ResolvedStore.list: the store\'s listing; while the store is down, StoreUnavailableError even with a backup (never a listing from it)', async () => {
  const stores = new Map<string, FlakyStore>();
  const registry = createStoreRegistry(
    {
      file: undefined,
      stores: [{ name: 'main', type: 'in-memory', configuration: {}, default: true, backup: true }],
      defaultStore: 'main',
      backup: join(TMP, 'backup', 'list.db'),
      schemas: {},
      scripts: {},
      interface: {},
    },
    { logger: { warn: () => undefined }, createStore: (d) => stores.set(d.name, new FlakyStore(d.name)).get(d.name)! },
  );
  await registry.init();
  const main = registry.resolve('main');
  await main.write([{ set: 'prod', key: 'A', value: 'a' }]);
  assert.deepEqual(await main.read([{ set: 'prod', key: 'A' }]), { configs: [{ set: 'prod', key: 'A', value: 'a' }], fromBackup: false });
  assert.deepEqual(await main.list!('prod'), { prefix: 'prod', sets: [], truncated: false, limits: { sets: 1, keys: 1 } });
  await new Promise((r) => setImmediate(r)); // the backup has the read
  stores.get('main')!.up = false;
  assert.equal((await main.read([{ set: 'prod', key: 'A' }])).fromBackup, true, 'reads fall back');
  await assert.rejects(main.list!('prod'), (e: unknown) => e instanceof StoreUnavailableError && e.message === 'store "main" is unavailable: connection refused');
  assert.deepEqual(registry.status(), [{ name: 'main', type: 'in-memory', available: false, problem: 'store "main" is unavailable: connection refused' }]);
  stores.get('main')!.up = true;
  await main.list!('');
  assert.deepEqual(registry.status(), [{ name: 'main', type: 'in-memory', available: true }], 'a listing that answers counts as the store being back');
  await registry.close();
});

test('the .configu shape is a valid JSON Schema (compiled without the meta-schema check at start-up)', () => {
  assertValidJsonSchema(CONFIGU_SHAPE, '.configu shape');
});
