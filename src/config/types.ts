/** The loaded `.configu` store-definition file. */
import type { ConfigStore, StoreResolver } from '../stores/types.js';

export interface StoreDefinition {
  name: string;
  /** Normalised type (`json-file`, `in-memory`, `sqlite`, `postgresql`, `mysql`, `redis`, `etcd`, ...). */
  type: string;
  /** Store-specific settings with relative paths already resolved against the file's folder. */
  configuration: Record<string, unknown>;
  default: boolean;
  backup: boolean;
}

export interface LoadedConfiguration {
  /** Absolute path of the file (for operator-facing messages only; never sent to HTTP clients). */
  file: string | undefined;
  stores: StoreDefinition[];
  /** Name of the default store, if any. */
  defaultStore: string | undefined;
  /** Path of the backup database. */
  backup: string;
  schemas: Record<string, string>;
  scripts: Record<string, string>;
  /** `interface` section as written (e.g. `interface.proxy` settings), validated for shape. */
  interface: Record<string, unknown>;
  /** What the file says that cfgu accepts but ignores, and why (a warning each, for the log or standard error). */
  notices?: string[];
}

/** The stores of a loaded configuration, built and initialised once. */
export interface StoreRegistry extends StoreResolver {
  /** Connect every store (init). */
  init(): Promise<void>;
  /** Close every store and the backup database. */
  close(): Promise<void>;
  /** The underlying store objects, by name. */
  store(name: string): ConfigStore | undefined;
}
