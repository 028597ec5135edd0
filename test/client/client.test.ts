/**
 * cfgu/client (src/client, docs/clients.md) against a real `cfgu serve` started here, over a json-file store written
 * by renaming a new file over it (as an editor saves): get() and its 304 revalidation, the typed errors of refused
 * requests (401, 403, 422, with the problem bodies a plain request gets), subscribe() delivering each change once and
 * losing nothing across server restarts, the last good answer file when the server is down at start, and token
 * refresh after a JWT expires (plain requests and streams).
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SignJWT, exportJWK, generateKeyPair, type CryptoKey } from 'jose';
import { createClient, CfguClientError, CLIENT_PROBLEMS, type Answer, type ClientOptions } from '../../src/client/index.js';
import { freePort, killChildren, postJson, removeTempDirs, spawnCfgu, tempDir, waitForStatus, writeJson, type Spawned } from '../server/helpers.js';
import { waitFor } from '../helpers/wait.js';

const sha256 = (t: string) => createHash('sha256').update(t, 'utf8').digest('hex');
const APP = `cfgu_app-${randomUUID()}`;
const NARROW = `cfgu_narrow-${randomUUID()}`;
const HIDDEN = `hidden-${randomUUID()}`;
const ISSUER = 'https://idp.client.test';
const AUDIENCE = 'cfgu-proxy';

let dir: string;
let port: number;
let base: string;
let server: Spawned | undefined;
let privateKey: CryptoKey;

/** Replace the store's file (a rename, as an editor saves), with HOST of production set to `host`. */
function writeStore(host: string, staging = 'staging.example'): void {
  const entries = [
    { set: 'production', key: 'HOST', value: host },
    { set: 'production', key: 'SECRET', value: HIDDEN },
    { set: 'staging', key: 'HOST', value: staging },
  ];
  writeFileSync(join(dir, 'config.json.new'), JSON.stringify(entries));
  renameSync(join(dir, 'config.json.new'), join(dir, 'config.json'));
}

async function startServer(): Promise<void> {
  server = spawnCfgu(['serve', '--config', join(dir, '.configu'), '--port', String(port), '--host', '127.0.0.1', '--workers', '1']);
  await waitForStatus(`${base}/ready`, 200);
}
async function stopServer(): Promise<void> {
  const s = server!;
  server = undefined;
  s.child.kill('SIGTERM');
  await s.exited;
}

before(async () => {
  dir = tempDir('cfgu-client-');
  writeStore('prod-1.example');
  const pair = await generateKeyPair('RS256', { extractable: true });
  privateKey = pair.privateKey;
  writeJson(join(dir, 'jwks.json'), { keys: [{ ...(await exportJWK(pair.publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' }] });
  writeJson(join(dir, '.configu'), {
    stores: { main: { type: 'json-file', configuration: { path: 'config.json' } } },
    interface: {
      proxy: {
        auth: {
          enabled: true,
          credentials: [
            { name: 'app', sha256: sha256(APP), stores: ['main'], sets: ['', '**'] },
            { name: 'narrow', sha256: sha256(NARROW), stores: ['main'], sets: ['staging/**'] },
          ],
          jwt: { jwksFile: 'jwks.json', issuer: ISSUER, audience: AUDIENCE, clockSkewSeconds: 0, grants: [{ claim: 'scope', value: 'cfgu:read', stores: ['main'], sets: ['', '**'] }] },
        },
      },
    },
  });
  port = await freePort();
  base = `http://127.0.0.1:${port}`;
  await startServer();
});
after(async () => {
  await killChildren();
  removeTempDirs();
});

const pipeline = [{ store: 'main', set: 'production', schema: { keys: { HOST: {}, SECRET: { hidden: true } } } }];
type Values = { HOST: string };
const validate = (v: unknown): Values => {
  if (typeof v !== 'object' || v === null || typeof (v as Values).HOST !== 'string') throw new TypeError('HOST is not a string');
  return v as Values;
};

/** A fetch that records, per request, the status and the number of body bytes the client read. */
function countingFetch(): { fetch: typeof fetch; calls: Array<{ status: number; bytes: number; accept: string; lastEventId: string | undefined }> } {
  const calls: Array<{ status: number; bytes: number; accept: string; lastEventId: string | undefined }> = [];
  const counted: typeof fetch = async (input, init) => {
    const res = await fetch(input, init);
    const headers = new Headers(init?.headers);
    const call = { status: res.status, bytes: 0, accept: headers.get('accept') ?? '', lastEventId: headers.get('last-event-id') ?? undefined };
    calls.push(call);
    if (!res.body) return res;
    const body = res.body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, controller) {
          call.bytes += chunk.byteLength;
          controller.enqueue(chunk);
        },
      }),
    );
    return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
  return { fetch: counted, calls };
}

const client = (options: Partial<ClientOptions<Values>> = {}) =>
  createClient<Values>({ url: base, token: APP, pipeline, validate, reconnect: { initialDelayMs: 50, maxDelayMs: 500 }, onWarning: (m) => assert.fail(m), ...options });

describe('get()', () => {
  test('200 with its tag, then 304 without a body; the file holds the answer (mode 0600) and no hidden value', async () => {
    writeStore('prod-1.example');
    const cacheFile = join(dir, 'get.json');
    const counting = countingFetch();
    const c = client({ cacheFile, fetch: counting.fetch });
    const first = await c.get();
    assert.deepEqual(first.values, { HOST: 'prod-1.example' });
    assert.equal(first.stale, false);
    assert.match(first.etag, /^"[A-Za-z0-9_-]{43}"$/);
    const again = await c.get();
    assert.deepEqual(again, first);
    assert.deepEqual(
      counting.calls.map((x) => [x.status, x.bytes]),
      [
        [200, Buffer.byteLength('{"HOST":"prod-1.example"}')],
        [304, 0],
      ],
    );
    assert.equal(statSync(cacheFile).mode & 0o777, 0o600);
    const text = readFileSync(cacheFile, 'utf8');
    assert.ok(!text.includes(HIDDEN), 'the hidden value never reaches the file');
    assert.equal(JSON.parse(text).answer, '{"HOST":"prod-1.example"}');
    assert.equal(JSON.parse(text).etag, first.etag);

    writeStore('prod-2.example');
    const changed = await waitFor('the new answer', async () => {
      const a = await c.get();
      return a.values.HOST === 'prod-2.example' ? a : undefined;
    });
    assert.notEqual(changed.etag, first.etag);
    assert.equal(JSON.parse(readFileSync(cacheFile, 'utf8')).answer, '{"HOST":"prod-2.example"}');
  });

  test('401, 403 and 422 are CfguClientErrors carrying the problem body a plain request gets', async () => {
    const cases: Array<{ token: string; body: unknown; status: number; type: string }> = [
      { token: 'cfgu_wrong', body: pipeline, status: 401, type: 'urn:cfgu:problem:unauthorized' },
      { token: NARROW, body: pipeline, status: 403, type: 'urn:cfgu:problem:forbidden' },
      { token: APP, body: [{ store: 'main', set: 'production', schema: { keys: { MISSING: { required: true } } } }], status: 422, type: '' },
    ];
    for (const c of cases) {
      const plain = await postJson(`${base}/export`, c.body, { authorization: `Bearer ${c.token}` });
      assert.equal(plain.status, c.status, plain.body);
      const error = await createClient({ url: base, token: c.token, pipeline: c.body })
        .get()
        .then(() => assert.fail('no error'), (e: unknown) => e);
      assert.ok(error instanceof CfguClientError, String(error));
      assert.deepEqual(error.problem, plain.json());
      assert.equal(error.status, c.status);
      if (c.type) assert.equal(error.type, c.type);
      assert.equal(error.type, plain.json().type);
      assert.equal(error.detail, plain.json().detail);
      assert.ok(!error.message.includes(c.token), 'the token is not in the message');
    }
  });

  test('an answer the validator refuses is an error, and not held', async () => {
    const c = createClient({ url: base, token: APP, pipeline, validate: () => { throw new TypeError('not what this application expects'); } });
    const error = await c.get().then(() => assert.fail('no error'), (e: unknown) => e);
    assert.ok(error instanceof CfguClientError);
    assert.deepEqual(
      { type: error.type, status: error.status, detail: error.detail },
      { type: CLIENT_PROBLEMS.validation, status: 200, detail: 'the validator refused the answer: not what this application expects' },
    );
    assert.equal(c.last, undefined);
  });
});

describe('subscribe()', () => {
  test('each change is delivered once; a write that leaves the answer as it was delivers nothing', async () => {
    writeStore('stream-1.example');
    const c = client();
    const seen: Array<Answer<Values>> = [];
    const errors: CfguClientError[] = [];
    const sub = c.subscribe((a) => seen.push(a), (e) => errors.push(e));
    try {
      await waitFor('the current answer', () => seen.length === 1);
      writeStore('stream-2.example');
      await waitFor('the change', () => seen.length === 2);
      writeStore('stream-2.example', 'staging-2.example'); // another set: the answer stays as it was
      writeStore('stream-3.example', 'staging-2.example');
      await waitFor('the next change', () => seen.length === 3);
      assert.deepEqual(seen.map((a) => [a.values.HOST, a.stale]), [['stream-1.example', false], ['stream-2.example', false], ['stream-3.example', false]]);
      assert.equal(new Set(seen.map((a) => a.etag)).size, 3);
      assert.deepEqual(errors, []);
    } finally {
      sub.close();
    }
    assert.equal(await sub.closed, undefined);
  });

  test('server restarts mid-stream lose nothing and repeat nothing', async () => {
    writeStore('restart-1.example');
    const counting = countingFetch();
    const c = client({ fetch: counting.fetch });
    const seen: string[] = [];
    const sub = c.subscribe((a) => seen.push(a.values.HOST));
    const streamsOpened = () => counting.calls.filter((x) => x.accept === 'text/event-stream' && x.status === 200).length;
    try {
      await waitFor('the current answer', () => seen.length === 1);
      // Down, a change while it is down, up again: the client delivers the change once it is back.
      await stopServer();
      writeStore('restart-2.example');
      await startServer();
      await waitFor('the change made while the server was down', () => seen.length === 2);
      // Down and up without a change: the client resumes (Last-Event-ID) and delivers nothing.
      const before = streamsOpened();
      await stopServer();
      await startServer();
      await waitFor('the client back on the restarted server', () => streamsOpened() > before);
      assert.equal(counting.calls.at(-1)!.lastEventId, c.last!.etag);
      writeStore('restart-3.example');
      await waitFor('the change after the restart', () => seen.length === 3);
      assert.deepEqual(seen, ['restart-1.example', 'restart-2.example', 'restart-3.example']);
    } finally {
      sub.close();
    }
  });

  test('a refused stream (403) ends the subscription with the problem', async () => {
    const errors: CfguClientError[] = [];
    const sub = createClient({ url: base, token: NARROW, pipeline }).subscribe(() => assert.fail('no answer'), (e) => errors.push(e));
    const ended = await sub.closed;
    const plain = await postJson(`${base}/export`, pipeline, { authorization: `Bearer ${NARROW}` });
    assert.ok(ended instanceof CfguClientError);
    assert.deepEqual(ended.problem, plain.json());
    assert.deepEqual(errors, [ended]);
  });
});

describe('the last good answer file', () => {
  test('the server down at start: the file answers, stale; another pipeline or no file: the typed unreachable error', async () => {
    writeStore('file-1.example');
    const cacheFile = join(dir, 'offline.json');
    const fresh = await client({ cacheFile }).get();
    await stopServer();
    try {
      const counting = countingFetch();
      const c = client({ cacheFile, fetch: counting.fetch });
      const offline = await c.get();
      assert.deepEqual(offline, { values: { HOST: 'file-1.example' }, etag: fresh.etag, stale: true });
      for (const other of [client({ cacheFile, pipeline: [{ ...pipeline[0], set: 'staging' }] }), client()]) {
        const error = await other.get().then(() => assert.fail('no error'), (e: unknown) => e);
        assert.ok(error instanceof CfguClientError);
        assert.deepEqual({ type: error.type, status: error.status, title: error.title }, { type: CLIENT_PROBLEMS.unreachable, status: 0, title: 'Server Unreachable' });
        assert.equal(error.detail, `no answer from ${base}/export (ECONNREFUSED)`);
      }
      // Back: the kept answer is confirmed by a 304, without a body, and is no longer stale.
      await startServer();
      const confirmed = await c.get();
      assert.deepEqual(confirmed, { values: { HOST: 'file-1.example' }, etag: fresh.etag, stale: false });
      assert.deepEqual([counting.calls.at(-1)!.status, counting.calls.at(-1)!.bytes], [304, 0]);
    } finally {
      if (!server) await startServer();
    }
  });
});

describe('token refresh', () => {
  /** A JWT of the read grant, valid for `seconds`. */
  const jwt = (seconds: number) =>
    new SignJWT({ sub: 'svc-app', scope: 'cfgu:read' })
      .setProtectedHeader({ alg: 'RS256', kid: 'k1' })
      .setIssuer(ISSUER)
      .setAudience(AUDIENCE)
      .setIssuedAt()
      .setExpirationTime(Math.floor(Date.now() / 1000) + seconds)
      .sign(privateKey);

  test('an expired token is refreshed once by get(); a refreshed token refused again is the 401', async () => {
    writeStore('token-1.example');
    const asked: boolean[] = [];
    let expiresAt = 0;
    const c = client({
      token: undefined,
      getToken: async ({ refresh }) => {
        asked.push(refresh);
        expiresAt = Date.now() + 2000;
        return jwt(asked.length === 1 ? 2 : 600);
      },
    });
    assert.deepEqual((await c.get()).values, { HOST: 'token-1.example' });
    await waitFor('the first token expired', () => Date.now() > expiresAt + 1000);
    assert.deepEqual((await c.get()).values, { HOST: 'token-1.example' });
    assert.deepEqual(asked, [false, true]);

    const refused: boolean[] = [];
    const bad = client({ token: undefined, getToken: ({ refresh }) => (refused.push(refresh), 'cfgu_not-a-token') });
    const error = await bad.get().then(() => assert.fail('no error'), (e: unknown) => e);
    assert.ok(error instanceof CfguClientError);
    assert.equal(error.status, 401);
    assert.deepEqual(refused, [false, true]);
  });

  test('a stream ended by its token expiry goes on with a refreshed token', async () => {
    writeStore('token-stream-1.example');
    const asked: boolean[] = [];
    const c = client({ token: undefined, getToken: ({ refresh }) => (asked.push(refresh), jwt(asked.length === 1 ? 2 : 600)) });
    const seen: string[] = [];
    const errors: CfguClientError[] = [];
    const sub = c.subscribe((a) => seen.push(a.values.HOST), (e) => errors.push(e));
    try {
      await waitFor('the current answer', () => seen.length === 1);
      await waitFor('the refresh after the stream ended at the expiry', () => asked.length === 2);
      writeStore('token-stream-2.example');
      await waitFor('the change on the new stream', () => seen.length === 2);
      assert.deepEqual(seen, ['token-stream-1.example', 'token-stream-2.example']);
      assert.deepEqual(asked, [false, true]);
      assert.deepEqual(errors, []);
    } finally {
      sub.close();
    }
  });
});
