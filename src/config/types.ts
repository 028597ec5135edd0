/** The loaded `.configu` store-definition file. */
import type { StoreDefinition } from '../stores/factory.js';

export interface LoadedConfiguration {
  /** Absolute path of the file (for operator-facing messages only; never sent to HTTP clients). */
  file: string | undefined;
  /** The declared stores, each with its settings parsed and checked for its kind. */
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
