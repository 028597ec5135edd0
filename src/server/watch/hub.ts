/**
 * Watching `POST /export` for changes: conditional requests (ETag / If-None-Match, ./etags.ts), long polls
 * (`Prefer: wait=N`, ./long-poll.ts) and Server-Sent Events streams (`Accept: text/event-stream`, ./streams.ts). The
 * rules are described in docs/server.md, "Watching for changes".
 *
 * One WatchHub per process. Watchers of the same pipeline (the same request body) from the same client (the identity
 * the sandbox queues by: credential, JWT subject, preshared key, or address without authentication) share one
 * `Pipeline` (./pipeline.ts): it is evaluated once at first, then once per change notice (notices within `debounceMs`
 * coalesced), and each of that client's watchers gets the result. Nothing evaluated for one client is handed to
 * another, and no client can learn that another watches the same body: pipelines are keyed by client and body.
 *
 * A watcher obeys its credential for its whole life (../access/watch-credentials.ts): a stream ends with an `end`
 * event, a held long poll is answered 401 or 403, when the token expires, is no longer accepted, or its scope no
 * longer covers the pipeline. Each watcher's answer is kept once per pipeline as the bytes of its SSE event
 * (./state.ts), never copied per stream. Each store a watched pipeline reads has one change feed per process
 * (./store-feeds.ts: ResolvedStore.watch, or a periodic re-evaluation every `pollMs` for a kind without one), shared
 * with the change streams of GET /changes (./store-streams.ts, served here too: `follow`); a notice re-evaluates only
 * the pipelines that read one of the notice's sets (a set or one of its descendants: a pipeline of set `prod/eu` reads
 * `prod` and the root). A pipeline that names a schema of the server (`"schema": "app"`) keeps the name: each
 * evaluation uses the schema of that moment, and a change of that schema's file (../schemas/watch.ts) re-evaluates
 * the pipelines that name it. Every watcher (streams of both routes, held long polls) counts against the same limits
 * (./slots.ts).
 */
import { createHash } from 'node:crypto';
import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from 'fastify';
import { exportPipelineJson, noticeConcerns } from '../../core/index.js';
import type { EvalCommandInput } from '../../core/types.js';
import { NamedSchemas } from '../schemas/registry.js';
import { resolveCommands, type WireCommand } from '../schemas/resolve.js';
import { requestContext, type ExpressionEvaluator } from '../../core/ports.js';
import type { StoreResolver } from '../../core/ports.js';
import { cacheBudget, type CacheMember } from '../../core/cache-budget.js';
import type { WatchCredential } from '../access/watch-credentials.js';
import { httpProblem, toProblem } from '../http/problem.js';
import type { Engine, WatchEndReason } from '../observe/observation.js';
import type { Lifecycle } from '../process/lifecycle.js';
import type { ServerSettings } from '../process/settings.js';
import { etagOf, sendAnswer, sendProblemText as sendProblem } from './etags.js';
import { holdPoll, preferredWait } from './long-poll.js';
import { Pipeline, type PipelineOwner } from './pipeline.js';
import { bodyOf, problemState, type ProblemState, type State, type Stream } from './state.js';
import { WatcherSlots } from './slots.js';
import { StoreFeeds } from './store-feeds.js';
import { StoreStreams, type ChangeStreamContext } from './store-streams.js';
import { Streams, wantsStream } from './streams.js';

export type { WatchRecord } from './state.js';

/** The watched pipelines that read one store, and their subscription to its feed. */
interface StoreFeed {
  pipelines: Set<Pipeline>;
  unsubscribe: () => void;
}

/** Metrics and traces of watch work (../observe/observation.ts): evaluations counted and traced, stream ends counted. */
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
  /** The server's named schemas (default: none). */
  schemas?: NamedSchemas;
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

export class WatchHub implements PipelineOwner {
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
  private readonly schemas: NamedSchemas;
  /** Schema name -> the pipelines that name it. */
  private readonly bySchema = new Map<string, Set<Pipeline>>();
  private readonly unlisten: () => void;
  private readonly streams: Streams;
  private readonly storeFeeds: StoreFeeds;
  /** The change streams of GET /changes (./store-streams.ts). */
  private readonly changes: StoreStreams;
  /** The watcher limits (./slots.ts). */
  private readonly slots: WatcherSlots;

  constructor(options: WatchHubOptions) {
    this.registry = options.registry;
    this.evaluator = options.evaluator;
    this.settings = options.settings;
    this.lifecycle = options.lifecycle;
    this.log = options.log;
    this.observer = options.observer;
    const observer = options.observer;
    this.slots = new WatcherSlots(options.settings.watch);
    this.streams = new Streams(options.settings.watch, observer ? (reason) => observer.watchStreamEnded(reason) : undefined);
    this.storeFeeds = new StoreFeeds(options.registry, options.settings.watch.pollMs, options.log, this.stats);
    this.changes = new StoreStreams({ registry: options.registry, feeds: this.storeFeeds, streams: this.streams, debounceMs: options.settings.watch.debounceMs, log: options.log });
    this.lifecycle.onStopping(() => this.drain());
    this.unregister = cacheBudget.register(this.member);
    this.schemas = options.schemas ?? NamedSchemas.empty();
    // A named schema changed: the pipelines naming it are evaluated again (the notices of a store, debounced alike).
    this.unlisten = this.schemas.on((event) => {
      if (event.kind !== 'changed') return;
      for (const p of this.bySchema.get(event.name) ?? []) p.debouncer.schedule();
    });
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
  evaluate(wire: readonly WireCommand[], client: string, watchers: number): ReturnType<typeof exportPipelineJson> {
    // The named schemas of this moment (the route checked the names and the scope; the watch's credential is checked
    // again before each delivery).
    const commands: readonly EvalCommandInput[] = resolveCommands(wire, this.schemas);
    const run = (engine: Engine) => exportPipelineJson(commands, engine, { context: requestContext(client), limits: this.settings.limits });
    if (this.observer) return this.observer.watchEvaluation(commands, watchers, run);
    return run({ stores: this.registry, ...(this.evaluator ? { expressions: this.evaluator } : {}) });
  }

  /** Streams (of POST /export and GET /changes) plus held long polls (and watchers being set up). */
  get watchers(): number {
    return this.slots.total;
  }

  /** The watchers one client holds (tests). */
  watchersOf(client: string): number {
    return this.slots.of(client);
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

  problemState(e: unknown, message: string): ProblemState {
    return problemState(this.log, e, message);
  }

  /** Send `state` to a stream once its credential is checked again (../access/watch-credentials.ts). */
  deliver(s: Stream, state: State): void {
    this.streams.guarded(s, () => this.streams.send(s, state));
  }

  /**
   * Serve a watch request (the route checked auth, the body, its limits and its scope already). `context.scope`
   * rewrites an error the way the plain request would.
   */
  async serve(request: FastifyRequest, reply: FastifyReply, commands: WireCommand[], context: WatchContext): Promise<FastifyReply> {
    const { client, scope, credential } = context;
    const stream = wantsStream(request.headers.accept);
    const wait = this.waitOf(request);
    if (this.lifecycle.stopping || this.closed) {
      if (stream) return sendProblem(reply, 503, JSON.stringify(httpProblem(503, 'the server is shutting down; reconnect to another replica')), { 'retry-after': '1' });
      return this.answerOnce(request, reply, commands, client);
    }
    const release = this.slots.reserve(client);
    if (typeof release !== 'function') return sendProblem(reply, release.status, release.text, release.headers);
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
    const done = () => {
      release();
      this.forget(pipeline);
    };
    if (stream) return this.streams.start(request, reply, pipeline, state, credential, done);
    await holdPoll({ request, reply, pipeline, state, wait: wait!, credential, done });
    return reply;
  }

  /**
   * Serve a change stream of GET /changes (the route checked auth, the query, the store and the scope already):
   * refused while stopping (503) and beyond the watcher limits, like the streams of POST /export.
   */
  follow(request: FastifyRequest, reply: FastifyReply, store: string, context: ChangeStreamContext): FastifyReply {
    if (this.lifecycle.stopping || this.closed) {
      return sendProblem(reply, 503, JSON.stringify(httpProblem(503, 'the server is shutting down; reconnect to another replica')), { 'retry-after': '1' });
    }
    const release = this.slots.reserve(context.client);
    if (typeof release !== 'function') return sendProblem(reply, release.status, release.text, release.headers);
    return this.changes.start(request, reply, store, context, release);
  }

  /** A watch request while shutting down: one plain answer (a long poll answers at once). */
  private async answerOnce(request: FastifyRequest, reply: FastifyReply, commands: WireCommand[], client: string): Promise<FastifyReply> {
    const { text: body, keys, backupStores } = await this.evaluate(commands, client, 0);
    request.cfguKeys = keys;
    return sendAnswer(request, reply, body, etagOf(body), backupStores);
  }

  /** The pipeline of this client and body (never another client's: its answers and its timing are that client's). */
  private pipelineFor(commands: WireCommand[], client: string): Pipeline {
    const key = createHash('sha256').update(client).update('\0').update(JSON.stringify(commands)).digest('base64url');
    let p = this.pipelines.get(key);
    if (!p) {
      p = new Pipeline(this, key, commands, client);
      this.pipelines.set(key, p);
      for (const store of p.reads.keys()) this.feedOf(store).pipelines.add(p);
      for (const name of p.schemaNames) {
        let named = this.bySchema.get(name);
        if (!named) this.bySchema.set(name, (named = new Set()));
        named.add(p);
      }
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
    for (const name of p.schemaNames) {
      const named = this.bySchema.get(name);
      named?.delete(p);
      if (named && !named.size) this.bySchema.delete(name);
    }
    for (const store of p.reads.keys()) {
      const f = this.feeds.get(store);
      if (!f) continue;
      f.pipelines.delete(p);
      if (!f.pipelines.size) {
        this.feeds.delete(store);
        f.unsubscribe();
      }
    }
  }

  /** The pipelines of this process that read store `name`, subscribed to its feed (./store-feeds.ts). */
  private feedOf(name: string): StoreFeed {
    let f = this.feeds.get(name);
    if (f) return f;
    const pipelines = new Set<Pipeline>();
    const { unsubscribe } = this.storeFeeds.subscribe(name, {
      // A tick of a store without a feed is an empty notice: every pipeline reading the store is evaluated again.
      change: (notice) => {
        for (const p of pipelines) if (noticeConcerns(p.reads.get(name), notice)) p.debouncer.schedule();
      },
      error: (state) => {
        for (const p of pipelines) p.tell(state);
      },
    });
    f = { pipelines, unsubscribe };
    this.feeds.set(name, f);
    return f;
  }

  /**
   * Check every watcher's credential again now (the app's credentials were reloaded): streams whose credential is
   * gone or out of scope end, such long polls are answered 401 or 403.
   */
  recheck(): void {
    this.streams.recheck();
    for (const p of [...this.pipelines.values()]) for (const poll of [...p.polls]) poll.recheck();
  }

  /** Shutdown began: end every stream (clients reconnect elsewhere) and answer every long poll with 304 now. */
  drain(): void {
    this.streams.drain();
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
    this.unlisten();
    this.bySchema.clear();
    this.streams.stopHeartbeat();
    for (const p of this.pipelines.values()) p.stop();
    this.pipelines.clear();
    this.heldBytes = 0;
    this.unregister();
    this.feeds.clear();
    this.changes.close();
    await this.storeFeeds.close();
  }
}
