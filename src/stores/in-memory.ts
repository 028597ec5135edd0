/**
 * `in-memory`: configs in process memory. For tests and examples; lost when the process ends. Its change feed is told
 * of each write directly (nothing else can write to it).
 */
import { AnswerMemo, indexEntry, splitWrites, type SetIndex } from './common.js';
import { FeedSink, LocalFeeds, OpenFeeds, setsOf } from './feed.js';
import { listArguments, listingFromIndex } from './listing.js';
import type { ChangeFeed, ChangeListener, Config, ConfigQuery, ConfigStore, SetListing, SetListOptions } from '../core/ports.js';

export class InMemoryConfigStore implements ConfigStore {
  readonly type = 'in-memory';
  private readonly data: SetIndex = new Map();
  /** Writes to `data` so far: answers remembered from before a write are not used after it. */
  private writes = 0;
  private readonly answers = new AnswerMemo();
  private readonly feeds = new LocalFeeds();
  private readonly openFeeds = new OpenFeeds();

  constructor(readonly name = 'in-memory') {}

  async init(): Promise<void> {}

  async get(queries: readonly ConfigQuery[]): Promise<Config[]> {
    return this.answers.answer(this.data, this.writes, queries);
  }

  async set(configs: readonly Config[]): Promise<void> {
    const { upserts, deletes } = splitWrites(configs);
    this.writes++;
    for (const c of deletes) this.data.get(c.set)?.delete(c.key);
    for (const c of upserts) {
      let keys = this.data.get(c.set);
      if (!keys) this.data.set(c.set, (keys = new Map()));
      keys.set(c.key, indexEntry(c));
    }
    if (configs.length) this.feeds.written(configs);
  }

  /** From memory: the set names are filtered and sorted, the keys read for the listed sets only. */
  async list(prefix: string, options?: SetListOptions): Promise<SetListing> {
    const args = listArguments(prefix, options);
    return listingFromIndex(this.data, args.prefix, args.limits);
  }

  watch(listener: ChangeListener): ChangeFeed {
    const sink = new FeedSink(listener);
    const remove = this.feeds.add((configs) => sink.change({ sets: setsOf(configs) }));
    return this.openFeeds.add(() => {
      sink.close();
      remove();
    });
  }

  async close(): Promise<void> {
    await this.openFeeds.closeAll();
  }
}
