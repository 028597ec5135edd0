/**
 * Live updates: `GET /changes?store=S` is a Server-Sent Events stream of the store's change notices (`change` events
 * naming the sets written, or `sets: null` when any set may have changed). EventSource cannot send an Authorization
 * header, so the stream is read with fetch. When it breaks, it reconnects with back-off and jitter, and reports
 * `sets: null` once it is back (what changed while it was away is unknown: the page refetches what it shows).
 */
import type { Api, Problem } from './api.js';
import { ApiError } from './api.js';

export interface ChangeNotice {
  store: string;
  /** The sets written; null: any set may have changed. */
  sets: string[] | null;
}

export interface ChangeHandlers {
  change(notice: ChangeNotice): void;
  /** The stream's state, for the page's "live" indicator. */
  status(state: 'connecting' | 'live' | 'offline', problem?: Problem): void;
}

/** One SSE event: its name (default `message`) and its data lines joined. */
export interface SseEvent {
  event: string;
  data: string;
}

/** Splits a text stream into SSE events (comments and `id:`/`retry:` lines are ignored: the console needs neither). */
export class SseParser {
  private buffer = '';
  private event = 'message';
  private data: string[] = [];

  push(chunk: string, emit: (e: SseEvent) => void): void {
    this.buffer += chunk;
    let nl: number;
    while ((nl = this.buffer.search(/\r\n|\r|\n/)) >= 0) {
      const line = this.buffer.slice(0, nl);
      this.buffer = this.buffer.slice(nl + (this.buffer.startsWith('\r\n', nl) ? 2 : 1));
      if (line === '') {
        if (this.data.length) emit({ event: this.event, data: this.data.join('\n') });
        this.event = 'message';
        this.data = [];
      } else if (line.startsWith('event:')) this.event = line.slice(6).trim();
      else if (line.startsWith('data:')) this.data.push(line.slice(5).replace(/^ /, ''));
    }
  }
}

/** Follows a store's changes until the returned function is called. */
export function followChanges(api: Api, store: string, handlers: ChangeHandlers): () => void {
  const abort = new AbortController();
  let attempt = 0;
  let connectedBefore = false;

  const once = async (): Promise<'retry' | 'stop'> => {
    handlers.status('connecting');
    const response = await api.respond(`/changes?store=${encodeURIComponent(store)}`, {
      headers: { Accept: 'text/event-stream' },
      signal: abort.signal,
    });
    const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
    const parser = new SseParser();
    let stop = false;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return stop ? 'stop' : 'retry';
      parser.push(value, (e) => {
        if (e.event === 'ready') {
          attempt = 0;
          handlers.status('live');
          if (connectedBefore) handlers.change({ store, sets: null });
          connectedBefore = true;
        } else if (e.event === 'change') {
          const notice = JSON.parse(e.data) as ChangeNotice;
          handlers.change(notice);
        } else if (e.event === 'error') {
          handlers.status('offline', JSON.parse(e.data) as Problem);
        } else if (e.event === 'end') {
          // The credential no longer covers the stream (expired, withdrawn): reconnecting would be refused too.
          handlers.status('offline', JSON.parse(e.data) as Problem);
          stop = true;
        }
      });
    }
  };

  void (async () => {
    while (!abort.signal.aborted) {
      try {
        if ((await once()) === 'stop') return;
      } catch (e) {
        if (abort.signal.aborted) return;
        if (e instanceof ApiError && (e.status === 401 || e.status === 403 || e.status === 400)) {
          handlers.status('offline', e.problem);
          return;
        }
        handlers.status('offline', e instanceof ApiError ? e.problem : undefined);
      }
      if (abort.signal.aborted) return;
      attempt++;
      const delay = Math.min(30_000, 500 * 2 ** Math.min(attempt, 6)) * (0.5 + Math.random() / 2);
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  })();
  return () => abort.abort();
}
