/** `in-memory`: configs in process memory. For tests and examples; lost when the process ends. */
import { lookUp, pairKey, splitWrites } from './common.js';
import type { Config, ConfigQuery, ConfigStore } from './types.js';

export class InMemoryConfigStore implements ConfigStore {
  readonly type = 'in-memory';
  private readonly data = new Map<string, Config>();

  constructor(readonly name = 'in-memory') {}

  async init(): Promise<void> {}

  async get(queries: readonly ConfigQuery[]): Promise<Config[]> {
    return lookUp(this.data, queries);
  }

  async set(configs: readonly Config[]): Promise<void> {
    const { upserts, deletes } = splitWrites(configs);
    for (const c of deletes) this.data.delete(pairKey(c.set, c.key));
    for (const c of upserts) this.data.set(pairKey(c.set, c.key), c);
  }

  async close(): Promise<void> {}
}
