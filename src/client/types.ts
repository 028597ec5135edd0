/** The client's public types (docs/clients.md). */
import type { CfguClientError } from './errors.js';

export interface ClientOptions<T> {
  /** The cfgu server, such as `http://cfgu:8080` (the client posts to its `/export`; a URL ending in /export is used as is). */
  url: string;
  /** The body of `POST /export`: the pipeline (an array of steps). */
  pipeline: unknown;
  /** A bearer token that does not change (a scoped token, a preshared key). */
  token?: string;
  /**
   * A bearer token from the caller, asked before the first request (`refresh: false`) and again (`refresh: true`)
   * after a 401, once per refused request; a second 401 in a row is the caller's error.
   */
  getToken?: (context: { refresh: boolean }) => string | Promise<string>;
  /**
   * Checks an answer and gives it its type (such as the parse function of a generated validator). An answer it
   * throws on is refused (`urn:cfgu:client:validation`): not held, not written, not delivered.
   */
  validate?: (values: unknown) => T;
  /** Where the last good answer is kept (written after each accepted answer, read when the server is unreachable). */
  cacheFile?: string;
  /** More request headers (never `authorization`: use `token` or `getToken`). */
  headers?: Record<string, string>;
  /** The fetch implementation (the global `fetch` by default). */
  fetch?: typeof fetch;
  /** The longest a `get()` waits for its whole answer (ms); 30000 by default. */
  requestTimeoutMs?: number;
  /** Reconnection of `subscribe()`: exponential back-off with full jitter between these bounds (ms; 500 and 30000). */
  reconnect?: { initialDelayMs?: number; maxDelayMs?: number };
  /**
   * A stream on which nothing arrives (not even the server's heartbeat) for this long (ms) is taken as cut and
   * opened again; 45000 by default (three of the server's default heartbeats); 0 turns it off.
   */
  idleTimeoutMs?: number;
  /** Told of what is not an error of a call (the file could not be written or read); `process.emitWarning` by default. */
  onWarning?: (message: string) => void;
}

/** An answer: the values, their entity tag, and whether it comes from the file because the server was unreachable. */
export interface Answer<T> {
  values: T;
  etag: string;
  stale: boolean;
}

export interface Subscription {
  /** Stop following (the connection is closed, no callback runs after it). */
  close(): void;
  /** Resolves when the subscription ends: with undefined after close(), or with the error that ended it. */
  readonly closed: Promise<CfguClientError | undefined>;
}

export interface CfguClient<T> {
  /** The current answer (If-None-Match revalidation: a 304 reuses the held answer, without a body). */
  get(): Promise<Answer<T>>;
  /**
   * Follow the answer's changes over the server's event stream: `onChange` gets each new answer once. Connections
   * that fail or break are opened again (back-off with jitter), resuming from the last answer's tag.
   */
  subscribe(onChange: (answer: Answer<T>) => void, onError?: (error: CfguClientError) => void): Subscription;
  /** The answer held now, if any. */
  readonly last: Answer<T> | undefined;
  /** Resolves once the last good answer file holds every answer accepted so far. */
  saved(): Promise<void>;
}
