/** Store kinds behind one `ConfigStore` interface, and the factory that builds one from a `.configu` definition. */
import { ConfigurationError } from '../core/errors.js';
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

export { parseStoreSettings, STORE_SCHEMAS, STORE_SETTINGS, type StoreSettingsOf } from './settings.js';

/** The options of the SQL server kinds from their parsed settings (`user` is another name for `username`). */
function sqlServerOptions(s: StoreSettingsOf<'mysql'>) {
  const { user, timeout, ...rest } = s;
  return { ...rest, username: rest.username ?? user, timeoutMs: timeout };
}

/**
 * Build (but do not connect) a store of a type (any accepted spelling) with its `configuration` (relative paths
 * already resolved). `name` is the declared store name, used in error messages; `base` is the property path of the
 * configuration in them (parseStoreSettings). Throws ConfigurationError.
 */
export function createStore(type: string, configuration: StoreSettings = {}, name: string = type, base?: string): ConfigStore {
  const kind: StoreType | undefined = normaliseStoreType(type);
  switch (kind) {
    case 'in-memory':
      parseStoreSettings(kind, configuration, name, base);
      return new InMemoryConfigStore(name);
    case 'json-file':
      return new JsonFileConfigStore(name, parseStoreSettings(kind, configuration, name, base));
    case 'sqlite': {
      const { timeout, ...rest } = parseStoreSettings(kind, configuration, name, base);
      return new SqliteConfigStore(name, { ...rest, timeoutMs: timeout });
    }
    case 'postgresql': {
      const { notify, ...rest } = parseStoreSettings(kind, configuration, name, base);
      return new PostgresConfigStore(name, { ...sqlServerOptions(rest), notify: notify ?? false });
    }
    case 'mysql':
    case 'mariadb':
      return new MysqlConfigStore(name, sqlServerOptions(parseStoreSettings(kind, configuration, name, base)), kind);
    case 'redis': {
      const { timeout, ...rest } = parseStoreSettings(kind, configuration, name, base);
      return new RedisConfigStore(name, { ...rest, timeoutMs: timeout });
    }
    case 'etcd': {
      const s = parseStoreSettings(kind, configuration, name, base);
      return new EtcdConfigStore(name, { hosts: (s.hosts ?? s.host ?? s.url)!, username: s.username, password: s.password, timeoutMs: s.timeout });
    }
    default:
      throw new ConfigurationError(
        `store "${name}": unknown store type "${type}"; known types: ${STORE_TYPES.join(', ')}`,
        undefined,
        `stores.${name}.type`,
      );
  }
}
