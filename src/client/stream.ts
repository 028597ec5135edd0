/**
 * `subscribe()`: the answer's changes over the server's event stream (`POST /export` with `Accept:
 * text/event-stream`; docs/server.md, "Watching for changes"). Each connection sends `Last-Event-ID` with the tag of
 * the answer the client holds: the server then sends the current answer only when it differs (else `: resumed`),
 * so a reconnection delivers whatever changed while the client was away and nothing twice. A connection that fails,
 * ends, breaks the event format, is cut in the middle of an event, or stays silent past `idleTimeoutMs` is opened
 * again after a back-off (exponential, full jitter, capped; reset once a connection delivers). A 401 asks `getToken`
 * for a new token once; a refusal that asking again cannot change (401 after that, 403, another 4xx) ends it.
 */
import { ClientCore } from './core.js';
import { CLIENT_PROBLEMS, clientError, errorOf, isProblem, unreachable, CfguClientError } from './errors.js';
import { SseParser, type SseEvent } from './sse.js';
import type { Answer, Subscription } from './types.js';

/** What a connection came to: open another (after `waitMs` at least, `fresh` when it delivered), or stop. */
type Outcome = { kind: 'again'; waitMs?: number; fresh: boolean; refresh?: string | undefined } | { kind: 'stop'; error: CfguClientError };

/** Statuses worth asking again for: the server or a proxy may answer otherwise later. */
const TRANSIENT = new Set([408, 425, 429, 500, 502, 503, 504]);

/** The error for a stream that ended or failed in the middle of an event (nothing of that event is used). */
const cut = (cause?: unknown) => clientError(CLIENT_PROBLEMS.invalidAnswer, 'Invalid Answer', 200, 'the stream was cut in the middle of an event', cause);

/** A delay of full jitter: uniform in [0, min(max, initial * 2^attempt)). */
export function backoffDelay(attempt: number, initialMs: number, maxMs: number, random: () => number = Math.random): number {
  return Math.floor(random() * Math.min(maxMs, initialMs * 2 ** Math.min(attempt, 30)));
}

/** `Retry-After` in seconds (the only form cfgu sends), as ms. */
const retryAfterMs = (res: Response): number | undefined => {
  const v = res.headers.get('retry-after');
  return v && /^\d+$/.test(v.trim()) ? Number(v.trim()) * 1000 : undefined;
};

/** One subscription: its loop of connections, and what each connection delivers. */
class Follower<T> {
  private closing = false;
  private current: AbortController | undefined;
  private wake: (() => void) | undefined;
  private done!: (e: CfguClientError | undefined) => void;
  readonly closed = new Promise<CfguClientError | undefined>((r) => (this.done = r));
  private readonly initialMs: number;
  private readonly maxMs: number;
  private readonly idleMs: number;

  constructor(
    private readonly core: ClientCore<T>,
    private readonly onChange: (a: Answer<T>) => void,
    private readonly onError: ((e: CfguClientError) => void) | undefined,
  ) {
    this.initialMs = core.options.reconnect?.initialDelayMs ?? 500;
    this.maxMs = core.options.reconnect?.maxDelayMs ?? 30_000;
    this.idleMs = core.options.idleTimeoutMs ?? 45_000;
  }

  close(): void {
    if (this.closing) return;
    this.closing = true;
    this.current?.abort();
    this.wake?.();
  }

  private report(e: CfguClientError): void {
    if (!this.closing) this.onError?.(e);
  }

  /** Connections one after another until closed or refused for good. */
  async run(): Promise<void> {
    let attempt = 0;
    let refreshed = false;
    while (!this.closing) {
      const outcome = await this.connect(refreshed);
      if (this.closing) break;
      if (outcome.kind === 'stop') return this.stop(outcome.error);
      // A connection that delivered resets the back-off and allows one more token refresh.
      if (outcome.fresh) {
        attempt = 0;
        refreshed = false;
      }
      if ('refresh' in outcome && !refreshed) {
        refreshed = true;
        try {
          await this.core.tokens.refresh(outcome.refresh);
        } catch (e) {
          return this.stop(e as CfguClientError);
        }
        continue; // at once, with the new token
      }
      await this.pause(Math.max(outcome.waitMs ?? 0, backoffDelay(attempt++, this.initialMs, this.maxMs)));
    }
    this.done(undefined);
  }

  private stop(error: CfguClientError): void {
    this.report(error);
    this.closing = true;
    this.done(error);
  }

  private pause(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.wake = () => (clearTimeout(timer), resolve());
    });
  }

  /** Open one connection and follow it. */
  private async connect(refreshed: boolean): Promise<Outcome> {
    const controller = new AbortController();
    this.current = controller;
    const core = this.core;
    let res: Response;
    let token: string | undefined;
    try {
      const sent = await core.headers('text/event-stream', core.kept ? { 'last-event-id': core.kept.etag } : {});
      token = sent.token;
      res = await core.fetch(core.exportUrl, { method: 'POST', headers: sent.headers, body: core.body, signal: controller.signal });
    } catch (e) {
      if (e instanceof CfguClientError) return { kind: 'stop', error: e }; // getToken failed
      if (!this.closing) this.report(unreachable(core.exportUrl, e));
      return { kind: 'again', fresh: false };
    }
    if (res.status === 200 && /^text\/event-stream\b/i.test(res.headers.get('content-type') ?? '') && res.body) return this.read(res, controller, token);
    if (res.status === 200) {
      await res.body?.cancel();
      this.report(clientError(CLIENT_PROBLEMS.invalidAnswer, 'Invalid Answer', 200, 'the answer is not an event stream'));
      return { kind: 'again', fresh: false };
    }
    const error = await errorOf(res);
    if (res.status === 401 && core.tokens.canRefresh && !refreshed) return { kind: 'again', fresh: false, refresh: token };
    if (!TRANSIENT.has(res.status)) return { kind: 'stop', error };
    this.report(error);
    return { kind: 'again', fresh: false, waitMs: retryAfterMs(res) };
  }

  /** Read one open stream until it ends or breaks. */
  private async read(res: Response, controller: AbortController, token: string | undefined): Promise<Outcome> {
    const parser = new SseParser();
    const reader = res.body!.getReader();
    const state = { fresh: false };
    let idle: NodeJS.Timeout | undefined;
    const arm = () => {
      if (this.idleMs <= 0) return;
      clearTimeout(idle);
      idle = setTimeout(() => controller.abort(Object.assign(new Error('nothing arrived within idleTimeoutMs'), { code: 'IDLE_TIMEOUT' })), this.idleMs);
    };
    arm();
    try {
      for (;;) {
        const { done: ended, value } = await reader.read();
        if (ended) break;
        arm();
        const chunk = parser.push(value);
        if (chunk.comments.includes('resumed')) {
          state.fresh = true;
          if (this.core.kept) this.core.kept.fromFile = false;
        }
        for (const e of chunk.events) {
          const outcome = this.event(e, state, token);
          if (outcome) return outcome;
        }
      }
      if (parser.pending) this.report(cut());
      return { kind: 'again', fresh: state.fresh };
    } catch (e) {
      // The connection failed (reset, idle): in the middle of an event, that is the error to tell.
      if (!this.closing) this.report(parser.pending ? cut(e) : unreachable(this.core.exportUrl, e));
      return { kind: 'again', fresh: state.fresh };
    } finally {
      clearTimeout(idle);
      controller.abort();
    }
  }

  /** One event of an open stream: undefined to read on, else how the connection ends. */
  private event(e: SseEvent, state: { fresh: boolean }, token: string | undefined): Outcome | undefined {
    if (e.event === 'message') {
      if (!this.deliver(e)) return { kind: 'again', fresh: state.fresh };
      state.fresh = true;
      return undefined;
    }
    if (e.event !== 'error' && e.event !== 'end') return undefined; // an event kind of a later server: not ours
    let problem: unknown;
    try {
      problem = JSON.parse(e.data);
    } catch {
      problem = undefined;
    }
    if (!isProblem(problem)) {
      this.report(clientError(CLIENT_PROBLEMS.invalidAnswer, 'Invalid Answer', 200, `an ${e.event} event whose data is not a problem`));
      return { kind: 'again', fresh: state.fresh };
    }
    if (e.event === 'error') {
      this.report(new CfguClientError(problem)); // the stream goes on; the next answer follows when there is one
      return undefined;
    }
    // `end`: the credential no longer admits the stream.
    if (problem.status === 401 && this.core.tokens.canRefresh) return { kind: 'again', fresh: state.fresh, refresh: token };
    return { kind: 'stop', error: new CfguClientError(problem) };
  }

  /** Deliver an answer event; false when it breaks the format or is refused (the connection is then opened again). */
  private deliver(e: SseEvent): boolean {
    const core = this.core;
    if (!e.id) {
      this.report(clientError(CLIENT_PROBLEMS.invalidAnswer, 'Invalid Answer', 200, 'an answer event without an id (its entity tag)'));
      return false;
    }
    if (core.kept && core.kept.etag === e.id) {
      core.kept.fromFile = false;
      return true; // the answer the client holds: nothing to deliver
    }
    let kept;
    try {
      kept = core.accept(e.data, e.id, 200);
    } catch (error) {
      this.report(error as CfguClientError);
      return false;
    }
    if (!this.closing) this.onChange({ values: kept.values, etag: kept.etag, stale: false });
    return true;
  }
}

export function follow<T>(core: ClientCore<T>, onChange: (a: Answer<T>) => void, onError?: (e: CfguClientError) => void): Subscription {
  const follower = new Follower(core, onChange, onError);
  void follower.run();
  return { close: () => follower.close(), closed: follower.closed };
}
