/**
 * The change feeds of one process, one per store (ResolvedStore.watch), shared by everything that watches that store:
 * the watched pipelines of POST /export (./hub.ts) and the change streams of GET /changes (./store-streams.ts). A feed
 * starts with its store's first subscriber and closes with its last. For a store without a feed (its kind has none, or
 * it failed to start), every `pollMs` each subscriber hears a tick instead, and decides itself what to look at again.
 * A feed's outage becomes the problem a plain request would get (503 store-unavailable), made once for every
 * subscriber.
 */
import type { FastifyBaseLogger } from 'fastify';
import { StoreUnavailableError } from '../../core/errors.js';
import type { ChangeFeed, ChangeListener, ChangeNotice, StoreResolver } from '../../core/ports.js';
import { problemState, type ProblemState } from './state.js';

/** One subscriber of a store's feed. Must not throw. */
export interface FeedSubscriber {
  /** A notice of the store's feed; `tick`: the periodic re-check of a store without a feed (the notice is then empty). */
  change(notice: ChangeNotice, tick: boolean): void;
  /** The feed lost its source (said once per outage; the next notice after it is "any set"). */
  error(state: ProblemState): void;
}

/** A subscription: whether the store is polled (no feed), and how to end it. */
export interface FeedSubscription {
  readonly polled: boolean;
  /** The problem of the feed's outage while it lasts (from its error to its next notice), else undefined. */
  outage(): ProblemState | undefined;
  unsubscribe(): void;
}

interface Entry {
  feed: ChangeFeed;
  subscribers: Set<FeedSubscriber>;
  polled: boolean;
  outage: ProblemState | undefined;
}

export class StoreFeeds {
  private readonly entries = new Map<string, Entry>();

  constructor(
    private readonly registry: StoreResolver,
    private readonly pollMs: number,
    private readonly log: FastifyBaseLogger,
    /** Counts every notice of every feed (the hub's `stats`, read by tests). */
    private readonly stats: { notices: number },
  ) {}

  /** Follow store `name` (a declared name: resolve() must know it). */
  subscribe(name: string, subscriber: FeedSubscriber): FeedSubscription {
    const entry = this.entries.get(name) ?? this.start(name);
    entry.subscribers.add(subscriber);
    return {
      polled: entry.polled,
      outage: () => entry.outage,
      unsubscribe: () => {
        if (!entry.subscribers.delete(subscriber) || entry.subscribers.size) return;
        if (this.entries.get(name) === entry) this.entries.delete(name);
        void entry.feed.close().catch(() => undefined);
      },
    };
  }

  private start(name: string): Entry {
    const subscribers = new Set<FeedSubscriber>();
    const listener: ChangeListener = {
      change: (notice) => {
        this.stats.notices++;
        entry.outage = undefined; // the first notice after an outage says the feed is back
        for (const s of subscribers) s.change(notice, false);
      },
      error: (error) => {
        const state = problemState(this.log, new StoreUnavailableError(name, error?.message ?? String(error)), 'store change feed failed');
        entry.outage = state;
        for (const s of subscribers) s.error(state);
      },
    };
    // Filled in below: a feed may notify synchronously from watch().
    const entry: Entry = { feed: { close: async () => undefined }, subscribers, polled: false, outage: undefined };
    let feed: ChangeFeed | undefined;
    const store = this.registry.resolve(name);
    if (store.watch) {
      try {
        feed = store.watch(listener);
      } catch (e) {
        this.log.warn({ store: name, err: { message: (e as Error)?.message } }, 'store change feed could not start; polling instead');
      }
    }
    const polled = !feed;
    if (!feed) {
      // No feed for this kind: a tick every pollMs (a change shows within pollMs).
      const timer = setInterval(() => {
        this.stats.notices++;
        for (const s of subscribers) s.change({}, true);
      }, this.pollMs);
      timer.unref();
      feed = { close: async () => clearInterval(timer) };
    }
    entry.feed = feed;
    entry.polled = polled;
    this.entries.set(name, entry);
    return entry;
  }

  /** Close every feed (the hub closes). */
  async close(): Promise<void> {
    const entries = [...this.entries.values()];
    this.entries.clear();
    await Promise.allSettled(entries.map((e) => e.feed.close()));
  }
}
