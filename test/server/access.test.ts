/**
 * Access control (docs/security.md): scoped credentials from `.configu` (token hashes), JWTs verified against a JWKS
 * served over loopback by this test (RS256 and EdDSA keys made with jose), 403 without any store read, the audit
 * line of every /export field by field, and per-subject rate limits (in-process, and in Redis shared by two servers).
 * In-process (buildServer + inject) over json-file stores; the settings go through resolveSettings as `.configu`
 * would give them.
 */
import { after, before, describe, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { pino, type Logger } from 'pino';
import { Redis } from 'ioredis';
import { SignJWT, exportJWK, exportSPKI, generateKeyPair, type JWK, type CryptoKey } from 'jose';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { buildServer } from '../../src/server/index.js';
import { resolveSettings } from '../../src/server/process/resolve-settings.js';
import { createAuthenticator } from '../../src/server/access/credentials.js';
import { loadKeyLabels, type KeyLabels } from '../../src/server/access/key-labels.js';
import { loadConfiguration } from '../../src/config/index.js';
import { createStoreRegistry, type StoreRegistry } from '../../src/stores/index.js';
import type { StoreResolver } from '../../src/core/index.js';
import { captureLog, removeTempDirs, tempDir, writeJson } from './helpers.js';
import { waitFor } from '../helpers/wait.js';
import { probeTcp, requireService } from '../helpers/services.js';
import { countingResolver } from '../helpers/engine.js';

const PRESHARED = 'preshared-key-0a1b2c3d4e';
const sha256 = (t: string) => createHash('sha256').update(t, 'utf8').digest('hex');
const STAGING_TOKEN = `cfgu_staging-${randomUUID()}`;
const KEYS_TOKEN = `cfgu_keys-${randomUUID()}`;
const ROOT_TOKEN = `cfgu_root-${randomUUID()}`;
const GHOST_TOKEN = `cfgu_ghost-${randomUUID()}`;
const SECRET = 'S3cret-value-never-in-audit';
const ISSUER = 'https://idp.test.example';
const AUDIENCE = 'cfgu-proxy';

let dir: string;
let registry: StoreRegistry;
/** Every store read, by store name (the counting resolver below records them). */
const reads: string[] = [];
const apps: FastifyInstance[] = [];

/** The registry, with every read recorded. */
const counting = countingResolver(() => registry, reads);

// ---- the identity provider: a JWKS over loopback -------------------------------------------------------------------
interface Signer {
  kid: string;
  alg: 'RS256' | 'EdDSA';
  privateKey: CryptoKey;
  publicKey: CryptoKey;
  jwk: JWK;
}
let jwks: { keys: JWK[] } = { keys: [] };
let jwksFetches = 0;
let idp: Server;
let jwksUrl: string;

async function signer(kid: string, alg: 'RS256' | 'EdDSA'): Promise<Signer> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const jwk = { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' };
  return { kid, alg, privateKey, publicKey, jwk };
}

let rsa: Signer;
let ed: Signer;
let rotated: Signer;

const now = () => Math.floor(Date.now() / 1000);

function token(s: Signer, claims: Record<string, unknown> = {}, header: Record<string, unknown> = {}): Promise<string> {
  const { iss = ISSUER, aud = AUDIENCE, exp = now() + 600, nbf, ...rest } = claims;
  const jwt = new SignJWT({ sub: 'svc-staging', ...rest }).setProtectedHeader({ alg: s.alg, kid: s.kid, ...header }).setIssuer(iss as string).setAudience(aud as string).setIssuedAt().setExpirationTime(exp as number);
  if (nbf !== undefined) jwt.setNotBefore(nbf as number);
  return jwt.sign(s.privateKey);
}

const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');

// ---- servers -------------------------------------------------------------------------------------------------------
const capture = captureLog;

const credentials = () => [
  { name: 'ci-staging', sha256: sha256(STAGING_TOKEN), stores: ['main'], sets: ['staging/**'] },
  { name: 'public-keys', sha256: sha256(KEYS_TOKEN), stores: ['*'], sets: ['**'], keys: ['PUBLIC_*'], labels: ['public'] },
  { name: 'root-only', sha256: sha256(ROOT_TOKEN), stores: ['main'], sets: [''] },
  { name: 'ghost', sha256: sha256(GHOST_TOKEN), stores: ['main', 'ghost'], sets: ['**'] },
];

async function app(
  proxy: Record<string, unknown> = {},
  logger: Logger = pino({ level: 'silent' }) as unknown as Logger,
  auditLogger?: Logger,
  keyLabels?: KeyLabels,
): Promise<FastifyInstance> {
  const fileSettings = {
    auth: {
      enabled: true,
      presharedKeys: [PRESHARED],
      credentials: credentials(),
      jwt: {
        jwksUrl,
        issuer: ISSUER,
        audience: AUDIENCE,
        jwksCooldownSeconds: 0,
        grants: [
          { claim: 'scope', value: 'cfgu:staging', stores: ['main'], sets: ['staging/**'] },
          { claim: 'groups', value: 'team-prod', stores: ['main'], sets: ['prod'] },
        ],
        ...((proxy.jwt as object) ?? {}),
      },
    },
    ...Object.fromEntries(Object.entries(proxy).filter(([k]) => k !== 'jwt')),
  };
  const settings = resolveSettings({ fileSettings, file: join(dir, '.configu'), env: {} });
  const a = await buildServer({
    registry: counting,
    settings: { ...settings, workers: 1 },
    logger,
    ready: true,
    ...(auditLogger ? { auditLogger } : {}),
    ...(keyLabels ? { keyLabels } : {}),
  });
  apps.push(a);
  return a;
}

const body = (...sets: string[]) => JSON.stringify(sets.map((set) => ({ store: 'main', set, schema: { keys: { HOST: {}, PUBLIC_URL: {} } } })));

const post = (a: FastifyInstance, payload: string, bearer?: string, headers: Record<string, string> = {}) =>
  a.inject({
    method: 'POST',
    url: '/export',
    headers: { 'content-type': 'application/json', ...(bearer ? { authorization: `Bearer ${bearer}` } : {}), ...headers },
    payload,
  });

function exactly(r: LightMyRequestResponse, status: number, expected: Record<string, unknown>): void {
  assert.equal(r.statusCode, status, r.body);
  assert.equal(r.headers['content-type'], 'application/problem+json; charset=utf-8');
  assert.deepEqual(r.json(), expected);
}

const UNAUTHORIZED = {
  type: 'urn:cfgu:problem:unauthorized',
  title: 'Unauthorized',
  status: 401,
  detail: 'a valid bearer key is required (Authorization: Bearer <key>)',
};

const forbidden = (detail: string, refused: unknown[]) => ({ type: 'urn:cfgu:problem:forbidden', title: 'Forbidden', status: 403, detail, refused });

before(async () => {
  dir = tempDir('cfgu-access-');
  writeJson(join(dir, 'main.json'), [
    { set: '', key: 'HOST', value: 'root.internal' },
    { set: 'staging', key: 'HOST', value: 'staging.internal' },
    { set: 'staging/eu', key: 'HOST', value: 'eu.staging.internal' },
    { set: 'prod', key: 'HOST', value: 'prod.internal' },
    { set: '', key: 'PUBLIC_URL', value: 'https://example.com' },
    { set: '', key: 'DB_PASSWORD', value: SECRET },
  ]);
  writeJson(join(dir, 'other.json'), [{ set: '', key: 'HOST', value: 'other.internal' }]);
  writeJson(join(dir, '.configu'), {
    stores: {
      main: { type: 'json-file', configuration: { path: 'main.json' } },
      other: { type: 'json-file', configuration: { path: 'other.json' } },
    },
  });
  registry = createStoreRegistry(await loadConfiguration({ file: join(dir, '.configu') }), { logger: { warn: () => undefined } });
  await registry.init();

  rsa = await signer('rsa-1', 'RS256');
  ed = await signer('ed-1', 'EdDSA');
  rotated = await signer('rsa-2', 'RS256');
  jwks = { keys: [rsa.jwk, ed.jwk] };
  idp = createServer((req, res) => {
    if (req.url !== '/jwks.json') {
      res.writeHead(404).end();
      return;
    }
    jwksFetches++;
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(jwks));
  });
  await new Promise<void>((r) => idp.listen(0, '127.0.0.1', r));
  const address = idp.address() as { port: number };
  jwksUrl = `http://127.0.0.1:${address.port}/jwks.json`;
});

after(async () => {
  for (const a of apps) await a.close();
  await registry?.close();
  await new Promise((r) => idp?.close(r));
  removeTempDirs();
});

describe('scoped credentials (token hashes in .configu)', () => {
  test('a staging token reads staging and below; a pipeline with one prod command is 403 and reads nothing', async () => {
    const a = await app();
    const ok = await post(a, body('staging', 'staging/eu'), STAGING_TOKEN);
    assert.equal(ok.statusCode, 200, ok.body);
    assert.deepEqual(ok.json(), { HOST: 'eu.staging.internal', PUBLIC_URL: 'https://example.com' });
    assert.ok(reads.length > 0, 'an allowed pipeline reads its store');

    reads.length = 0;
    const r = await post(a, body('staging', 'prod', 'staging/eu'), STAGING_TOKEN);
    exactly(
      r,
      403,
      forbidden('1 of 3 commands is outside the scope of this credential: command 1 (store "main", set "prod")', [{ command: 1, store: 'main', set: 'prod' }]),
    );
    assert.deepEqual(reads, [], 'no store was read');
  });

  test('watch requests (an SSE stream, a long poll) are scope-checked the same way: 403, nothing read, nothing held', async () => {
    const a = await app();
    const expected = forbidden('1 of 2 commands is outside the scope of this credential: command 0 (store "main", set "prod")', [{ command: 0, store: 'main', set: 'prod' }]);
    const watchHeaders: Array<Record<string, string>> = [{ accept: 'text/event-stream' }, { 'if-none-match': '"x"', prefer: 'wait=30' }];
    for (const headers of watchHeaders) {
      reads.length = 0;
      exactly(await post(a, body('prod', 'staging'), STAGING_TOKEN, headers), 403, expected);
      assert.deepEqual(reads, [], 'no store was read');
    }
    assert.equal(a.cfgu.watch.watchers, 0, 'no watcher was registered');
  });

  test('stores: another store, and a command without store (the default) are refused by index', async () => {
    const a = await app();
    reads.length = 0;
    const payload = JSON.stringify([
      { store: 'other', set: 'staging', schema: { keys: { HOST: {} } } },
      { set: '/staging/', schema: { keys: { HOST: {} } } },
    ]);
    exactly(
      await post(a, payload, STAGING_TOKEN),
      403,
      // Two stores and no default: a command without store names none (null); the set is normalised.
      forbidden('2 of 2 commands are outside the scope of this credential: command 0 (store "other", set "staging"), command 1 (store (none), set "staging")', [
        { command: 0, store: 'other', set: 'staging' },
        { command: 1, store: null, set: 'staging' },
      ]),
    );
    assert.deepEqual(reads, []);
  });

  test('the root set only when named, or by `**` alone; no other pattern covers it', async () => {
    const a = await app();
    const root = await post(a, body(''), ROOT_TOKEN);
    assert.equal(root.statusCode, 200, root.body);
    assert.deepEqual(root.json(), { HOST: 'root.internal', PUBLIC_URL: 'https://example.com' });
    exactly(
      await post(a, body('staging'), ROOT_TOKEN),
      403,
      forbidden('1 of 1 command is outside the scope of this credential: command 0 (store "main", set "staging")', [{ command: 0, store: 'main', set: 'staging' }]),
    );
    // `**` alone covers the root: the ghost credential (sets `**`, no keys or labels) reads it.
    const ghost = await post(a, body(''), GHOST_TOKEN);
    assert.equal(ghost.statusCode, 200, ghost.body);
    assert.deepEqual(ghost.json(), { HOST: 'root.internal', PUBLIC_URL: 'https://example.com' });
    // `staging/**` covers staging and below, never the root.
    exactly(
      await post(a, body(''), STAGING_TOKEN),
      403,
      forbidden('1 of 1 command is outside the scope of this credential: command 0 (store "main", set "")', [{ command: 0, store: 'main', set: '' }]),
    );
  });

  test('keys and labels: a schema declaring a key outside them is refused; labels are those of the server\'s schemas', async () => {
    // HOST carries `public` in the schema .configu names, not because the request says so (docs/security.md).
    writeJson(join(dir, 'net.cfgu.json'), { keys: { HOST: { label: ['public', 'net'] } } });
    const settings = resolveSettings({ fileSettings: { auth: { enabled: true, credentials: credentials() } }, file: join(dir, '.configu'), env: {} });
    const { table, warnings } = loadKeyLabels({ ...(await loadConfiguration({ file: join(dir, '.configu') })), schemas: { net: join(dir, 'net.cfgu.json') } }, settings);
    assert.deepEqual(warnings, []);
    const a = await app({}, undefined, undefined, table);
    const allowed = JSON.stringify([{ store: 'main', set: 'staging', schema: { keys: { PUBLIC_URL: {}, HOST: {} } } }]);
    const ok = await post(a, allowed, KEYS_TOKEN);
    assert.equal(ok.statusCode, 200, ok.body);
    assert.deepEqual(ok.json(), { PUBLIC_URL: 'https://example.com', HOST: 'staging.internal' });
    reads.length = 0;
    const secret = JSON.stringify([{ store: 'main', set: 'staging', schema: { keys: { PUBLIC_URL: {}, DB_PASSWORD: { hidden: true } } } }]);
    exactly(
      await post(a, secret, KEYS_TOKEN),
      403,
      forbidden('1 of 1 command is outside the scope of this credential: command 0 (store "main", set "staging")', [{ command: 0, store: 'main', set: 'staging' }]),
    );
    assert.deepEqual(reads, []);
  });

  /** What the ghost credential (stores main and ghost; ghost is not declared) learns of an unknown store. */
  const GHOST_UNKNOWN = {
    type: 'urn:cfgu:problem:unknown-store',
    title: 'Unknown Store',
    status: 400,
    detail: 'unknown store "ghost"; known stores: "main"',
    store: 'ghost',
    knownStores: ['main'],
  };

  test('an unknown store a credential may name: 400 listing only the stores it may name', async () => {
    const a = await app();
    exactly(await post(a, JSON.stringify([{ store: 'ghost', schema: { keys: { HOST: {} } } }]), GHOST_TOKEN), 400, GHOST_UNKNOWN);
  });

  test('watching a pipeline that names an unknown store (SSE, long poll) answers as /export does: 400 listing only the stores it may name', async () => {
    const a = await app();
    const payload = JSON.stringify([{ store: 'ghost', schema: { keys: { HOST: {} } } }]);
    exactly(await post(a, payload, GHOST_TOKEN, { accept: 'text/event-stream' }), 400, GHOST_UNKNOWN);
    exactly(await post(a, payload, GHOST_TOKEN, { 'if-none-match': '"any"', prefer: 'wait=5' }), 400, GHOST_UNKNOWN);
    // A full-access key gets the full list, on a watch as on the plain request.
    const plain = await post(a, payload, PRESHARED);
    assert.equal(plain.statusCode, 400, plain.body);
    exactly(await post(a, payload, PRESHARED, { accept: 'text/event-stream' }), 400, plain.json());
    exactly(await post(a, payload, PRESHARED, { 'if-none-match': '"any"', prefer: 'wait=5' }), 400, plain.json());
  });

  test('preshared keys keep full access; an unknown token is 401 with the reason in the log only', async () => {
    const log = capture();
    const a = await app({}, log.logger);
    const ok = await post(a, body('prod'), PRESHARED);
    assert.equal(ok.statusCode, 200, ok.body);
    assert.deepEqual(ok.json(), { HOST: 'prod.internal', PUBLIC_URL: 'https://example.com' });
    const r = await post(a, body('staging'), `${STAGING_TOKEN}x`);
    exactly(r, 401, UNAUTHORIZED);
    assert.equal(r.headers['www-authenticate'], 'Bearer realm="cfgu"');
    const failure = log.lines().find((l) => l.msg === 'authentication failed');
    assert.equal(failure?.reason, 'unknown key or token');
    assert.ok(!log.raw().includes(STAGING_TOKEN), 'the token is never logged');
  });
});

describe('JWT bearer tokens (JWKS over loopback)', () => {
  test('RS256 with scope cfgu:staging reads staging and gets 403 for prod; EdDSA with groups team-prod reads prod', async () => {
    const a = await app();
    const staging = await token(rsa, { scope: 'openid cfgu:staging' });
    const ok = await post(a, body('staging/eu'), staging);
    assert.equal(ok.statusCode, 200, ok.body);
    assert.deepEqual(ok.json(), { HOST: 'eu.staging.internal', PUBLIC_URL: 'https://example.com' });
    reads.length = 0;
    exactly(
      await post(a, body('prod'), staging),
      403,
      forbidden('1 of 1 command is outside the scope of this credential: command 0 (store "main", set "prod")', [{ command: 0, store: 'main', set: 'prod' }]),
    );
    assert.deepEqual(reads, []);

    const prod = await token(ed, { sub: 'svc-prod', groups: ['team-prod'] });
    const p = await post(a, body('prod'), prod);
    assert.equal(p.statusCode, 200, p.body);
    assert.deepEqual(p.json(), { HOST: 'prod.internal', PUBLIC_URL: 'https://example.com' });
    // A valid token that no grant matches: authenticated, allowed nothing.
    exactly(
      await post(a, body('staging'), await token(ed, { sub: 'nobody', groups: ['other'] })),
      403,
      forbidden('1 of 1 command is outside the scope of this credential: command 0 (store "main", set "staging")', [{ command: 0, store: 'main', set: 'staging' }]),
    );
  });

  test('expired, not yet valid, wrong issuer, wrong audience, alg none, HS256 with the public key: 401, reason in the log only', async () => {
    const log = capture();
    const a = await app({}, log.logger);
    const publicPem = await exportSPKI(rsa.publicKey);
    const hs256 = await new SignJWT({ sub: 'svc-staging', scope: 'cfgu:staging' })
      .setProtectedHeader({ alg: 'HS256', kid: rsa.kid })
      .setIssuer(ISSUER)
      .setAudience(AUDIENCE)
      .setExpirationTime(now() + 600)
      .sign(new TextEncoder().encode(publicPem));
    const none = `${b64({ alg: 'none', kid: rsa.kid })}.${b64({ sub: 'svc-staging', scope: 'cfgu:staging', iss: ISSUER, aud: AUDIENCE, exp: now() + 600 })}.`;
    const cases: Array<[string, string]> = [
      ['token expired', await token(rsa, { scope: 'cfgu:staging', exp: now() - 120 })],
      ['token not yet valid (nbf)', await token(rsa, { scope: 'cfgu:staging', nbf: now() + 600 })],
      ['wrong issuer', await token(rsa, { scope: 'cfgu:staging', iss: 'https://evil.example' })],
      ['wrong audience', await token(ed, { scope: 'cfgu:staging', aud: 'someone-else' })],
      ['algorithm not allowed', none],
      ['algorithm not allowed', hs256],
    ];
    for (const [reason, jwt] of cases) {
      const before = log.lines().length;
      const id = `jwt-${randomUUID()}`;
      const r = await post(a, body('staging'), jwt, { 'x-request-id': id });
      exactly(r, 401, UNAUTHORIZED);
      assert.ok(!r.body.includes(reason), 'no reason in the body');
      const line = log.lines().slice(before).find((l) => l.msg === 'authentication failed' && l.reqId === id);
      assert.equal(line?.reason, reason, `${reason}: ${JSON.stringify(log.lines().slice(before))}`);
    }
    assert.ok(!log.raw().includes(none.split('.')[1]!), 'no token in the log');
  });

  test('a clock skew of 30 s: a token expired 10 s ago still passes', async () => {
    const a = await app();
    const r = await post(a, body('staging'), await token(rsa, { scope: 'cfgu:staging', exp: now() - 10 }));
    assert.equal(r.statusCode, 200, r.body);
  });

  test('an unknown kid is 401; after the issuer rotates its keys (the JWKS changes), the same token is accepted', async () => {
    const log = capture();
    const a = await app({}, log.logger);
    jwks = { keys: [rsa.jwk, ed.jwk] };
    const newKey = await token(rotated, { scope: 'cfgu:staging' });
    exactly(await post(a, body('staging'), newKey), 401, UNAUTHORIZED);
    assert.equal(log.lines().find((l) => l.msg === 'authentication failed')?.reason, 'no key of the JWKS matches the token (unknown kid or algorithm)');
    jwks = { keys: [rotated.jwk, ed.jwk] };
    const r = await post(a, body('staging'), newKey);
    assert.equal(r.statusCode, 200, r.body);
    jwks = { keys: [rsa.jwk, ed.jwk] };
  });

  test('the JWKS is refetched for an unknown kid no sooner than the cooldown', async () => {
    const a = await app({ jwt: { jwksCooldownSeconds: 3600 } });
    jwks = { keys: [rsa.jwk, ed.jwk] };
    const first = jwksFetches;
    assert.equal((await post(a, body('staging'), await token(rsa, { scope: 'cfgu:staging' }))).statusCode, 200);
    assert.equal(jwksFetches, first + 1, 'one fetch for the first token');
    jwks = { keys: [rotated.jwk, rsa.jwk, ed.jwk] };
    const newKey = await token(rotated, { scope: 'cfgu:staging' });
    for (let i = 0; i < 3; i++) exactly(await post(a, body('staging'), newKey), 401, UNAUTHORIZED);
    assert.equal(jwksFetches, first + 1, 'an unknown kid within the cooldown fetches nothing');
    jwks = { keys: [rsa.jwk, ed.jwk] };
  });

  test('a verified token is remembered (answered without verification) until it expires, in a bounded cache', async () => {
    const settings = resolveSettings({
      fileSettings: { auth: { enabled: true, jwt: { jwksUrl, issuer: ISSUER, audience: AUDIENCE, clockSkewSeconds: 0, cacheSize: 2, grants: [] } } },
      env: {},
    });
    const authn = createAuthenticator(settings)!;
    const header = `Bearer ${await token(rsa, { exp: now() + 2 })}`;
    const first = authn.authenticate(header);
    assert.ok(first instanceof Promise, 'the first sight of a token verifies it');
    assert.equal(((await first) as { principal: { subject: string } }).principal.subject, 'svc-staging');
    const again = authn.authenticate(header);
    assert.ok(!(again instanceof Promise), 'the same token again is answered from the cache');
    assert.equal((again as { principal: { subject: string } }).principal.subject, 'svc-staging');
    // Bounded: two more tokens push the first one out.
    for (const sub of ['x', 'y']) await authn.authenticate(`Bearer ${await token(rsa, { sub })}`);
    assert.ok(authn.authenticate(header) instanceof Promise, 'evicted: verified again');
    // Once expired, the cached answer is dropped and verification says why.
    const reason = await waitFor('the token to expire', async () => {
      const r = await authn.authenticate(header);
      return 'reason' in r ? r.reason : false;
    });
    assert.equal(reason, 'token expired');
  });
});

describe('audit log', () => {
  test('one line per /export, field by field, in its own file; never a value or a token', async () => {
    const file = join(dir, 'audit', 'audit.log');
    const a = await app({ audit: { file: 'audit/audit.log' } });
    const ids = [`a-${randomUUID()}`, `b-${randomUUID()}`, `c-${randomUUID()}`, `d-${randomUUID()}`];
    const secretBody = JSON.stringify([
      { store: 'main', set: 'staging', schema: { keys: { HOST: {} } } },
      { store: 'main', set: 'staging/eu', schema: { keys: { DB_PASSWORD: { hidden: true }, PUBLIC_URL: {} } }, configs: { PUBLIC_URL: 'override-x' } },
    ]);
    assert.equal((await post(a, secretBody, PRESHARED, { 'x-request-id': ids[0]! })).statusCode, 200);
    assert.equal((await post(a, body('prod', 'staging'), STAGING_TOKEN, { 'x-request-id': ids[1]! })).statusCode, 403);
    assert.equal((await post(a, body('staging'), 'wrong-token-123', { 'x-request-id': ids[2]! })).statusCode, 401);
    const jwt = await token(rsa, { scope: 'cfgu:staging' });
    assert.equal((await post(a, body('staging'), jwt, { 'x-request-id': ids[3]! })).statusCode, 200);

    const lines = await waitFor('four audit lines', () => {
      if (!existsSync(file)) return false;
      const l = readFileSync(file, 'utf8').split('\n').filter(Boolean);
      return l.length >= 4 ? l.map((x) => JSON.parse(x) as Record<string, unknown>) : false;
    });
    assert.equal(lines.length, 4);
    const byId = (id: string) => lines.find((l) => l.requestId === id)!;
    const common = (l: Record<string, unknown>) => {
      assert.match(String(l.time), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      assert.equal(l.msg, 'audit');
      assert.equal(l.client, '127.0.0.1');
      assert.equal(l.level, 'info');
    };
    const rest = (l: Record<string, unknown>) => {
      const { time: _t, pid: _p, level: _l, msg: _m, client: _c, ...others } = l;
      return others;
    };
    for (const l of lines) common(l);
    const main = (...sets: string[]) => sets.map((set) => ({ store: 'main', set }));
    const expected: Array<Record<string, unknown>> = [
      { subject: 'preshared:1', auth: 'preshared', commands: main('staging', 'staging/eu'), keys: 2, status: 200 },
      { subject: 'ci-staging', auth: 'credential', commands: main('prod', 'staging'), keys: 0, status: 403 },
      { subject: null, auth: null, commands: [], keys: 0, status: 401, reason: 'unknown key or token' },
      { subject: 'svc-staging', auth: 'jwt', commands: main('staging'), keys: 2, status: 200 },
    ];
    expected.forEach((fields, i) => assert.deepEqual(rest(byId(ids[i]!)), { requestId: ids[i], ...fields }));
    const raw = readFileSync(file, 'utf8');
    for (const secret of [SECRET, 'override-x', 'staging.internal', PRESHARED, STAGING_TOKEN, jwt, 'wrong-token-123']) {
      assert.ok(!raw.includes(secret), `the audit log holds ${secret.slice(0, 12)}...`);
    }
  });

  test('without a file of its own, the lines go to the server log', async () => {
    const log = capture();
    const a = await app({}, log.logger);
    const id = `e-${randomUUID()}`;
    assert.equal((await post(a, body('staging'), STAGING_TOKEN, { 'x-request-id': id })).statusCode, 200);
    const line = await waitFor('the audit line', () => log.lines().find((l) => l.msg === 'audit' && l.requestId === id));
    assert.equal(line.subject, 'ci-staging');
    assert.deepEqual(line.commands, [{ store: 'main', set: 'staging' }]);
  });
});

describe('audit lines and the request-line switch', () => {
  test('with request lines off (log.enabled false) the audit lines still reach the server log', async () => {
    const log = capture();
    const a = await app({ log: { enabled: false } }, log.logger);
    const id = `f-${randomUUID()}`;
    assert.equal((await post(a, body('staging'), STAGING_TOKEN, { 'x-request-id': id })).statusCode, 200);
    const line = await waitFor('the audit line', () => log.lines().find((l) => l.msg === 'audit' && l.requestId === id));
    assert.equal(line.subject, 'ci-staging');
    assert.equal(log.lines().filter((l) => l.msg === 'request').length, 0, 'no request line');
  });
});

describe('the default store', () => {
  test('is resolved once, when the server is built: scope checks and audit lines of commands naming no store use it, no lookup per request', async () => {
    let defaultLookups = 0;
    const withDefault: StoreResolver = {
      resolve(name) {
        if (name === undefined) defaultLookups++;
        return counting.resolve(name ?? 'main');
      },
      names: () => counting.names(),
    };
    const log = capture();
    const settings = resolveSettings({ fileSettings: { auth: { enabled: true, credentials: credentials() } }, file: join(dir, '.configu'), env: {} });
    const a = await buildServer({ registry: withDefault, settings: { ...settings, workers: 1 }, logger: log.logger, ready: true });
    apps.push(a);
    assert.equal(defaultLookups, 1, 'once, at build');
    const noStore = (set: string) => JSON.stringify([{ set, schema: { keys: { HOST: {} } } }]);
    const id = `f-${randomUUID()}`;
    exactly(
      await post(a, noStore('prod'), STAGING_TOKEN, { 'x-request-id': id }),
      403,
      forbidden('1 of 1 command is outside the scope of this credential: command 0 (store "main", set "prod")', [{ command: 0, store: 'main', set: 'prod' }]),
    );
    const line = await waitFor('the audit line', () => log.lines().find((l) => l.msg === 'audit' && l.requestId === id));
    assert.deepEqual(line.commands, [{ store: 'main', set: 'prod' }]);
    assert.equal(defaultLookups, 1, 'a refused request (scope check and audit line) looks nothing up');
  });
});

describe('rate limits per subject', () => {
  function over(r: LightMyRequestResponse, max: number, window: number): void {
    assert.equal(r.statusCode, 429, r.body);
    const retry = Number(r.headers['retry-after']);
    assert.ok(Number.isInteger(retry) && retry >= 1 && retry <= window, `Retry-After ${r.headers['retry-after']}`);
    exactly(r, 429, {
      type: 'urn:cfgu:problem:rate-limited',
      title: 'Too Many Requests',
      status: 429,
      detail: `more than ${max} requests in ${window} s; retry after ${retry} s`,
    });
  }

  test('off by default: many requests, no 429', async () => {
    const a = await app();
    for (let i = 0; i < 5; i++) assert.equal((await post(a, body('staging'), STAGING_TOKEN)).statusCode, 200);
  });

  test('in-process: the third request of a subject in the window is 429 with Retry-After; another subject is not limited', async () => {
    const a = await app({ rateLimit: { enabled: true, max: 2, windowSeconds: 3600 } });
    for (let i = 0; i < 2; i++) assert.equal((await post(a, body('staging'), STAGING_TOKEN)).statusCode, 200);
    reads.length = 0;
    over(await post(a, body('staging'), STAGING_TOKEN), 2, 3600);
    assert.deepEqual(reads, [], 'a limited request reads nothing');
    assert.equal((await post(a, body('prod'), PRESHARED)).statusCode, 200, 'another subject has its own counter');
    assert.equal((await a.inject({ method: 'GET', url: '/live' })).statusCode, 200, 'health is never limited');
  });

  test('Redis: two servers sharing one Redis share the counters', async (t: TestContext) => {
    if (!(await requireService(t, 'redis', probeTcp(6379)))) return;
    const prefix = `cfgu-test-rate-${randomUUID()}:`;
    const proxy = { rateLimit: { enabled: true, max: 2, windowSeconds: 3600, redisUrl: 'redis://127.0.0.1:6379', redisPrefix: prefix } };
    const a = await app(proxy);
    const b = await app(proxy);
    const client = new Redis({ host: '127.0.0.1', port: 6379, maxRetriesPerRequest: 1 });
    try {
      assert.equal((await post(a, body('staging'), STAGING_TOKEN)).statusCode, 200);
      assert.equal((await post(b, body('staging'), STAGING_TOKEN)).statusCode, 200);
      over(await post(a, body('staging'), STAGING_TOKEN), 2, 3600);
      over(await post(b, body('staging'), STAGING_TOKEN), 2, 3600);
      assert.ok((await client.keys(`${prefix}*`)).length >= 1, 'the counter lives in Redis');
    } finally {
      const keys = await client.keys(`${prefix}*`);
      if (keys.length) await client.del(...keys);
      client.disconnect();
    }
  });
});
