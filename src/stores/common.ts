/**
 * Helpers shared by the store kinds: reading store configuration, turning driver errors into safe
 * StoreUnavailableErrors, timeouts, the Configu row id, identifier checks, batch de-duplication.
 */
import { createHash } from 'node:crypto';
import { CfguError, StoreUnavailableError } from '../core/errors.js';
import type { Config, ConfigQuery } from '../core/ports.js';

/** Default connect and query timeout of network stores, in milliseconds. */
export const DEFAULT_TIMEOUT_MS = 3000;

/** The `id` column of the SQL layout: lower-case hex MD5 of `set + key` (as the Cfgu v1 ORM stores compute it). */
export function configId(set: string, key: string): string {
  return createHash('md5').update(set + key).digest('hex');
}

/** A map key for one (set, key) pair. NUL cannot appear in set paths or key names. */
export const pairKey = (set: string, key: string): string => `${set}\u0000${key}`;

/** Queries without duplicates (same order as first seen). */
export function uniqueQueries(queries: readonly ConfigQuery[]): ConfigQuery[] {
  const seen = new Set<string>();
  const out: ConfigQuery[] = [];
  for (const q of queries) {
    const k = pairKey(q.set, q.key);
    if (!seen.has(k)) {
      seen.add(k);
      out.push({ set: q.set, key: q.key });
    }
  }
  return out;
}

/** The last write of each (set, key) in a batch wins; returns the upserts and the deletes (value ""). */
export function splitWrites(configs: readonly Config[]): { upserts: Config[]; deletes: Config[] } {
  const last = new Map<string, Config>();
  for (const c of configs) {
    const k = pairKey(c.set, c.key);
    last.delete(k); // keep the order of the last write
    last.set(k, { set: c.set, key: c.key, value: c.value });
  }
  const upserts: Config[] = [];
  const deletes: Config[] = [];
  for (const c of last.values()) (c.value === '' ? deletes : upserts).push(c);
  return { upserts, deletes };
}

/**
 * Configs indexed set -> key -> entry: a lookup hashes two strings the caller already has, builds none. An entry holds
 * a frozen copy of its config (`indexEntry`), so a lookup can hand it out as it is, and the number of the last lookup
 * that handed it out (how `lookUp` answers a repeated query once without a set of its own).
 */
export type SetIndex = Map<string, Map<string, IndexEntry>>;

export interface IndexEntry {
  readonly config: Readonly<Config>;
  /** The `lookUp` call that last answered with this entry (0: none yet). Scratch state of `lookUp` only. */
  answeredBy: number;
}

/** The index entry of a config: a frozen copy of it. */
export const indexEntry = (c: Config): IndexEntry => ({ config: Object.freeze({ set: c.set, key: c.key, value: c.value }), answeredBy: 0 });

export function indexBySet(configs: Iterable<Config>): SetIndex {
  const index: SetIndex = new Map();
  for (const c of configs) {
    let keys = index.get(c.set);
    if (!keys) index.set(c.set, (keys = new Map()));
    keys.set(c.key, indexEntry(c));
  }
  return index;
}

/**
 * The index of `configs` where only `sets` changed since `index` was made: the other sets' maps are kept as they are
 * (one pass over the configs, entries made only for those sets).
 */
export function reindexSets(index: SetIndex, configs: Iterable<Config>, sets: ReadonlySet<string>): SetIndex {
  const next: SetIndex = new Map(index);
  for (const s of sets) next.delete(s);
  for (const c of configs) {
    if (!sets.has(c.set)) continue;
    let keys = next.get(c.set);
    if (!keys) next.set(c.set, (keys = new Map()));
    keys.set(c.key, indexEntry(c));
  }
  return next;
}

/** Numbers the calls of `lookUp` (a double counts exactly past any number of calls a process can make). */
let lookUps = 0;

/**
 * Answer a batch from an in-process index (exact lookups, so no filtering is needed): the non-empty configs, each
 * once (duplicate queries answered once). They are the index's own frozen configs, not copies: a write replaces an
 * entry (in-memory) or the whole index (json-file), never a config, so an answer stays as it was. Queries come grouped
 * by set (the engine asks for every key of one set, then the next), so the set's map is looked up once per run of
 * queries for that set.
 *
 * A repeated query is recognised by the entry's `answeredBy`: this call's number once the entry is in the answer. The
 * call runs to its end without yielding, so no other call can mark an entry in between. That costs one field write
 * per answered config, against a `Set` of the answered configs that took about 45 µs of a 1,000-key request's
 * 3,000 lookups (bench/RESULTS.md, "Store lookups without a set").
 */
export function lookUp(index: SetIndex, queries: readonly ConfigQuery[]): Config[] {
  const call = ++lookUps;
  const out: Config[] = [];
  let set: string | null = null;
  let keys: Map<string, IndexEntry> | undefined;
  for (const q of queries) {
    if (q.set !== set) {
      set = q.set;
      keys = index.get(set);
    }
    const e = keys?.get(q.key);
    if (!e || e.config.value === '' || e.answeredBy === call) continue;
    e.answeredBy = call;
    out.push(e.config);
  }
  return out;
}

/**
 * The answers an in-process store (json-file, in-memory) gave to frozen query batches, for as long as its index is
 * unchanged. The engine asks with one frozen array per prepared schema and set (src/core/eval.ts, queriesOf), so a
 * repeated request is answered without its lookups: 3,000 for a 1,000-key schema over three sets. An answer is kept
 * with the index object and the store's count of writes it was read from, and is used only while both are the same:
 * the json-file store replaces its index whenever the file changed (its check runs before every read, as before), the
 * in-memory store counts every write to its index. Answers are frozen and shared: no caller changes an answer (the
 * engine only reads it). A batch that is not frozen is always looked up, as a caller may change its array later. The
 * answers live as long as the query arrays do (a WeakMap).
 */
export class AnswerMemo {
  private readonly answers = new WeakMap<readonly ConfigQuery[], { index: SetIndex; writes: number; configs: Config[] }>();

  answer(index: SetIndex, writes: number, queries: readonly ConfigQuery[]): Config[] {
    if (!Object.isFrozen(queries)) return lookUp(index, queries);
    const known = this.answers.get(queries);
    if (known && known.index === index && known.writes === writes) return known.configs;
    const configs = Object.freeze(lookUp(index, queries)) as Config[];
    this.answers.set(queries, { index, writes, configs });
    return configs;
  }
}

/** Keep only the rows that answer one of the queries exactly (SQL collations may compare case-insensitively). */
export function answerFrom(rows: Iterable<Config>, queries: readonly ConfigQuery[]): Config[] {
  const wanted = new Set(queries.map((q) => pairKey(q.set, q.key)));
  const out: Config[] = [];
  const seen = new Set<string>();
  for (const r of rows) {
    if (typeof r.value !== 'string' || r.value === '') continue;
    const k = pairKey(r.set, r.key);
    if (wanted.has(k) && !seen.has(k)) {
      seen.add(k);
      out.push({ set: r.set, key: r.key, value: r.value });
    }
  }
  return out;
}

/** A store's `configuration` as written in `.configu` (src/stores/settings.ts parses it). */
export type StoreSettings = Record<string, unknown>;

/** Index names derived from a table name, kept within the 63/64-character identifier limits. */
export const indexName = (prefix: string, table: string): string => `${prefix}_${table}`.slice(0, 63);

// ---------------------------------------------------------------------------------------------------------------
// Errors

/** Replace the password part of URLs and every given secret in a text. */
export function redact(text: string, secrets: readonly (string | undefined)[] = []): string {
  let out = text.replace(/(\b[a-z][a-z0-9+.-]*:\/\/)([^\s/@:]*):([^\s/@]*)@/gi, '$1$2:***@');
  for (const s of secrets) if (s && s.length >= 3) out = out.split(s).join('***');
  return out;
}

const CODE_REASONS: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  ETIMEDOUT: 'timed out',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'host name lookup failed',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  EPIPE: 'connection closed',
  EACCES: 'permission denied',
  EPERM: 'permission denied',
  ENOENT: 'not found',
  EISDIR: 'is a folder',
  ENOTDIR: 'a parent is not a folder',
  EROFS: 'read-only file system',
  ENOSPC: 'no space left on the device',
  '28P01': 'authentication failed',
  '28000': 'authentication failed',
  '3D000': 'database does not exist',
  '57P01': 'the server is shutting down',
  '57P03': 'the server is starting up or shutting down',
  ER_ACCESS_DENIED_ERROR: 'authentication failed',
  ER_BAD_DB_ERROR: 'database does not exist',
  PROTOCOL_CONNECTION_LOST: 'connection lost',
  SQLITE_BUSY: 'database is locked',
  SQLITE_CANTOPEN: 'cannot open the database file',
  SQLITE_CORRUPT: 'database file is corrupt',
  SQLITE_NOTADB: 'file is not a database',
  SQLITE_READONLY: 'database is read-only',
};

/** A short, secret-free reason for a driver error (no stack, no URL credentials). */
export function reasonOf(err: unknown, secrets: readonly (string | undefined)[] = []): string {
  if (err instanceof AggregateError && err.errors.length) return reasonOf(err.errors[0], secrets);
  const e = err as { code?: unknown; message?: unknown; errno?: unknown } | undefined;
  const code = typeof e?.code === 'string' ? e.code : undefined;
  if (code && CODE_REASONS[code]) return CODE_REASONS[code]!;
  let message = typeof e?.message === 'string' ? e.message : String(err);
  message = redact(message.split('\n')[0]!, secrets).trim();
  if (message.length > 160) message = `${message.slice(0, 157)}...`;
  if (!message) message = code ?? 'unknown error';
  return message;
}

/** Wrap any failure as StoreUnavailableError (CfguErrors pass through unchanged). */
export function unavailable(store: string, err: unknown, secrets: readonly (string | undefined)[] = []): CfguError {
  if (err instanceof CfguError) return err;
  const wrapped = new StoreUnavailableError(store, reasonOf(err, secrets));
  causes.set(wrapped, err); // for retry decisions inside the store only; never attached to the error itself
  return wrapped;
}

const causes = new WeakMap<object, unknown>();

/** The driver error a StoreUnavailableError was made from (inside the stores only). */
export const causeOf = (err: unknown): unknown => (err && typeof err === 'object' ? causes.get(err) ?? err : err);

export class TimeoutError extends Error {
  constructor(what: string, ms: number) {
    super(`${what} timed out after ${ms} ms`);
    this.name = 'TimeoutError';
  }
}

/** Reject after `ms` (the underlying operation is not cancelled; drivers are given their own timeouts too). */
export function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  if (!(ms > 0)) return promise;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new TimeoutError(what, ms)), ms);
    timer.unref?.();
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** A promise-chain mutex: `run` calls execute one at a time, in order. */
export class Mutex {
  private tail: Promise<unknown> = Promise.resolve();
  run<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.tail.then(fn, fn);
    this.tail = next.catch(() => undefined);
    return next;
  }
}

/**
 * Connect-once-and-retry-on-use: `ensure()` runs `connect` at most once at a time; after a failure, the next call
 * tries again (so a store that was down at start-up comes up on its own when it is reachable).
 */
export class Lazy {
  private ready = false;
  private pending: Promise<void> | undefined;
  constructor(private readonly connect: () => Promise<void>) {}
  get isReady(): boolean {
    return this.ready;
  }
  ensure(): Promise<void> {
    if (this.ready) return Promise.resolve();
    if (!this.pending) {
      this.pending = this.connect().then(
        () => {
          this.ready = true;
          this.pending = undefined;
        },
        (err) => {
          this.pending = undefined;
          throw err;
        },
      );
    }
    return this.pending;
  }
  reset(): void {
    this.ready = false;
  }
}

/**
 * The secrets of a connection's settings (its `password`, and the password inside its `url`), which every message
 * about that store must redact.
 */
export function connectionSecrets(options: { password?: string; url?: string }): (string | undefined)[] {
  let fromUrl: string | undefined;
  try {
    fromUrl = options.url ? decodeURIComponent(new URL(options.url).password) || undefined : undefined;
  } catch {
    /* not a URL */
  }
  return [options.password, fromUrl];
}
