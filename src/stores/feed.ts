/**
 * Building blocks of the change feeds (ConfigStore.watch, see src/core/ports.ts and docs/stores.md "Change feeds"):
 *
 *   - FeedSink: one listener's view of a feed. It reports an outage once (`error`), and the first sign of life after
 *     it as `change({})` (anything may have changed meanwhile); it drops everything after `close`, and a listener that
 *     throws never breaks the feed.
 *   - Poller: runs a check every `intervalMs`, one at a time (a slow check delays the next, never overlaps it), on
 *     unref'd timers (a feed never keeps the process alive), and can be asked to check at once.
 *   - LocalFeeds: the feeds of a store object, told directly about the writes made through that object (a kind that
 *     polls looks at once; a kind whose own writes are invisible to its check reports them directly).
 *   - changedSets: which sets differ between two per-set snapshots (the polled kinds report precise sets).
 */
import type { ChangeFeed, ChangeListener, ChangeNotice, Config } from '../core/ports.js';

/** Default period of the periodic checks (ms), per kind, when `feedIntervalMs` is not set. */
export const DEFAULT_FEED_INTERVAL_MS = {
  /** json-file safety net behind the file-system notifications. */
  'json-file': 1000,
  /** `PRAGMA data_version`: a few microseconds, no I/O. */
  sqlite: 100,
  /** One aggregate over the table (PostgreSQL without `notify`, MySQL/MariaDB). */
  sql: 1000,
  /** One MGET of the storage keys this store has read (Redis without keyspace notifications). */
  redis: 1000,
} as const;

/**
 * The life of a feed with a reconnection loop: `pause(ms)` waits on an unref'd timer (a feed never keeps the process
 * alive) and ends at once when the feed is closed, so that closing never waits for a back-off.
 */
export class FeedLife {
  private stopped = false;
  private readonly wakers = new Set<() => void>();

  get closed(): boolean {
    return this.stopped;
  }

  pause(ms: number): Promise<void> {
    if (this.stopped) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.wakers.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      timer.unref?.();
      this.wakers.add(done);
    });
  }

  /** A promise that resolves when the feed is closed. */
  ended(): Promise<void> {
    return new Promise((resolve) => (this.stopped ? resolve() : this.wakers.add(resolve)));
  }

  close(): void {
    this.stopped = true;
    for (const w of [...this.wakers]) w();
    this.wakers.clear();
  }
}

/** Back-off between reconnection attempts of a feed: 100 ms doubling up to 2 s. */
export const backoff = (attempt: number): number => Math.min(100 * 2 ** Math.min(attempt, 5), 2000);

export class FeedSink {
  private down = false;
  private closed = false;
  constructor(private readonly listener: ChangeListener) {}

  get isClosed(): boolean {
    return this.closed;
  }

  /** Something may have changed. During an outage, the first change is reported as `change({})`. */
  change(notice: ChangeNotice = {}): void {
    if (this.closed) return;
    if (this.down) {
      this.down = false;
      notice = {};
    }
    try {
      this.listener.change(notice.sets ? { sets: [...notice.sets] } : {});
    } catch {
      /* the listener's own fault must not stop the feed */
    }
  }

  /** The source is lost; reported once per outage. */
  fail(error: Error): void {
    if (this.closed || this.down) return;
    this.down = true;
    try {
      this.listener.error(error);
    } catch {
      /* as above */
    }
  }

  /** The source answered: after an outage, that is `change({})`. */
  ok(): void {
    if (this.down) this.change({});
  }

  close(): void {
    this.closed = true;
  }
}

export class Poller {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private again = false;
  private stopped = false;

  constructor(
    private readonly intervalMs: number,
    private readonly check: () => Promise<void>,
  ) {}

  /** Run the first check now, then every `intervalMs`. */
  start(): void {
    this.now();
  }

  /** Check as soon as possible (right after a check in progress, when there is one). */
  now(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.running = this.check()
      .catch(() => undefined)
      .finally(() => {
        this.running = undefined;
        if (this.stopped) return;
        if (this.again) {
          this.again = false;
          this.now();
          return;
        }
        this.timer = setTimeout(() => this.now(), this.intervalMs);
        this.timer.unref?.();
      });
  }

  /** Stop; resolves once a check in progress has ended. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    await this.running;
  }
}

/** What the feeds of one store object want to hear about the writes made through it. */
export class LocalFeeds {
  private readonly hooks = new Set<(configs: readonly Config[]) => void>();

  add(hook: (configs: readonly Config[]) => void): () => void {
    this.hooks.add(hook);
    return () => this.hooks.delete(hook);
  }

  /** Tell every feed of this object that these configs were written. */
  written(configs: readonly Config[]): void {
    if (!configs.length) return;
    for (const h of this.hooks) {
      try {
        h(configs);
      } catch {
        /* a feed's fault must not fail the write */
      }
    }
  }
}

/** The distinct sets of a batch. */
export const setsOf = (configs: readonly { set: string }[]): string[] => [...new Set(configs.map((c) => c.set))];

/** Sets whose entry differs between two snapshots `set -> fingerprint` (added, removed or changed). */
export function changedSets(before: ReadonlyMap<string, string>, after: ReadonlyMap<string, string>): string[] {
  const out: string[] = [];
  for (const [set, v] of after) if (before.get(set) !== v) out.push(set);
  for (const set of before.keys()) if (!after.has(set)) out.push(set);
  return out;
}

/** The open feeds of a store object: closing the store closes them (no connection or timer outlives it). */
export class OpenFeeds {
  private readonly feeds = new Set<ChangeFeed>();

  /** A feed whose `close()` runs `close` once and forgets the feed. */
  add(close: () => Promise<void> | void): ChangeFeed {
    const feed = feedOf(async () => {
      this.feeds.delete(feed);
      await close();
    });
    this.feeds.add(feed);
    return feed;
  }

  async closeAll(): Promise<void> {
    await Promise.allSettled([...this.feeds].map((f) => f.close()));
  }
}

/** A feed made of a close function, idempotent. */
export function feedOf(close: () => Promise<void> | void): ChangeFeed {
  let done: Promise<void> | undefined;
  return {
    close: () => (done ??= Promise.resolve().then(close).catch(() => undefined)),
  };
}
