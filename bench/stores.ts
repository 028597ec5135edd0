/** A real store registry (the shipped `in-memory` store) filled with configs, for the in-process benchmarks. */
import { createStoreRegistry } from '../src/stores/index.js';
import type { Config } from '../src/core/ports.js';

export async function memoryRegistry(configs: Config[]) {
  const registry = createStoreRegistry({
    file: undefined,
    stores: [{ name: 'main', type: 'in-memory', configuration: {}, default: true, backup: false }],
    defaultStore: 'main',
    backup: '',
    schemas: {},
    scripts: {},
    interface: {},
  });
  await registry.init();
  await registry.store('main')!.set(configs);
  return registry;
}
