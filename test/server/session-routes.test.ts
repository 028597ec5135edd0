/**
 * GET /session, GET /stores and GET /sets (src/server/http/routes/session.ts; docs/server.md, "Routes"): exact answers
 * for every kind of caller (preshared key, scoped tokens, JWTs with and without a matching grant, no authentication),
 * what a scope shows (its stores only; of a store, the sets a grant covers, the rest counted in `withheld`), listings
 * of a json-file and a sqlite store, the listing bound (`truncated`), and every refusal with its problem body: 401
 * without a credential, 400 unknown store or bad query, 403 store outside the scope, 503 store down, 405, 429 with a
 * budget per route; the audit line of each request (names and counts only).
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pino, type Logger } from 'pino';
import { SignJWT, exportJWK, generateKeyPair, type CryptoKey } from 'jose';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { buildServer } from '../../src/server/index.js';
import { resolveSettings } from '../../src/server/process/resolve-settings.js';
import { loadConfiguration } from '../../src/config/index.js';
import { createStoreRegistry, type StoreRegistry } from '../../src/stores/index.js';
import { removeTempDirs, tempDir, writeJson } from './helpers.js';

const sha256 = (t: string) => createHash('sha256').update(t, 'utf8').digest('hex');
const PRESHARED = 'preshared-session-key-0123456789';
const PROD_READER = 'cfgu_prod-reader-0123456789';
const ROOT_READER = 'cfgu_root-reader-0123456789';
const WRITER = 'cfgu_writer-0123456789';
const SQL_EU = 'cfgu_sql-eu-0123456789';
const ISSUER = 'https://idp.session.example';

const MAIN_SETS = ['', 'dev', 'prod', 'prod/eu', 'prod/us', 'staging', 'staging/eu'];
const SQL_SETS = ['', 'a/eu', 'b', 'b/eu', 'c/us'];

let dir: string;
let file: string;
let registry: StoreRegistry;
let jwtKey: CryptoKey;
const apps: FastifyInstance[] = [];
const audit: Array<Record<string, any>> = [];

const PROXY = {
  auth: {
    enabled: true,
    presharedKeys: [PRESHARED],
    credentials: [
      { name: 'prod-reader', sha256: sha256(PROD_READER), stores: ['main'], sets: ['prod/**'] },
      { name: 'root-reader', sha256: sha256(ROOT_READER), stores: ['main'], sets: [''] },
      { name: 'writer', sha256: sha256(WRITER), stores: ['*'], sets: ['**'], keys: ['LOG_*'], write: true, breaking: true, metrics: true },
      { name: 'sql-eu', sha256: sha256(SQL_EU), stores: ['sql'], sets: ['*/eu'], labels: ['public'] },
    ],
    jwt: {
      jwksFile: 'jwks.json',
      issuer: ISSUER,
      audience: 'cfgu',
      grants: [
        { claim: 'scope', value: 'cfgu:prod', stores: ['main'], sets: ['prod/**'] },
        { claim: 'scope', value: 'cfgu:sql', stores: ['sql', 'ro'], sets: ['**'], write: true },
      ],
    },
  },
};

async function app(proxy: Record<string, unknown> = PROXY, reg: StoreRegistry = registry): Promise<FastifyInstance> {
  const settings = resolveSettings({ fileSettings: proxy, file, env: {} });
  const auditLogger = pino({ level: 'info' }, { write: (line: string) => void audit.push(JSON.parse(line)) }) as unknown as Logger;
  const a = await buildServer({ registry: reg, settings: { ...settings, workers: 1 }, logger: false, auditLogger, ready: true });
  apps.push(a);
  return a;
}

const get = (a: FastifyInstance, url: string, bearer?: string, requestId?: string) =>
  a.inject({ url, headers: { ...(bearer ? { authorization: `Bearer ${bearer}` } : {}), ...(requestId ? { 'x-request-id': requestId } : {}) } });

function answer(r: LightMyRequestResponse, body: unknown): void {
  assert.equal(r.statusCode, 200, r.body);
  assert.equal(r.headers['content-type'], 'application/json; charset=utf-8');
  assert.equal(r.headers['cache-control'], 'no-store');
  assert.deepEqual(r.json(), body);
}

function problem(r: LightMyRequestResponse, status: number, body: unknown): void {
  assert.equal(r.statusCode, status, r.body);
  assert.equal(r.headers['content-type'], 'application/problem+json; charset=utf-8');
  assert.deepEqual(r.json(), body);
}

const UNAUTHORIZED = { type: 'urn:cfgu:problem:unauthorized', title: 'Unauthorized', status: 401, detail: 'a valid bearer key is required (Authorization: Bearer <key>)' };
const outOfScope = (store: string) => ({
  type: 'urn:cfgu:problem:forbidden',
  title: 'Forbidden',
  status: 403,
  detail: `store "${store}" is outside the scope of this credential`,
  refused: [{ command: 0, store, set: '' }],
});

async function jwt(scope: string, sub = 'svc-console', exp = Math.floor(Date.now() / 1000) + 600): Promise<{ token: string; exp: number }> {
  const token = await new SignJWT({ sub, scope }).setProtectedHeader({ alg: 'ES256', kid: 'k1' }).setIssuer(ISSUER).setAudience('cfgu').setIssuedAt().setExpirationTime(exp).sign(jwtKey);
  return { token, exp };
}

before(async () => {
  dir = tempDir('cfgu-session-');
  writeJson(join(dir, 'main.json'), MAIN_SETS.map((set) => ({ set, key: 'LOG_LEVEL', value: `level-of-${set || 'root'}` })));
  writeJson(join(dir, 'ro.json'), [{ set: 'x', key: 'A', value: '1' }]);
  writeFileSync(join(dir, 'broken.json'), '{ not json');
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
  jwtKey = privateKey;
  writeJson(join(dir, 'jwks.json'), { keys: [{ ...(await exportJWK(publicKey)), kid: 'k1', alg: 'ES256', use: 'sig' }] });
  file = writeJson(join(dir, '.configu'), {
    stores: {
      main: { type: 'json-file', configuration: { path: 'main.json' }, default: true },
      ro: { type: 'json-file', configuration: { path: 'ro.json' }, readOnly: true },
      sql: { type: 'sqlite', configuration: { database: 'sql.db', tableName: 'config' } },
      broken: { type: 'json-file', configuration: { path: 'broken.json' } },
    },
  });
  registry = createStoreRegistry(await loadConfiguration({ file }), { logger: { warn: () => undefined } });
  await registry.init();
  await registry.resolve('sql').write(SQL_SETS.map((set) => ({ set, key: 'K', value: `v-${set || 'root'}` })));
});

after(async () => {
  for (const a of apps) await a.close();
  await registry?.close();
  removeTempDirs();
});

describe('authentication on', () => {
  let a: FastifyInstance;
  before(async () => {
    a = await app();
  });

  test('without a credential: 401 on each route', async () => {
    for (const url of ['/session', '/stores', '/sets', '/sets?store=main']) {
      const r = await get(a, url);
      problem(r, 401, UNAUTHORIZED);
      assert.equal(r.headers['www-authenticate'], 'Bearer realm="cfgu"');
    }
  });

  test('GET /session: a preshared key has full access and no grants', async () => {
    answer(await get(a, '/session', PRESHARED), { authentication: true, kind: 'preshared', subject: 'preshared:1', access: 'full' });
  });

  test('GET /session: a scoped token shows its grant as written, never its hash', async () => {
    const writer = await get(a, '/session', WRITER);
    answer(writer, {
      authentication: true,
      kind: 'credential',
      subject: 'writer',
      access: 'scoped',
      grants: [{ stores: ['*'], sets: ['**'], keys: ['LOG_*'], write: true, breaking: true, metrics: true }],
    });
    assert.doesNotMatch(writer.body, new RegExp(sha256(WRITER)));
    assert.doesNotMatch(writer.body, /cfgu_writer/);
    answer(await get(a, '/session', SQL_EU), {
      authentication: true,
      kind: 'credential',
      subject: 'sql-eu',
      access: 'scoped',
      grants: [{ stores: ['sql'], sets: ['*/eu'], labels: ['public'], write: false, breaking: false, metrics: false }],
    });
  });

  test('GET /session: a JWT shows the grants its claims match and when it expires', async () => {
    const { token, exp } = await jwt('openid cfgu:prod cfgu:sql');
    const r = await get(a, '/session', token);
    answer(r, {
      authentication: true,
      kind: 'jwt',
      subject: 'svc-console',
      access: 'scoped',
      grants: [
        { stores: ['main'], sets: ['prod/**'], write: false, breaking: false, metrics: false },
        { stores: ['sql', 'ro'], sets: ['**'], write: true, breaking: false, metrics: false },
      ],
      expiresAt: new Date(exp * 1000).toISOString(),
    });
    assert.doesNotMatch(r.body, /claim|cfgu:prod/);
    // The same token again (answered from the verified-token cache): the same expiry.
    assert.equal((await get(a, '/session', token)).json().expiresAt, new Date(exp * 1000).toISOString());
    const none = await jwt('openid', 'svc-nothing');
    answer(await get(a, '/session', none.token), {
      authentication: true,
      kind: 'jwt',
      subject: 'svc-nothing',
      access: 'scoped',
      grants: [],
      expiresAt: new Date(none.exp * 1000).toISOString(),
    });
  });

  test('GET /stores: every store in .configu order for full access; a scope sees the stores its grants name', async () => {
    const all = [
      { name: 'main', kind: 'json-file', default: true, readOnly: false, history: true, write: true },
      { name: 'ro', kind: 'json-file', default: false, readOnly: true, history: true, write: false },
      { name: 'sql', kind: 'sqlite', default: false, readOnly: false, history: true, write: true },
      { name: 'broken', kind: 'json-file', default: false, readOnly: false, history: true, write: true },
    ];
    answer(await get(a, '/stores', PRESHARED), { stores: all });
    // `*` and write: every store, writable but the read-only one.
    answer(await get(a, '/stores', WRITER), { stores: all });
    answer(await get(a, '/stores', PROD_READER), { stores: [{ ...all[0], write: false }] });
    answer(await get(a, '/stores', SQL_EU), { stores: [{ ...all[2], write: false }] });
    const { token } = await jwt('cfgu:prod cfgu:sql');
    answer(await get(a, '/stores', token), { stores: [{ ...all[0], write: false }, all[1], all[2]] });
    answer(await get(a, '/stores', (await jwt('openid')).token), { stores: [] });
  });

  test('GET /sets: every set of the default store (json-file) for full access, in path order', async () => {
    answer(await get(a, '/sets', PRESHARED), { store: 'main', sets: MAIN_SETS, withheld: 0, truncated: false });
    answer(await get(a, '/sets?store=main', PRESHARED), { store: 'main', sets: MAIN_SETS, withheld: 0, truncated: false });
  });

  test('GET /sets: a sqlite store', async () => {
    answer(await get(a, '/sets?store=sql', PRESHARED), { store: 'sql', sets: SQL_SETS, withheld: 0, truncated: false });
  });

  test('GET /sets: a scope sees the sets one of its grants covers (whatever its keys); the others are counted', async () => {
    answer(await get(a, '/sets', PROD_READER), { store: 'main', sets: ['prod', 'prod/eu', 'prod/us'], withheld: 4, truncated: false });
    answer(await get(a, '/sets', ROOT_READER), { store: 'main', sets: [''], withheld: 6, truncated: false });
    // Its `labels` allow no key here (the server holds no schema), yet the sets it covers are listed.
    answer(await get(a, '/sets?store=sql', SQL_EU), { store: 'sql', sets: ['a/eu', 'b/eu'], withheld: 3, truncated: false });
    const { token } = await jwt('cfgu:prod');
    answer(await get(a, '/sets?store=main', token), { store: 'main', sets: ['prod', 'prod/eu', 'prod/us'], withheld: 4, truncated: false });
  });

  test('GET /sets: a store outside the scope is 403 whether it exists or not; an unknown one in scope is 400', async () => {
    problem(await get(a, '/sets?store=sql', PROD_READER), 403, outOfScope('sql'));
    problem(await get(a, '/sets?store=nope', PROD_READER), 403, outOfScope('nope'));
    problem(await get(a, '/sets', SQL_EU), 403, outOfScope('main'));
    problem(await get(a, '/sets', (await jwt('openid')).token), 403, outOfScope('main'));
    const unknown = (known: string[]) => ({
      type: 'urn:cfgu:problem:unknown-store',
      title: 'Unknown Store',
      status: 400,
      detail: `unknown store "nope"; known stores: ${known.map((k) => `"${k}"`).join(', ')}`,
      knownStores: known,
      store: 'nope',
    });
    problem(await get(a, '/sets?store=nope', WRITER), 400, unknown(['main', 'ro', 'sql', 'broken']));
    problem(await get(a, '/sets?store=nope', PRESHARED), 400, unknown(['main', 'ro', 'sql', 'broken']));
  });

  test('GET /sets: a bad query string is 400', async () => {
    problem(await get(a, '/sets?colour=blue', PRESHARED), 400, {
      type: 'urn:cfgu:problem:invalid-request',
      title: 'Invalid Request',
      status: 400,
      detail: 'the query string is not valid: /colour is not an allowed property',
      issues: [{ path: '/colour', message: 'is not an allowed property' }],
    });
    problem(await get(a, '/sets?store=', PRESHARED), 400, {
      type: 'urn:cfgu:problem:invalid-request',
      title: 'Invalid Request',
      status: 400,
      detail: 'the query string is not valid: /store must NOT have fewer than 1 characters',
      issues: [{ path: '/store', message: 'must NOT have fewer than 1 characters' }],
    });
  });

  test('GET /sets: a store that cannot be read is 503', async () => {
    const r = await get(a, '/sets?store=broken', PRESHARED);
    problem(r, 503, { type: 'urn:cfgu:problem:store-unavailable', title: 'Store Unavailable', status: 503, detail: 'store "broken" cannot be reached or read; retry later' });
    assert.match(String(r.headers['retry-after']), /^[1-9]\d*$/);
  });

  test('HEAD answers the headers; another method is 405 with Allow', async () => {
    for (const url of ['/session', '/stores', '/sets']) {
      const r = await a.inject({ method: 'HEAD', url, headers: { authorization: `Bearer ${PRESHARED}` } });
      assert.equal(r.statusCode, 200, url);
      assert.equal(r.body, '');
      assert.equal(r.headers['cache-control'], 'no-store');
      const post = await a.inject({ method: 'POST', url, headers: { authorization: `Bearer ${PRESHARED}`, 'content-type': 'application/json' }, payload: '{}' });
      problem(post, 405, { type: 'about:blank', title: 'Method Not Allowed', status: 405, detail: `POST is not allowed on ${url}; allowed: GET, HEAD` });
      assert.equal(post.headers.allow, 'GET, HEAD');
    }
  });

  test('one audit line per request: the route, the store and counts, never a token or a set name', async () => {
    const ids = { session: 'audit-session-1', stores: 'audit-stores-1', sets: 'audit-sets-1', refused: 'audit-sets-2', anonymous: 'audit-sets-3' };
    await get(a, '/session', WRITER, ids.session);
    await get(a, '/stores', PROD_READER, ids.stores);
    await get(a, '/sets', PROD_READER, ids.sets);
    await get(a, '/sets?store=sql', PROD_READER, ids.refused);
    await get(a, '/sets', undefined, ids.anonymous);
    const line = (id: string) => {
      const found = audit.filter((l) => l.requestId === id);
      assert.equal(found.length, 1, id);
      const { time, pid, hostname, level, msg, client, ...rest } = found[0]!;
      assert.equal(msg, 'audit');
      assert.equal(client, '127.0.0.1');
      return rest;
    };
    const base = { commands: [], keys: 0 };
    assert.deepEqual(line(ids.session), { ...base, requestId: ids.session, subject: 'writer', auth: 'credential', status: 200, lookup: { route: 'session' } });
    assert.deepEqual(line(ids.stores), { ...base, requestId: ids.stores, subject: 'prod-reader', auth: 'credential', status: 200, lookup: { route: 'stores', listed: 1 } });
    assert.deepEqual(line(ids.sets), {
      ...base,
      requestId: ids.sets,
      subject: 'prod-reader',
      auth: 'credential',
      status: 200,
      lookup: { route: 'sets', store: 'main', listed: 3, withheld: 4 },
    });
    assert.deepEqual(line(ids.refused), { ...base, requestId: ids.refused, subject: 'prod-reader', auth: 'credential', status: 403, lookup: { route: 'sets', store: 'sql' } });
    assert.deepEqual(line(ids.anonymous), { ...base, requestId: ids.anonymous, subject: null, auth: null, status: 401, reason: 'no Authorization header' });
    assert.doesNotMatch(JSON.stringify(audit), /prod\/eu|cfgu_/);
  });
});

describe('limits', () => {
  test('the listing stops at limits.matrixSets sets: truncated, the withheld count over the listed ones', async () => {
    const a = await app({ ...PROXY, limits: { matrixSets: 3 } });
    answer(await get(a, '/sets', PRESHARED), { store: 'main', sets: ['', 'dev', 'prod'], withheld: 0, truncated: true });
    answer(await get(a, '/sets', PROD_READER), { store: 'main', sets: ['prod'], withheld: 2, truncated: true });
  });

  test('the rate limit: a budget per route', async () => {
    const a = await app({ ...PROXY, rateLimit: { enabled: true, max: 2, windowSeconds: 60 } });
    for (let i = 0; i < 2; i++) assert.equal((await get(a, '/sets', PROD_READER)).statusCode, 200);
    const r = await get(a, '/sets', PROD_READER);
    assert.equal(r.statusCode, 429, r.body);
    assert.equal(r.headers['content-type'], 'application/problem+json; charset=utf-8');
    const body = r.json();
    assert.deepEqual({ ...body, detail: undefined }, { type: 'urn:cfgu:problem:rate-limited', title: 'Too Many Requests', status: 429, detail: undefined });
    assert.match(body.detail, /^more than 2 requests in 60 s; retry after \d+ s$/);
    assert.match(String(r.headers['retry-after']), /^[1-9]\d*$/);
    // Its own budget: the other routes still answer, and another caller's /sets too.
    assert.equal((await get(a, '/stores', PROD_READER)).statusCode, 200);
    assert.equal((await get(a, '/session', PROD_READER)).statusCode, 200);
    assert.equal((await get(a, '/sets', ROOT_READER)).statusCode, 200);
  });
});

describe('authentication off', () => {
  test('full access for anyone: /session says so; /stores and /sets answer everything', async () => {
    const a = await app({});
    answer(await get(a, '/session'), { authentication: false, kind: 'anonymous', subject: null, access: 'full' });
    assert.equal((await get(a, '/stores')).json().stores.length, 4);
    answer(await get(a, '/sets?store=sql'), { store: 'sql', sets: SQL_SETS, withheld: 0, truncated: false });
  });

  test('no store given and no default store: 400 naming the known stores', async () => {
    const other = tempDir('cfgu-session-nodefault-');
    writeJson(join(other, 'a.json'), []);
    const noDefault = createStoreRegistry(
      await loadConfiguration({ file: writeJson(join(other, '.configu'), { stores: { a: { type: 'json-file', configuration: { path: 'a.json' } }, b: { type: 'in-memory' } } }) }),
      { logger: { warn: () => undefined } },
    );
    await noDefault.init();
    try {
      const a = await app({}, noDefault);
      problem(await get(a, '/sets'), 400, {
        type: 'urn:cfgu:problem:unknown-store',
        title: 'Unknown Store',
        status: 400,
        detail: 'no store was given and there is no default store; known stores: "a", "b"',
        knownStores: ['a', 'b'],
      });
      answer(await get(a, '/sets?store=b'), { store: 'b', sets: [], withheld: 0, truncated: false });
      answer(await get(a, '/stores'), {
        stores: [
          { name: 'a', kind: 'json-file', default: false, readOnly: false, history: true, write: true },
          { name: 'b', kind: 'in-memory', default: false, readOnly: false, history: true, write: true },
        ],
      });
    } finally {
      await noDefault.close();
    }
  });
});
