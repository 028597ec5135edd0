/** Store kinds behind one `ConfigStore` interface, and the factory that builds one from a `.configu` definition. */
import { ConfigurationError } from '../core/errors.js';
import { optNumber, optString, reqString, tableNameOf, timeoutOf, type StoreSettings } from './common.js';
import { EtcdConfigStore } from './etcd.js';
import { InMemoryConfigStore } from './in-memory.js';
import { JsonFileConfigStore } from './json-file.js';
import { MysqlConfigStore } from './mysql.js';
import { DEFAULT_FEED_INTERVAL_MS, feedIntervalOf } from './feed.js';
import { normaliseStoreType, STORE_TYPES, type StoreType } from './normalise.js';
import { PostgresConfigStore } from './postgresql.js';
import { RedisConfigStore } from './redis.js';
import { SqliteConfigStore } from './sqlite.js';
import type { ConfigStore } from './types.js';

export type { Config, ConfigQuery, ConfigStore, ResolvedStore, StoreResolver } from './types.js';
export { normaliseStoreType, STORE_TYPES, type StoreType } from './normalise.js';
export { InMemoryConfigStore } from './in-memory.js';
export { JsonFileConfigStore, parseJsonConfigs, type JsonFileStoreOptions } from './json-file.js';
export { SqliteConfigStore } from './sqlite.js';
export { PostgresConfigStore } from './postgresql.js';
export { MysqlConfigStore } from './mysql.js';
export { RedisConfigStore } from './redis.js';
export { EtcdConfigStore } from './etcd.js';
export { BackupDatabase } from './backup.js';
export { configId, DEFAULT_TIMEOUT_MS } from './common.js';

const SQL_SERVER_SETTINGS = [
  'url', 'host', 'port', 'username', 'user', 'password', 'database', 'ssl', 'tableName', 'timeout', 'poolSize', 'feedIntervalMs',
] as const;

/**
 * The `configuration` properties each store kind reads (and nothing else: `.configu` loading rejects any other name,
 * so a misspelt `tablename` is a start-up error instead of data silently going to the default table).
 */
export const STORE_SETTINGS: Readonly<Record<StoreType, readonly string[]>> = {
  'json-file': ['path', 'watch', 'recheckMs', 'lockTimeoutMs', 'staleLockMs', 'feedIntervalMs'],
  'in-memory': [],
  sqlite: ['database', 'tableName', 'timeout', 'feedIntervalMs'],
  postgresql: [...SQL_SERVER_SETTINGS, 'notify'],
  mysql: SQL_SERVER_SETTINGS,
  mariadb: SQL_SERVER_SETTINGS,
  redis: ['url', 'host', 'port', 'username', 'password', 'db', 'timeout', 'feedIntervalMs'],
  etcd: ['hosts', 'host', 'url', 'username', 'password', 'timeout'],
};

function optBoolean(conf: StoreSettings, prop: string, store: string): boolean | undefined {
  const v = conf[prop];
  if (v === undefined || v === null) return undefined;
  if (typeof v === 'boolean') return v;
  if (v === 'true' || v === 'false') return v === 'true';
  throw new ConfigurationError(
    `store "${store}": configuration.${prop} must be a boolean`,
    undefined,
    `stores.${store}.configuration.${prop}`,
  );
}

function sqlServerOptions(conf: StoreSettings, name: string) {
  return {
    feedIntervalMs: feedIntervalOf(conf, name, DEFAULT_FEED_INTERVAL_MS.sql),
    url: optString(conf, 'url', name),
    host: optString(conf, 'host', name),
    port: optNumber(conf, 'port', name),
    username: optString(conf, 'username', name) ?? optString(conf, 'user', name),
    password: optString(conf, 'password', name),
    database: optString(conf, 'database', name),
    ssl: conf.ssl,
    tableName: tableNameOf(conf, name),
    timeoutMs: timeoutOf(conf, name),
    poolSize: optNumber(conf, 'poolSize', name),
  };
}

/**
 * Build (but do not connect) a store of a type (any accepted spelling) with its `configuration` (relative paths
 * already resolved). `name` is the declared store name, used in error messages. Throws ConfigurationError.
 */
export function createStore(type: string, configuration: StoreSettings = {}, name: string = type): ConfigStore {
  const kind: StoreType | undefined = normaliseStoreType(type);
  const conf = configuration ?? {};
  switch (kind) {
    case 'in-memory':
      return new InMemoryConfigStore(name);
    case 'json-file':
      return new JsonFileConfigStore(name, {
        path: reqString(conf, 'path', name),
        watch: optBoolean(conf, 'watch', name),
        recheckMs: optNumber(conf, 'recheckMs', name),
        lockTimeoutMs: optNumber(conf, 'lockTimeoutMs', name),
        staleLockMs: optNumber(conf, 'staleLockMs', name),
        feedIntervalMs: feedIntervalOf(conf, name, DEFAULT_FEED_INTERVAL_MS['json-file']),
      });
    case 'sqlite':
      return new SqliteConfigStore(name, {
        database: reqString(conf, 'database', name),
        tableName: tableNameOf(conf, name),
        timeoutMs: timeoutOf(conf, name),
        feedIntervalMs: feedIntervalOf(conf, name, DEFAULT_FEED_INTERVAL_MS.sqlite),
      });
    case 'postgresql':
      return new PostgresConfigStore(name, { ...sqlServerOptions(conf, name), notify: optBoolean(conf, 'notify', name) ?? false });
    case 'mysql':
    case 'mariadb':
      return new MysqlConfigStore(name, sqlServerOptions(conf, name), kind);
    case 'redis':
      return new RedisConfigStore(name, {
        url: optString(conf, 'url', name),
        host: optString(conf, 'host', name),
        port: optNumber(conf, 'port', name),
        username: optString(conf, 'username', name),
        password: optString(conf, 'password', name),
        db: optNumber(conf, 'db', name),
        timeoutMs: timeoutOf(conf, name),
        feedIntervalMs: feedIntervalOf(conf, name, DEFAULT_FEED_INTERVAL_MS.redis),
      });
    case 'etcd': {
      const hosts = conf.hosts ?? conf.host ?? conf.url;
      const list = typeof hosts === 'string' ? [hosts] : Array.isArray(hosts) ? hosts : [];
      if (!list.length || !list.every((h) => typeof h === 'string' && h !== '')) {
        throw new ConfigurationError(
          `store "${name}": configuration.hosts must be a URL or a list of URLs (e.g. http://127.0.0.1:2379)`,
          undefined,
          `stores.${name}.configuration.hosts`,
        );
      }
      return new EtcdConfigStore(name, {
        hosts: list as string[],
        username: optString(conf, 'username', name),
        password: optString(conf, 'password', name),
        timeoutMs: timeoutOf(conf, name),
      });
    }
    default:
      throw new ConfigurationError(
        `store "${name}": unknown store type "${type}"; known types: ${STORE_TYPES.join(', ')}`,
        undefined,
        `stores.${name}.type`,
      );
  }
}
