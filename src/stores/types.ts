/**
 * The store interface every store kind implements is a port of the engine (src/core/ports.ts): re-exported here for
 * the store implementations. A store holds Configs `{ set, key, value }` whose value is always a string.
 */
export type {
  ChangeFeed,
  ChangeListener,
  ChangeNotice,
  Config,
  ConfigQuery,
  ConfigStore,
  ListedSet,
  SetListing,
  SetListLimits,
  SetListOptions,
  ResolvedStore,
  StoreResolver,
} from '../core/ports.js';
