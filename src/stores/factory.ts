/**
 * Store definitions and the factory that builds a store from one. A definition's settings are parsed for its kind
 * once, when it is made (`defineStore`, called by `.configu` loading); `buildStore` hands the typed settings to the
 * store kind's constructor without parsing them again, and connects nothing.
 */
import { ConfigurationError } from '../core/errors.js';
import type { ConfigStore } from '../core/ports.js';
import type { StoreSettings } from './common.js';
import { EtcdConfigStore } from './etcd.js';
import { InMemoryConfigStore } from './in-memory.js';
import { JsonFileConfigStore } from './json-file.js';
import { MysqlConfigStore } from './mysql.js';
import { normaliseStoreType, STORE_TYPES, type StoreType } from './normalise.js';
import { PostgresConfigStore } from './postgresql.js';
import { RedisConfigStore } from './redis.js';
import { parseStoreSettings, type StoreSettingsOf } from './settings.js';
import { SqliteConfigStore } from './sqlite.js';

/** One declared store of a kind. */
export interface StoreDefinitionOf<K extends StoreType> {
  name: string;
  /** The canonical type (normalise.ts): the union's discriminant. */
  type: K;
  /** The settings as written in `.configu`, with relative paths already resolved against the file's folder. */
  configuration: StoreSettings;
  /**
   * The settings parsed and checked for the kind (settings.ts). `defineStore` always sets them; a definition written
   * by hand (a test, a benchmark) may leave them out, and `buildStore` then parses `configuration`.
   */
  settings?: StoreSettingsOf<K>;
  default: boolean;
  backup: boolean;
  /** `.configu` declares the store `readOnly: true`: cfgu reads it and refuses every write to it. */
  readOnly?: boolean;
}

/** One declared store, typed by its kind (`type`). */
export type StoreDefinition<K extends StoreType = StoreType> = { [P in K]: StoreDefinitionOf<P> }[K];

/**
 * A definition with its settings parsed for `type`. Throws ConfigurationError naming the store and the property
 * (`base` is the property path of the configuration in messages, as for parseStoreSettings).
 */
export function defineStore<K extends StoreType>(
  declared: { name: string; type: K; configuration: StoreSettings; default: boolean; backup: boolean; readOnly?: boolean },
  base?: string,
): StoreDefinition<K> {
  const settings = parseStoreSettings(declared.type, declared.configuration, declared.name, base);
  return { ...declared, settings } as StoreDefinitionOf<K> as StoreDefinition<K>;
}

/** The typed settings of a definition: as parsed when it was made, else parsed now. */
function settingsOf<K extends StoreType>(definition: StoreDefinitionOf<K>): StoreSettingsOf<K> {
  return definition.settings ?? parseStoreSettings(definition.type, definition.configuration, definition.name);
}

/** The options of the SQL server kinds from their parsed settings (`user` is another name for `username`). */
function sqlServerOptions(s: StoreSettingsOf<'mysql'>) {
  const { user, timeout, ...rest } = s;
  return { ...rest, username: rest.username ?? user, timeoutMs: timeout };
}

/** Build (but do not connect) the store of a definition. Throws ConfigurationError only for a definition without
 * `settings` whose `configuration` is wrong. */
export function buildStore(definition: StoreDefinition): ConfigStore {
  const { name } = definition;
  switch (definition.type) {
    case 'in-memory':
      settingsOf(definition);
      return new InMemoryConfigStore(name);
    case 'json-file':
      return new JsonFileConfigStore(name, settingsOf(definition));
    case 'sqlite': {
      const { timeout, ...rest } = settingsOf(definition);
      return new SqliteConfigStore(name, { ...rest, timeoutMs: timeout });
    }
    case 'postgresql': {
      const { notify, ...rest } = settingsOf(definition);
      return new PostgresConfigStore(name, { ...sqlServerOptions(rest), notify: notify ?? false });
    }
    case 'mysql':
    case 'mariadb':
      return new MysqlConfigStore(name, sqlServerOptions(settingsOf<'mysql' | 'mariadb'>(definition)), definition.type);
    case 'redis': {
      const { timeout, ...rest } = settingsOf(definition);
      return new RedisConfigStore(name, { ...rest, timeoutMs: timeout });
    }
    case 'etcd': {
      const s = settingsOf(definition);
      return new EtcdConfigStore(name, { hosts: (s.hosts ?? s.host ?? s.url)!, username: s.username, password: s.password, timeoutMs: s.timeout, history: s.history });
    }
  }
}

/**
 * Build (but do not connect) a store of a type (any accepted spelling) with its `configuration` (relative paths
 * already resolved), parsing the settings on the way. `name` is the declared store name, used in error messages;
 * `base` is the property path of the configuration in them (parseStoreSettings). Throws ConfigurationError.
 */
export function createStore(type: string, configuration: StoreSettings = {}, name: string = type, base?: string): ConfigStore {
  const kind = normaliseStoreType(type);
  if (!kind) {
    throw new ConfigurationError(
      `store "${name}": unknown store type "${type}"; known types: ${STORE_TYPES.join(', ')}`,
      undefined,
      `stores.${name}.type`,
    );
  }
  return buildStore(defineStore({ name, type: kind, configuration, default: false, backup: false }, base));
}
