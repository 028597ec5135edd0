/**
 * Watching `POST /export` for changes: conditional requests (ETag / If-None-Match), long polls (`Prefer: wait=N`)
 * and Server-Sent Events streams (`Accept: text/event-stream`). The rules are described in docs/server.md,
 * "Watching for changes".
 *
 * One WatchHub per process. Watchers of the same pipeline (the same request body) from the same client (the identity
 * the sandbox queues by: credential, JWT subject, preshared key, or address without authentication) share one
 * `Pipeline`: it is evaluated once at first, then once per change notice (notices within `debounceMs` coalesced),
 * and each of that client's watchers gets the result. Nothing evaluated for one client is handed to another, and no
 * client can learn that another watches the same body: pipelines are keyed by client and body.
 *
 * A watcher obeys its credential for its whole life (./watch-access.ts): a stream ends with an `end` event, a held
 * long poll is answered 401 or 403, when the token expires, is no longer accepted, or its scope no longer covers the
 * pipeline. Each watcher's answer is kept once per pipeline as the bytes of its SSE event (a Buffer every stream of the
 * pipeline writes as is, and long polls answer a slice of), never copied per stream. Each store a watched pipeline reads has one change feed per process (ResolvedStore.watch, or a
 * periodic re-evaluation every `pollMs` for a kind without one); a notice re-evaluates only the pipelines that read
 * one of the notice's sets (a set or one of its descendants: a pipeline of set `prod/eu` reads `prod` and the root).
 */
import { createHash } from 'node:crypto';
import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from 'fastify';
import { Debouncer, exportPipelineJson, noticeConcerns, setsRead } from '../../core/index.js';
import { StoreUnavailableError } from '../../core/errors.js';
import type { EvalCommandInput } from '../../core/types.js';
import { requestContext, type ExpressionEvaluator } from '../../expressions/types.js';
import type { ChangeFeed, ChangeListener, StoreResolver } from '../../stores/types.js';
import type { Lifecycle } from '../process/lifecycle.js';
import type { Engine, WatchEndReason } from '../observe/observation.js';
import { httpProblem, PROBLEM_CONTENT_TYPE, toProblem } from '../http/problem.js';
import type { ServerSettings } from '../process/settings.js';
import type { CredentialVerdict, WatchCredential } from '../access/watch-credentials.js';
import { cacheBudget, type CacheMember } from '../../core/cache-budget.js';

/** What the audit line of a watch request says about the watch (set by the hub, read by the app's audit). */
export interface WatchRecord {
  kind: 'stream' | 'poll';
  /** Answer events a stream delivered (error events and comments not counted). */
  events: number;
  /** Keys of the last answer a stream delivered. */
  keys: number;
  /** Why the server ended the watch (unset: answered as usual, or, for a stream, the client went away). */
  ended?: WatchEndReason;
  /** performance.now() when the stream opened. */
  opened: number;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set when the request became a watch (a stream, or a long poll that was held). */
    cfguWatch: WatchRecord | null;
  }
}

/** A strong entity tag of an answer: a digest of its exact bytes. */
export function etagOf(body: string): string {
  return `"${createHash('sha256').update(body, 'utf8').digest('base64url')}"`;
}

/** `If-None-Match` (a list of tags, or `*`) matches `etag`, by the weak comparison RFC 9110 prescribes for it. */
export function noneMatchHits(header: string | undefined, etag: string): boolean {
  if (typeof header !== 'string' || header === '') return false;
  if (header.trim() === '*') return true;
  const opaque = etag.replace(/^W\//, '');
  return header.split(',').some((t) => t.trim().replace(/^W\//, '') === opaque);
}

/** `Prefer: wait=N` (RFC 7240) in seconds, cut to `max`; undefined when absent or malformed. */
export function preferredWait(prefer: string | string[] | undefined, max: number): number | undefined {
  const text = Array.isArray(prefer) ? prefer.join(',') : prefer;
  if (typeof text !== 'string') return undefined;
  for (const part of text.split(',')) {
    const m = /^\s*wait\s*=\s*"?(\d{1,10})"?\s*(;.*)?$/i.exec(part);
    if (m) return Math.min(Number(m[1]), max);
  }
  return undefined;
}

/** The client accepts an event stream (`text/event-stream` in Accept, not with q=0). */
export function wantsStream(accept: string | undefined): boolean {
  if (typeof accept !== 'string') return false;
  return accept.split(',').some((range) => {
    const [type, ...params] = range.split(';').map((s) => s.trim().toLowerCase());
    return type === 'text/event-stream' && !params.some((p) => /^q=0(\.0*)?$/.test(p));
  });
}

/** Answer a 200 with its ETag, or 304 without a body when `If-None-Match` names it. */
export function sendAnswer(request: FastifyRequest, reply: FastifyReply, body: string | Buffer, etag: string, backupStores: readonly string[]): FastifyReply {
  if (backupStores.length) reply.header('x-configu-backup', headerSafe(backupStores));
  reply.header('cache-control', 'no-store');
  reply.header('etag', etag);
  if (noneMatchHits(request.headers['if-none-match'], etag)) return reply.code(304).send();
  reply.type('application/json; charset=utf-8');
  return reply.send(body);
}

/** A header-safe rendering of store names (names come from the operator's file, but be strict anyway). */
export const headerSafe = (names: readonly string[]): string =>
  names.map((n) => (/^[\x21-\x7e]+$/.test(n) && !n.includes(',') ? n : encodeURIComponent(n))).join(', ');

/**
 * The current answer of a pipeline, kept once: the UTF-8 bytes of its SSE event (`id: <tag>\ndata: <answer>\n\n`),
 * which every stream writes as is (a socket that cannot take it at once holds a reference, not a copy), and from which
 * a long poll answers the `<answer>` slice.
 */
type State =
  | { kind: 'answer'; frame: Buffer; dataStart: number; etag: string; backupStores: string[]; keys: number }
  | { kind: 'problem'; status: number; text: string; headers: Record<string, string>; error?: unknown; frame: Buffer };

/**
 * The event bytes of each answer in use, by its tag: pipelines of different clients whose evaluations produced the
 * same bytes (the same SHA-256) keep one Buffer between them. Nothing is shared but memory: each client's answer is
 * still its own evaluation, and it gets exactly the bytes that evaluation produced.
 */
const frames = new Map<string, WeakRef<Buffer>>();
const framesFreed = new FinalizationRegistry<string>((etag) => {
  if (frames.get(etag)?.deref() === undefined) frames.delete(etag);
});

function answerState(body: string, keys: number, backupStores: string[]): Extract<State, { kind: 'answer' }> {
  const etag = etagOf(body);
  const head = `id: ${etag}\ndata: `;
  // Built every time, kept only when no equal one is in use: whether another client holds the same answer does not
  // change the work (or its time) of this evaluation.
  let frame: Buffer = Buffer.from(`${head}${body}\n\n`, 'utf8');
  const kept = frames.get(etag)?.deref();
  if (kept) frame = kept;
  else {
    frames.set(etag, new WeakRef(frame));
    framesFreed.register(frame, etag);
  }
  return { kind: 'answer', frame, dataStart: Buffer.byteLength(head), etag, backupStores, keys };
}

/** The answer's JSON bytes (a view of the event's bytes). */
const bodyOf = (s: Extract<State, { kind: 'answer' }>): Buffer => s.frame.subarray(s.dataStart, s.frame.length - 2);

/** What a watcher last received: the answer's ETag, or the text of the error event. */
const markOf = (s: State): string => (s.kind === 'answer' ? s.etag : `problem:${s.text}`);

interface Stream {
  pipeline: Pipeline;
  res: FastifyReply['raw'];
  last: string;
  record: WatchRecord;
  credential: WatchCredential | undefined;
  /** The expiry timer of a credential that expires. */
  timer?: NodeJS.Timeout;
  /** Deliveries waiting for an asynchronous credential check, in order. */
  chain?: Promise<void>;
  closed: boolean;
}

type PollOutcome = State | 'unchanged' | CredentialVerdict;

interface Poll {
  tag: string;
  record: WatchRecord;
  finish(outcome: PollOutcome): void;
  /** Check the credential again (a reload of the credentials); answers the poll when it no longer admits it. */
  recheck(): void;
}

const isVerdict = (o: PollOutcome): o is CredentialVerdict => typeof o === 'object' && 'reason' in o;

/** The longest delay setTimeout takes (about 24.8 days); a later expiry re-arms the timer. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** Buffered bytes beyond which a stream whose client does not read is cut (it reconnects and resumes). */
const MAX_BUFFERED = 1024 * 1024;

class Pipeline {
  state: State | undefined;
  first: Promise<void>;
  readonly streams = new Set<Stream>();
  readonly polls = new Set<Poll>();
  /** Store name -> the sets of it this pipeline reads (each command's set and its ancestors). */
  readonly reads: Map<string, Set<string>>;
  readonly debouncer: Debouncer;

  constructor(
    readonly hub: WatchHub,
    readonly key: string,
    readonly commands: EvalCommandInput[],
    readonly client: string,
  ) {
    this.reads = setsRead(commands, hub.registry);
    this.debouncer = new Debouncer(() => this.evaluate(), hub.settings.watch.debounceMs);
    this.first = this.debouncer.run();
  }

  get watchers(): number {
    return this.streams.size + this.polls.size;
  }

  private async evaluate(): Promise<void> {
    this.hub.stats.evaluations++;
    let state: State;
    try {
      const { text: body, keys, backupStores } = await this.hub.evaluate(this.commands, this.client, this.watchers);
      state = answerState(body, keys, backupStores);
    } catch (e) {
      state = this.hub.problemState(e, 'watched pipeline evaluation failed');
    }
    if (!this.hub.closed) this.publish(state);
  }

  /** Make `state` current and tell every watcher that has not seen it yet. */
  publish(state: State): void {
    this.hub.held(this.state, state);
    this.state = state;
    this.tell(state);
    for (const p of [...this.polls]) {
      if (state.kind === 'answer' && p.tag === state.etag) continue;
      p.finish(state);
    }
  }

  /**
   * Send `state` to every stream that has not seen it last. A feed error (the store is down) goes to the streams only:
   * it is no answer, so it does not change `state` or answer long polls.
   */
  tell(state: State): void {
    if (!this.streams.size) return;
    const mark = markOf(state);
    for (const s of this.streams) {
      if (s.last === mark) continue;
      s.last = mark;
      // Each delivery checks the stream's credential first (./watch-access.ts).
      this.hub.guarded(s, () => this.hub.send(s, state));
    }
  }

  stop(): void {
    this.debouncer.stop();
  }
}

interface StoreFeed {
  feed: ChangeFeed;
  pipelines: Set<Pipeline>;
}

/** Metrics and traces of watch work (./observe.ts): evaluations counted and traced, stream ends counted. */
export interface WatchObserver {
  watchEvaluation<T>(commands: readonly EvalCommandInput[], watchers: number, run: (engine: Engine) => Promise<T>): Promise<T>;
  watchStreamEnded(reason: WatchEndReason): void;
}

export interface WatchHubOptions {
  registry: StoreResolver;
  evaluator?: ExpressionEvaluator;
  settings: ServerSettings;
  lifecycle: Lifecycle;
  log: FastifyBaseLogger;
  observer?: WatchObserver;
}

/** A scoped credential's view of an error (e.g. an unknown store's list cut to the stores it may name). */
export type ErrorScope = (e: unknown) => unknown;

/** What the route knows of a watch request: for whom it runs, its error scope, and its credential (auth on). */
export interface WatchContext {
  /** The client identity: the sandbox queue, the pipeline key, and the per-client watcher count. */
  client: string;
  /** A scoped credential's view of an error (the plain request's). */
  scope?: ErrorScope;
  /** The request's credential, checked again for the watch's whole life; undefined without authentication. */
  credential?: WatchCredential;
}

export class WatchHub {
  readonly registry: StoreResolver;
  readonly evaluator: ExpressionEvaluator | undefined;
  readonly settings: ServerSettings;
  readonly stats = { evaluations: 0, notices: 0 };
  closed = false;
  private readonly lifecycle: Lifecycle;
  private readonly log: FastifyBaseLogger;
  private readonly observer: WatchObserver | undefined;
  private readonly pipelines = new Map<string, Pipeline>();
  private readonly feeds = new Map<string, StoreFeed>();
  private readonly streams = new Set<Stream>();
  /** Watchers (and watchers being set up) per client identity. */
  private readonly perClient = new Map<string, number>();
  private reserved = 0;
  private heartbeat: NodeJS.Timeout | undefined;

  constructor(options: WatchHubOptions) {
    this.registry = options.registry;
    this.evaluator = options.evaluator;
    this.settings = options.settings;
    this.lifecycle = options.lifecycle;
    this.log = options.log;
    this.observer = options.observer;
    this.lifecycle.onStopping(() => this.drain());
    this.unregister = cacheBudget.register(this.member);
  }

  /**
   * The answers the pipelines hold, counted against the process's cache ceiling (core/cache-budget.ts) as `watch`:
   * each pipeline's current event bytes (an answer that pipelines of several clients share is counted once for each,
   * an upper bound). None is evictable: a pipeline is dropped as soon as nobody watches it, so every answer held is
   * one a watcher needs; over the ceiling, the other caches make room.
   */
  private heldBytes = 0;
  private readonly member: CacheMember = {
    name: 'watch',
    bytes: () => this.heldBytes,
    entries: () => this.pipelines.size,
    evictOne: () => false,
  };
  private readonly unregister: () => void;

  /** A pipeline's answer went from `before` to `after` (undefined: none). */
  held(before: State | undefined, after: State | undefined): void {
    this.heldBytes += (after ? after.frame.length + 200 : 0) - (before ? before.frame.length + 200 : 0);
    if (after) cacheBudget.settle();
  }

  /** One evaluation for watchers: through the observer (counted, traced) when there is one. */
  evaluate(commands: readonly EvalCommandInput[], client: string, watchers: number): ReturnType<typeof exportPipelineJson> {
    const run = (engine: Engine) => exportPipelineJson(commands, engine, { context: requestContext(client), limits: this.settings.limits });
    if (this.observer) return this.observer.watchEvaluation(commands, watchers, run);
    return run({ stores: this.registry, ...(this.evaluator ? { expressions: this.evaluator } : {}) });
  }

  /** Streams plus held long polls (and watchers being set up). */
  get watchers(): number {
    return this.reserved;
  }

  /** The watchers one client holds (tests). */
  watchersOf(client: string): number {
    return this.perClient.get(client) ?? 0;
  }

  /** Pipelines kept (tests: one per client and body). */
  get pipelineCount(): number {
    return this.pipelines.size;
  }

  /** A pipeline is waiting for its debounce or being evaluated (tests: nothing pending after an unrelated change). */
  get pending(): boolean {
    for (const p of this.pipelines.values()) if (p.debouncer.pending) return true;
    return false;
  }

  /** The request asks to watch: an event stream, or a long poll (`Prefer: wait=N` with `If-None-Match`). */
  wants(request: FastifyRequest): boolean {
    if (wantsStream(request.headers.accept)) return true;
    return this.waitOf(request) !== undefined;
  }

  private waitOf(request: FastifyRequest): number | undefined {
    if (!request.headers['if-none-match']) return undefined;
    const wait = preferredWait(request.headers.prefer, this.settings.watch.maxWaitSeconds);
    return wait !== undefined && wait > 0 ? wait : undefined;
  }

  problemState(e: unknown, message: string): Extract<State, { kind: 'problem' }> {
    const { problem, headers, log } = toProblem(e, 'watch');
    if (log === 'error') this.log.error({ err: e }, message);
    else if (log === 'warn') this.log.warn({ err: { type: (e as Error)?.name, message: (e as Error)?.message } }, message);
    const text = JSON.stringify(problem);
    return { kind: 'problem', status: problem.status, text, headers: headers ?? {}, error: e, frame: Buffer.from(`event: error\ndata: ${text}\n\n`, 'utf8') };
  }

  /**
   * Serve a watch request (the route checked auth, the body, its limits and its scope already). `context.scope`
   * rewrites an error the way the plain request would.
   */
  async serve(request: FastifyRequest, reply: FastifyReply, commands: EvalCommandInput[], context: WatchContext): Promise<FastifyReply> {
    const { client, scope, credential } = context;
    const stream = wantsStream(request.headers.accept);
    const wait = this.waitOf(request);
    if (this.lifecycle.stopping || this.closed) {
      if (stream) return sendProblem(reply, 503, JSON.stringify(httpProblem(503, 'the server is shutting down; reconnect to another replica')), { 'retry-after': '1' });
      return this.answerOnce(request, reply, commands, client);
    }
    const max = this.settings.watch.maxWatchers;
    if (this.reserved >= max) {
      const body = httpProblem(503, `this server already serves its maximum of ${max} watchers; retry later or elsewhere`);
      return sendProblem(reply, 503, JSON.stringify(body), { 'retry-after': '5' });
    }
    // Each client's share: one client holding its maximum leaves the rest of the server's watchers to the others.
    const perClient = this.settings.watch.maxWatchersPerClient;
    const held = this.perClient.get(client) ?? 0;
    if (held >= perClient) {
      const body = httpProblem(429, `this client already holds its maximum of ${perClient} watchers (streams and long polls); close one, or retry later`);
      return sendProblem(reply, 429, JSON.stringify(body), { 'retry-after': '5' });
    }
    this.reserved++;
    this.perClient.set(client, held + 1);
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      this.reserved--;
      const n = (this.perClient.get(client) ?? 1) - 1;
      if (n > 0) this.perClient.set(client, n);
      else this.perClient.delete(client);
    };
    const pipeline = this.pipelineFor(commands, client);
    const first = pipeline.state === undefined;
    try {
      await pipeline.first;
    } catch {
      /* evaluate() never rejects */
    }
    const state = pipeline.state!;
    // The credential may have expired (or been removed) while the first answer was evaluated: answered as a plain
    // request would be now.
    const verdict = credential ? await credential.check() : true;
    if (verdict !== true) {
      release();
      this.forget(pipeline);
      return sendProblem(reply, verdict.status, verdict.text, verdict.headers);
    }
    if (this.lifecycle.stopping || this.closed || (first && state.kind === 'problem') || (!stream && state.kind === 'problem')) {
      release();
      this.forget(pipeline);
      if (state.kind === 'problem') {
        const scoped = scope && state.error !== undefined ? scope(state.error) : state.error;
        if (scoped !== state.error) {
          const { problem, headers } = toProblem(scoped, 'watch');
          return sendProblem(reply, problem.status, JSON.stringify(problem), headers ?? {});
        }
        return sendProblem(reply, state.status, state.text, state.headers);
      }
      request.cfguKeys = state.keys;
      return sendAnswer(request, reply, bodyOf(state), state.etag, state.backupStores);
    }
    if (stream) return this.openStream(request, reply, pipeline, state, release, credential);
    await this.hold(request, reply, pipeline, state, wait!, release, credential);
    return reply;
  }

  /** A watch request while shutting down: one plain answer (a long poll answers at once). */
  private async answerOnce(request: FastifyRequest, reply: FastifyReply, commands: EvalCommandInput[], client: string): Promise<FastifyReply> {
    const { text: body, keys, backupStores } = await this.evaluate(commands, client, 0);
    request.cfguKeys = keys;
    return sendAnswer(request, reply, body, etagOf(body), backupStores);
  }

  /** The pipeline of this client and body (never another client's: its answers and its timing are that client's). */
  private pipelineFor(commands: EvalCommandInput[], client: string): Pipeline {
    const key = createHash('sha256').update(client).update('\0').update(JSON.stringify(commands)).digest('base64url');
    let p = this.pipelines.get(key);
    if (!p) {
      p = new Pipeline(this, key, commands, client);
      this.pipelines.set(key, p);
      for (const store of p.reads.keys()) this.feedOf(store).pipelines.add(p);
    }
    return p;
  }

  /** Drop a pipeline nobody watches any more, and the store feeds no pipeline needs. */
  private forget(p: Pipeline): void {
    if (p.watchers > 0 || this.pipelines.get(p.key) !== p) return;
    if (p.state === undefined) return; // its first evaluation is still running for another request
    p.stop();
    this.pipelines.delete(p.key);
    this.held(p.state, undefined);
    for (const store of p.reads.keys()) {
      const f = this.feeds.get(store);
      if (!f) continue;
      f.pipelines.delete(p);
      if (!f.pipelines.size) {
        this.feeds.delete(store);
        void f.feed.close().catch(() => undefined);
      }
    }
  }

  private feedOf(name: string): StoreFeed {
    let f = this.feeds.get(name);
    if (f) return f;
    const pipelines = new Set<Pipeline>();
    const listener: ChangeListener = {
      change: (notice) => {
        this.stats.notices++;
        for (const p of pipelines) if (noticeConcerns(p.reads.get(name), notice)) p.debouncer.schedule();
      },
      error: (error) => {
        const state = this.problemState(new StoreUnavailableError(name, error?.message ?? String(error)), 'store change feed failed');
        for (const p of pipelines) p.tell(state);
      },
    };
    let feed: ChangeFeed | undefined;
    const store = this.registry.resolve(name);
    if (store.watch) {
      try {
        feed = store.watch(listener);
      } catch (e) {
        this.log.warn({ store: name, err: { message: (e as Error)?.message } }, 'store change feed could not start; polling instead');
      }
    }
    if (!feed) {
      // No feed for this kind: evaluate the watched pipelines again periodically (a change shows within pollMs).
      const timer = setInterval(() => listener.change({}), this.settings.watch.pollMs);
      timer.unref();
      feed = { close: async () => clearInterval(timer) };
    }
    f = { feed, pipelines };
    this.feeds.set(name, f);
    return f;
  }

  private openStream(request: FastifyRequest, reply: FastifyReply, pipeline: Pipeline, state: State, release: () => void, credential: WatchCredential | undefined): FastifyReply {
    reply.hijack();
    const res = reply.raw;
    const headers: Record<string, string | number | string[]> = {};
    for (const [k, v] of Object.entries(reply.getHeaders())) if (v !== undefined) headers[k] = v as string | number | string[];
    headers['content-type'] = 'text/event-stream; charset=utf-8';
    headers['cache-control'] = 'no-store';
    headers['x-accel-buffering'] = 'no';
    res.writeHead(200, headers);
    const record: WatchRecord = { kind: 'stream', events: 0, keys: 0, opened: performance.now() };
    request.cfguWatch = record;
    const s: Stream = { pipeline, res, last: '', record, credential, closed: false };
    const lastId = request.headers['last-event-id'];
    if (state.kind === 'answer' && lastId === state.etag) {
      s.last = state.etag;
      res.write(': resumed\n\n'); // nothing changed since the client's last event
    } else {
      s.last = markOf(state);
      this.send(s, state);
    }
    pipeline.streams.add(s);
    this.streams.add(s);
    this.startHeartbeat();
    if (credential?.expiresAt !== undefined) this.armExpiry(s, credential.expiresAt);
    res.once('close', () => {
      s.closed = true;
      if (s.timer) clearTimeout(s.timer);
      pipeline.streams.delete(s);
      this.streams.delete(s);
      release();
      this.forget(pipeline);
      if (!this.streams.size) this.stopHeartbeat();
      // The stream's own line (its request line was never written: the reply was hijacked); off with request lines.
      const reason = record.ended ?? 'client';
      this.observer?.watchStreamEnded(reason);
      request.log.info({ method: request.method, path: '/export', status: 200, reason, ms: Math.round((performance.now() - record.opened) * 100) / 100 }, 'watch stream ended');
    });
    return reply;
  }

  /** End the stream at its credential's expiry (a timer per stream; a later expiry than setTimeout takes re-arms). */
  private armExpiry(s: Stream, expiresAt: number): void {
    const left = expiresAt - Date.now();
    s.timer = setTimeout(
      () => {
        if (s.closed) return;
        if (Date.now() < expiresAt) return this.armExpiry(s, expiresAt);
        this.endFor(s, s.credential!.expired());
      },
      Math.max(0, Math.min(left, MAX_TIMER_MS)),
    );
  }

  /**
   * Run `action` (a delivery, a heartbeat) once the stream's credential is checked again: when it no longer admits
   * the stream, the stream ends instead. Deliveries keep their order while a check is asynchronous (a JWT verified
   * again).
   */
  guarded(s: Stream, action: () => void): void {
    const credential = s.credential;
    if (!credential) return action();
    const step = (verdict: true | CredentialVerdict): void => {
      if (s.closed || s.res.destroyed) return;
      if (verdict === true) action();
      else this.endFor(s, verdict);
    };
    if (s.chain) {
      s.chain = s.chain.then(() => {
        const v = credential.check();
        return v instanceof Promise ? v.then(step) : step(v);
      });
      return;
    }
    const v = credential.check();
    if (!(v instanceof Promise)) return step(v);
    const chain: Promise<void> = v.then(step).finally(() => {
      if (s.chain === chain) s.chain = undefined;
    });
    s.chain = chain;
  }

  /** End a stream whose credential no longer admits it: a last `end` event with the problem a plain request gets. */
  private endFor(s: Stream, verdict: CredentialVerdict): void {
    if (s.closed || s.res.destroyed || s.res.writableEnded) return;
    s.record.ended ??= verdict.reason;
    s.res.end(`event: end\ndata: ${verdict.text}\n\n`);
  }

  /** Write a state's event to a stream, counting the answers it delivered. */
  send(s: Stream, state: State): void {
    if (!this.write(s, state.frame)) return;
    if (state.kind === 'answer') {
      s.record.events++;
      s.record.keys = state.keys;
    }
  }

  /** Hold a long poll until the answer differs from the client's tag, or `wait` seconds pass; resolves once answered. */
  private hold(request: FastifyRequest, reply: FastifyReply, pipeline: Pipeline, state: State, wait: number, release: () => void, credential: WatchCredential | undefined): Promise<void> {
    const tag = String(request.headers['if-none-match']);
    if (state.kind === 'answer' && !noneMatchHits(tag, state.etag)) {
      release();
      this.forget(pipeline);
      request.cfguKeys = state.keys;
      sendAnswer(request, reply, bodyOf(state), state.etag, state.backupStores);
      return Promise.resolve();
    }
    const record: WatchRecord = { kind: 'poll', events: 0, keys: 0, opened: performance.now() };
    request.cfguWatch = record;
    return new Promise<void>((resolve) => {
      const answer = (outcome: PollOutcome): void => {
        if (outcome === 'unchanged') {
          reply.header('cache-control', 'no-store');
          if (state.kind === 'answer') reply.header('etag', state.etag);
          reply.code(304).send();
        } else if (isVerdict(outcome)) {
          record.ended ??= outcome.reason;
          sendProblem(reply, outcome.status, outcome.text, outcome.headers);
        } else if (outcome.kind === 'problem') {
          sendProblem(reply, outcome.status, outcome.text, outcome.headers);
        } else {
          request.cfguKeys = outcome.keys;
          sendAnswer(request, reply, bodyOf(outcome), outcome.etag, outcome.backupStores);
        }
        resolve();
      };
      const poll: Poll = {
        tag: state.kind === 'answer' ? state.etag : '',
        record,
        finish: (outcome) => {
          if (!pipeline.polls.delete(poll)) return;
          clearTimeout(timer);
          if (expiry) clearTimeout(expiry);
          release();
          this.forget(pipeline);
          // A new answer (or problem) goes out only if the credential still admits it.
          if (credential && outcome !== 'unchanged' && !isVerdict(outcome)) {
            const v = credential.check();
            if (v instanceof Promise) void v.then((r) => answer(r === true ? outcome : r));
            else answer(v === true ? outcome : v);
            return;
          }
          answer(outcome);
        },
        recheck: () => {
          if (!credential) return;
          const v = credential.check();
          const apply = (r: true | CredentialVerdict) => {
            if (r !== true) poll.finish(r);
          };
          if (v instanceof Promise) void v.then(apply);
          else apply(v);
        },
      };
      const timer = setTimeout(() => poll.finish('unchanged'), wait * 1000);
      // A held poll whose token expires is answered 401 at that instant, as a plain request would be.
      let expiry: NodeJS.Timeout | undefined;
      const at = credential?.expiresAt;
      if (at !== undefined) {
        const arm = (): void => {
          expiry = setTimeout(() => (Date.now() < at ? arm() : poll.finish(credential!.expired())), Math.max(0, Math.min(at - Date.now(), MAX_TIMER_MS)));
        };
        arm();
      }
      pipeline.polls.add(poll);
      reply.raw.once('close', () => poll.finish('unchanged'));
    });
  }

  /** Write to a stream unless it is gone; a stream whose client does not read is cut (`slow_client`). */
  write(s: Stream, frame: Buffer | string): boolean {
    if (s.res.destroyed || s.res.writableEnded) return false;
    if (s.res.writableLength > MAX_BUFFERED) {
      s.record.ended ??= 'slow_client';
      s.res.destroy();
      return false;
    }
    s.res.write(frame);
    return true;
  }

  /**
   * Check every watcher's credential again now (the app's credentials were reloaded): streams whose credential is
   * gone or out of scope end, such long polls are answered 401 or 403.
   */
  recheck(): void {
    for (const s of [...this.streams]) this.guarded(s, () => undefined);
    for (const p of [...this.pipelines.values()]) for (const poll of [...p.polls]) poll.recheck();
  }

  private startHeartbeat(): void {
    if (this.heartbeat) return;
    this.heartbeat = setInterval(() => {
      // Each heartbeat checks the stream's credential too.
      for (const s of this.streams) this.guarded(s, () => void this.write(s, ': heartbeat\n\n'));
    }, this.settings.watch.heartbeatMs);
    this.heartbeat.unref();
  }

  private stopHeartbeat(): void {
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = undefined;
  }

  /** Shutdown began: end every stream (clients reconnect elsewhere) and answer every long poll with 304 now. */
  drain(): void {
    for (const s of [...this.streams]) {
      s.record.ended ??= 'shutdown';
      s.res.end();
    }
    for (const p of this.pipelines.values()) {
      for (const poll of [...p.polls]) {
        poll.record.ended ??= 'shutdown';
        poll.finish('unchanged');
      }
    }
  }

  /** Stop everything: streams, polls, timers, store feeds. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.drain();
    this.closed = true;
    this.stopHeartbeat();
    for (const p of this.pipelines.values()) p.stop();
    this.pipelines.clear();
    this.heldBytes = 0;
    this.unregister();
    const feeds = [...this.feeds.values()];
    this.feeds.clear();
    await Promise.allSettled(feeds.map((f) => f.feed.close()));
  }
}

function sendProblem(reply: FastifyReply, status: number, text: string, headers: Record<string, string>): FastifyReply {
  reply.code(status).type(PROBLEM_CONTENT_TYPE).headers(headers);
  return reply.send(text);
}
