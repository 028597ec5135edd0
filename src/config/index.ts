/** Public entry of the store-definition file: find, load, and build the stores it declares. */
export { CONFIG_FILE_NAME, NO_CONFIG_FILE, findConfigFile, type FindConfigFileOptions } from './find.js';
export { defaultBackupPath, loadConfiguration, type LoadConfigurationOptions } from './load.js';
export { renderVariables, type TemplateRenderer } from './render.js';
export {
  createStoreRegistry,
  type RegistryLogger,
  type StoreRegistryOptions,
  type StoreRegistryWithStatus,
  type StoreStatus,
} from './registry.js';
export type { LoadedConfiguration, StoreDefinition, StoreRegistry } from './types.js';
export { createStore, normaliseStoreType, STORE_TYPES } from '../stores/index.js';
