/**
 * cfgu/client's stream against a small fake server (node:http) that breaks the event format on purpose, the one
 * thing a real cfgu server never does: an answer event whose data is not JSON, an answer without an id, a stream cut
 * in the middle of an event, a 503 with Retry-After. Each is a reconnection (resuming with Last-Event-ID), reported to
 * onError as a typed error, and nothing broken is delivered. Also the event parser and the back-off on their own.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createClient, CfguClientError, CLIENT_PROBLEMS } from '../../src/client/index.js';
import { SseParser } from '../../src/client/sse.js';
import { backoffDelay } from '../../src/client/stream.js';
import { waitFor } from '../helpers/wait.js';

/** A fake server answering its Nth stream request with `script[N]`; records each request's Last-Event-ID. */
async function fakeServer(script: Array<(res: ServerResponse) => void>) {
  const requests: Array<{ lastEventId: string | undefined; accept: string | undefined }> = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    req.on('end', () => {
      requests.push({ lastEventId: req.headers['last-event-id'] as string | undefined, accept: req.headers.accept });
      const step = script[requests.length - 1];
      if (step) step(res);
      // Past the script: a stream that stays open, silent.
      else res.writeHead(200, { 'content-type': 'text/event-stream' }).write(': resumed\n\n');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  after(() => {
    server.closeAllConnections();
    server.close();
  });
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, requests };
}

const stream = (res: ServerResponse, text: string, end = true) => {
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  res.write(text);
  if (end) res.end();
};

test('malformed and truncated events are reconnections: nothing broken is delivered, each is a typed error', async () => {
  const fake = await fakeServer([
    // 1: a good answer, then an answer whose data is not JSON.
    (res) => stream(res, 'id: "t1"\ndata: {"A":"1"}\n\nid: "t2"\ndata: {not json\n\n', false),
    // 2: an answer without an id.
    (res) => stream(res, 'data: {"A":"x"}\n\n', false),
    // 3: a new answer cut in the middle of its event (the response ends there).
    (res) => stream(res, 'id: "t3"\ndata: {"A":'),
    // 4: the same, the connection dropping.
    (res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('id: "t3"\ndata: {"A":');
      res.socket?.destroy();
    },
    // 5: busy: 503 with Retry-After 0 and a problem body.
    (res) => {
      res.writeHead(503, { 'content-type': 'application/problem+json', 'retry-after': '0' });
      res.end(JSON.stringify({ type: 'urn:cfgu:problem:store-unavailable', title: 'Service Unavailable', status: 503, detail: 'store "main" is unavailable' }));
    },
    // 6: the answer after t1, whole.
    (res) => stream(res, 'id: "t4"\ndata: {"A":"4"}\n\n', false),
  ]);
  const seen: Array<[string, string]> = [];
  const errors: CfguClientError[] = [];
  const sub = createClient<{ A: string }>({ url: fake.url, pipeline: [], reconnect: { initialDelayMs: 1, maxDelayMs: 20 } }).subscribe(
    (a) => seen.push([a.etag, a.values.A]),
    (e) => errors.push(e),
  );
  try {
    await waitFor('the whole answer after the broken ones', () => seen.length === 2);
    assert.deepEqual(seen, [['"t1"', '1'], ['"t4"', '4']]);
    // Every reconnection resumed from the last answer delivered.
    assert.deepEqual(fake.requests.slice(0, 6).map((r) => r.lastEventId), [undefined, '"t1"', '"t1"', '"t1"', '"t1"', '"t1"']);
    assert.ok(fake.requests.every((r) => r.accept === 'text/event-stream'));
    assert.ok(errors.every((e) => e instanceof CfguClientError));
    // The dropped connection: a cut event when its first bytes were read before the drop, else a failed connection
    // (the bytes in flight are lost with it); either way a typed error and a reconnection.
    const dropped = errors.splice(3, 1)[0]!;
    assert.ok(
      (dropped.type === CLIENT_PROBLEMS.invalidAnswer && dropped.detail === 'the stream was cut in the middle of an event') ||
        (dropped.type === CLIENT_PROBLEMS.unreachable && dropped.status === 0 && dropped.detail.endsWith('/export (UND_ERR_SOCKET)')),
      dropped.message,
    );
    assert.deepEqual(
      errors.map((e) => [e.type, e.status, e.detail]),
      [
        [CLIENT_PROBLEMS.invalidAnswer, 200, 'the answer is not JSON'],
        [CLIENT_PROBLEMS.invalidAnswer, 200, 'an answer event without an id (its entity tag)'],
        [CLIENT_PROBLEMS.invalidAnswer, 200, 'the stream was cut in the middle of an event'],
        ['urn:cfgu:problem:store-unavailable', 503, 'store "main" is unavailable'],
      ],
    );
  } finally {
    sub.close();
  }
  assert.equal(await sub.closed, undefined);
});

test('the event parser: CRLF, CR and LF line ends, comments, split chunks, multi-line data; a cut event is pending', () => {
  const p = new SseParser();
  const bytes = new TextEncoder().encode(': heartbeat\r\nid: "a"\r\ndata: {"x":\r\ndata: 1}\r\n\r\nevent: error\rdata: {}\r\r: resumed\n\nid: "b"\ndata: {"y"');
  const out = { events: [] as unknown[], comments: [] as string[] };
  for (let i = 0; i < bytes.length; i += 7) {
    const chunk = p.push(bytes.subarray(i, i + 7));
    out.events.push(...chunk.events);
    out.comments.push(...chunk.comments);
  }
  assert.deepEqual(out.events, [
    { event: 'message', id: '"a"', data: '{"x":\n1}' },
    { event: 'error', id: undefined, data: '{}' },
  ]);
  assert.deepEqual(out.comments, ['heartbeat', 'resumed']);
  assert.equal(p.pending, true);
  assert.deepEqual(p.push(new TextEncoder().encode(':1}\n\n')).events, [{ event: 'message', id: '"b"', data: '{"y":1}' }]);
  assert.equal(p.pending, false);
});

test('back-off: full jitter below an exponential bound, capped', () => {
  assert.equal(backoffDelay(0, 500, 30_000, () => 0.999), 499);
  assert.equal(backoffDelay(3, 500, 30_000, () => 0.5), 2000);
  assert.equal(backoffDelay(10, 500, 30_000, () => 0.999), 29_970);
  assert.equal(backoffDelay(1000, 500, 30_000, () => 0.5), 15_000);
  assert.equal(backoffDelay(5, 500, 30_000, () => 0), 0);
});
