/**
 * Server-Sent Events streams of `POST /export` (`Accept: text/event-stream`): the first event at once (or `: resumed`
 * when `Last-Event-ID` names the current answer), then an event per new answer, an `error` event when a store's
 * change feed fails, and a heartbeat comment every `heartbeatMs`. The change streams of `GET /changes`
 * (./store-streams.ts) are streams of the same kind, opened here too (`openStream`): one heartbeat, one drain and one
 * credential re-check serve both. Every delivery and heartbeat first checks the
 * stream's credential again (../access/watch-credentials.ts): a credential that no longer admits the stream ends it
 * with an `end` event carrying the problem a plain request would get; a JWT's expiry ends it at that instant. A
 * stream whose client does not read is cut (`slow_client`): it reconnects and resumes.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { CredentialVerdict, WatchCredential } from '../access/watch-credentials.js';
import type { WatchEndReason } from '../observe/observation.js';
import type { Pipeline } from './pipeline.js';
import { markOf, MAX_TIMER_MS, type State, type Stream, type WatchRecord } from './state.js';

/** Buffered bytes beyond which a stream whose client does not read is cut (it reconnects and resumes). */
const MAX_BUFFERED = 1024 * 1024;

/** The client accepts an event stream (`text/event-stream` in Accept, not with q=0). */
export function wantsStream(accept: string | undefined): boolean {
  if (typeof accept !== 'string') return false;
  return accept.split(',').some((range) => {
    const [type, ...params] = range.split(';').map((s) => s.trim().toLowerCase());
    return type === 'text/event-stream' && !params.some((p) => /^q=0(\.0*)?$/.test(p));
  });
}

/** The open streams of one process, and their shared heartbeat. */
export class Streams {
  private readonly open = new Set<Stream>();
  private heartbeat: NodeJS.Timeout | undefined;

  constructor(
    /** The watch settings (`heartbeatMs` read when the heartbeat starts). */
    private readonly settings: { readonly heartbeatMs: number },
    private readonly ended: ((reason: WatchEndReason) => void) | undefined,
  ) {}

  /**
   * Turn the request into a stream of `pipeline` (the reply is hijacked) and send it `state`. `onClose` runs once the
   * stream is gone (the watcher's release).
   */
  start(request: FastifyRequest, reply: FastifyReply, pipeline: Pipeline, state: State, credential: WatchCredential | undefined, onClose: () => void): FastifyReply {
    const s = this.openStream(request, reply, credential, () => {
      pipeline.streams.delete(s);
      onClose();
    });
    const lastId = request.headers['last-event-id'];
    if (state.kind === 'answer' && lastId === state.etag) {
      s.last = state.etag;
      s.res.write(': resumed\n\n'); // nothing changed since the client's last event
    } else {
      s.last = markOf(state);
      this.send(s, state);
    }
    pipeline.streams.add(s);
    return reply;
  }

  /**
   * Hijack the reply and make it an event stream of this process: the headers written, heartbeats, the credential's
   * expiry armed, and its end counted and logged (with the request's path, e.g. `/export`, `/changes`). `onClose`
   * runs once the stream is gone.
   */
  openStream(request: FastifyRequest, reply: FastifyReply, credential: WatchCredential | undefined, onClose: () => void): Stream {
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
    const s: Stream = { res, last: '', record, credential, closed: false };
    this.open.add(s);
    this.startHeartbeat();
    if (credential?.expiresAt !== undefined) this.armExpiry(s, credential.expiresAt);
    const path = request.routeOptions.url ?? request.url;
    res.once('close', () => {
      s.closed = true;
      if (s.timer) clearTimeout(s.timer);
      this.open.delete(s);
      onClose();
      if (!this.open.size) this.stopHeartbeat();
      // The stream's own line (its request line was never written: the reply was hijacked); off with request lines.
      const reason = record.ended ?? 'client';
      this.ended?.(reason);
      request.log.info({ method: request.method, path, status: 200, reason, ms: Math.round((performance.now() - record.opened) * 100) / 100 }, 'watch stream ended');
    });
    return s;
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

  /** Check every stream's credential again now (the app's credentials were reloaded). */
  recheck(): void {
    for (const s of [...this.open]) this.guarded(s, () => undefined);
  }

  private startHeartbeat(): void {
    if (this.heartbeat) return;
    this.heartbeat = setInterval(() => {
      // Each heartbeat checks the stream's credential too.
      for (const s of this.open) this.guarded(s, () => void this.write(s, ': heartbeat\n\n'));
    }, this.settings.heartbeatMs);
    this.heartbeat.unref();
  }

  stopHeartbeat(): void {
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = undefined;
  }

  /** Shutdown began: end every stream (clients reconnect elsewhere). */
  drain(): void {
    for (const s of [...this.open]) {
      s.record.ended ??= 'shutdown';
      s.res.end();
    }
  }
}
