/**
 * `redis` (ioredis): `url` (`redis://[user:password@]host:port[/db]`), or `host`, `port`, `username`, `password`,
 * `db`; `timeout` (ms, default 3000: connect and command timeout).
 *
 * Layout: see key-value.ts. A batch read is one MGET. A batch write is an optimistic transaction: WATCH the storage
 * keys, MGET them, compute the new values, MULTI/SET/DEL/EXEC; when another writer changed a watched key, EXEC aborts
 * and the write is retried (up to 20 times). Writes of one process are serialised (WATCH state is per connection).
 *
 * Commands never queue while the server is unreachable (`enableOfflineQueue: false`): they fail at once with
 * StoreUnavailableError, and the client keeps reconnecting in the background (back-off up to 2 s).
 *
 * Change feed (one extra connection per feed, in subscriber mode):
 *   - when the server has keyspace notifications enabled (`CONFIG GET notify-keyspace-events` shows `K` with `A`,
 *     or `K` with `$` and `g`; checked on every (re)connection, never changed by cfgu), the feed subscribes to the
 *     keyspace channel of its database and reports every write, by anyone, to a storage key this store object has
 *     been asked for or has written (or is reading or writing);
 *   - otherwise it subscribes to the channel `cfgu:changes:<db>`, on which every write through cfgu publishes the
 *     sets it wrote (inside the write's MULTI), and every `feedIntervalMs` (default 1000) it reads, with one MGET,
 *     the storage keys this store object has been asked for, and reports those whose value moved. Writes by other
 *     programs to keys that this store object never read cannot matter to what it answered, and are not reported.
 * Either way, a key is reported with the sets it was read for. The server still sends the feed an event for every
 * key written in the database (the layout has no prefix); those of keys never read are dropped here.
 */
import type { Redis, RedisOptions } from 'ioredis';
import { redisDriver } from './drivers.js';
import { StoreUnavailableError } from '../core/errors.js';
import { Mutex, unavailable, withTimeout, connectionSecrets } from './common.js';
import { DEFAULT_FEED_INTERVAL_MS, FeedSink, OpenFeeds, Poller, setsOf } from './feed.js';
import { applyKeyValueWrites, decodeKeyValue, KeyValueLister, ReadKeys, storageKeyOf, storageKeys } from './key-value.js';
import { globEscape, listArguments } from './listing.js';
import { changedOutside, checkedChanges, checkedQuery, checkedSet, DEFAULT_HISTORY, type HistorySettings } from './history.js';
import { RedisHistory } from './redis-history.js';
import type {
  ChangeFeed,
  ChangeListener,
  Config,
  ConfigChange,
  ConfigQuery,
  HistoryPage,
  HistoryQuery,
  RevisionedStore,
  SetListing,
  SetListOptions,
  SetRevision,
  WriteOptions,
  WriteResult,
} from '../core/ports.js';

export interface RedisStoreOptions {
  url?: string;
  host?: string;
  port?: number;
  username?: string;
  password?: string;
  db?: number;
  timeoutMs?: number;
  /** Period of the change feed's check when the server has no keyspace notifications (ms). */
  feedIntervalMs?: number;
  /** Revisions and history (docs/stores.md, "Revisions and history"); default DEFAULT_HISTORY. */
  history?: HistorySettings;
}

const MAX_WRITE_ATTEMPTS = 20;

/** True when `notify-keyspace-events` flags deliver keyspace events for string writes and deletions. */
export function keyspaceEventsEnabled(flags: string): boolean {
  return flags.includes('K') && (flags.includes('A') || (flags.includes('$') && flags.includes('g')));
}



export class RedisConfigStore implements RevisionedStore {
  readonly type = 'redis';
  private client: Redis | undefined;
  private readonly writes = new Mutex();
  private readonly timeoutMs: number;
  /** The storage keys reads have asked for: what the change feeds follow. */
  private readonly read = new ReadKeys();
  private readonly openFeeds = new OpenFeeds();
  /** Polling feeds, told which storage keys a read asked for and what it found. */
  private readonly readHooks = new Set<(queries: readonly ConfigQuery[], raw: ReadonlyMap<string, string | undefined>) => void>();

  constructor(
    readonly name: string,
    private readonly options: RedisStoreOptions,
  ) {
    this.timeoutMs = options.timeoutMs ?? 3000;
    this.historySettings = options.history ?? { ...DEFAULT_HISTORY };
    this.revisions = new RedisHistory(name, this.historySettings, (c) => this.channel(c));
  }

  private readonly historySettings: HistorySettings;
  private readonly revisions: RedisHistory;

  async revision(set: string): Promise<SetRevision> {
    const s = checkedSet(set);
    const { state, current } = await this.guard((c) => this.revisions.revision(c, s));
    return { set: s, revision: state.revision, changedOutside: changedOutside(state, current, this.historySettings) };
  }

  /** redis-history.ts: WATCH, read, MULTI ... EXEC, serialised with set() (WATCH state is per connection). */
  async write(set: string, changes: readonly ConfigChange[], options?: WriteOptions): Promise<WriteResult> {
    const s = checkedSet(set);
    const checked = checkedChanges(changes);
    // The written keys are followed from now on (ReadKeys), so that a keyspace event reports this write too.
    this.read.follow(checked.map((ch) => ({ set: s, key: ch.key })));
    const plan = await this.writes.run(() => this.guard((c) => this.revisions.write(c, s, checked, options)));
    return { set: s, revision: plan.revision, records: plan.records };
  }

  async history(query: HistoryQuery): Promise<HistoryPage> {
    const q = checkedQuery(query);
    return this.guard((c) => this.revisions.history(c, q));
  }

  private secrets(): (string | undefined)[] {
    return connectionSecrets(this.options);
  }

  private makeClient(overrides: RedisOptions = {}): Redis {
    const o = this.options;
    const common: RedisOptions = {
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      connectTimeout: this.timeoutMs,
      commandTimeout: this.timeoutMs,
      retryStrategy: (times) => Math.min(100 * times, 2000),
      reconnectOnError: () => false,
      ...overrides,
    };
    if (o.username !== undefined) common.username = o.username;
    if (o.password !== undefined) common.password = o.password;
    if (o.db !== undefined) common.db = o.db;
    const client = o.url
      ? new (redisDriver().Redis)(o.url, common)
      : new (redisDriver().Redis)({ ...common, host: o.host ?? '127.0.0.1', port: o.port ?? 6379 });
    // Connection errors are reported per command; an unhandled 'error' event would only be noise.
    client.on('error', () => undefined);
    return client;
  }

  /** Make sure the client exists and has been asked to connect; wait for the first connection only. */
  private async ready(): Promise<Redis> {
    if (!this.client) this.client = this.makeClient();
    const c = this.client;
    if (c.status === 'wait' || c.status === 'end') {
      await withTimeout(c.connect(), this.timeoutMs + 500, 'redis connect');
    }
    return c;
  }

  private async guard<T>(fn: (c: Redis) => Promise<T>): Promise<T> {
    try {
      const c = await this.ready();
      if (c.status !== 'ready') throw new StoreUnavailableError(this.name, 'not connected (reconnecting)');
      return await withTimeout(fn(c), this.timeoutMs * 2 + 500, 'redis command');
    } catch (e) {
      throw unavailable(this.name, e, this.secrets());
    }
  }

  async init(): Promise<void> {
    try {
      // After a failed first connect the client reconnects in the background: only a live connection counts.
      if ((await this.ready()).status !== 'ready') throw new StoreUnavailableError(this.name, 'not connected (reconnecting)');
    } catch (e) {
      throw unavailable(this.name, e, this.secrets());
    }
  }

  async get(queries: readonly ConfigQuery[]): Promise<Config[]> {
    if (!queries.length) return [];
    const keys = storageKeys(queries);
    const values = await this.read.around(queries, () => this.guard((c) => c.mget(...keys)));
    const raw = new Map<string, string | undefined>();
    keys.forEach((k, i) => raw.set(k, values[i] ?? undefined));
    for (const hook of this.readHooks) hook(queries, raw);
    return decodeKeyValue(queries, raw);
  }

  async set(configs: readonly Config[]): Promise<void> {
    if (!configs.length) return;
    const keys = storageKeys(configs);
    // The written keys are followed from now on (ReadKeys), so that a keyspace event reports this write too.
    this.read.follow(configs);
    await this.writes.run(() =>
      this.guard(async (c) => {
        for (let attempt = 0; attempt < MAX_WRITE_ATTEMPTS; attempt++) {
          await c.watch(...keys);
          let changes: Map<string, string | null>;
          try {
            const values = await c.mget(...keys);
            const current = new Map<string, string | undefined>();
            keys.forEach((k, i) => current.set(k, values[i] ?? undefined));
            changes = applyKeyValueWrites(configs, current);
          } catch (e) {
            await c.unwatch().catch(() => undefined);
            throw e;
          }
          if (!changes.size) {
            await c.unwatch();
            return;
          }
          const multi = c.multi();
          for (const [k, v] of changes) {
            if (v === null) multi.del(k);
            else multi.set(k, v);
          }
          // Tell the change feeds of every cfgu process on this database, atomically with the write.
          multi.publish(this.channel(c), JSON.stringify(setsOf(configs)));
          const result = await multi.exec();
          if (result === null) continue; // a watched key changed: read again and retry
          const failed = result.find(([err]) => err);
          if (failed) throw failed[0];
          return;
        }
        throw new StoreUnavailableError(this.name, 'too many concurrent writers; try again', 1);
      }),
    );
  }

  /**
   * The layout has no index of sets and no common prefix, so this walks the key space with SCAN ... MATCH
   * `<prefix>/*` (`*` for the prefix "", glob characters escaped) COUNT 1000, plus the prefix's own key, and reads
   * each page's matches with one MGET (a set's key names are inside its JSON value). SCAN visits every key of the
   * database whatever the pattern, in pages, with no order: memory is bounded (KeyValueLister), the time is that of
   * the database's size. Each command has the store's timeout; a page is never held across an outage.
   */
  async list(prefix: string, options?: SetListOptions): Promise<SetListing> {
    const args = listArguments(prefix, options);
    const lister = new KeyValueLister(args.prefix, args.limits);
    const pattern = args.prefix === '' ? '*' : `${globEscape(args.prefix)}/*`;
    if (args.prefix !== '') {
      const [own] = await this.guard((c) => c.mget(args.prefix)); // MGET: a key of another type reads as nil
      lister.add(args.prefix, own);
    }
    let cursor = '0';
    do {
      const [next, names] = await this.guard((c) => c.scan(cursor, 'MATCH', pattern, 'COUNT', 1000));
      cursor = next;
      if (names.length) {
        const values = await this.guard((c) => c.mget(...names));
        names.forEach((name, i) => lister.add(name, values[i]));
      }
    } while (cursor !== '0' && !lister.full);
    return lister.result(cursor === '0');
  }

  /** The channel on which writes through cfgu announce their sets. */
  private channel(c: Redis): string {
    return `cfgu:changes:${c.options.db ?? 0}`;
  }

  watch(listener: ChangeListener): ChangeFeed {
    const sink = new FeedSink(listener);
    /** Each followed storage key's value at the last look (null: absent). */
    const values = new Map<string, string | null>();
    const onRead = (queries: readonly ConfigQuery[], raw: ReadonlyMap<string, string | undefined>) => {
      // A key first read now is compared, from the next look on, with the value this read found.
      for (const q of queries) {
        const key = storageKeyOf(q);
        if (!values.has(key)) values.set(key, raw.get(key) ?? null);
      }
    };
    this.readHooks.add(onRead);
    const removeHook = () => this.readHooks.delete(onRead);

    let keyspace = false;
    /**
     * One look: MGET the keys reads asked for; report the sets of those whose value moved. False when the store did
     * not answer (reported as an outage). Looks never overlap (`lookOnce`): a look begun during an outage that fails
     * late must not report an outage after the look that found the server back.
     */
    const look = async (): Promise<boolean> => {
      if (keyspace) return true;
      const keys = this.read.keys();
      const changed = new Set<string>();
      try {
        const c = await this.ready();
        if (c.status !== 'ready') throw new StoreUnavailableError(this.name, 'not connected (reconnecting)');
        for (let i = 0; i < keys.length; i += 1000) {
          const chunk = keys.slice(i, i + 1000);
          const now = await withTimeout(c.mget(...chunk), this.timeoutMs * 2 + 500, 'redis command');
          chunk.forEach((k, j) => {
            const value = now[j] ?? null;
            if (!values.has(k)) values.set(k, value); // first look at this key: the baseline
            else if (values.get(k) !== value) {
              values.set(k, value);
              for (const s of this.read.setsOf(k)) changed.add(s);
            }
          });
        }
        for (const k of values.keys()) if (!this.read.completed(k)) values.delete(k);
      } catch (e) {
        sink.fail(unavailable(this.name, e, this.secrets()));
        return false;
      }
      if (changed.size) sink.change({ sets: [...changed] });
      else sink.ok();
      return true;
    };
    let looking: Promise<boolean> = Promise.resolve(true);
    const lookOnce = (): Promise<boolean> => (looking = looking.then(look, look));
    const poller = new Poller(this.options.feedIntervalMs ?? DEFAULT_FEED_INTERVAL_MS.redis, () => lookOnce().then(() => undefined));

    const sub = this.makeClient({ autoResubscribe: false, enableOfflineQueue: true, commandTimeout: undefined });
    const db = sub.options.db ?? 0;
    const keyspacePrefix = `__keyspace@${db}__:`;
    let closed = false;
    sub.on('close', () => {
      if (!closed) sink.fail(new StoreUnavailableError(this.name, 'the change feed lost its connection (reconnecting)'));
    });
    sub.on('pmessage', (_pattern: string, channel: string) => {
      if (!channel.startsWith(keyspacePrefix)) return;
      const key = channel.slice(keyspacePrefix.length);
      // A key no read of this store asked for cannot have changed an answer it gave: not reported.
      if (this.read.has(key)) sink.change({ sets: this.read.setsOf(key) });
    });
    sub.on('message', (_channel: string, message: string) => sink.change(announcedSets(message)));
    sub.on('ready', () => {
      void (async () => {
        try {
          keyspace = await subscribeChanges(sub, db);
        } catch (e) {
          if (!closed) sink.fail(unavailable(this.name, e, this.secrets()));
          sub.disconnect(true); // start over on a new connection
          return;
        }
        // Subscribed (first time, or again after an outage), and without keyspace events a first look taken (the
        // baseline): anything may have changed before, so say so. When that look finds the store still down (the
        // subscriber is back before the connection that reads), the poller's first look that answers says it.
        if (!keyspace && !(await lookOnce())) return;
        if (!closed) sink.change({});
      })();
    });
    sub.connect().catch(() => undefined); // failures surface as 'close'; the client keeps reconnecting
    poller.start();
    return this.openFeeds.add(async () => {
      closed = true;
      sink.close();
      removeHook();
      await poller.stop();
      sub.disconnect();
    });
  }

  async close(): Promise<void> {
    await this.openFeeds.closeAll();
    const c = this.client;
    this.client = undefined;
    if (!c) return;
    try {
      if (c.status === 'ready') await withTimeout(c.quit(), 1000, 'redis quit');
      else c.disconnect();
    } catch {
      c.disconnect();
    }
  }
}

/** The sets a write through cfgu announced on its channel; a message of another shape says only "something changed". */
function announcedSets(message: string): { sets?: string[] } {
  let sets: unknown;
  try {
    sets = JSON.parse(message);
  } catch {
    sets = undefined;
  }
  return Array.isArray(sets) && sets.every((s) => typeof s === 'string') ? { sets: sets as string[] } : {};
}

/**
 * Subscribes a change feed's connection: to keyspace notifications when the server sends them, else to the channel
 * writes through cfgu announce on. True when keyspace notifications are on.
 */
async function subscribeChanges(sub: Redis, db: number): Promise<boolean> {
  let flags = '';
  try {
    const answer = (await sub.config('GET', 'notify-keyspace-events')) as unknown as string[];
    flags = String(answer?.[1] ?? '');
  } catch {
    flags = ''; // CONFIG refused (ACL, managed service): treat as disabled
  }
  const keyspace = keyspaceEventsEnabled(flags);
  if (keyspace) await sub.psubscribe(`__keyspace@${db}__:*`);
  else await sub.subscribe(`cfgu:changes:${db}`);
  return keyspace;
}
