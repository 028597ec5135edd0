/**
 * The stores of a loaded `.configu`, built once at start-up (never per request). `init()` connects every store that
 * has not answered yet; a store that cannot be reached is logged and left to reconnect on its own (each store kind
 * retries on use), and `awaiting()` names the stores without a backup that have never answered, which the server
 * waits for before it reports ready. Requests resolve a store by declared name (or the default store); the
 * ResolvedStore wrapper adds the backup behaviour: a store declared with `backup: true` has its answers copied to the
 * backup database, which answers its reads while the store cannot be reached.
 */
import { CfguError, StoreUnavailableError, UnknownStoreError } from '../core/errors.js';
import { isRevisioned, type ChangeFeed, type ChangeListener, type Config, type ConfigQuery, type ConfigStore, type ResolvedStore, type SetListing, type SetListOptions, type StoreResolver, type StoreRevisions } from '../core/ports.js';
import { BackupDatabase } from './backup.js';
import { reasonOf } from './common.js';
import { buildStore, type StoreDefinition } from './factory.js';

/** What the registry needs of a loaded `.configu` (src/config's LoadedConfiguration has these). */
export interface StoreRegistryInput {
  stores: readonly StoreDefinition[];
  /** Name of the default store, if any. */
  defaultStore: string | undefined;
  /** Path of the backup database. */
  backup: string;
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

/** pino-compatible subset. */
export interface RegistryLogger {
  warn(details: Record<string, unknown>, message: string): void;
  info?(details: Record<string, unknown>, message: string): void;
}

export interface StoreRegistryOptions {
  logger?: RegistryLogger;
  /** Build a store (tests inject fakes). Default: buildStore, which takes the settings as parsed at loading. */
  createStore?: (definition: StoreDefinition) => ConfigStore;
}

export interface StoreStatus {
  name: string;
  type: string;
  /** The last init/read/write reached the store. */
  available: boolean;
  /** Why not, when not (secret-free). */
  problem?: string;
}

export interface StoreRegistryWithStatus extends StoreRegistry {
  /** Per-store reachability as last seen (for readiness reports and logs). */
  status(): StoreStatus[];
  /** The backup database, when any store has `backup: true`. */
  readonly backup: BackupDatabase | undefined;
  /** Stores without a backup that have not answered once yet (init or a request): the server is not ready. */
  awaiting(): string[];
}

const stderrLogger: RegistryLogger = {
  warn: (details, message) => process.stderr.write(`cfgu: ${message} ${JSON.stringify(details)}\n`),
};

class Resolved implements ResolvedStore {
  available = true;
  /** The store has answered at least once (init or a request) since start-up. */
  answered = false;
  problem: string | undefined;
  constructor(
    readonly name: string,
    readonly type: string,
    readonly store: ConfigStore,
    readonly backup: BackupDatabase | undefined,
    readonly readOnly = false,
  ) {
    if (isRevisioned(store)) this.revisions = this.revisionsOf(store);
    // The change feed, when the store's kind has one. The backup answers reads during an outage; it changes only
    // when the store answers again, which the feed reports as change({}) then.
    if (store.watch) this.watch = (listener: ChangeListener): ChangeFeed => store.watch!(listener);
  }

  watch?: (listener: ChangeListener) => ChangeFeed;
  readonly revisions?: StoreRevisions;

  /** The store's revisions, each call counted for the store's availability as read and write are. */
  private revisionsOf(store: ConfigStore & Pick<StoreRevisions, 'revision' | 'write' | 'history'>): StoreRevisions {
    const reached = async <T>(run: () => Promise<T>): Promise<T> => {
      let value: T;
      try {
        value = await run();
      } catch (e) {
        throw this.unavailable(e);
      }
      this.ok();
      return value;
    };
    return {
      revision: (set) => reached(() => store.revision(set)),
      history: (query) => reached(() => store.history(query)),
      list: (prefix, options) => reached(() => store.list(prefix, options)),
      write: async (set, changes, options) => {
        const result = await reached(() => store.write(set, changes, options));
        this.backup?.recordWrite(this.name, changes.map((c) => ({ set, key: c.key, value: c.value ?? '' })));
        return result;
      },
    };
  }

  private unavailable(e: unknown): CfguError {
    const err = e instanceof CfguError ? e : new StoreUnavailableError(this.name, reasonOf(e));
    if (err instanceof StoreUnavailableError) {
      this.available = false;
      this.problem = err.message;
    }
    return err;
  }

  private ok(): void {
    this.available = true;
    this.answered = true;
    this.problem = undefined;
  }

  async read(queries: readonly ConfigQuery[]): Promise<{ configs: Config[]; fromBackup: boolean }> {
    let configs: Config[];
    try {
      configs = await this.store.get(queries);
    } catch (e) {
      const err = this.unavailable(e);
      if (this.backup && err instanceof StoreUnavailableError) {
        let fromBackup: Config[] | undefined;
        try {
          fromBackup = this.backup.read(this.name, queries);
        } catch {
          fromBackup = undefined;
        }
        if (fromBackup) return { configs: fromBackup, fromBackup: true };
      }
      throw err;
    }
    this.ok();
    this.backup?.recordRead(this.name, queries, configs);
    return { configs, fromBackup: false };
  }

  /**
   * The store's own listing. The backup never answers it (it holds only the (set, key) pairs once read, so it would
   * leave sets out without saying so): while the store cannot be read, this throws StoreUnavailableError (503).
   */
  async list(prefix: string, options?: SetListOptions): Promise<SetListing> {
    let listing: SetListing;
    try {
      listing = await this.store.list(prefix, options);
    } catch (e) {
      throw this.unavailable(e);
    }
    this.ok();
    return listing;
  }

  async write(configs: readonly Config[]): Promise<void> {
    try {
      await this.store.set(configs);
    } catch (e) {
      throw this.unavailable(e);
    }
    this.ok();
    this.backup?.recordWrite(this.name, configs);
  }
}

/**
 * Build the registry (stores are created, not connected). Throws ConfigurationError for a bad store setting, which
 * only a definition without parsed `settings` can have (one written by hand: loading parses them). `loaded` is a
 * loaded `.configu` (generic, so that one written out whole with its other properties is taken as it is).
 */
export function createStoreRegistry<L extends StoreRegistryInput>(loaded: L, options: StoreRegistryOptions = {}): StoreRegistryWithStatus {
  const logger = options.logger ?? stderrLogger;
  const build = options.createStore ?? buildStore;
  const needsBackup = loaded.stores.some((s) => s.backup);
  const backup = needsBackup
    ? new BackupDatabase(loaded.backup, (message) => logger.warn({ backup: loaded.backup }, message))
    : undefined;
  const byName = new Map<string, Resolved>();
  for (const d of loaded.stores) byName.set(d.name, new Resolved(d.name, d.type, build(d), d.backup ? backup : undefined, d.readOnly === true));
  const names = [...byName.keys()];
  let closed = false;

  return {
    backup,
    names: () => [...names],
    store: (name) => byName.get(name)?.store,
    resolve(name) {
      const wanted = name ?? loaded.defaultStore;
      const found = wanted === undefined ? undefined : byName.get(wanted);
      if (!found) throw new UnknownStoreError(name, names);
      return found;
    },
    async init() {
      closed = false;
      await Promise.all(
        [...byName.values()]
          .filter((r) => !r.answered)
          .map(async (r) => {
            try {
              await r.store.init();
              r.available = true;
              r.answered = true;
              r.problem = undefined;
            } catch (e) {
              const err = e instanceof CfguError ? e : new StoreUnavailableError(r.name, reasonOf(e));
              r.available = false;
              r.problem = err.message;
              logger.warn(
                { store: r.name, type: r.type, code: err.code },
                r.backup
                  ? `${err.message}; its backup answers meanwhile, and the store is retried when a request uses it`
                  : `${err.message}; retried until it answers`,
              );
            }
          }),
      );
    },
    awaiting: () => [...byName.values()].filter((r) => !r.answered && !r.backup).map((r) => r.name),
    async close() {
      if (closed) return;
      closed = true;
      await Promise.allSettled([...byName.values()].map((r) => r.store.close()));
      backup?.close();
    },
    status: () =>
      [...byName.values()].map((r) => ({
        name: r.name,
        type: r.type,
        available: r.available,
        ...(r.problem ? { problem: r.problem } : {}),
      })),
  };
}
