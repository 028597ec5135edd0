/**
 * `etcd` (etcd3, v3 gRPC API): `hosts` (a URL or a list of URLs, e.g. `http://127.0.0.1:2379`), optional
 * `username`/`password`, `timeout` (ms, default 3000: dial timeout and per-call deadline).
 *
 * Layout: see key-value.ts. A batch read is one transaction of range requests (one per storage key, in chunks of
 * 128, etcd's default `--max-txn-ops`). A batch write reads the storage keys with their mod revisions in one
 * transaction, computes the new values, and commits a transaction whose compares check every mod revision is
 * unchanged (0 = still absent); when another writer got there first, it is retried.
 *
 * The client's circuit breaker and retries reconnect by themselves when etcd is back (within about 5 s).
 *
 * Change feed: etcd's own watch over the whole key space (the layout has no prefix), on the client's shared watch
 * stream. Each put or delete of a storage key this store object has been asked for, or has written (or is reading or
 * writing), reports the sets it was read or written for; other keys are dropped here (they cannot have changed an answer). After a lost connection the watch is resumed from the last revision it saw, so events in between
 * are replayed (and `change({})` is sent as well); when that revision was compacted away, a new watch starts from the
 * present.
 */
import type { Etcd3, IOptions, Watcher } from 'etcd3';
import { etcdDriver } from './drivers.js';
import { StoreUnavailableError } from '../core/errors.js';
import { unavailable, withTimeout } from './common.js';
import { backoff, FeedLife, FeedSink, OpenFeeds } from './feed.js';
import { applyKeyValueWrites, decodeKeyValue, KeyValueLister, ReadKeys, storageKeys } from './key-value.js';
import { descendantRange, listArguments } from './listing.js';
import { changedOutside, checkedChanges, checkedQuery, checkedSet, DEFAULT_HISTORY, type HistorySettings } from './history.js';
import { EtcdHistory } from './etcd-history.js';
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

export interface EtcdStoreOptions {
  hosts: string | string[];
  username?: string;
  password?: string;
  timeoutMs?: number;
  /** Revisions and history (docs/stores.md, "Revisions and history"); default DEFAULT_HISTORY. */
  history?: HistorySettings;
}

const MAX_OPS_PER_TXN = 128;
const MAX_WRITE_ATTEMPTS = 20;
/** Storage keys per range read of list() (values included: keeps an answer well under gRPC's 4 MiB default). */
const LIST_PAGE = 256;

export class EtcdConfigStore implements RevisionedStore {
  readonly type = 'etcd';
  private client: Etcd3 | undefined;
  private readonly timeoutMs: number;
  private readonly openFeeds = new OpenFeeds();
  /** The storage keys reads have asked for: what the change feeds report. */
  private readonly read = new ReadKeys();

  constructor(
    readonly name: string,
    private readonly options: EtcdStoreOptions,
  ) {
    this.timeoutMs = options.timeoutMs ?? 3000;
    this.historySettings = options.history ?? { ...DEFAULT_HISTORY };
    this.revisions = new EtcdHistory(name, this.historySettings);
  }

  private readonly historySettings: HistorySettings;
  private readonly revisions: EtcdHistory;

  async revision(set: string): Promise<SetRevision> {
    const s = checkedSet(set);
    const { state, current } = await this.guard((c) => this.revisions.revision(c, s));
    return { set: s, revision: state.revision, changedOutside: changedOutside(state, current, this.historySettings) };
  }

  /** etcd-history.ts: read with mod revisions, then one transaction that compares them. */
  async write(set: string, changes: readonly ConfigChange[], options?: WriteOptions): Promise<WriteResult> {
    const s = checkedSet(set);
    const checked = checkedChanges(changes);
    // The written keys are followed from now on (ReadKeys), so that the watch reports this write too.
    this.read.follow(checked.map((ch) => ({ set: s, key: ch.key })));
    const plan = await this.guard((c) => this.revisions.write(c, s, checked, options));
    return { set: s, revision: plan.revision, records: plan.records };
  }

  async history(query: HistoryQuery): Promise<HistoryPage> {
    const q = checkedQuery(query);
    return this.guard((c) => this.revisions.history(c, q));
  }

  private etcd(): Etcd3 {
    if (!this.client) {
      const timeout = this.timeoutMs;
      const opts: IOptions = {
        hosts: this.options.hosts,
        dialTimeout: timeout,
        defaultCallOptions: (ctx) => (ctx.isStream ? {} : { deadline: Date.now() + timeout }),
      };
      if (this.options.username !== undefined) {
        opts.auth = { username: this.options.username, password: this.options.password ?? '' };
      }
      this.client = new (etcdDriver().Etcd3)(opts);
    }
    return this.client;
  }

  private async guard<T>(fn: (c: Etcd3) => Promise<T>): Promise<T> {
    try {
      return await withTimeout(fn(this.etcd()), this.timeoutMs * 2 + 500, 'etcd call');
    } catch (e) {
      throw unavailable(this.name, e, [this.options.password]);
    }
  }

  /** Raw values and mod revisions of storage keys, one transaction per 128 keys. */
  private async readKeys(c: Etcd3, keys: readonly string[]): Promise<Map<string, { value: string; modRevision: string }>> {
    const out = new Map<string, { value: string; modRevision: string }>();
    for (let i = 0; i < keys.length; i += MAX_OPS_PER_TXN) {
      const chunk = keys.slice(i, i + MAX_OPS_PER_TXN);
      const res = await c.kv.txn({
        compare: [],
        success: chunk.map((k) => ({ request_range: { key: Buffer.from(k) } })),
        failure: [],
      });
      for (const r of res.responses) {
        for (const kv of r.response_range?.kvs ?? []) {
          out.set(kv.key.toString(), { value: kv.value.toString(), modRevision: String(kv.mod_revision) });
        }
      }
    }
    return out;
  }

  async init(): Promise<void> {
    // Check reachability (the client connects lazily).
    await this.guard((c) => c.kv.range({ key: Buffer.from('\u0000cfgu-ping'), count_only: true }));
  }

  async get(queries: readonly ConfigQuery[]): Promise<Config[]> {
    if (!queries.length) return [];
    const keys = storageKeys(queries);
    const found = await this.read.around(queries, () => this.guard((c) => this.readKeys(c, keys)));
    const raw = new Map<string, string | undefined>();
    for (const k of keys) raw.set(k, found.get(k)?.value);
    return decodeKeyValue(queries, raw);
  }

  async set(configs: readonly Config[]): Promise<void> {
    if (!configs.length) return;
    const keys = storageKeys(configs);
    if (keys.length > MAX_OPS_PER_TXN / 2) {
      // Compare + put per key must fit one transaction: split the batch by storage key.
      const groups = new Map<string, Config[]>();
      for (const c of configs) {
        const k = c.set === '' ? c.key : c.set;
        const g = groups.get(k) ?? [];
        g.push(c);
        groups.set(k, g);
      }
      const all = [...groups.values()];
      for (let i = 0; i < all.length; i += MAX_OPS_PER_TXN / 2) await this.set(all.slice(i, i + MAX_OPS_PER_TXN / 2).flat());
      return;
    }
    // The written keys are followed from now on (ReadKeys), so that the watch reports this write too.
    this.read.follow(configs);
    await this.guard(async (c) => {
      for (let attempt = 0; attempt < MAX_WRITE_ATTEMPTS; attempt++) {
        const found = await this.readKeys(c, keys);
        const current = new Map<string, string | undefined>();
        for (const k of keys) current.set(k, found.get(k)?.value);
        const changes = applyKeyValueWrites(configs, current);
        if (!changes.size) return;
        const res = await c.kv.txn({
          compare: [...changes.keys()].map((k) => ({
            key: Buffer.from(k),
            target: 'Mod' as const,
            result: 'Equal' as const,
            mod_revision: found.get(k)?.modRevision ?? '0',
          })),
          success: [...changes].map(([k, v]) =>
            v === null
              ? { request_delete_range: { key: Buffer.from(k) } }
              : { request_put: { key: Buffer.from(k), value: Buffer.from(v) } },
          ),
          failure: [],
        });
        if (res.succeeded) return;
        await new Promise((r) => setTimeout(r, Math.random() * 10 * (attempt + 1)));
      }
      throw new StoreUnavailableError(this.name, 'too many concurrent writers; try again', 1);
    });
  }

  /**
   * Range reads in key order, in pages of LIST_PAGE storage keys, all at the revision of the first (one consistent
   * snapshot): the first page is one transaction of the prefix's own key and the range [`prefix/`, `prefix0`); the
   * prefix "" reads the whole key space. Values are read too (a set's key names are inside its JSON value). Under a
   * prefix the reading stops once the first `sets + 1` sets or more than `keys` keys are in; under "" it goes on to
   * the end of the key space (the root set's keys are spread over all of it) unless the root set alone is past `keys`.
   */
  async list(prefix: string, options?: SetListOptions): Promise<SetListing> {
    const args = listArguments(prefix, options);
    const lister = new KeyValueLister(args.prefix, args.limits);
    const { from, to } = args.prefix === '' ? { from: '\u0000', to: '\u0000' } : descendantRange(args.prefix);
    const page = (key: string, revision?: string) => ({
      key: Buffer.from(key),
      range_end: Buffer.from(to),
      limit: LIST_PAGE,
      ...(revision === undefined ? {} : { revision }),
    });
    const add = (kvs: ReadonlyArray<{ key: Buffer; value: Buffer }>) => {
      for (const kv of kvs) lister.add(kv.key.toString(), kv.value.toString());
    };
    let more: boolean;
    let last: string | undefined;
    let revision: string | undefined;
    if (args.prefix === '') {
      const res = await this.guard((c) => c.kv.range(page(from)));
      add(res.kvs);
      ({ more } = res);
      last = res.kvs.at(-1)?.key.toString();
      revision = res.header.revision;
    } else {
      const res = await this.guard((c) =>
        c.kv.txn({ compare: [], success: [{ request_range: { key: Buffer.from(args.prefix) } }, { request_range: page(from) }], failure: [] }),
      );
      const [own, first] = res.responses.map((r) => r.response_range!);
      add(own!.kvs);
      add(first!.kvs);
      ({ more } = first!);
      last = first!.kvs.at(-1)?.key.toString();
      revision = res.header.revision;
    }
    while (more && last !== undefined && !lister.enough) {
      const res = await this.guard((c) => c.kv.range(page(`${last}\u0000`, revision)));
      add(res.kvs);
      ({ more } = res);
      last = res.kvs.at(-1)?.key.toString();
    }
    return lister.result(!more);
  }

  watch(listener: ChangeListener): ChangeFeed {
    const sink = new FeedSink(listener);
    const life = new FeedLife();
    const onKey = (kv: { key: Buffer }) => {
      const key = kv.key.toString();
      // A key no read of this store asked for cannot have changed an answer it gave: not reported.
      if (this.read.has(key)) sink.change({ sets: this.read.setsOf(key) });
    };
    const run = async () => {
      for (let attempt = 0; !life.closed; attempt++) {
        let w: Watcher;
        try {
          // The empty prefix is the whole key space.
          w = await withTimeout(this.etcd().watch().prefix('').create(), this.timeoutMs * 2 + 500, 'etcd watch');
        } catch (e) {
          if (life.closed) return;
          sink.fail(unavailable(this.name, e, [this.options.password]));
          await life.pause(backoff(attempt));
          continue;
        }
        attempt = 0;
        if (!life.closed) sink.change({}); // watching (first time, or again): anything may have changed before
        w.on('put', onKey);
        w.on('delete', onKey);
        w.on('disconnected', (e) => sink.fail(unavailable(this.name, e, [this.options.password])));
        w.on('connected', () => sink.ok());
        // A non-recoverable error (e.g. the revision to resume from was compacted): start a new watch.
        await Promise.race([
          life.ended(),
          new Promise<void>((resolve) =>
            w.on('error', (e) => {
              sink.fail(unavailable(this.name, e, [this.options.password]));
              resolve();
            }),
          ),
        ]);
        await w.cancel().catch(() => undefined);
        if (!life.closed) await life.pause(backoff(0));
      }
    };
    const running = run();
    return this.openFeeds.add(async () => {
      sink.close();
      life.close();
      await running;
    });
  }

  async close(): Promise<void> {
    await this.openFeeds.closeAll();
    const c = this.client;
    this.client = undefined;
    c?.close();
  }
}
