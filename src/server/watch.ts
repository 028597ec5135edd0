/**
 * Watching `POST /export` for changes: conditional requests (ETag / If-None-Match), long polls (`Prefer: wait=N`)
 * and Server-Sent Events streams (`Accept: text/event-stream`). The rules are described in docs/server.md,
 * "Watching for changes".
 *
 * One WatchHub per process. Watchers of the same pipeline (the same request body) share one `Pipeline`: it is
 * evaluated once at first, then once per change notice (notices within `debounceMs` coalesced), and every watcher
 * gets the result. Each store a watched pipeline reads has one change feed per process (ResolvedStore.watch, or a
 * periodic re-evaluation every `pollMs` for a kind without one); a notice re-evaluates only the pipelines that read
 * one of the notice's sets (a set or one of its descendants: a pipeline of set `prod/eu` reads `prod` and the root).
 */
import { createHash } from 'node:crypto';
import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from 'fastify';
import { Debouncer, exportPipelineJson, noticeConcerns, setsRead } from '../core/index.js';
import { StoreUnavailableError } from '../core/errors.js';
import type { EvalCommandInput } from '../core/types.js';
import { requestContext, type ExpressionEvaluator } from '../expressions/types.js';
import type { ChangeFeed, ChangeListener, StoreResolver } from '../stores/types.js';
import type { Lifecycle } from './lifecycle.js';
import type { Engine, WatchEndReason } from './observe.js';
import { httpProblem, PROBLEM_CONTENT_TYPE, toProblem } from './problem.js';
import type { ServerSettings } from './settings.js';

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
export function sendAnswer(request: FastifyRequest, reply: FastifyReply, body: string, etag: string, backupStores: readonly string[]): FastifyReply {
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

type State =
  | { kind: 'answer'; body: string; etag: string; backupStores: string[] }
  | { kind: 'problem'; status: number; text: string; headers: Record<string, string>; error?: unknown };

/** What a watcher last received: the answer's ETag, or the text of the error event. */
const markOf = (s: State): string => (s.kind === 'answer' ? s.etag : `problem:${s.text}`);

/** The SSE event of a state: the answer with its tag as `id:`, or an `error` event with the problem body. */
const frameOf = (s: State): string => (s.kind === 'answer' ? `id: ${s.etag}\ndata: ${s.body}\n\n` : `event: error\ndata: ${s.text}\n\n`);

interface Stream {
  pipeline: Pipeline;
  res: FastifyReply['raw'];
  last: string;
  /** Set when the server ends the stream (else the client went away). */
  endedBy?: WatchEndReason;
}

interface Poll {
  tag: string;
  finish(state: State | 'unchanged'): void;
}

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
      const { text: body, backupStores } = await this.hub.evaluate(this.commands, this.client, this.watchers);
      state = { kind: 'answer', body, etag: etagOf(body), backupStores };
    } catch (e) {
      state = this.hub.problemState(e, 'watched pipeline evaluation failed');
    }
    if (!this.hub.closed) this.publish(state);
  }

  /** Make `state` current and tell every watcher that has not seen it yet. */
  publish(state: State): void {
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
    const frame = frameOf(state);
    for (const s of this.streams) {
      if (s.last === mark) continue;
      s.last = mark;
      this.hub.write(s, frame);
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
    return { kind: 'problem', status: problem.status, text: JSON.stringify(problem), headers: headers ?? {}, error: e };
  }

  /**
   * Serve a watch request (the route checked auth, the body and its limits already). `scope` rewrites an error the
   * way the plain request would (the pipeline, and so its first answer, is shared by every client that watches it).
   */
  async serve(request: FastifyRequest, reply: FastifyReply, commands: EvalCommandInput[], client: string, scope?: ErrorScope): Promise<FastifyReply> {
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
    this.reserved++;
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      this.reserved--;
    };
    const pipeline = this.pipelineFor(commands, client);
    const first = pipeline.state === undefined;
    try {
      await pipeline.first;
    } catch {
      /* evaluate() never rejects */
    }
    const state = pipeline.state!;
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
      return sendAnswer(request, reply, state.body, state.etag, state.backupStores);
    }
    if (stream) return this.openStream(request, reply, pipeline, state, release);
    await this.hold(request, reply, pipeline, state, wait!, release);
    return reply;
  }

  /** A watch request while shutting down: one plain answer (a long poll answers at once). */
  private async answerOnce(request: FastifyRequest, reply: FastifyReply, commands: EvalCommandInput[], client: string): Promise<FastifyReply> {
    const { text: body, backupStores } = await this.evaluate(commands, client, 0);
    return sendAnswer(request, reply, body, etagOf(body), backupStores);
  }

  private pipelineFor(commands: EvalCommandInput[], client: string): Pipeline {
    const key = createHash('sha256').update(JSON.stringify(commands)).digest('base64url');
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

  private openStream(request: FastifyRequest, reply: FastifyReply, pipeline: Pipeline, state: State, release: () => void): FastifyReply {
    reply.hijack();
    const res = reply.raw;
    const headers: Record<string, string | number | string[]> = {};
    for (const [k, v] of Object.entries(reply.getHeaders())) if (v !== undefined) headers[k] = v as string | number | string[];
    headers['content-type'] = 'text/event-stream; charset=utf-8';
    headers['cache-control'] = 'no-store';
    headers['x-accel-buffering'] = 'no';
    res.writeHead(200, headers);
    const s: Stream = { pipeline, res, last: '' };
    const opened = performance.now();
    const lastId = request.headers['last-event-id'];
    if (state.kind === 'answer' && lastId === state.etag) {
      s.last = state.etag;
      res.write(': resumed\n\n'); // nothing changed since the client's last event
    } else {
      s.last = markOf(state);
      res.write(frameOf(state));
    }
    pipeline.streams.add(s);
    this.streams.add(s);
    this.startHeartbeat();
    res.once('close', () => {
      pipeline.streams.delete(s);
      this.streams.delete(s);
      release();
      this.forget(pipeline);
      if (!this.streams.size) this.stopHeartbeat();
      // The stream's own line (its request line was never written: the reply was hijacked); off with request lines.
      const reason = s.endedBy ?? 'client';
      this.observer?.watchStreamEnded(reason);
      request.log.info({ method: request.method, path: '/export', status: 200, reason, ms: Math.round((performance.now() - opened) * 100) / 100 }, 'watch stream ended');
    });
    return reply;
  }

  /** Hold a long poll until the answer differs from the client's tag, or `wait` seconds pass; resolves once answered. */
  private hold(request: FastifyRequest, reply: FastifyReply, pipeline: Pipeline, state: State, wait: number, release: () => void): Promise<void> {
    const tag = String(request.headers['if-none-match']);
    if (state.kind === 'answer' && !noneMatchHits(tag, state.etag)) {
      release();
      this.forget(pipeline);
      sendAnswer(request, reply, state.body, state.etag, state.backupStores);
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      const poll: Poll = {
        tag: state.kind === 'answer' ? state.etag : '',
        finish: (outcome) => {
          if (!pipeline.polls.delete(poll)) return;
          clearTimeout(timer);
          release();
          this.forget(pipeline);
          if (outcome === 'unchanged') {
            reply.header('cache-control', 'no-store');
            if (state.kind === 'answer') reply.header('etag', state.etag);
            reply.code(304).send();
          } else if (outcome.kind === 'problem') {
            sendProblem(reply, outcome.status, outcome.text, outcome.headers);
          } else {
            sendAnswer(request, reply, outcome.body, outcome.etag, outcome.backupStores);
          }
          resolve();
        },
      };
      const timer = setTimeout(() => poll.finish('unchanged'), wait * 1000);
      pipeline.polls.add(poll);
      reply.raw.once('close', () => poll.finish('unchanged'));
    });
  }

  write(s: Stream, frame: string): void {
    if (s.res.destroyed) return;
    if (s.res.writableLength > MAX_BUFFERED) {
      s.endedBy ??= 'slow_client';
      s.res.destroy();
      return;
    }
    s.res.write(frame);
  }

  private startHeartbeat(): void {
    if (this.heartbeat) return;
    this.heartbeat = setInterval(() => {
      for (const s of this.streams) this.write(s, ': heartbeat\n\n');
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
      s.endedBy ??= 'shutdown';
      s.res.end();
    }
    for (const p of this.pipelines.values()) for (const poll of [...p.polls]) poll.finish('unchanged');
  }

  /** Stop everything: streams, polls, timers, store feeds. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.drain();
    this.closed = true;
    this.stopHeartbeat();
    for (const p of this.pipelines.values()) p.stop();
    this.pipelines.clear();
    const feeds = [...this.feeds.values()];
    this.feeds.clear();
    await Promise.allSettled(feeds.map((f) => f.feed.close()));
  }
}

function sendProblem(reply: FastifyReply, status: number, text: string, headers: Record<string, string>): FastifyReply {
  reply.code(status).type(PROBLEM_CONTENT_TYPE).headers(headers);
  return reply.send(text);
}
