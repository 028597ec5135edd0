/** A minimal Server-Sent Events client for the watch suites: events and comments as they arrive, parsed per the SSE format. */
import { request } from 'node:http';
import { record, recordHeaders } from '../helpers/capture.js';

export interface SseEvent {
  event: string;
  id: string | undefined;
  data: string;
}

export interface SseStream {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** Events so far, in order. */
  events: SseEvent[];
  /** Comment lines so far (heartbeats), without the colon. */
  comments: string[];
  /** The body of a non-stream answer (a problem), once ended. */
  body: string;
  /** Resolves when the server ends the response. */
  ended: Promise<void>;
  close(): void;
}

/**
 * POST `body` to `url` with `Accept: text/event-stream`; resolves once the response headers arrive. `options.path`
 * sends that request target as is (a spelling a URL would normalise: `/export#x`); `options.localAddress` the
 * client's address (another loopback address is another anonymous client).
 */
export function openStream(url: string, body: unknown, headers: Record<string, string> = {}, options: { path?: string; localAddress?: string } = {}): Promise<SseStream> {
  return streamOf(url, JSON.stringify(body), headers, options);
}

/** GET `url` with `Accept: text/event-stream` (as an EventSource does: GET /changes); as `openStream` otherwise. */
export function openGetStream(url: string, headers: Record<string, string> = {}, options: { localAddress?: string } = {}): Promise<SseStream> {
  return streamOf(url, undefined, headers, options);
}

function streamOf(url: string, text: string | undefined, headers: Record<string, string>, options: { path?: string; localAddress?: string }): Promise<SseStream> {
  return new Promise((resolve, reject) => {
    const req = request(url, {
      method: text === undefined ? 'GET' : 'POST',
      agent: false,
      ...(options.path ? { path: options.path } : {}),
      ...(options.localAddress ? { localAddress: options.localAddress } : {}),
      headers: { ...(text === undefined ? {} : { 'content-type': 'application/json' }), accept: 'text/event-stream', connection: 'close', ...headers },
    });
    req.on('error', reject);
    req.on('response', (res) => {
      let buffer = '';
      let endResolve!: () => void;
      const ended = new Promise<void>((r) => (endResolve = r));
      const stream: SseStream = {
        status: res.statusCode ?? 0,
        headers: res.headers,
        events: [],
        comments: [],
        body: '',
        ended,
        close: () => req.destroy(),
      };
      let current: { event: string; id: string | undefined; data: string[] } = { event: 'message', id: undefined, data: [] };
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        stream.body += chunk;
        buffer += chunk;
        let nl: number;
        while ((nl = buffer.indexOf('\n')) !== -1) {
          const line = buffer.slice(0, nl).replace(/\r$/, '');
          buffer = buffer.slice(nl + 1);
          if (line === '') {
            if (current.data.length) stream.events.push({ event: current.event, id: current.id, data: current.data.join('\n') });
            current = { event: 'message', id: undefined, data: [] };
          } else if (line.startsWith(':')) {
            stream.comments.push(line.slice(1).trim());
          } else {
            const colon = line.indexOf(':');
            const field = colon === -1 ? line : line.slice(0, colon);
            const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
            if (field === 'event') current.event = value;
            else if (field === 'id') current.id = value;
            else if (field === 'data') current.data.push(value);
          }
        }
      });
      res.on('end', endResolve);
      res.on('close', endResolve);
      // The whole stream as one record, when it ends or is closed (test/helpers/capture.ts).
      recordHeaders(res.headers);
      res.once('close', () => record('response-body', stream.body));
      res.on('error', endResolve);
      resolve(stream);
    });
    if (text === undefined) req.end();
    else req.end(text);
  });
}
