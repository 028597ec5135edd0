/**
 * The SQL layout shared by `sqlite`, `postgresql` and `mysql`/`mariadb` (the Cfgu v1 ORM layout):
 *
 *   table <tableName> (default `config`):
 *     id    varchar(32) primary key   -- lower-case hex MD5 of set + key
 *     set   text                      -- "" for the root set
 *     key   text
 *     value text
 *   unique index set_key_<tableName> (set, key), index set_<tableName> (set)
 *
 * The table is created when absent. Reads select by (set, key) pairs, writes delete the "" values and upsert the others
 * on (set, key) in one transaction; a statement that binds values per pair or row carries at most
 * MAX_PAIRS_PER_STATEMENT of them, so a large batch is several statements (several transactions for a read, one for a
 * write). Statements are parameterised; identifiers are validated and quoted. Each kind supplies its driver calls.
 */
import { answerFrom, causeOf, Lazy, splitWrites, unavailable, uniqueQueries, withTimeout } from './common.js';
import { changedSets, FeedSink, LocalFeeds, OpenFeeds, Poller } from './feed.js';
import { listArguments, listingFromRows } from './listing.js';
import { changedOutside, checkedChanges, checkedQuery, checkedSet, DEFAULT_HISTORY, HistoryPager, planWrite, type HistorySettings } from './history.js';
import { HISTORY_BATCH, type SqlHistoryDriver } from './sql-history.js';
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

/**
 * Largest number of (set, key) pairs, or of rows, in one statement that binds values per pair or row: at 2 values a
 * pair and 4 a row, at most 8,000 bound values, under the limits of SQLite (32,766) and PostgreSQL (65,535).
 * MySQL/MariaDB statements carry their values in their text instead; mysql.ts bounds its statements' bytes too.
 */
export const MAX_PAIRS_PER_STATEMENT = 2000;

/**
 * `items` in runs of at most MAX_PAIRS_PER_STATEMENT, in order (none for no items); with `bytes`, also of at most
 * `bytes.max` bytes by `bytes.of` (a run holds at least one item, however large).
 */
export function statementChunks<T>(items: readonly T[], bytes?: { of: (item: T) => number; max: number }): T[][] {
  const out: T[][] = [];
  let run: T[] = [];
  let size = 0;
  for (const item of items) {
    const n = bytes ? bytes.of(item) : 0;
    if (run.length === MAX_PAIRS_PER_STATEMENT || (run.length && bytes && size + n > bytes.max)) {
      out.push(run);
      run = [];
      size = 0;
    }
    run.push(item);
    size += n;
  }
  if (run.length) out.push(run);
  return out;
}

/** About how many statements of MAX_PAIRS_PER_STATEMENT pairs or rows `count` of them take (at least 1). */
const statementsFor = (count: number): number => Math.max(1, Math.ceil(count / MAX_PAIRS_PER_STATEMENT));
const MAX_WRITE_ATTEMPTS = 8;

const byPair = (a: ConfigQuery, b: ConfigQuery): number =>
  a.set < b.set ? -1 : a.set > b.set ? 1 : a.key < b.key ? -1 : a.key > b.key ? 1 : 0;

/** A polled change feed's two statements (see SqlConfigStore.pollingFeed). */
export interface TableCheck {
  /** `count:sum:xor` of the per-row hashes over the whole table (an empty table: `0:0:0`). */
  total(): Promise<string>;
  /** One row per table row: its set, the hash summed (`a`) and the hash XOR-ed (`b`), as integers or their text. */
  rows(): Promise<ReadonlyArray<{ s: unknown; a: unknown; b: unknown }>>;
}

export interface TableDigest {
  /** As TableCheck.total would give it for these rows. */
  total: string;
  /** set -> `count:sum:xor` of its rows. */
  sets: Map<string, string>;
}

/** Fingerprints of the rows, whole table and per set, computed as the SQL aggregates would (exact integers). */
export function digestRows(rows: ReadonlyArray<{ s: unknown; a: unknown; b: unknown }>): TableDigest {
  const acc = new Map<string, { n: number; sum: bigint; xor: bigint }>();
  const all = { n: 0, sum: 0n, xor: 0n };
  for (const r of rows) {
    const s = String(r.s);
    const a = BigInt(String(r.a));
    const b = BigInt(String(r.b));
    let e = acc.get(s);
    if (!e) acc.set(s, (e = { n: 0, sum: 0n, xor: 0n }));
    for (const x of [e, all]) {
      x.n++;
      x.sum += a;
      x.xor ^= b;
    }
  }
  const text = (x: { n: number; sum: bigint; xor: bigint }) => `${x.n}:${x.sum}:${x.xor}`;
  return { total: text(all), sets: new Map([...acc].map(([s, x]) => [s, text(x)])) };
}

export abstract class SqlConfigStore implements RevisionedStore {
  abstract readonly type: string;
  protected readonly ready: Lazy;
  /** The change feeds of this object, told of the writes made through it. */
  protected readonly feeds = new LocalFeeds();
  /** Open change feeds, closed with the store. */
  protected readonly openFeeds = new OpenFeeds();

  /** The history tables exist (created on the first revision(), write() or history(), not at connect). */
  private readonly historyReady: Lazy;

  protected constructor(
    readonly name: string,
    protected readonly table: string,
    protected readonly timeoutMs: number,
    protected readonly historySettings: HistorySettings = { ...DEFAULT_HISTORY },
  ) {
    this.ready = new Lazy(() => this.guard('connect', () => this.connect()));
    this.historyReady = new Lazy(() => this.guard('create the history tables', () => this.historyDriver().createTables()));
  }

  /** The kind's statements for revisions and history (sql-history.ts). */
  protected abstract historyDriver(): SqlHistoryDriver;

  /** Open the connection/pool and create the table when absent. */
  protected abstract connect(): Promise<void>;
  /** Open the connection/pool only (a change feed never creates the table). */
  protected abstract openConnection(): Promise<void>;
  /** Select the rows matching the pairs (already de-duplicated, at most MAX_PAIRS_PER_STATEMENT). */
  protected abstract select(pairs: readonly ConfigQuery[]): Promise<Config[]>;
  /**
   * The (set, key) rows under `prefix` (listing.ts isUnder; "" = every row) with a non-empty value, ordered by set
   * then key by code point, at most `rows` of them: one statement.
   */
  protected abstract selectUnder(prefix: string, rows: number): Promise<ReadonlyArray<{ set: string; key: string }>>;
  /** Apply deletes and upserts atomically (in statements of at most MAX_PAIRS_PER_STATEMENT rows each). */
  protected abstract writeRows(upserts: readonly Config[], deletes: readonly ConfigQuery[]): Promise<void>;
  protected abstract disconnect(): Promise<void>;
  /** Secrets to keep out of error messages (passwords). */
  protected secrets(): (string | undefined)[] {
    return [];
  }
  /** True for a "table does not exist" error: the table is created again on the next call. */
  protected abstract isMissingTable(err: unknown): boolean;

  async init(): Promise<void> {
    await this.ready.ensure();
  }

  async get(queries: readonly ConfigQuery[]): Promise<Config[]> {
    if (!queries.length) return [];
    await this.ready.ensure();
    const pairs = uniqueQueries(queries);
    const rows: Config[] = [];
    for (const chunk of statementChunks(pairs)) rows.push(...(await this.guard('read', () => this.select(chunk))));
    return answerFrom(rows, queries);
  }

  /**
   * One SELECT of the set and key columns under the prefix, ordered, with LIMIT `limits.keys + 1` (each kind's
   * selectUnder): the bound on keys bounds the rows read; the bound on sets is applied to them.
   */
  async list(prefix: string, options?: SetListOptions): Promise<SetListing> {
    const args = listArguments(prefix, options);
    await this.ready.ensure();
    const rows = await this.guard('list', () => this.selectUnder(args.prefix, args.limits.keys + 1));
    return listingFromRows(args.prefix, args.limits, rows);
  }

  async set(configs: readonly Config[]): Promise<void> {
    if (!configs.length) return;
    await this.ready.ensure();
    const { upserts, deletes } = splitWrites(configs);
    // A fixed row order makes concurrent batches take row locks in the same order (fewer deadlocks).
    upserts.sort(byPair);
    deletes.sort(byPair);
    await this.retrying(() => this.guard('write', () => this.writeRows(upserts, deletes), statementsFor(configs.length)));
    this.feeds.written(configs);
  }

  /** Run a transaction again after a deadlock or serialization failure (the server rolled it back). */
  private async retrying<T>(run: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await run();
      } catch (e) {
        if (attempt >= MAX_WRITE_ATTEMPTS || !this.isRetryable(causeOf(e))) throw e;
        await new Promise((r) => setTimeout(r, Math.random() * 5 * attempt));
      }
    }
  }

  async revision(set: string): Promise<SetRevision> {
    const s = checkedSet(set);
    await this.ready.ensure();
    await this.historyReady.ensure();
    const { state, current } = await this.guard('read the revision', () => this.historyDriver().readState(s));
    return { set: s, revision: state.revision, changedOutside: changedOutside(state, current, this.historySettings) };
  }

  /** One transaction (sql-history.ts); retried after a deadlock, where the retry may then find a conflict. */
  async write(set: string, changes: readonly ConfigChange[], options?: WriteOptions): Promise<WriteResult> {
    const s = checkedSet(set);
    const checked = checkedChanges(changes);
    await this.ready.ensure();
    await this.historyReady.ensure();
    const plan = await this.retrying(() =>
      this.guard(
        'write',
        () =>
          this.historyDriver().transact(s, (state, current) =>
            planWrite({ store: this.name, set: s, current, state, changes: checked, options, history: this.historySettings }),
          ),
        statementsFor(checked.length),
      ),
    );
    this.feeds.written([...plan.upserts, ...plan.deletes.map((d) => ({ ...d, value: '' }))]);
    return { set: s, revision: plan.revision, records: plan.records };
  }

  /** Newest first, HISTORY_BATCH records per statement (bounded by time in SQL, by key here) until the page is full. */
  async history(query: HistoryQuery): Promise<HistoryPage> {
    const q = checkedQuery(query);
    await this.ready.ensure();
    await this.historyReady.ensure();
    const pager = new HistoryPager(q);
    let before = q.before;
    let more = true;
    while (more && !pager.done) {
      const batch = Math.max(HISTORY_BATCH, q.limit + 1);
      const rows = await this.guard('read the history', () =>
        this.historyDriver().readRecords(q.set, Number.isFinite(before) ? before : Number.MAX_SAFE_INTEGER, batch, q.since ?? -1, q.until ?? Number.MAX_SAFE_INTEGER),
      );
      let i = 0;
      for (; i < rows.length && !pager.done; i++) pager.add(rows[i]!);
      more = i < rows.length || rows.length === batch;
      before = rows.at(-1)?.revision ?? 0;
    }
    return pager.page(more);
  }

  /** A deadlock or serialization failure: the transaction was rolled back and can be retried. */
  protected isRetryable(err: unknown): boolean {
    const e = err as { code?: unknown; errno?: unknown } | undefined;
    return e?.code === '40P01' || e?.code === '40001' || e?.errno === 1213 || e?.errno === 1205 || e?.code === 'SQLITE_BUSY';
  }

  async close(): Promise<void> {
    await this.openFeeds.closeAll();
    this.ready.reset();
    await this.disconnect().catch(() => undefined);
  }

  /**
   * A change feed that checks the table every `intervalMs` and reports the sets whose fingerprint moved. A write
   * through this object makes it look at once. Its first successful look is reported as `change({})` (writes made
   * between watch() and that look are covered).
   *
   * Each look is one aggregate over the whole table without GROUP BY (`check.total`: the row count, the sum and the
   * XOR of a per-row hash, as `count:sum:xor`), which needs no temporary table; only when it moved does the feed read
   * one (set, hash) pair per row (`check.rows`, a plain scan, no sorting) and build the per-set fingerprints itself.
   * The feed never creates the table: on a dropped table it reports error() and recovers once the table is back.
   */
  protected pollingFeed(listener: ChangeListener, intervalMs: number, check: TableCheck): ChangeFeed {
    const sink = new FeedSink(listener);
    let last: Map<string, string> | undefined;
    let known: TableDigest | undefined;
    const snapshot = async (): Promise<Map<string, string>> => {
      await this.openConnection();
      const total = await check.total();
      if (known && known.total === total) return known.sets;
      known = digestRows(await check.rows());
      return known.sets;
    };
    const poller = new Poller(intervalMs, async () => {
      let now: Map<string, string>;
      try {
        now = await this.guard('change check', snapshot);
      } catch (e) {
        last = undefined;
        known = undefined;
        sink.fail(e as Error);
        return;
      }
      const before = last;
      last = now;
      if (!before) {
        sink.change({});
        return;
      }
      const sets = changedSets(before, now);
      if (sets.length) sink.change({ sets });
    });
    const remove = this.feeds.add(() => poller.now());
    poller.start();
    return this.openFeeds.add(async () => {
      sink.close();
      remove();
      await poller.stop();
    });
  }

  /**
   * Run a driver call with a timeout (`statements` times the budget of one statement, for a write carried by several);
   * map failures to StoreUnavailableError (secret-free).
   */
  protected async guard<T>(what: string, fn: () => Promise<T>, statements = 1): Promise<T> {
    try {
      return await withTimeout(fn(), (this.timeoutMs * 2 + 500) * statements, `${this.type} ${what}`);
    } catch (e) {
      if (this.isMissingTable(e)) {
        this.ready.reset();
        this.historyReady.reset();
      }
      throw unavailable(this.name, e, this.secrets());
    }
  }
}
