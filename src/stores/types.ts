/**
 * The store interface every store kind implements. A store holds Configs `{ set, key, value }` whose value is always
 * a string; an empty value is never kept (writing "" deletes).
 */

export interface Config {
  /** Set path in normal form: "" for the root, else `a/b/c` (no leading or trailing slash). */
  set: string;
  key: string;
  value: string;
}

export interface ConfigQuery {
  set: string;
  key: string;
}

export interface ConfigStore {
  /** Normalised type name, e.g. `json-file`, `postgresql`. */
  readonly type: string;
  /** Connect / open / create tables. Called once at start-up. Idempotent. */
  init(): Promise<void>;
  /**
   * Answer a batch of queries in one round trip. Returns the configs that exist with a non-empty value, in any order;
   * queries without a value are simply absent from the answer.
   * Throws StoreUnavailableError (src/core/errors.ts) when the store cannot be reached or read.
   */
  get(queries: readonly ConfigQuery[]): Promise<Config[]>;
  /** Write a batch; a config whose value is "" deletes that (set, key). */
  set(configs: readonly Config[]): Promise<void>;
  /** Release connections, timers and file handles. Idempotent. */
  close(): Promise<void>;
}

/**
 * A store as the engine sees it: a declared name, resolved from `.configu`, wrapped with backup behaviour.
 * Built once at start-up by the registry (src/config), never per request.
 */
export interface ResolvedStore {
  /** The name under which `.configu` declares the store. */
  readonly name: string;
  /** Normalised store type (`$.input.store.type`). */
  readonly type: string;
  /**
   * Batched read. `fromBackup` is true when the store could not be reached and the backup answered instead.
   * Throws StoreUnavailableError when neither can answer.
   */
  read(queries: readonly ConfigQuery[]): Promise<{ configs: Config[]; fromBackup: boolean }>;
  /** Batched write ("" deletes). */
  write(configs: readonly Config[]): Promise<void>;
}

export interface StoreResolver {
  /** The store a request names, or the default store when `name` is undefined. Throws UnknownStoreError. */
  resolve(name: string | undefined): ResolvedStore;
  /** Declared names, for error messages. */
  names(): string[];
}
