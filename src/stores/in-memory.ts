/** `in-memory`: configs in process memory. For tests and examples; lost when the process ends. */
import { lookUp, splitWrites, type SetIndex } from './common.js';
import type { ChangeFeed, ChangeListener, Config, ConfigQuery, ConfigStore } from './types.js';

export class InMemoryConfigStore implements ConfigStore {
  readonly type = 'in-memory';
  private readonly data: SetIndex = new Map();
  private readonly listeners = new Set<ChangeListener>();

  constructor(readonly name = 'in-memory') {}

  async init(): Promise<void> {}

  async get(queries: readonly ConfigQuery[]): Promise<Config[]> {
    return lookUp(this.data, queries);
  }

  async set(configs: readonly Config[]): Promise<void> {
    const { upserts, deletes } = splitWrites(configs);
    for (const c of deletes) this.data.get(c.set)?.delete(c.key);
    for (const c of upserts) {
      let keys = this.data.get(c.set);
      if (!keys) this.data.set(c.set, (keys = new Map()));
      keys.set(c.key, { set: c.set, key: c.key, value: c.value });
    }
    if (configs.length && this.listeners.size) {
      const sets = [...new Set(configs.map((c) => c.set))];
      for (const l of [...this.listeners]) l.change({ sets });
    }
  }

  /** Change feed: every write through this store object notifies (nothing else can write to it). */
  watch(listener: ChangeListener): ChangeFeed {
    this.listeners.add(listener);
    return { close: async () => void this.listeners.delete(listener) };
  }

  async close(): Promise<void> {}
}
