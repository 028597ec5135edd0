/**
 * Store kinds behind one `ConfigStore` interface (a port of src/core/ports.ts), the factory that builds one from a
 * store definition, and the registry that holds the declared stores with their backup.
 */
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
export { buildStore, createStore, defineStore, type StoreDefinition, type StoreDefinitionOf } from './factory.js';
export {
  createStoreRegistry,
  type RegistryLogger,
  type StoreRegistry,
  type StoreRegistryInput,
  type StoreRegistryOptions,
  type StoreRegistryWithStatus,
  type StoreStatus,
} from './registry.js';
