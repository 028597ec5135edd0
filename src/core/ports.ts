/**
 * The engine's ports: what src/core needs from a store and from the expression evaluator. src/core owns them;
 * src/stores and src/expressions implement them.
 */

// ---- Stores --------------------------------------------------------------------------------------------------------

/** A stored config. Its value is always a string; an empty value is never kept (writing "" deletes). */
export interface Config {
  /** Set path in normal form: "" for the root, else `a/b/c` (no leading or trailing slash). */
  set: string;
  key: string;
  value: string;
}

export interface ConfigQuery {
  set: string;
  key: string;
}

/** The interface every store kind implements. */
export interface ConfigStore {
  /** Normalised type name, e.g. `json-file`, `postgresql`. */
  readonly type: string;
  /** Connect / open / create tables. Called once at start-up. Idempotent. */
  init(): Promise<void>;
  /**
   * Answer a batch of queries in one round trip. Returns the configs that exist with a non-empty value, in any order;
   * queries without a value are simply absent from the answer.
   * Throws StoreUnavailableError (./errors.ts) when the store cannot be reached or read.
   */
  get(queries: readonly ConfigQuery[]): Promise<Config[]>;
  /** Write a batch; a config whose value is "" deletes that (set, key). */
  set(configs: readonly Config[]): Promise<void>;
  /**
   * The sets this store holds under the set path `prefix` (the set itself and its descendants, by whole segments:
   * `prod` covers `prod` and `prod/eu`, not `production`; "" covers every set, the root set included), each with the
   * names of its keys (never the values). Bounded by `options` (SetListLimits); read-only, one query per call where
   * the backend allows. What it costs per kind: docs/stores.md, "Listing sets".
   * Throws StoreUnavailableError, as get() does, when the store cannot be reached or read.
   */
  list(prefix: string, options?: SetListOptions): Promise<SetListing>;
  /** Release connections, timers and file handles. Idempotent. */
  close(): Promise<void>;
  /**
   * Change feed (optional): tell `listener` whenever configuration in this store may have changed, whoever wrote it
   * (cfgu, another program, an editor). One call starts one feed; `close()` on the result stops it. A kind that cannot
   * be notified polls cheaply. A notice may be spurious (the reader re-evaluates and compares), never missing.
   *
   * Start-up: a kind whose source is established asynchronously (a LISTEN, a subscription, a watch stream, a first
   * check) calls `change({})` once it is live, so a write made between `watch()` and that moment is not lost; the
   * json-file feed takes its first look synchronously and sends no such notice. Listeners may be called
   * synchronously from `watch()` and from the store's own `set()`; they must not throw (a throw is ignored).
   * Feeds never keep the process alive (unref'd timers and watchers). How each kind learns of changes, with its
   * delay and cost: docs/stores.md, "Change feeds".
   */
  watch?(listener: ChangeListener): ChangeFeed;
}

/**
 * A store that keeps revisions and a history of its sets (every kind in src/stores does). Each set has a revision
 * number, 0 until cfgu first writes it; every `write` raises it and appends a RevisionRecord, in the same atomic step
 * as the change to the configuration data (which keeps the layout Configu's tools read). A rollback is a `write` of
 * the values a record shows as `before`, with `expectedRevision`. Per kind: docs/stores.md, "Revisions and history".
 */
export interface RevisionedStore extends ConfigStore {
  /** The set's current revision, and whether its data changed since then outside cfgu (when the kind can tell). */
  revision(set: string): Promise<SetRevision>;
  /**
   * Change keys of one set, atomically: check `expectedRevision` (when given), record any change made outside cfgu
   * since the last revision (a record with `recorded: false`), apply the changes to the data, append this write's
   * record, prune by the store's retention. All of it or none of it. Throws RevisionConflictError (nothing written)
   * when the set is at another revision than `expectedRevision`; StoreUnavailableError as set() does.
   */
  write(set: string, changes: readonly ConfigChange[], options?: WriteOptions): Promise<WriteResult>;
  /** One page of a set's history, newest first. */
  history(query: HistoryQuery): Promise<HistoryPage>;
}

/** One key of a write: its new value, or null (or "") to remove it. */
export interface ConfigChange {
  key: string;
  value: string | null;
}

export interface WriteOptions {
  /** Refuse the write (RevisionConflictError) unless the set is at this revision (0: never written through cfgu). */
  expectedRevision?: number;
  /** Who writes (the authenticated subject); recorded as is. */
  subject?: string;
  /** The request's id; recorded as is. */
  requestId?: string;
  /** Why; recorded as is. */
  message?: string;
}

/** A key's value before and after a revision; null: absent. */
export interface KeyChange {
  key: string;
  before: string | null;
  after: string | null;
}

/** One revision of a set, as its history holds it. */
export interface RevisionRecord {
  set: string;
  revision: number;
  /** When it was written (ISO 8601, UTC, the writing process's clock). */
  time: string;
  subject: string | null;
  requestId: string | null;
  message: string | null;
  /**
   * True for a write through cfgu. False for a change cfgu found but did not make (another tool wrote the data since
   * the last revision): its changes are the difference found, and nothing else about it is known.
   */
  recorded: boolean;
  /** Sorted by key. */
  changes: KeyChange[];
}

export interface SetRevision {
  set: string;
  revision: number;
  /** True when the data differs from what the last revision left (a change outside cfgu, not yet recorded). */
  changedOutside: boolean;
}

export interface WriteResult {
  set: string;
  /** The set's revision after the write (this write's record). */
  revision: number;
  /** The records the write appended: an unrecorded one first when an outside change was found, then its own. */
  records: RevisionRecord[];
}

/** What `history` reads: one set, newest first, at most `limit` records (default 100, at most 1000). */
export interface HistoryQuery {
  set: string;
  /** Only records that change this key. */
  key?: string;
  /** Only records written at or after this time (ISO 8601). */
  since?: string;
  /** Only records written before this time (ISO 8601). */
  until?: string;
  /** Only records with a lower revision: the `next` of the previous page. */
  before?: number;
  limit?: number;
}

export interface HistoryPage {
  set: string;
  records: RevisionRecord[];
  /** Present when older records may match: pass it as `before` for the next page. */
  next?: number;
}

/** True for a store that keeps revisions and history. */
export function isRevisioned(store: ConfigStore): store is RevisionedStore {
  const s = store as Partial<RevisionedStore>;
  return typeof s.revision === 'function' && typeof s.write === 'function' && typeof s.history === 'function';
}

/** The bounds of one ConfigStore.list call; each a positive integer. */
export interface SetListOptions {
  /** At most this many sets are listed (default DEFAULT_SET_LIST_LIMITS.sets). */
  sets?: number;
  /** At most this many key names are listed over all the listed sets (default DEFAULT_SET_LIST_LIMITS.keys). */
  keys?: number;
}

export type SetListLimits = Required<SetListOptions>;

export const DEFAULT_SET_LIST_LIMITS: Readonly<SetListLimits> = Object.freeze({ sets: 1000, keys: 100_000 });

/** One set of a listing: its path (normal form) and the names of the keys it holds with a non-empty value. */
export interface ListedSet {
  set: string;
  /** Sorted by code point, each once. Never empty (a set without keys is not held, so not listed). */
  keys: string[];
}

/**
 * What ConfigStore.list answers. Sets are taken in order of their path (by code point, so the root set "" first and
 * `prod` before `prod/eu`), each whole: the listing stops before the first set that would take it past `limits.sets`
 * sets or `limits.keys` key names in total, and then `truncated` is true. A listed set always has all its keys.
 */
export interface SetListing {
  /** The prefix listed, in normal form. */
  prefix: string;
  sets: ListedSet[];
  /** True when the store holds at least one more set under the prefix than listed. */
  truncated: boolean;
  /** The bounds this answer was cut at. */
  limits: SetListLimits;
}

/** What changed: the set paths (normal form) written to, or `undefined` when it could be any set (a reconnect, a file replaced). */
export interface ChangeNotice {
  sets?: string[];
}

export interface ChangeListener {
  /** Configuration under `notice.sets` (or anywhere) may have changed. */
  change(notice: ChangeNotice): void;
  /**
   * The feed lost its source (the store is down or refused the watch). The feed keeps trying on its own; once back it
   * calls `change({})` (anything may have changed meanwhile).
   */
  error(error: Error): void;
}

export interface ChangeFeed {
  /** Stop watching; releases connections and timers. Idempotent. */
  close(): Promise<void>;
}

/**
 * A store as the engine sees it: a declared name, resolved from `.configu`, wrapped with backup behaviour.
 * Built once at start-up by the registry, never per request.
 */
export interface ResolvedStore {
  /** The name under which `.configu` declares the store. */
  readonly name: string;
  /** Normalised store type (`$.input.store.type`). */
  readonly type: string;
  /**
   * Batched read. `fromBackup` is true when the store could not be reached and the backup answered instead.
   * Throws StoreUnavailableError when neither can answer.
   */
  read(queries: readonly ConfigQuery[]): Promise<{ configs: Config[]; fromBackup: boolean }>;
  /** Batched write ("" deletes). */
  write(configs: readonly Config[]): Promise<void>;
  /**
   * The sets the store holds under `prefix` (ConfigStore.list). Never answered by the backup: it holds only what was
   * read, so a listing from it could leave sets out; throws StoreUnavailableError while the store cannot be read.
   * Optional so that a stand-in store may leave it out; every store of the registry has it.
   */
  list?(prefix: string, options?: SetListOptions): Promise<SetListing>;
  /** The store's change feed (ConfigStore.watch), when its kind has one. */
  watch?(listener: ChangeListener): ChangeFeed;
  /** `.configu` declares the store `readOnly: true`: cfgu refuses every write to it (ReadOnlyStoreError). */
  readonly readOnly?: boolean;
  /** The store's revisions, history and listing, when its kind keeps them (every kind in src/stores does). */
  readonly revisions?: StoreRevisions;
}

/**
 * What a ResolvedStore offers of a RevisionedStore's revisions and history, and of its listing: a write through it is
 * also recorded in the backup database (when the store has one), as ResolvedStore.write is.
 */
export interface StoreRevisions {
  revision(set: string): Promise<SetRevision>;
  write(set: string, changes: readonly ConfigChange[], options?: WriteOptions): Promise<WriteResult>;
  history(query: HistoryQuery): Promise<HistoryPage>;
  list(prefix: string, options?: SetListOptions): Promise<SetListing>;
}

export interface StoreResolver {
  /** The store a request names, or the default store when `name` is undefined. Throws UnknownStoreError. */
  resolve(name: string | undefined): ResolvedStore;
  /** Declared names, for error messages. */
  names(): string[];
}

// ---- Observer ------------------------------------------------------------------------------------------------------

/** What an observer is told about one command of a pipeline: counts and names, never a value. */
export interface CommandInfo {
  /** Position of the command in the pipeline. */
  index: number;
  /** Declared name of the command's store (undefined without a store, e.g. defaults only). */
  store: string | undefined;
  /** Keys the command's schema declares. */
  keys: number;
}

/**
 * An optional watcher of the engine's work (the server uses it for traces). `command` wraps the evaluation of one
 * command: it must call `run` exactly once and return (or rethrow) what `run` gives.
 */
export interface EngineObserver {
  command<T>(info: CommandInfo, run: () => Promise<T>): Promise<T>;
}

// ---- Expression evaluator ------------------------------------------------------------------------------------------

/**
 * What `$.configs.<KEY>` (and `$` itself for the key under evaluation) holds. `value` and `labels` are functions of
 * `storedValue` and `cfgu` (coerceValue with the Cfgu's `schema.type`; `label` as an array): the sandbox may derive
 * them again on its side rather than receive them.
 */
export interface ConfigView {
  key: string;
  /** The stored (raw) string. Exposed as `$.storedValue`. */
  storedValue: string;
  /** The coerced value (coerceValue from ./coerce.ts). Exposed as `$.value`. */
  value: unknown;
  origin: 'empty' | 'store' | 'override' | 'default' | 'const';
  /** The Cfgu declaration (`{}` for a null declaration). */
  cfgu: Record<string, unknown>;
  /** Always an array. */
  labels: string[];
}

/** `$.input` */
export interface InputView {
  store: { type: string };
  set: { path: string; hierarchy: string[] };
  schema: { keys: Record<string, unknown> };
}

/**
 * Everything one command needs from the sandbox, sent in one round trip.
 * Consts are evaluated first in the given order (already dependency-ordered by the engine); after each const the
 * sandbox updates `$.configs[key]` (storedValue = rendered text, value = coerced with the key's `schema.type`,
 * origin = 'const') so later consts and every test see it. Then every test runs with `$` = the view of its key.
 */
export interface ExpressionJob {
  input: InputView;
  configs: Record<string, ConfigView>;
  consts: Array<{ key: string; template: string }>;
  tests: Array<{ key: string; expressions: string[] }>;
}

/** Why an expression failed: a thrown error / falsy result, or a sandbox limit. */
export type ExpressionFailureKind = 'error' | 'falsy' | 'time-limit' | 'memory-limit';

export type ConstOutcome =
  | { key: string; ok: true; value: string }
  | { key: string; ok: false; kind: ExpressionFailureKind; message: string };

export interface TestOutcome {
  key: string;
  /** Index of the expression in the key's `test` list (0 for a single expression). */
  index: number;
  ok: boolean;
  kind?: ExpressionFailureKind;
  /** For failures: a readable reason (the thrown message, or that the expression was falsy). */
  message?: string;
}

export interface ExpressionResult {
  consts: ConstOutcome[];
  /** Only the failed tests need be reported; passing ones may be omitted. */
  tests: TestOutcome[];
}

/**
 * What one request's jobs consumed in the sandbox, shared by all of them (one object per request). The evaluator adds
 * to it and refuses the request's further jobs once a budget is exceeded.
 */
export interface RequestUsage {
  /** CPU time of the request's jobs (every attempt), in ms. */
  cpuMs: number;
  /** Sandbox children that the request's jobs killed or made retire. */
  restarts: number;
  /** Set once a budget was exceeded: every later job of the request fails with it. */
  exceeded?: Error;
}

/** Who a job is for. Jobs are queued per client and clients are served in turn. */
export interface RunContext {
  /** The client's identity (the authenticated subject, else the client address). */
  client: string;
  /** The request's budget account; without it the job counts against no request budget. */
  usage?: RequestUsage;
}

/** A context for one request of `client`, with a fresh budget account. */
export function requestContext(client: string): RunContext {
  return { client, usage: { cpuMs: 0, restarts: 0 } };
}

/** The engine talks to expressions only through this interface; the implementation runs them in a sandbox. */
export interface ExpressionEvaluator {
  /**
   * Evaluate one command's consts and tests. Never rejects for the expression's own faults (those are outcomes); may
   * reject when the sandbox is unavailable or busy, or when the request's budget is exceeded.
   */
  run(job: ExpressionJob, context?: RunContext): Promise<ExpressionResult>;
  /** Render a template (`{{ }}` / `<% %>`) with the given `$` (CLI `--template`). Throws ExpressionError. */
  renderTemplate(template: string, context: unknown): Promise<string>;
  /** Evaluate a boolean expression with the given `$` (CLI `--filter`). Throws ExpressionError. */
  evaluateBoolean(expression: string, context: unknown): Promise<boolean>;
  /**
   * Render a TRUSTED template (the server's own `.configu`): bare identifiers resolve to `variables` (a copy of the
   * process environment), an unknown identifier reads as "". Throws ExpressionError.
   */
  renderTrusted(template: string, variables: Record<string, string>): Promise<string>;
  /** Stop the sandbox processes. */
  close(): Promise<void>;
}
