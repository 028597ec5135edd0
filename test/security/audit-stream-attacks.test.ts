/**
 * Red-team tests of the audit, change streams and long polls (issue 30, part B; docs/security.md "The audit log" and
 * "Streams, long polls and credentials", docs/server.md "Watching for changes"). One describe per class of attack:
 *   - path spellings: every spelling Fastify routes to POST /export leaves its audit line, the others are 404 and
 *     read nothing;
 *   - every value-reading route (plain export, SSE stream, long poll) leaves exactly one line, with its outcome;
 *   - clients that hang up (before the answer, during a long poll, closing a stream) leave one line each;
 *   - a stream or held long poll ends with its credential (JWT expiry, a credential removed by a reload, a scope
 *     narrowed by a reload);
 *   - clients apart: nothing evaluated for one client reaches another, nor the fact or time of its watch;
 *   - fair limits: a per-client watcher cap (429) below the server's total;
 *   - the audit promise as a property: a seeded random mix of requests, one line per request routed to /export.
 * In process (buildServer over an in-memory store, a real sandbox for `const` expressions), over real sockets.
 */
import { after, before, beforeEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { request, type ClientRequest } from 'node:http';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SignJWT, exportJWK, generateKeyPair, type CryptoKey } from 'jose';
import { pino, type Logger } from 'pino';
import type { FastifyInstance } from 'fastify';
import { buildServer } from '../../src/server/index.js';
import { resolveSettings } from '../../src/server/process/resolve-settings.js';
import { loadConfiguration } from '../../src/config/index.js';
import { createStoreRegistry, type StoreRegistryWithStatus } from '../../src/stores/index.js';
import { createSandboxEvaluator } from '../../src/expressions/index.js';
import type { ExpressionEvaluator } from '../../src/core/ports.js';
import type { StoreResolver } from '../../src/core/index.js';
import type { InMemoryConfigStore } from '../../src/stores/in-memory.js';
import { captureLog, isProblem, removeTempDirs, tempDir, writeJson, type HttpAnswer } from '../server/helpers.js';
import { openStream, type SseStream } from '../server/sse-client.js';
import { HANG_GUARD_MS, waitFor, within } from '../helpers/wait.js';
import { mulberry32 } from '../fuzz/prng.mjs';

const sha256 = (t: string) => createHash('sha256').update(t, 'utf8').digest('hex');
const PRESHARED = `preshared-${randomUUID()}`;
const STAGING = `cfgu_staging-${randomUUID()}`;
const OTHER = `cfgu_other-${randomUUID()}`;
const ISSUER = 'https://idp.audit.test';
const AUDIENCE = 'cfgu-proxy';

const UNAUTHORIZED = {
  type: 'urn:cfgu:problem:unauthorized',
  title: 'Unauthorized',
  status: 401,
  detail: 'a valid bearer key is required (Authorization: Bearer <key>)',
};
const notFound = (path: string) => ({ type: 'about:blank', title: 'Not Found', status: 404, detail: `no route POST ${path}` });

let dir: string;
let registry: StoreRegistryWithStatus;
let mem: InMemoryConfigStore;
let evaluator: ExpressionEvaluator;
let privateKey: CryptoKey;
let jwksFile: string;
/** Reads of the store, and a gate that holds them (to hang up after a read began). */
let reads = 0;
let gate: Promise<void> | undefined;
const resolver: StoreResolver = {
  resolve(name) {
    const store = registry.resolve(name);
    return {
      name: store.name,
      type: store.type,
      read: async (queries) => {
        reads++;
        if (gate) await gate;
        return store.read(queries);
      },
      write: (configs) => store.write(configs),
      ...(store.watch ? { watch: store.watch.bind(store) } : {}),
    };
  },
  names: () => registry.names(),
};

const cleanups: Array<() => unknown> = [];
before(async () => {
  dir = tempDir('cfgu-audit-attacks-');
  writeJson(join(dir, '.configu'), { stores: { mem: { type: 'in-memory', default: true } } });
  registry = createStoreRegistry(await loadConfiguration({ file: join(dir, '.configu') }), { logger: { warn: () => undefined } });
  await registry.init();
  mem = registry.store('mem') as InMemoryConfigStore;
  await mem.set([
    { set: '', key: 'HOST', value: 'root.internal' },
    { set: 'staging', key: 'HOST', value: 'staging.internal' },
    { set: 'prod', key: 'HOST', value: 'prod.internal' },
  ]);
  evaluator = createSandboxEvaluator({ workers: 1, spares: 0, timeoutMs: 5000, memoryMb: 32 });
  const pair = await generateKeyPair('RS256', { extractable: true });
  privateKey = pair.privateKey;
  jwksFile = join(dir, 'jwks.json');
  writeFileSync(jwksFile, JSON.stringify({ keys: [{ ...(await exportJWK(pair.publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' }] }));
});
after(async () => {
  for (const c of cleanups.reverse()) await Promise.resolve(c()).catch(() => undefined);
  await evaluator?.close();
  await registry?.close();
  removeTempDirs();
});
beforeEach(() => {
  gate = undefined;
});

const credentials = (stagingSets: string[] = ['staging/**']) => [
  { name: 'ci-staging', sha256: sha256(STAGING), stores: ['mem'], sets: stagingSets },
  { name: 'other-team', sha256: sha256(OTHER), stores: ['mem'], sets: ['staging/**'] },
];
const authSettings = (stagingSets?: string[]) => ({
  enabled: true,
  presharedKeys: [PRESHARED],
  credentials: credentials(stagingSets),
  jwt: { jwksFile, issuer: ISSUER, audience: AUDIENCE, clockSkewSeconds: 0, grants: [{ claim: 'scope', value: 'cfgu:staging', stores: ['mem'], sets: ['staging/**'] }] },
});

interface Server {
  app: FastifyInstance;
  base: string;
  port: number;
  /** The audit lines so far, without level, time, pid, hostname and msg. */
  audit(): Array<Record<string, unknown>>;
  auditOf(requestId: string): Array<Record<string, unknown>>;
  /** Requests the HTTP server received so far (counted after the app's own listener ran its synchronous part). */
  received(): number;
}

async function server(proxy: Record<string, unknown> = {}, auth = true): Promise<Server> {
  const capture = captureLog();
  const fileSettings = { ...(auth ? { auth: authSettings() } : {}), ...proxy };
  const settings = resolveSettings({ fileSettings, file: join(dir, '.configu'), env: {} });
  const app = await buildServer({
    registry: resolver,
    evaluator,
    settings: { ...settings, workers: 1 },
    logger: pino({ level: 'silent' }) as unknown as Logger,
    auditLogger: capture.logger,
    ready: true,
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  cleanups.push(() => app.close());
  const port = (app.server.address() as { port: number }).port;
  let received = 0;
  app.server.on('request', () => received++);
  const audit = () =>
    capture
      .lines()
      .filter((l) => l.msg === 'audit')
      .map(({ level: _l, time: _t, pid: _p, hostname: _h, msg: _m, ...rest }) => rest);
  return { app, base: `http://127.0.0.1:${port}`, port, audit, auditOf: (id) => audit().filter((l) => l.requestId === id), received: () => received };
}

interface Sent {
  req: ClientRequest;
  answer: Promise<HttpAnswer>;
}

/** A request with its target sent as is (no URL normalisation), from `localAddress` when given. */
function send(s: Server, path: string, body: unknown, headers: Record<string, string> = {}, localAddress?: string): Sent {
  let req!: ClientRequest;
  const answer = new Promise<HttpAnswer>((resolve, reject) => {
    const text = typeof body === 'string' ? body : JSON.stringify(body);
    req = request(
      { host: '127.0.0.1', port: s.port, path, method: 'POST', agent: false, ...(localAddress ? { localAddress } : {}), headers: { 'content-type': 'application/json', connection: 'close', ...headers } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text, json: () => JSON.parse(text) });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(text);
  });
  answer.catch(() => undefined);
  return { req, answer };
}
const post = (s: Server, path: string, body: unknown, headers: Record<string, string> = {}, localAddress?: string) => send(s, path, body, headers, localAddress).answer;

const streams: SseStream[] = [];
async function stream(s: Server, body: unknown, headers: Record<string, string> = {}, options: { path?: string; localAddress?: string } = {}): Promise<SseStream> {
  const st = await openStream(`${s.base}/export`, body, headers, options);
  streams.push(st);
  cleanups.push(() => st.close());
  return st;
}
/** The stream's end (the server ended it, or the client), with a hang guard. */
const ended = (st: SseStream) => within(st.ended, HANG_GUARD_MS);
const answers = (st: SseStream) => st.events.filter((e) => e.event === 'message');

const schema = { keys: { HOST: {} } };
const body = (set = 'staging') => [{ set, schema }];
const bearer = (t: string) => ({ authorization: `Bearer ${t}` });
const commandsOf = (set = 'staging') => [{ store: 'mem', set }];

function jwt(claims: Record<string, unknown> = {}, expSeconds = 600): Promise<string> {
  return new SignJWT({ sub: 'svc-jwt', scope: 'cfgu:staging', ...claims })
    .setProtectedHeader({ alg: 'RS256', kid: 'k1' })
    .setIssuer(ISSUER)
    .setAudience(AUDIENCE)
    .setIssuedAt()
    .setExpirationTime(Math.floor(Date.now() / 1000) + expSeconds)
    .sign(privateKey);
}

/** The one audit line of a request (waits for it), checked to be the only one. */
async function lineOf(s: Server, id: string): Promise<Record<string, unknown>> {
  await waitFor(`the audit line of ${id}`, () => s.auditOf(id).length > 0);
  const lines = s.auditOf(id);
  assert.equal(lines.length, 1, JSON.stringify(lines));
  return lines[0]!;
}

describe('the audit line follows the route, not the spelling of the path', () => {
  const routed = ['/export', '/%65xport', '/export#x', '/export?x=1', '/%65%78%70%6f%72%74', '/export?#'];
  for (const path of routed) {
    test(`POST ${path}: routed to the export, answered, exactly one audit line`, async () => {
      const s = await server();
      const id = `spell-${randomUUID()}`;
      const r = await post(s, path, body(), { ...bearer(PRESHARED), 'x-request-id': id });
      assert.equal(r.status, 200, r.body);
      assert.deepEqual(r.json(), { HOST: 'staging.internal' });
      assert.deepEqual(await lineOf(s, id), { requestId: id, subject: 'preshared:1', auth: 'preshared', client: '127.0.0.1', commands: commandsOf(), keys: 1, status: 200 });
    });
  }

  const unrouted = ['//export', '/EXPORT', '/Export', '/export/', '/export;x', '/export%23x', '/./export', '/x/../export'];
  test(`${unrouted.join(', ')}: 404, nothing read, no audit line`, async () => {
    const s = await server();
    for (const path of unrouted) {
      const id = `unrouted-${randomUUID()}`;
      const before = reads;
      const r = await post(s, path, body(), { ...bearer(PRESHARED), 'x-request-id': id });
      assert.deepEqual(isProblem(r, 404), notFound(path), path);
      assert.equal(reads, before, `${path} read a store`);
    }
    // A routed request after them: its line is there, and it is the only one.
    const id = `after-${randomUUID()}`;
    assert.equal((await post(s, '/export', body(), { ...bearer(PRESHARED), 'x-request-id': id })).status, 200);
    await lineOf(s, id);
    assert.equal(s.audit().length, 1, JSON.stringify(s.audit()));
  });

  test('a stream and a long poll on /%65xport and /export#x leave their lines too', async () => {
    const s = await server();
    const id = `spell-stream-${randomUUID()}`;
    const st = await stream(s, body(), { ...bearer(STAGING), 'x-request-id': id }, { path: '/%65xport' });
    assert.equal(st.status, 200);
    await waitFor('the first event', () => answers(st).length === 1);
    st.close();
    assert.deepEqual(omitMs(await lineOf(s, id)), {
      requestId: id, subject: 'ci-staging', auth: 'credential', client: '127.0.0.1', commands: commandsOf(), keys: 1, status: 200, watch: 'stream', events: 1, ended: 'client',
    });
    const tag = String(answers(st)[0]!.id);
    const pid = `spell-poll-${randomUUID()}`;
    const r = await post(s, '/export#x', body(), { ...bearer(STAGING), 'x-request-id': pid, 'if-none-match': tag, prefer: 'wait=1' });
    assert.equal(r.status, 304);
    assert.deepEqual(await lineOf(s, pid), { requestId: pid, subject: 'ci-staging', auth: 'credential', client: '127.0.0.1', commands: commandsOf(), keys: 0, status: 304, watch: 'poll' });
  });
});

/** A stream's line carries its duration (`ms`, a number); the rest is compared exactly. */
function omitMs(line: Record<string, unknown>): Record<string, unknown> {
  const { ms, ...rest } = line;
  assert.equal(typeof ms, 'number');
  return rest;
}

describe('every route that reads values: one line each, with its outcome', () => {
  test('plain export: 200, 401, 403, 400 each one line with the right subject', async () => {
    const s = await server();
    const cases: Array<[string, Record<string, string>, unknown, number, Record<string, unknown>]> = [
      ['ok', bearer(STAGING), body(), 200, { subject: 'ci-staging', auth: 'credential', commands: commandsOf(), keys: 1 }],
      ['no-key', {}, body(), 401, { subject: null, auth: null, commands: [], keys: 0, reason: 'no Authorization header' }],
      ['scope', bearer(STAGING), body('prod'), 403, { subject: 'ci-staging', auth: 'credential', commands: commandsOf('prod'), keys: 0 }],
      ['invalid', bearer(PRESHARED), [{ set: 'a//b', schema }], 400, { subject: 'preshared:1', auth: 'preshared', commands: [{ store: 'mem', set: 'a//b' }], keys: 0 }],
    ];
    for (const [name, headers, payload, status, expected] of cases) {
      const id = `${name}-${randomUUID()}`;
      const r = await post(s, '/export', payload, { ...headers, 'x-request-id': id });
      assert.equal(r.status, status, `${name}: ${r.body}`);
      if (status === 401) assert.deepEqual(isProblem(r, 401), UNAUTHORIZED);
      assert.deepEqual(await lineOf(s, id), { requestId: id, client: '127.0.0.1', status, ...expected }, name);
    }
  });

  test('SSE stream: one line when it ends, with the answers it delivered and why it ended', async () => {
    const s = await server({ watch: { heartbeatMs: 3_600_000 } });
    await mem.set([{ set: 'staging', key: 'HOST', value: 'staging-1.internal' }]);
    const id = `stream-${randomUUID()}`;
    const st = await stream(s, body(), { ...bearer(STAGING), 'x-request-id': id });
    await waitFor('the first event', () => answers(st).length === 1);
    await mem.set([{ set: 'staging', key: 'HOST', value: 'staging-2.internal' }]);
    await waitFor('the change event', () => answers(st).length === 2);
    // Open: no line yet (the line is written when the stream ends).
    assert.equal(s.auditOf(id).length, 0);
    st.close();
    assert.deepEqual(omitMs(await lineOf(s, id)), {
      requestId: id, subject: 'ci-staging', auth: 'credential', client: '127.0.0.1', commands: commandsOf(), keys: 1, status: 200, watch: 'stream', events: 2, ended: 'client',
    });
    await mem.set([{ set: 'staging', key: 'HOST', value: 'staging.internal' }]);
  });

  test('SSE stream ended by shutdown: one line, ended "shutdown"', async () => {
    const s = await server();
    const id = `stream-shutdown-${randomUUID()}`;
    const st = await stream(s, body(), { ...bearer(PRESHARED), 'x-request-id': id });
    await waitFor('the first event', () => answers(st).length === 1);
    s.app.cfgu.lifecycle.beginShutdown();
    await ended(st);
    assert.deepEqual(omitMs(await lineOf(s, id)), {
      requestId: id, subject: 'preshared:1', auth: 'preshared', client: '127.0.0.1', commands: commandsOf(), keys: 1, status: 200, watch: 'stream', events: 1, ended: 'shutdown',
    });
  });

  test('long poll: held then answered 200 after a change, one line with its keys', async () => {
    const s = await server();
    const first = await post(s, '/export', body(), bearer(PRESHARED));
    const id = `poll-${randomUUID()}`;
    const held = post(s, '/export', body(), { ...bearer(PRESHARED), 'x-request-id': id, 'if-none-match': String(first.headers.etag), prefer: 'wait=120' });
    await waitFor('the poll is held', () => s.app.cfgu.watch.watchers === 1);
    await mem.set([{ set: 'staging', key: 'HOST', value: 'staging-3.internal' }]);
    const r = await held;
    assert.equal(r.status, 200);
    assert.deepEqual(await lineOf(s, id), { requestId: id, subject: 'preshared:1', auth: 'preshared', client: '127.0.0.1', commands: commandsOf(), keys: 1, status: 200, watch: 'poll' });
    await mem.set([{ set: 'staging', key: 'HOST', value: 'staging.internal' }]);
  });

  test('watch requests refused by the limits: one line each with the status (503 total, 429 per client)', async () => {
    const s = await server({ watch: { maxWatchers: 2, maxWatchersPerClient: 1 } });
    const a = await stream(s, body(), bearer(STAGING));
    await waitFor('the first event', () => answers(a).length === 1);
    const id = `cap-${randomUUID()}`;
    const r = await within(post(s, '/export', body(), { ...bearer(STAGING), 'x-request-id': id, accept: 'text/event-stream' }), HANG_GUARD_MS);
    assert.equal(r.status, 429);
    assert.deepEqual(await lineOf(s, id), { requestId: id, subject: 'ci-staging', auth: 'credential', client: '127.0.0.1', commands: commandsOf(), keys: 0, status: 429 });
  });
});

describe('clients that hang up: one line each', () => {
  test('a plain request whose client hangs up after the store read began: one line (499, ended "client"), never two', async () => {
    const s = await server();
    let open!: () => void;
    gate = new Promise<void>((r) => (open = r));
    const before = reads;
    const id = `hangup-${randomUUID()}`;
    const sent = send(s, '/export', body(), { ...bearer(STAGING), 'x-request-id': id });
    await waitFor('the store read began', () => reads > before);
    sent.req.destroy();
    assert.deepEqual(await lineOf(s, id), {
      requestId: id, subject: 'ci-staging', auth: 'credential', client: '127.0.0.1', commands: commandsOf(), keys: 0, status: 499, ended: 'client',
    });
    const answered = reads;
    open();
    // The handler finishes after the client left: still one line (a later request's line shows the first was written).
    const next = `next-${randomUUID()}`;
    assert.equal((await post(s, '/export', body(), { ...bearer(STAGING), 'x-request-id': next })).status, 200);
    await lineOf(s, next);
    assert.ok(reads > answered);
    assert.equal(s.auditOf(id).length, 1);
  });

  test('a held long poll whose client hangs up: one line (499, ended "client", watch "poll")', async () => {
    const s = await server();
    const first = await post(s, '/export', body(), bearer(OTHER));
    const id = `poll-hangup-${randomUUID()}`;
    const sent = send(s, '/export', body(), { ...bearer(OTHER), 'x-request-id': id, 'if-none-match': String(first.headers.etag), prefer: 'wait=120' });
    await waitFor('the poll is held', () => s.app.cfgu.watch.watchers === 1);
    sent.req.destroy();
    assert.deepEqual(await lineOf(s, id), {
      requestId: id, subject: 'other-team', auth: 'credential', client: '127.0.0.1', commands: commandsOf(), keys: 0, status: 499, watch: 'poll', ended: 'client',
    });
    await waitFor('the watcher is released', () => s.app.cfgu.watch.watchers === 0);
    assert.equal(s.auditOf(id).length, 1);
  });

  test('a JWT request whose client hangs up while the store is read: one line with the token\'s subject', async () => {
    const s = await server();
    const token = await jwt({ sub: 'svc-hangup' });
    let open!: () => void;
    gate = new Promise<void>((r) => (open = r));
    const before = reads;
    const id = `jwt-hangup-${randomUUID()}`;
    const sent = send(s, '/%65xport', body(), { ...bearer(token), 'x-request-id': id });
    await waitFor('the store read began', () => reads > before);
    sent.req.destroy();
    assert.deepEqual(await lineOf(s, id), {
      requestId: id, subject: 'svc-hangup', auth: 'jwt', client: '127.0.0.1', commands: commandsOf(), keys: 0, status: 499, ended: 'client',
    });
    open();
  });
});

describe('a stream or a held long poll obeys its credential for its whole life', () => {
  test('a JWT stream ends at exp (plus the skew) with an end event holding the 401 body; a plain request then gets 401', async () => {
    const s = await server({ watch: { heartbeatMs: 3_600_000 } });
    const token = await jwt({}, 2);
    const exp = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()).exp as number;
    const id = `expiry-${randomUUID()}`;
    const st = await stream(s, body(), { ...bearer(token), 'x-request-id': id });
    await waitFor('the first event', () => answers(st).length === 1);
    await ended(st);
    const endedAt = Date.now();
    assert.ok(endedAt >= exp * 1000, 'never before exp');
    const end = st.events.at(-1)!;
    assert.equal(end.event, 'end');
    assert.deepEqual(JSON.parse(end.data), UNAUTHORIZED);
    assert.deepEqual(isProblem(await post(s, '/export', body(), bearer(token)), 401), UNAUTHORIZED);
    assert.deepEqual(omitMs(await lineOf(s, id)), {
      requestId: id, subject: 'svc-jwt', auth: 'jwt', client: '127.0.0.1', commands: commandsOf(), keys: 1, status: 200, watch: 'stream', events: 1, ended: 'expired',
    });
  });

  test('with a clock skew, the stream lasts until exp + skew, not beyond', async () => {
    const s = await server({ auth: { ...authSettings(), jwt: { ...authSettings().jwt, clockSkewSeconds: 1 } }, watch: { heartbeatMs: 3_600_000 } });
    const token = await jwt({}, 1);
    const exp = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()).exp as number;
    const st = await stream(s, body(), bearer(token));
    await waitFor('the first event', () => answers(st).length === 1);
    await ended(st);
    assert.ok(Date.now() >= (exp + 1) * 1000, 'never before exp + skew');
    assert.equal(st.events.at(-1)!.event, 'end');
  });

  test('a held long poll whose JWT expires is answered 401 with the exact body', async () => {
    const s = await server();
    const token = await jwt({ sub: 'svc-poll' }, 2);
    const first = await post(s, '/export', body(), bearer(token));
    const id = `poll-expiry-${randomUUID()}`;
    const r = await post(s, '/export', body(), { ...bearer(token), 'x-request-id': id, 'if-none-match': String(first.headers.etag), prefer: 'wait=120' });
    assert.deepEqual(isProblem(r, 401), UNAUTHORIZED);
    assert.equal(r.headers['www-authenticate'], 'Bearer realm="cfgu"');
    assert.deepEqual(await lineOf(s, id), { requestId: id, subject: 'svc-poll', auth: 'jwt', client: '127.0.0.1', commands: commandsOf(), keys: 0, status: 401, watch: 'poll', ended: 'expired' });
  });

  test('a credential removed by a reload ends its streams and answers its polls 401; other credentials stay', async () => {
    const s = await server({ watch: { heartbeatMs: 3_600_000 } });
    const id = `revoked-${randomUUID()}`;
    const gone = await stream(s, body(), { ...bearer(OTHER), 'x-request-id': id });
    const kept = await stream(s, body(), bearer(STAGING));
    await waitFor('first events', () => answers(gone).length === 1 && answers(kept).length === 1);
    const held = post(s, '/export', body(), { ...bearer(OTHER), 'if-none-match': String(answers(gone)[0]!.id), prefer: 'wait=120' });
    await waitFor('the poll is held', () => s.app.cfgu.watch.watchers === 3);
    const next = authSettings();
    s.app.cfgu.replaceCredentials({ ...s.app.cfgu.settings.auth, credentials: next.credentials.filter((c) => c.name !== 'other-team') });
    await ended(gone);
    assert.equal(gone.events.at(-1)!.event, 'end');
    assert.deepEqual(JSON.parse(gone.events.at(-1)!.data), UNAUTHORIZED);
    assert.deepEqual(isProblem(await held, 401), UNAUTHORIZED);
    assert.deepEqual(isProblem(await post(s, '/export', body(), bearer(OTHER)), 401), UNAUTHORIZED);
    assert.equal((await lineOf(s, id)).ended, 'revoked');
    // The other credential's stream is still served.
    await mem.set([{ set: 'staging', key: 'HOST', value: 'staging-4.internal' }]);
    await waitFor('the kept stream gets the change', () => answers(kept).length === 2);
    await mem.set([{ set: 'staging', key: 'HOST', value: 'staging.internal' }]);
  });

  test('a scope narrowed by a reload ends the stream with the 403 a plain request now gets', async () => {
    const s = await server({ watch: { heartbeatMs: 3_600_000 } });
    const id = `scope-${randomUUID()}`;
    const st = await stream(s, body(), { ...bearer(STAGING), 'x-request-id': id });
    await waitFor('the first event', () => answers(st).length === 1);
    const first = await post(s, '/export', body(), bearer(STAGING));
    const held = post(s, '/export', body(), { ...bearer(STAGING), 'if-none-match': String(first.headers.etag), prefer: 'wait=120' });
    await waitFor('the poll is held', () => s.app.cfgu.watch.watchers === 2);
    s.app.cfgu.replaceCredentials({ ...s.app.cfgu.settings.auth, credentials: credentials(['prod/**']) });
    await ended(st);
    const plain = isProblem(await post(s, '/export', body(), bearer(STAGING)), 403);
    assert.deepEqual(plain, {
      type: 'urn:cfgu:problem:forbidden',
      title: 'Forbidden',
      status: 403,
      detail: '1 of 1 command is outside the scope of this credential: command 0 (store "mem", set "staging")',
      refused: [{ command: 0, store: 'mem', set: 'staging' }],
    });
    assert.equal(st.events.at(-1)!.event, 'end');
    assert.deepEqual(JSON.parse(st.events.at(-1)!.data), plain);
    assert.deepEqual(isProblem(await held, 403), plain);
    assert.equal((await lineOf(s, id)).ended, 'scope');
  });

  test('a stream re-authenticates at each heartbeat: a reload that leaves the stream alone is caught there', async () => {
    const s = await server({ watch: { heartbeatMs: 20 } });
    const st = await stream(s, body(), bearer(OTHER));
    await waitFor('heartbeats', () => st.comments.filter((c) => c === 'heartbeat').length >= 2);
    // Swap the authenticator without the reload's own re-check (as a reload racing a new stream would).
    const watch = s.app.cfgu.watch;
    const recheck = watch.recheck;
    watch.recheck = () => undefined;
    try {
      s.app.cfgu.replaceCredentials({ ...s.app.cfgu.settings.auth, credentials: credentials().filter((c) => c.name !== 'other-team') });
      await ended(st);
    } finally {
      watch.recheck = recheck;
    }
    assert.equal(st.events.at(-1)!.event, 'end');
    assert.deepEqual(JSON.parse(st.events.at(-1)!.data), UNAUTHORIZED);
  });

  test('a stream re-authenticates before each delivery: a change after the credential went is never delivered', async () => {
    const s = await server({ watch: { heartbeatMs: 3_600_000 } });
    const st = await stream(s, body(), bearer(OTHER));
    await waitFor('the first event', () => answers(st).length === 1);
    const watch = s.app.cfgu.watch;
    const recheck = watch.recheck;
    watch.recheck = () => undefined;
    try {
      s.app.cfgu.replaceCredentials({ ...s.app.cfgu.settings.auth, credentials: credentials().filter((c) => c.name !== 'other-team') });
      await mem.set([{ set: 'staging', key: 'HOST', value: 'after-revocation.internal' }]);
      await ended(st);
    } finally {
      watch.recheck = recheck;
      await mem.set([{ set: 'staging', key: 'HOST', value: 'staging.internal' }]);
    }
    assert.deepEqual(st.events.map((e) => e.event), ['message', 'end']);
    assert.ok(!st.body.includes('after-revocation'));
    assert.deepEqual(JSON.parse(st.events.at(-1)!.data), UNAUTHORIZED);
  });
});

describe('clients apart: nothing computed for one client is handed to another', () => {
  const random = [{ set: 'staging', schema: { keys: { HOST: {}, NONCE: { const: '{{ Math.random() }}' } } } }];
  const clock = [{ set: 'staging', schema: { keys: { HOST: {}, NOW: { const: '{{ Date.now() }}' } } } }];

  test('two anonymous clients streaming the same body get their own evaluations (Math.random)', async () => {
    const s = await server({}, false);
    const a = await stream(s, random, {}, { localAddress: '127.0.0.2' });
    const b = await stream(s, random, {}, { localAddress: '127.0.0.3' });
    await waitFor('first events', () => answers(a).length === 1 && answers(b).length === 1);
    assert.notEqual(JSON.parse(answers(a)[0]!.data).NONCE, JSON.parse(answers(b)[0]!.data).NONCE);
    assert.equal(s.app.cfgu.watch.stats.evaluations, 2);
    // The same client twice shares its own evaluation.
    const a2 = await stream(s, random, {}, { localAddress: '127.0.0.2' });
    await waitFor('first event', () => answers(a2).length === 1);
    assert.equal(answers(a2)[0]!.data, answers(a)[0]!.data);
    assert.equal(s.app.cfgu.watch.stats.evaluations, 2);
  });

  test('a later client never gets the time of an earlier client\'s watch (Date.now)', async () => {
    const s = await server();
    const a = await stream(s, clock, bearer(STAGING));
    await waitFor('first event', () => answers(a).length === 1);
    const nowA = Number(JSON.parse(answers(a)[0]!.data).NOW);
    await waitFor('the clock moved on', () => Date.now() > nowA);
    const asked = Date.now();
    const b = await stream(s, clock, bearer(OTHER));
    await waitFor('first event', () => answers(b).length === 1);
    assert.ok(Number(JSON.parse(answers(b)[0]!.data).NOW) >= asked, 'evaluated for b when b asked');
  });

  test('a long poll with another client\'s tag is not held: that client\'s watch is not observable', async () => {
    const s = await server();
    const a = await stream(s, random, bearer(STAGING));
    await waitFor('first event', () => answers(a).length === 1);
    const r = await post(s, '/export', random, { ...bearer(OTHER), 'if-none-match': String(answers(a)[0]!.id), prefer: 'wait=120' });
    assert.equal(r.status, 200);
    assert.notEqual(r.headers.etag, answers(a)[0]!.id);
    assert.notEqual(r.json().NONCE, JSON.parse(answers(a)[0]!.data).NONCE);
  });
});

describe('fair limits: a per-client watcher cap below the server total', () => {
  const tooMany = (n: number) => ({
    type: 'about:blank',
    title: 'Too Many Requests',
    status: 429,
    detail: `this client already holds its maximum of ${n} watchers (streams and long polls); close one, or retry later`,
  });

  test('beyond its cap a client gets 429 with Retry-After (streams and polls counted together); others are served', async () => {
    const s = await server({ watch: { maxWatchers: 10, maxWatchersPerClient: 2 } }, false);
    const a1 = await stream(s, body(), {}, { localAddress: '127.0.0.2' });
    const first = await post(s, '/export', body(), {}, '127.0.0.2');
    const held = send(s, '/export', body(), { 'if-none-match': String(first.headers.etag), prefer: 'wait=120' }, '127.0.0.2');
    await waitFor('a stream and a poll held', () => s.app.cfgu.watch.watchers === 2 && answers(a1).length === 1);
    const third = await openStream(`${s.base}/export`, body(), {}, { localAddress: '127.0.0.2' });
    await ended(third);
    assert.equal(third.status, 429);
    assert.equal(third.headers['retry-after'], '5');
    assert.equal(third.headers['content-type'], 'application/problem+json; charset=utf-8');
    assert.deepEqual(JSON.parse(third.body), tooMany(2));
    const poll = await post(s, '/export', body(), { 'if-none-match': String(first.headers.etag), prefer: 'wait=60' }, '127.0.0.2');
    assert.deepEqual(isProblem(poll, 429), tooMany(2));
    assert.equal(poll.headers['retry-after'], '5');
    // Plain requests are not watchers.
    assert.equal((await post(s, '/export', body(), {}, '127.0.0.2')).status, 200);
    // Another client is served.
    const b = await stream(s, body(), {}, { localAddress: '127.0.0.3' });
    await waitFor('b first event', () => answers(b).length === 1);
    assert.equal(b.status, 200);
    // A freed slot is the client's again.
    a1.close();
    await waitFor('a1 released', () => s.app.cfgu.watch.watchers === 2);
    const again = await stream(s, body(), {}, { localAddress: '127.0.0.2' });
    await waitFor('again first event', () => answers(again).length === 1);
    held.req.destroy();
  });

  test('one credential is one client, whatever its connections; another credential has its own share', async () => {
    const s = await server({ watch: { maxWatchers: 10, maxWatchersPerClient: 1 } });
    const a = await stream(s, body(), bearer(STAGING), { localAddress: '127.0.0.2' });
    await waitFor('first event', () => answers(a).length === 1);
    const again = await openStream(`${s.base}/export`, body(), bearer(STAGING), { localAddress: '127.0.0.3' });
    await ended(again);
    assert.equal(again.status, 429);
    assert.deepEqual(JSON.parse(again.body), tooMany(1));
    const other = await stream(s, body(), bearer(OTHER), { localAddress: '127.0.0.2' });
    await waitFor('other first event', () => answers(other).length === 1);
  });

  test('the server total still applies (503) when the clients together reach it', async () => {
    const s = await server({ watch: { maxWatchers: 2, maxWatchersPerClient: 2 } }, false);
    const a = await stream(s, body(), {}, { localAddress: '127.0.0.2' });
    const b = await stream(s, body(), {}, { localAddress: '127.0.0.3' });
    await waitFor('first events', () => answers(a).length === 1 && answers(b).length === 1);
    const c = await openStream(`${s.base}/export`, body(), {}, { localAddress: '127.0.0.4' });
    await ended(c);
    assert.equal(c.status, 503);
    assert.deepEqual(JSON.parse(c.body), {
      type: 'about:blank',
      title: 'Service Unavailable',
      status: 503,
      detail: 'this server already serves its maximum of 2 watchers; retry later or elsewhere',
    });
  });
});

describe('the audit promise as a property: one line per request routed to /export, none for the others', () => {
  /** The project's seeded generator (test/fuzz/prng.mjs), so a failure can be replayed with its seed. */
  const rng = mulberry32;

  const SEED = Number(process.env.CFGU_AUDIT_SEED ?? 20261130);
  test(`a random mix of 60 requests (seed ${SEED})`, async () => {
    const s = await server({ watch: { heartbeatMs: 3_600_000 } });
    const next = rng(SEED);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(next() * xs.length)]!;
    const token = await jwt({ sub: 'svc-prop' });
    const who = [
      { headers: bearer(PRESHARED), subject: 'preshared:1', auth: 'preshared', sync: true },
      { headers: bearer(STAGING), subject: 'ci-staging', auth: 'credential', sync: true },
      { headers: bearer(token), subject: 'svc-prop', auth: 'jwt', sync: false },
      { headers: {}, subject: null, auth: null, sync: true },
      { headers: bearer('not-a-key'), subject: null, auth: null, sync: true },
    ];
    const paths = [
      { path: '/export', routed: true },
      { path: '/%65xport', routed: true },
      { path: '/export#frag', routed: true },
      { path: '/export?a=b', routed: true },
      { path: '//export', routed: false },
      { path: '/EXPORT', routed: false },
    ];
    const kinds = ['plain', 'plain', 'refused', 'invalid', 'hangup', 'stream', 'poll'] as const;
    const expected = new Map<string, { subject: string | null; auth: string | null }>();
    const unrouted: string[] = [];
    // The JWT's first verification is asynchronous; verified once here, it is remembered (no race in a hang-up).
    assert.equal((await post(s, '/export', body(), { ...bearer(token), 'x-request-id': 'warm-up' })).status, 200);
    expected.set('warm-up', { subject: 'svc-prop', auth: 'jwt' });
    for (let i = 0; i < 60; i++) {
      const id = `prop-${SEED}-${i}`;
      const w = pick(who);
      const p = pick(paths);
      const kind = pick(kinds);
      const headers = { ...w.headers, 'x-request-id': id };
      if (p.routed) expected.set(id, { subject: w.subject, auth: w.auth });
      else unrouted.push(id);
      const payload = kind === 'refused' ? body('prod') : kind === 'invalid' ? '{"not": "a pipeline"' : body();
      if (kind === 'stream' && p.routed && w.subject !== null) {
        const st = await stream(s, payload, headers, { path: p.path });
        assert.equal(st.status, 200);
        await waitFor('the first event', () => answers(st).length === 1);
        st.close();
      } else if (kind === 'stream') {
        const st = await openStream(`${s.base}/export`, payload, headers, { path: p.path });
        await ended(st);
        assert.equal(st.status, w.subject === null ? 401 : 404);
      } else if (kind === 'poll') {
        const r = await post(s, p.path, payload, { ...headers, 'if-none-match': '"stale"', prefer: 'wait=5' });
        assert.equal(r.status, w.subject === null ? 401 : !p.routed ? 404 : 200);
      } else if (kind === 'hangup') {
        const received = s.received();
        const sent = send(s, p.path, payload, headers);
        await waitFor('the request arrived', () => s.received() > received);
        sent.req.destroy();
        if (p.routed) await waitFor(`the line of ${id}`, () => s.auditOf(id).length > 0);
        await waitFor('the request ended', () => s.app.cfgu.lifecycle.inflight === 0);
      } else {
        const r = await post(s, p.path, payload, headers);
        // Authentication comes before routing: a request without a valid key is 401 on any path.
        // (An unrouted body is parsed too: malformed JSON is 400 there, still without a line.)
        const status = w.subject === null ? 401 : kind === 'invalid' ? 400 : !p.routed ? 404 : kind === 'refused' && w.auth !== 'preshared' ? 403 : 200;
        assert.equal(r.status, status, `${id} ${kind} ${p.path}: ${r.body}`);
      }
    }
    await waitFor('every routed request has its line', () => [...expected.keys()].every((id) => s.auditOf(id).length > 0));
    await waitFor('no watcher left', () => s.app.cfgu.watch.watchers === 0 && s.app.cfgu.lifecycle.inflight === 0);
    const lines = s.audit();
    for (const [id, who] of expected) {
      const mine = lines.filter((l) => l.requestId === id);
      assert.equal(mine.length, 1, `${id}: ${JSON.stringify(mine)}`);
      assert.equal(mine[0]!.subject, who.subject, id);
      assert.equal(mine[0]!.auth, who.auth, id);
    }
    for (const id of unrouted) assert.equal(lines.filter((l) => l.requestId === id).length, 0, id);
    assert.equal(lines.length, expected.size);
  });
});
