/**
 * `in-memory`: configs in process memory. For tests and examples; lost when the process ends. Its change feed is told
 * of each write directly (nothing else can write to it). Revisions and history (the default retention) are kept in
 * memory too; a write runs to its end without yielding, so it is atomic by itself, and set() (which keeps no history)
 * is the only "outside" writer.
 */
import { AnswerMemo, indexEntry, splitWrites, type SetIndex } from './common.js';
import { FeedSink, LocalFeeds, OpenFeeds, setsOf } from './feed.js';
import { listArguments, listingFromIndex } from './listing.js';
import { checkedChanges, checkedQuery, checkedSet, changedOutside, DEFAULT_HISTORY, EMPTY_STATE, HistoryPager, planWrite, pruned, type HistorySettings, type SetState, type Snapshot } from './history.js';
import type {
  ChangeFeed,
  ChangeListener,
  Config,
  ConfigChange,
  ConfigQuery,
  HistoryPage,
  HistoryQuery,
  RevisionedStore,
  RevisionRecord,
  SetListing,
  SetListOptions,
  SetRevision,
  WriteOptions,
  WriteResult,
} from '../core/ports.js';

export class InMemoryConfigStore implements RevisionedStore {
  readonly type = 'in-memory';
  private readonly data: SetIndex = new Map();
  /** Writes to `data` so far: answers remembered from before a write are not used after it. */
  private writes = 0;
  private readonly answers = new AnswerMemo();
  private readonly feeds = new LocalFeeds();
  private readonly openFeeds = new OpenFeeds();

  /** Per set: its revision and snapshot, and its records, oldest first. */
  private readonly states = new Map<string, SetState>();
  private readonly records = new Map<string, RevisionRecord[]>();

  constructor(
    readonly name = 'in-memory',
    private readonly historySettings: HistorySettings = { ...DEFAULT_HISTORY },
  ) {}

  async init(): Promise<void> {}

  async get(queries: readonly ConfigQuery[]): Promise<Config[]> {
    return this.answers.answer(this.data, this.writes, queries);
  }

  async set(configs: readonly Config[]): Promise<void> {
    this.apply(configs);
  }

  /** Synchronous: a write() checks, applies and records without yielding in between. */
  private apply(configs: readonly Config[]): void {
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

  private values(set: string): Snapshot {
    const out: Snapshot = new Map();
    for (const [key, e] of this.data.get(set) ?? []) if (e.config.value !== '') out.set(key, e.config.value);
    return out;
  }

  async revision(set: string): Promise<SetRevision> {
    const s = checkedSet(set);
    const state = this.states.get(s) ?? EMPTY_STATE;
    return { set: s, revision: state.revision, changedOutside: changedOutside(state, this.values(s), this.historySettings) };
  }

  async write(set: string, changes: readonly ConfigChange[], options?: WriteOptions): Promise<WriteResult> {
    const s = checkedSet(set);
    const checked = checkedChanges(changes);
    const plan = planWrite({
      store: this.name,
      set: s,
      current: this.values(s),
      state: this.states.get(s) ?? EMPTY_STATE,
      changes: checked,
      options,
      history: this.historySettings,
    });
    this.apply([...plan.upserts, ...plan.deletes.map((d) => ({ ...d, value: '' }))]);
    this.states.set(s, plan.state);
    if (plan.records.length) {
      const kept = (this.records.get(s) ?? []).filter((r) => !pruned(r, plan));
      kept.push(...plan.records);
      this.records.set(s, kept);
    }
    return { set: s, revision: plan.revision, records: plan.records };
  }

  async history(query: HistoryQuery): Promise<HistoryPage> {
    const q = checkedQuery(query);
    const pager = new HistoryPager(q);
    const all = this.records.get(q.set) ?? [];
    let i = all.length - 1;
    for (; i >= 0 && !pager.done; i--) pager.add(all[i]!);
    return pager.page(i >= 0);
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
