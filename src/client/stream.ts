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

/** A delay of full jitter: uniform in [0, min(max, initial * 2^attempt)). */
export function backoffDelay(attempt: number, initialMs: number, maxMs: number, random: () => number = Math.random): number {
  return Math.floor(random() * Math.min(maxMs, initialMs * 2 ** Math.min(attempt, 30)));
}

/** `Retry-After` in seconds (the only form cfgu sends), as ms. */
const retryAfterMs = (res: Response): number | undefined => {
  const v = res.headers.get('retry-after');
  return v && /^\d+$/.test(v.trim()) ? Number(v.trim()) * 1000 : undefined;
};

export function follow<T>(core: ClientCore<T>, onChange: (a: Answer<T>) => void, onError?: (e: CfguClientError) => void): Subscription {
  const initialMs = core.options.reconnect?.initialDelayMs ?? 500;
  const maxMs = core.options.reconnect?.maxDelayMs ?? 30_000;
  const idleMs = core.options.idleTimeoutMs ?? 45_000;
  let closing = false;
  let current: AbortController | undefined;
  let wake: (() => void) | undefined;
  let done!: (e: CfguClientError | undefined) => void;
  const closed = new Promise<CfguClientError | undefined>((r) => (done = r));
  const report = (e: CfguClientError) => {
    if (!closing) onError?.(e);
  };

  /** Deliver a message event; false when it breaks the format (the connection is then opened again). */
  const deliver = (e: SseEvent): boolean => {
    if (!e.id) {
      report(clientError(CLIENT_PROBLEMS.invalidAnswer, 'Invalid Answer', 200, 'an answer event without an id (its entity tag)'));
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
      report(error as CfguClientError);
      return false;
    }
    if (!closing) onChange({ values: kept.values, etag: kept.etag, stale: false });
    return true;
  };

  /** Read one open stream until it ends or breaks. */
  const read = async (res: Response, controller: AbortController, token: string | undefined): Promise<Outcome> => {
    const parser = new SseParser();
    const reader = res.body!.getReader();
    let fresh = false;
    let idle: NodeJS.Timeout | undefined;
    const arm = () => {
      if (idleMs <= 0) return;
      clearTimeout(idle);
      idle = setTimeout(() => controller.abort(Object.assign(new Error('nothing arrived within idleTimeoutMs'), { code: 'IDLE_TIMEOUT' })), idleMs);
    };
    arm();
    try {
      for (;;) {
        const { done: ended, value } = await reader.read();
        if (ended) break;
        arm();
        const chunk = parser.push(value);
        if (chunk.comments.includes('resumed')) {
          fresh = true;
          if (core.kept) core.kept.fromFile = false;
        }
        for (const e of chunk.events) {
          if (e.event === 'message') {
            if (!deliver(e)) return { kind: 'again', fresh };
            fresh = true;
            continue;
          }
          if (e.event !== 'error' && e.event !== 'end') continue; // an event kind of a later server: not ours
          let problem: unknown;
          try {
            problem = JSON.parse(e.data);
          } catch {
            problem = undefined;
          }
          if (!isProblem(problem)) {
            report(clientError(CLIENT_PROBLEMS.invalidAnswer, 'Invalid Answer', 200, `an ${e.event} event whose data is not a problem`));
            return { kind: 'again', fresh };
          }
          if (e.event === 'error') {
            report(new CfguClientError(problem)); // the stream goes on; the next answer follows when there is one
            continue;
          }
          // `end`: the credential no longer admits the stream.
          if (problem.status === 401 && core.tokens.canRefresh) return { kind: 'again', fresh, refresh: token };
          return { kind: 'stop', error: new CfguClientError(problem) };
        }
      }
      if (parser.pending) report(clientError(CLIENT_PROBLEMS.invalidAnswer, 'Invalid Answer', 200, 'the stream was cut in the middle of an event'));
      return { kind: 'again', fresh };
    } catch (e) {
      if (!closing) report(unreachable(core.exportUrl, e));
      return { kind: 'again', fresh };
    } finally {
      clearTimeout(idle);
      controller.abort();
    }
  };

  /** Open one connection and follow it. */
  const connect = async (refreshed: boolean): Promise<Outcome> => {
    const controller = new AbortController();
    current = controller;
    let res: Response;
    let token: string | undefined;
    try {
      const sent = await core.headers('text/event-stream', core.kept ? { 'last-event-id': core.kept.etag } : {});
      token = sent.token;
      res = await core.fetch(core.exportUrl, { method: 'POST', headers: sent.headers, body: core.body, signal: controller.signal });
    } catch (e) {
      if (e instanceof CfguClientError) return { kind: 'stop', error: e }; // getToken failed
      if (!closing) report(unreachable(core.exportUrl, e));
      return { kind: 'again', fresh: false };
    }
    if (res.status === 200 && /^text\/event-stream\b/i.test(res.headers.get('content-type') ?? '') && res.body) return read(res, controller, token);
    if (res.status === 200) {
      await res.body?.cancel();
      report(clientError(CLIENT_PROBLEMS.invalidAnswer, 'Invalid Answer', 200, 'the answer is not an event stream'));
      return { kind: 'again', fresh: false };
    }
    const error = await errorOf(res);
    if (res.status === 401 && core.tokens.canRefresh && !refreshed) return { kind: 'again', fresh: false, refresh: token };
    if (!TRANSIENT.has(res.status)) return { kind: 'stop', error };
    report(error);
    return { kind: 'again', fresh: false, waitMs: retryAfterMs(res) };
  };

  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      wake = () => (clearTimeout(timer), resolve());
    });

  void (async () => {
    let attempt = 0;
    let refreshed = false;
    while (!closing) {
      const outcome = await connect(refreshed);
      if (closing) break;
      if (outcome.kind === 'stop') {
        report(outcome.error);
        closing = true;
        return done(outcome.error);
      }
      // A connection that delivered resets the back-off and allows one more token refresh.
      if (outcome.fresh) {
        attempt = 0;
        refreshed = false;
      }
      if ('refresh' in outcome && !refreshed) {
        refreshed = true;
        try {
          await core.tokens.refresh(outcome.refresh);
        } catch (e) {
          report(e as CfguClientError);
          closing = true;
          return done(e as CfguClientError);
        }
        continue; // at once, with the new token
      }
      await pause(Math.max(outcome.waitMs ?? 0, backoffDelay(attempt++, initialMs, maxMs)));
    }
    done(undefined);
  })();

  return {
    close() {
      if (closing) return;
      closing = true;
      current?.abort();
      wake?.();
    },
    closed,
  };
}
