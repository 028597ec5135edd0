/**
 * The HTTP edge, over raw TCP sockets as an attacker would speak to it: requests Node's parser refuses, a missing
 * Host, oversized headers, CONNECT and unknown expectations, slow headers, slow bodies and idle keep-alive
 * connections, and docs asset paths that climb out of their folder. Every answer is checked byte for byte: status
 * line, content type, `Connection: close`, and the exact problem body.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino, type Logger } from 'pino';
import type { FastifyInstance } from 'fastify';
import { buildServer, settingsWith, type SettingsOverrides } from '../../src/server/index.js';
import { loadConfiguration } from '../../src/config/index.js';
import { createStoreRegistry, type StoreRegistry } from '../../src/stores/index.js';
import { call, removeTempDirs, tempDir, writeJson } from './helpers.js';

let registry: StoreRegistry;
const apps: FastifyInstance[] = [];

before(async () => {
  const dir = tempDir();
  writeJson(join(dir, 'data.json'), [{ set: '', key: 'GREETING', value: 'hello' }]);
  writeJson(join(dir, '.configu'), { stores: { main: { type: 'json-file', configuration: { path: 'data.json' } } } });
  registry = createStoreRegistry(await loadConfiguration({ file: join(dir, '.configu') }), { logger: { warn: () => undefined } });
  await registry.init();
});

after(async () => {
  for (const a of apps) await a.close();
  await registry?.close();
  removeTempDirs();
});

/** A server listening on loopback, with its JSON log lines captured. */
async function serve(overrides: SettingsOverrides = {}): Promise<{ port: number; logs: () => Array<Record<string, any>>; raw: () => string }> {
  let raw = '';
  const stream = new Writable({
    write(chunk, _enc, cb) {
      raw += chunk.toString();
      cb();
    },
  });
  const logger = pino({ level: 'info' }, stream) as unknown as Logger;
  const app = await buildServer({ registry, settings: settingsWith(overrides), logger, ready: true });
  apps.push(app);
  await app.listen({ port: 0, host: '127.0.0.1' });
  const port = (app.server.address() as { port: number }).port;
  return { port, raw: () => raw, logs: () => raw.split('\n').filter(Boolean).map((l) => JSON.parse(l)) };
}

interface RawAnswer {
  statusLine: string;
  headers: Record<string, string>;
  body: string;
  /** Every byte received before the server closed the connection. */
  bytes: string;
}

function parse(bytes: string): RawAnswer {
  const end = bytes.indexOf('\r\n\r\n');
  assert.ok(end > 0, `no complete response head in ${JSON.stringify(bytes)}`);
  const [statusLine, ...lines] = bytes.slice(0, end).split('\r\n');
  const headers: Record<string, string> = {};
  for (const l of lines) {
    const i = l.indexOf(':');
    headers[l.slice(0, i).toLowerCase()] = l.slice(i + 1).trim();
  }
  return { statusLine: statusLine!, headers, body: bytes.slice(end + 4), bytes };
}

/**
 * Open a connection, write `head`, then (when `drip` is given) one more chunk of `drip` every 50 ms, until the server
 * closes the connection. Resolves with everything received.
 */
function exchange(port: number, head: string | Buffer, drip?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket: Socket = connect(port, '127.0.0.1');
    let received = '';
    let timer: NodeJS.Timeout | undefined;
    socket.on('connect', () => {
      socket.write(head);
      if (drip !== undefined) timer = setInterval(() => socket.writable && socket.write(drip), 50);
    });
    socket.on('data', (c: Buffer) => (received += c.toString('latin1')));
    socket.on('error', (e) => {
      clearInterval(timer);
      reject(e);
    });
    socket.on('close', () => {
      clearInterval(timer);
      resolve(received);
    });
  });
}

/** The exact problem answer: status line, headers that close, and the body. */
function assertProblem(bytes: string, status: number, phrase: string, body: Record<string, unknown>): RawAnswer {
  const a = parse(bytes);
  assert.equal(a.statusLine, `HTTP/1.1 ${status} ${phrase}`, bytes);
  assert.equal(a.headers['content-type'], 'application/problem+json; charset=utf-8');
  assert.equal(a.headers['connection'], 'close');
  assert.equal(Number(a.headers['content-length']), Buffer.byteLength(a.body));
  assert.deepEqual(JSON.parse(a.body), body);
  return a;
}

const blank = (status: number, title: string, detail: string) => ({ type: 'about:blank', title, status, detail });

describe('requests Node refuses before routing are problem+json and close the connection', () => {
  let port: number;
  let logs: () => Array<Record<string, any>>;
  before(async () => ({ port, logs } = await serve()));

  const malformed: Array<[string, string, string]> = [
    ['binary garbage for a request line', '\x00\x01\x02\r\n\r\n', 'invalid method'],
    ['Content-Length next to Transfer-Encoding', 'POST /export HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n', 'invalid transfer encoding'],
    ['a header name with a space', 'GET /live HTTP/1.1\r\nHost: x\r\nBad Header: 1\r\n\r\n', 'invalid header token'],
    ['a Content-Length that is not a number', 'POST /export HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n', 'invalid content length'],
    ['a chunk size that is not hexadecimal', 'POST /export HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n', 'invalid chunk size'],
  ];
  for (const [name, request, what] of malformed) {
    test(`400: ${name}`, async () => {
      const a = assertProblem(await exchange(port, request), 400, 'Bad Request', blank(400, 'Bad Request', `the request is not valid HTTP/1.1 (${what})`));
      assert.equal(a.headers['x-content-type-options'], 'nosniff');
    });
  }

  test('400: an HTTP/1.1 request without Host; HTTP/1.0 needs none', async () => {
    assertProblem(await exchange(port, 'GET /live HTTP/1.1\r\n\r\n'), 400, 'Bad Request', blank(400, 'Bad Request', 'an HTTP/1.1 request must carry a Host header'));
    const old = parse(await exchange(port, 'GET /live HTTP/1.0\r\n\r\n'));
    assert.equal(old.statusLine, 'HTTP/1.1 200 OK');
    assert.deepEqual(Object.keys(JSON.parse(old.body)), ['uptime']);
  });

  test('431: 70 KB of headers', async () => {
    const big = `GET /live HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(70 * 1024)}\r\n\r\n`;
    assertProblem(
      await exchange(port, big),
      431,
      'Request Header Fields Too Large',
      blank(431, 'Request Header Fields Too Large', 'the request line and headers are larger than 16384 bytes'),
    );
  });

  test('417: an expectation other than 100-continue', async () => {
    assertProblem(
      await exchange(port, 'GET /live HTTP/1.1\r\nHost: x\r\nExpect: the-moon\r\n\r\n'),
      417,
      'Expectation Failed',
      blank(417, 'Expectation Failed', 'the only expectation this server meets is "Expect: 100-continue"'),
    );
  });

  test('405: CONNECT (Node would close without a word)', async () => {
    const a = assertProblem(
      await exchange(port, 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n'),
      405,
      'Method Not Allowed',
      blank(405, 'Method Not Allowed', 'CONNECT is not supported: this server is not a proxy'),
    );
    assert.equal(a.headers['allow'], 'GET, HEAD, POST');
  });

  test('a client error is one log line without the request and without a stack; the server still answers', async () => {
    await exchange(port, '\x00\x01\x02 secret-token\r\n\r\n');
    const line = logs().filter((l) => l.msg === 'client error').pop();
    assert.deepEqual({ status: line?.status, code: line?.code, ip: line?.ip }, { status: 400, code: 'HPE_INVALID_METHOD', ip: '127.0.0.1' });
    assert.doesNotMatch(JSON.stringify(logs()), /secret-token|"stack"/);
    assert.equal((await call(`http://127.0.0.1:${port}/live`)).status, 200);
  });
});

// The timeout is a guard against a hang should a timeout not fire, not a speed goal.
describe('slow clients are cut off', { timeout: 120_000 }, () => {
  const timeouts = { headersTimeoutMs: 300, requestTimeoutMs: 600, idleTimeoutMs: 300 };

  test('slow headers: 408 once the headers timeout passes, while /live keeps answering', async () => {
    const { port } = await serve({ http: timeouts });
    const slow = exchange(port, 'GET /live HTTP/1.1\r\nHost: x\r\n', 'X-Drip: 1\r\n');
    assert.equal((await call(`http://127.0.0.1:${port}/live`)).status, 200);
    assertProblem(await slow, 408, 'Request Timeout', blank(408, 'Request Timeout', 'the request headers did not arrive within 300 ms'));
  });

  test('a connection that never sends a byte is closed after the headers timeout', async () => {
    const { port } = await serve({ http: timeouts });
    assertProblem(await exchange(port, ''), 408, 'Request Timeout', blank(408, 'Request Timeout', 'the request headers did not arrive within 300 ms'));
  });

  test('slow body (a byte at a time): 408 once the request timeout passes, while /live and /export keep answering', async () => {
    const { port, raw } = await serve({ http: timeouts });
    const head = 'POST /export HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n[';
    const slow = exchange(port, head, ' ');
    assert.equal((await call(`http://127.0.0.1:${port}/live`)).status, 200);
    const r = await call(`http://127.0.0.1:${port}/export`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify([{ schema: { keys: { GREETING: {} } } }]),
    });
    assert.deepEqual([r.status, r.json()], [200, { GREETING: 'hello' }]);
    assertProblem(
      await slow,
      408,
      'Request Timeout',
      blank(408, 'Request Timeout', 'the request body did not arrive within 600 ms of the start of the request'),
    );
    assert.doesNotMatch(raw(), /"level":50|"stack"/, 'nothing logged as an error');
  });

  test('an idle keep-alive connection is closed after the idle timeout, with nothing more sent', async () => {
    const { port } = await serve({ http: timeouts });
    const bytes = await exchange(port, 'GET /live HTTP/1.1\r\nHost: x\r\n\r\n');
    const a = parse(bytes);
    assert.equal(a.statusLine, 'HTTP/1.1 200 OK');
    assert.notEqual(a.headers['connection'], 'close');
    assert.equal(a.body.length, Number(a.headers['content-length']), 'exactly one response, then the close');
  });
});

describe('docs assets: paths that climb out of the folder are 404, never 500, and nothing is logged as an error', () => {
  const paths = [
    '/docs/static/../../../package.json',
    '/docs/static/%2e%2e/%2e%2e/%2e%2e/package.json',
    '/docs/static/%2E%2E/%2E%2E/%2E%2E/package.json',
    '/docs/static/..%2f..%2f..%2fpackage.json',
    '/docs/static/.%2e/.%2e/.%2e/package.json',
  ];
  for (const path of paths) {
    test(path, async () => {
      const { port, raw } = await serve();
      const bytes = await exchange(port, `GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
      const a = parse(bytes);
      assert.equal(a.statusLine, 'HTTP/1.1 404 Not Found');
      assert.equal(a.headers['content-type'], 'application/problem+json; charset=utf-8');
      assert.deepEqual(JSON.parse(a.body), blank(404, 'Not Found', `no route GET ${path}`));
      assert.doesNotMatch(a.body, /"name"\s*:\s*"cfgu"|dependencies/);
      assert.doesNotMatch(raw(), /"level":50|"stack"|FST_STATIC/);
    });
  }

  test('the real assets are still served', async () => {
    const { port } = await serve();
    const r = await call(`http://127.0.0.1:${port}/docs/static/swagger-ui-bundle.js`);
    assert.equal(r.status, 200);
  });
});
