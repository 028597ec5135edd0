/** Public entry of the store-definition file `.configu`: find, load and render it. The stores it declares are built
 * by src/stores (createStoreRegistry). */
export { CONFIG_FILE_NAME, NO_CONFIG_FILE, findConfigFile, type FindConfigFileOptions } from './find.js';
export { defaultBackupPath, loadConfiguration, type LoadConfigurationOptions } from './load.js';
export { renderVariables, type TemplateRenderer } from './render.js';
export type { LoadedConfiguration } from './types.js';
