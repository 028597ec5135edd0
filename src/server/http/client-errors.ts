/**
 * Answers to requests that never reach Fastify's routing: Node's HTTP parser refused them (malformed request line,
 * oversized headers, a Content-Length next to Transfer-Encoding, ...), the client was too slow (headers or body
 * timeout), or the method or an `Expect` header is one Node handles itself (CONNECT, `Expect: <not 100-continue>`).
 * Every such answer is problem+json like any other error, closes the connection, and never echoes the request.
 */
import { maxHeaderSize, STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { ErrorCodes } from '../../core/errors.js';
import { cfguProblem, problem, PROBLEM_CONTENT_TYPE, PROBLEM_TYPES, type Problem } from './problem.js';
import type { ServerSettings } from '../process/settings.js';

/** A `type: about:blank` problem whose title is the status phrase (RFC 9457 §4.2.1). */
export const blankProblem = (status: number, detail: string): Problem =>
  problem(status, PROBLEM_TYPES.blank, STATUS_CODES[status] ?? 'Error', detail);

const seconds = (ms: number): string => (ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`);

/** What a socket carries once Node's server has attached it (internal, stable since Node 0.x). */
type ServerSocket = Duplex & { remoteAddress?: string; _httpMessage?: ServerResponse | null };

/** The problem for one parser or timeout error; undefined when the connection is already gone (reset). */
export function clientErrorProblem(err: NodeJS.ErrnoException, socket: ServerSocket, settings: ServerSettings): Problem | undefined {
  if (err.code === 'ECONNRESET' || socket.destroyed) return undefined;
  switch (err.code) {
    case 'ERR_HTTP_REQUEST_TIMEOUT': {
      const { headersTimeoutMs, requestTimeoutMs } = settings.http;
      // A response object exists once the headers were parsed: then it was the body that was too slow.
      return socket._httpMessage
        ? blankProblem(408, `the request body did not arrive within ${seconds(requestTimeoutMs)} of the start of the request`)
        : blankProblem(408, `the request headers did not arrive within ${seconds(headersTimeoutMs)}`);
    }
    case 'HPE_HEADER_OVERFLOW':
      return blankProblem(431, `the request line and headers are larger than ${maxHeaderSize} bytes`);
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return cfguProblem(ErrorCodes.LIMIT_EXCEEDED, 'the chunk extensions of the request body are too large');
    default: {
      // llhttp's codes name the fault (HPE_INVALID_METHOD -> "invalid method"); nothing of the request is quoted.
      const what = /^HPE_[A-Z_]+$/.test(err.code ?? '') ? ` (${err.code!.slice(4).toLowerCase().replace(/_/g, ' ')})` : '';
      return blankProblem(400, `the request is not valid HTTP/1.1${what}`);
    }
  }
}

/** The bytes of a complete problem response that closes the connection. */
export function rawProblemResponse(p: Problem, headers: Record<string, string> = {}): Buffer {
  const body = Buffer.from(JSON.stringify(p));
  let head = `HTTP/1.1 ${p.status} ${STATUS_CODES[p.status] ?? 'Error'}\r\n`;
  const all: Record<string, string> = {
    'Content-Type': PROBLEM_CONTENT_TYPE,
    'Content-Length': String(body.length),
    'Cache-Control': 'no-store',
    'X-Content-Type-Options': 'nosniff',
    Connection: 'close',
    ...headers,
  };
  for (const [k, v] of Object.entries(all)) head += `${k}: ${v}\r\n`;
  return Buffer.concat([Buffer.from(`${head}\r\n`, 'latin1'), body]);
}

/** How long a refused connection may stay half-open (our answer sent) before it is cut. */
const LINGER_MS = 2000;
const answered = new WeakSet<object>();

/**
 * Send `p` on a raw socket and close it. The socket is ended rather than destroyed, and what the client still sends is
 * read and dropped, so that the kernel does not reset the connection (and discard our answer) over unread bytes; a
 * client that keeps it open anyway is cut after LINGER_MS.
 */
export function answerOnSocket(socket: ServerSocket, p: Problem, headers?: Record<string, string>): void {
  if (answered.has(socket)) return;
  answered.add(socket);
  const inFlight = socket._httpMessage;
  if (!socket.writable || (inFlight && inFlight.headersSent)) {
    // Part of a response is already on the wire: another status line would corrupt it.
    socket.destroy();
    return;
  }
  const timer = setTimeout(() => socket.destroy(), LINGER_MS);
  timer.unref();
  socket.once('close', () => clearTimeout(timer));
  socket.on('error', () => socket.destroy());
  socket.end(rawProblemResponse(p, headers));
  socket.resume();
}

/** Fastify's `clientErrorHandler`: parser errors and header/body timeouts. */
export function createClientErrorHandler(settings: ServerSettings, log: Logger | undefined) {
  return (err: NodeJS.ErrnoException, socket: Duplex): void => {
    const s = socket as ServerSocket;
    if (answered.has(s)) return; // a parser that failed once keeps failing on every later chunk
    const p = clientErrorProblem(err, s, settings);
    if (!p) {
      s.destroy();
      return;
    }
    log?.info({ ip: s.remoteAddress, status: p.status, code: err.code }, 'client error');
    answerOnSocket(s, p);
  };
}

/** `Expect` other than `100-continue` (HTTP/1.1): Node would answer 417 with an empty body. */
export function answerExpectation(req: IncomingMessage, res: ServerResponse): void {
  const p = blankProblem(417, 'the only expectation this server meets is "Expect: 100-continue"');
  const body = JSON.stringify(p);
  res.writeHead(417, {
    'content-type': PROBLEM_CONTENT_TYPE,
    'content-length': Buffer.byteLength(body),
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
    connection: 'close',
  });
  res.end(body);
  req.resume();
}

/** CONNECT: Node would close the connection without a word. */
export function answerConnect(_req: IncomingMessage, socket: Duplex): void {
  answerOnSocket(socket as ServerSocket, blankProblem(405, 'CONNECT is not supported: this server is not a proxy'), { Allow: 'GET, HEAD, POST' });
}
