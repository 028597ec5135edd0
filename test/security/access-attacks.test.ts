/**
 * Attacks on the access layer (docs/security.md), one class per `describe`, each tried with every kind of credential
 * that it concerns (scoped token, JWT, preshared key):
 *   - labels: a label scope widened by the labels the caller writes in its own schema;
 *   - /metrics: a scoped caller reading the store names its 403 hides;
 *   - rate limits: a JWT whose `sub` is a credential's name (or a preshared key's subject) spending that budget;
 *   - the JWKS: an answer of tens of megabytes, or of thousands of keys, read whole and kept;
 *   - the CLI: `cfgu upsert --kv __proto__=V` dropping the value, and key names no store can hold.
 * The server is loaded as `cfgu serve` loads it (start.ts `load()`: `.configu`, its settings and the label table of its
 * schemas) and built in-process (buildServer + inject); the identity provider's JWKS is served over loopback here.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pino, type Logger } from 'pino';
import { SignJWT, exportJWK, generateKeyPair, type CryptoKey, type JWK } from 'jose';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { buildServer } from '../../src/server/index.js';
import { load, type Loaded } from '../../src/server/process/start.js';
import { loadConfiguration } from '../../src/config/index.js';
import { createStoreRegistry, type StoreRegistry } from '../../src/stores/index.js';
import { ConfigurationError } from '../../src/core/index.js';
import { captureLog, removeTempDirs, tempDir, writeJson } from '../server/helpers.js';
import { closeSandbox, killChildren, project, removeTempDirs as removeCliDirs, runCli } from '../cli/helpers.js';
import { waitFor } from '../helpers/wait.js';
import { countingResolver } from '../helpers/engine.js';

const PRESHARED = 'preshared-key-9d8c7b6a5f';
const METRICS_KEY = 'metrics-key-1a2b3c4d5e';
const sha256 = (t: string) => createHash('sha256').update(t, 'utf8').digest('hex');
const tokenOf = (name: string) => `cfgu_${name}-${randomUUID()}`;
const LABELS_TOKEN = tokenOf('labels');
const ONE_STORE_TOKEN = tokenOf('one-store');
const METRICS_TOKEN = tokenOf('metrics');
const LOOKALIKE_TOKEN = tokenOf('lookalike');
const SECRET = 'db-password-value-never-for-public';
const ISSUER = 'https://idp.attack.example';
const AUDIENCE = 'cfgu-proxy';

let dir: string;
let registry: StoreRegistry;
const reads: string[] = [];
const apps: FastifyInstance[] = [];

/** The registry, with every read recorded. */
const counting = countingResolver(() => registry, reads);

// ---- the identity provider -----------------------------------------------------------------------------------------
interface Signer {
  kid: string;
  privateKey: CryptoKey;
  jwk: JWK;
}
let signer: Signer;
let other: Signer;
/** What the JWKS URL answers: a handler per test (default: the set of `signer`). */
let serveJwks: (req: IncomingMessage, res: ServerResponse) => void;
let idp: Server;
let jwksUrl: string;

async function newSigner(kid: string): Promise<Signer> {
  const { privateKey, publicKey } = await generateKeyPair('EdDSA', { extractable: true });
  return { kid, privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg: 'EdDSA', use: 'sig' } };
}

const now = () => Math.floor(Date.now() / 1000);

function jwt(s: Signer, claims: Record<string, unknown>): Promise<string> {
  return new SignJWT({ sub: 'svc', ...claims })
    .setProtectedHeader({ alg: 'EdDSA', kid: s.kid })
    .setIssuer(ISSUER)
    .setAudience(AUDIENCE)
    .setIssuedAt()
    .setExpirationTime(now() + 600)
    .sign(s.privateKey);
}

const jwksOf = (...keys: JWK[]) => JSON.stringify({ keys });
const plainJwks = (req: IncomingMessage, res: ServerResponse) => {
  void req;
  res.writeHead(200, { 'content-type': 'application/json' }).end(jwksOf(signer.jwk));
};

// ---- the server ----------------------------------------------------------------------------------------------------
/** The `.configu` of the attacks, with `proxy` merged into `interface.proxy`. */
function configu(proxy: Record<string, unknown> = {}, schemas: Record<string, string> = SCHEMAS): string {
  const file = join(dir, `${randomUUID()}.configu`);
  const auth = (proxy.auth as Record<string, unknown> | undefined) ?? {};
  writeJson(file, {
    stores: { main: { type: 'json-file', configuration: { path: 'main.json' } }, billing: { type: 'json-file', configuration: { path: 'billing.json' } } },
    schemas,
    interface: {
      proxy: {
        ...proxy,
        auth: {
          enabled: true,
          presharedKeys: [PRESHARED],
          credentials: [
            { name: 'public-reader', sha256: sha256(LABELS_TOKEN), stores: ['main'], sets: ['', '**'], labels: ['public'] },
            { name: 'one-store', sha256: sha256(ONE_STORE_TOKEN), stores: ['main'], sets: [''] },
            { name: 'scraper', sha256: sha256(METRICS_TOKEN), stores: ['main'], sets: [''], metrics: true },
            // Named like the preshared key's subject: its budget must still be its own.
            { name: 'preshared:1', sha256: sha256(LOOKALIKE_TOKEN), stores: ['main'], sets: [''] },
          ],
          jwt: {
            jwksUrl,
            issuer: ISSUER,
            audience: AUDIENCE,
            jwksCooldownSeconds: 0,
            grants: [
              { claim: 'scope', value: 'cfgu:public', stores: ['main'], sets: ['', '**'], labels: ['public'] },
              { claim: 'scope', value: 'cfgu:root', stores: ['main'], sets: [''] },
              { claim: 'scope', value: 'cfgu:metrics', stores: ['main'], sets: [''], metrics: true },
            ],
            ...((auth.jwt as object | undefined) ?? {}),
          },
          ...Object.fromEntries(Object.entries(auth).filter(([k]) => k !== 'jwt')),
        },
      },
    },
  });
  return file;
}

/** `.configu` loaded as `cfgu serve` loads it (settings, the label table of its schemas, the start-up warnings). */
const loadConfigu = (file: string): Promise<Loaded> => load({ config: file, flags: { workers: '1' }, env: {}, cwd: dir });

async function app(proxy: Record<string, unknown> = {}, logger: Logger = pino({ level: 'silent' }) as unknown as Logger): Promise<FastifyInstance> {
  const loaded = await loadConfigu(configu(proxy));
  const a = await buildServer({ registry: counting, settings: loaded.settings, keyLabels: loaded.keyLabels, logger, auditLogger: false, ready: true });
  apps.push(a);
  return a;
}

const post = (a: FastifyInstance, commands: unknown[], bearer?: string) =>
  a.inject({
    method: 'POST',
    url: '/export',
    headers: { 'content-type': 'application/json', ...(bearer ? { authorization: `Bearer ${bearer}` } : {}) },
    payload: JSON.stringify(commands),
  });

const command = (keys: Record<string, unknown>, set = '') => ({ store: 'main', set, schema: { keys } });

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
const refusedRoot = {
  type: 'urn:cfgu:problem:forbidden',
  title: 'Forbidden',
  status: 403,
  detail: '1 of 1 command is outside the scope of this credential: command 0 (store "main", set "")',
  refused: [{ command: 0, store: 'main', set: '' }],
};
const METRICS_FORBIDDEN = {
  type: 'urn:cfgu:problem:forbidden',
  title: 'Forbidden',
  status: 403,
  detail: 'reading /metrics needs the metrics key, a preshared key, or a scope with metrics: true',
};

/** The schemas the server holds: HOST is `public` in both, SHARED only in one (the other says `ops`). */
const SCHEMAS: Record<string, string> = {};

before(async () => {
  dir = tempDir('cfgu-access-attacks-');
  writeJson(join(dir, 'main.json'), [
    { set: '', key: 'PUBLIC_URL', value: 'https://example.com' },
    { set: '', key: 'HOST', value: 'db.internal' },
    { set: '', key: 'SHARED', value: 'shared-value' },
    { set: '', key: 'SECRET_DB', value: SECRET },
    { set: '', key: 'STRAY', value: 'stray-value' },
  ]);
  writeJson(join(dir, 'billing.json'), []);
  writeJson(join(dir, 'public.cfgu.json'), { keys: { PUBLIC_URL: { label: 'public' }, HOST: { label: ['public'] }, SHARED: { label: 'public' }, SECRET_DB: { hidden: true } } });
  writeFileSync(join(dir, 'ops.cfgu.yaml'), 'keys:\n  HOST:\n    label: [public, ops]\n  SHARED:\n    label: ops\n');
  Object.assign(SCHEMAS, { public: 'public.cfgu.json', ops: 'ops.cfgu.yaml', remote: 'https://schemas.example/app.cfgu.json' });
  registry = createStoreRegistry(await loadConfiguration({ file: configuForRegistry() }), { logger: { warn: () => undefined } });
  await registry.init();

  signer = await newSigner('ed-1');
  other = await newSigner('ed-2');
  serveJwks = plainJwks;
  idp = createServer((req, res) => serveJwks(req, res));
  await new Promise<void>((r) => idp.listen(0, '127.0.0.1', r));
  jwksUrl = `http://127.0.0.1:${(idp.address() as { port: number }).port}/jwks.json`;
});

function configuForRegistry(): string {
  const file = join(dir, 'stores.configu');
  writeJson(file, { stores: { main: { type: 'json-file', configuration: { path: 'main.json' } }, billing: { type: 'json-file', configuration: { path: 'billing.json' } } } });
  return file;
}

after(async () => {
  for (const a of apps) await a.close();
  await registry?.close();
  idp?.closeAllConnections();
  await new Promise((r) => idp?.close(r));
  removeTempDirs();
  killChildren();
  removeCliDirs();
  await closeSandbox();
});

// ---- 1. labels -----------------------------------------------------------------------------------------------------
describe('a label scope cannot be widened by the labels the caller writes', () => {
  test('caller-declared labels on a secret key: 403 for the scoped token and the JWT, nothing read; the preshared key reads it', async () => {
    const a = await app();
    const attack = [command({ PUBLIC_URL: {}, SECRET_DB: { label: ['public'] } })];
    for (const bearer of [LABELS_TOKEN, await jwt(signer, { sub: 'svc-public', scope: 'cfgu:public' })]) {
      reads.length = 0;
      exactly(await post(a, attack, bearer), 403, refusedRoot);
      assert.deepEqual(reads, [], 'no store was read');
    }
    // The label as a plain string, and on a key the caller also hides: the same.
    exactly(await post(a, [command({ SECRET_DB: { label: 'public', hidden: false } })], LABELS_TOKEN), 403, refusedRoot);
    const full = await post(a, attack, PRESHARED);
    assert.equal(full.statusCode, 200, full.body);
    assert.deepEqual(full.json(), { PUBLIC_URL: 'https://example.com', SECRET_DB: SECRET });
  });

  test('keys the server schemas label `public` are read without any label in the request, by the token and the JWT', async () => {
    const a = await app();
    const plain = [command({ PUBLIC_URL: {}, HOST: {} })];
    for (const bearer of [LABELS_TOKEN, await jwt(signer, { sub: 'svc-public', scope: 'openid cfgu:public' })]) {
      const r = await post(a, plain, bearer);
      assert.equal(r.statusCode, 200, r.body);
      assert.deepEqual(r.json(), { PUBLIC_URL: 'https://example.com', HOST: 'db.internal' });
    }
    // A label the request takes away changes nothing either: access follows the server's schemas only.
    const r = await post(a, [command({ HOST: { label: 'private' } })], LABELS_TOKEN);
    assert.equal(r.statusCode, 200, r.body);
  });

  test('a key no server schema declares carries no label, whatever the request says', async () => {
    const a = await app();
    for (const bearer of [LABELS_TOKEN, await jwt(signer, { sub: 'svc-public', scope: 'cfgu:public' })]) {
      exactly(await post(a, [command({ STRAY: { label: 'public' } })], bearer), 403, refusedRoot);
    }
  });

  test('schemas that disagree: a key is `public` only when every server schema declaring it says so', async () => {
    const a = await app();
    // SHARED is `public` in public.cfgu.json and `ops` in ops.cfgu.yaml: not public. HOST is public in both.
    for (const bearer of [LABELS_TOKEN, await jwt(signer, { sub: 'svc-public', scope: 'cfgu:public' })]) {
      exactly(await post(a, [command({ SHARED: { label: 'public' } })], bearer), 403, refusedRoot);
      assert.equal((await post(a, [command({ HOST: {} })], bearer)).statusCode, 200);
    }
  });

  test('start-up: a schema URL is not fetched, and a label no schema gives is a warning; an unreadable schema stops start-up (exit 2)', async () => {
    const withUnused = configu({ auth: { credentials: [{ name: 'ghost-labels', sha256: sha256('x'), stores: ['*'], sets: ['**'], labels: ['nobody'], keys: ['PUBLIC_*'] }] } });
    const loaded = await loadConfigu(withUnused);
    assert.deepEqual(loaded.warnings, [
      'schema "remote" is a URL, which the server does not fetch: requests cannot name it and its labels grant nothing',
      'credential "ghost-labels" grants label "nobody", which no schema of .configu gives any key: it grants nothing (its keys patterns still apply)',
    ]);
    // Its keys patterns still work.
    const a = await buildServer({ registry: counting, settings: loaded.settings, keyLabels: loaded.keyLabels, logger: false, auditLogger: false, ready: true });
    apps.push(a);
    assert.equal((await post(a, [command({ PUBLIC_URL: {} })], 'x')).statusCode, 200);

    writeFileSync(join(dir, 'broken.cfgu.json'), '{ "keys": { "A": ');
    const broken = configu({}, { ...SCHEMAS, broken: 'broken.cfgu.json' });
    await assert.rejects(loadConfigu(broken), (e: unknown) => {
      assert.ok(e instanceof ConfigurationError);
      assert.equal(e.property, 'schemas.broken');
      assert.equal(
        e.message,
        `schema "broken" cannot be read: ${join(dir, 'broken.cfgu.json')}: line 1, column 18: not valid JSON: unexpected end of the file`,
      );
      return true;
    });
    const missing = configu({}, { ...SCHEMAS, gone: 'gone.cfgu.json' });
    const served = await runCli(['serve', '--config', missing, '--port', '0', '--workers', '1'], { cwd: dir });
    assert.equal(served.code, 2, served.stderr);
    assert.equal(
      served.stderr,
      `cfgu serve: ${missing}: schemas.gone: schema "gone" cannot be read: ${join(dir, 'gone.cfgu.json')}: no such file\n`,
    );
    // The server's schemas serve requests too (named schemas, docs/server.md): without any label grant, a missing one
    // stops start-up all the same.
    const noLabels = configu({ auth: { credentials: [], jwt: { grants: [] } } }, { ...SCHEMAS, gone: 'gone.cfgu.json' });
    await assert.rejects(loadConfigu(noLabels), (e: unknown) => {
      assert.ok(e instanceof ConfigurationError);
      assert.equal(e.property, 'schemas.gone');
      assert.equal(e.message, `schema "gone" cannot be read: ${join(dir, 'gone.cfgu.json')}: no such file`);
      return true;
    });
  });
});

// ---- 2. /metrics ---------------------------------------------------------------------------------------------------
describe('/metrics is read only with its own key or an explicit grant', () => {
  const scrape = (a: FastifyInstance, bearer?: string) =>
    a.inject({ method: 'GET', url: '/metrics', headers: bearer ? { authorization: `Bearer ${bearer}` } : {} });

  test('a credential scoped to one store, and a JWT with no grant or another grant: 403, no store name', async () => {
    const a = await app();
    const callers = [ONE_STORE_TOKEN, LABELS_TOKEN, await jwt(signer, { sub: 'nobody', scope: 'openid' }), await jwt(signer, { sub: 'svc-root', scope: 'cfgu:root' })];
    for (const bearer of callers) {
      const r = await scrape(a, bearer);
      exactly(r, 403, METRICS_FORBIDDEN);
      assert.ok(!r.body.includes('billing'));
    }
    exactly(await scrape(a), 401, UNAUTHORIZED);
  });

  test('a credential or a JWT grant with metrics: true, and a preshared key, read it', async () => {
    const a = await app();
    await post(a, [{ store: 'billing', set: '', schema: { keys: { A: {} } } }], PRESHARED);
    for (const bearer of [METRICS_TOKEN, await jwt(signer, { sub: 'prometheus', scope: 'cfgu:metrics' }), PRESHARED]) {
      const r = await scrape(a, bearer);
      assert.equal(r.statusCode, 200, r.body);
      assert.match(r.body, /cfgu_store_operations_total\{store="billing"/);
    }
    // The same kinds without the grant: refused.
    exactly(await scrape(a, ONE_STORE_TOKEN), 403, METRICS_FORBIDDEN);
    exactly(await scrape(a, await jwt(signer, { sub: 'prometheus', scope: 'cfgu:root' })), 403, METRICS_FORBIDDEN);
  });

  test('with a metrics key: only that key, not even a metrics grant; without auth: open', async () => {
    const a = await app({ metrics: { key: METRICS_KEY } });
    for (const bearer of [METRICS_TOKEN, await jwt(signer, { sub: 'prometheus', scope: 'cfgu:metrics' }), PRESHARED]) {
      exactly(await scrape(a, bearer), 401, {
        type: 'urn:cfgu:problem:unauthorized',
        title: 'Unauthorized',
        status: 401,
        detail: 'a valid metrics key is required (Authorization: Bearer <key>)',
      });
    }
    assert.equal((await scrape(a, METRICS_KEY)).statusCode, 200);
    const open = await app({ auth: { enabled: false } });
    assert.equal((await scrape(open)).statusCode, 200);
  });
});

// ---- 3. rate limits ------------------------------------------------------------------------------------------------
describe('rate-limit budgets are kept apart by the kind of credential', () => {
  const over = (r: LightMyRequestResponse) => {
    assert.equal(r.statusCode, 429, r.body);
    exactly(r, 429, {
      type: 'urn:cfgu:problem:rate-limited',
      title: 'Too Many Requests',
      status: 429,
      detail: `more than 2 requests in 3600 s; retry after ${r.headers['retry-after']} s`,
    });
  };
  const root = [command({ PUBLIC_URL: {} })];

  test('a JWT whose sub is a credential\'s name has its own budget, and the other way round', async () => {
    const a = await app({ rateLimit: { enabled: true, max: 2, windowSeconds: 3600 } });
    const lookalike = await jwt(signer, { sub: 'public-reader', scope: 'cfgu:public' });
    for (let i = 0; i < 2; i++) assert.equal((await post(a, root, LABELS_TOKEN)).statusCode, 200);
    over(await post(a, root, LABELS_TOKEN));
    const j = await post(a, root, lookalike);
    assert.equal(j.statusCode, 200, j.body);
    assert.equal(j.headers['x-ratelimit-remaining'], '1', 'the JWT spends a budget of its own');
    assert.equal((await post(a, root, lookalike)).statusCode, 200);
    over(await post(a, root, lookalike));
  });

  test('a credential named "preshared:1", and a JWT with that sub, never spend the preshared key\'s budget', async () => {
    const a = await app({ rateLimit: { enabled: true, max: 2, windowSeconds: 3600 } });
    const subject = await jwt(signer, { sub: 'preshared:1', scope: 'cfgu:root' });
    for (let i = 0; i < 2; i++) assert.equal((await post(a, root, LOOKALIKE_TOKEN)).statusCode, 200);
    for (let i = 0; i < 2; i++) assert.equal((await post(a, root, subject)).statusCode, 200);
    over(await post(a, root, LOOKALIKE_TOKEN));
    over(await post(a, root, subject));
    const p = await post(a, root, PRESHARED);
    assert.equal(p.statusCode, 200, p.body);
    assert.equal(p.headers['x-ratelimit-remaining'], '1');
  });
});

// ---- 4. the JWKS ---------------------------------------------------------------------------------------------------
describe('the JWKS answer is bounded in bytes and in keys, and an over-size answer is not kept', () => {
  /** A JWKS of `total` bytes, streamed in 64 KiB chunks as the client reads them; `sent` counts what was written. */
  function hugeJwks(total: number, declareLength: boolean): { handler: typeof serveJwks; sent: () => number; closed: () => boolean } {
    let sent = 0;
    let closed = false;
    const filler = JSON.stringify({ kty: 'OKP', crv: 'Ed25519', x: 'A'.repeat(43), kid: 'filler' });
    const chunk = Buffer.from(`${filler},`.repeat(Math.ceil(65536 / (filler.length + 1))));
    const handler = (_req: IncomingMessage, res: ServerResponse) => {
      res.writeHead(200, { 'content-type': 'application/json', ...(declareLength ? { 'content-length': String(total) } : {}) });
      res.on('close', () => (closed = true));
      const head = Buffer.from('{"keys":[');
      res.write(head);
      sent = head.length;
      const pump = () => {
        while (!res.destroyed && sent + chunk.length < total) {
          sent += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        if (res.destroyed) return;
        const tail = Buffer.from(`${filler}]}`.padStart(total - sent, ' '));
        sent += tail.length;
        res.end(tail);
      };
      pump();
    };
    return { handler, sent: () => sent, closed: () => closed };
  }

  test('64 MiB streamed for an unknown kid: 401, logged at error level, and the download stops near the 1 MiB limit', async () => {
    const log = captureLog();
    const a = await app({}, log.logger);
    const big = hugeJwks(64 * 1024 * 1024, false);
    serveJwks = big.handler;
    try {
      exactly(await post(a, [command({ PUBLIC_URL: {} })], await jwt(other, { scope: 'cfgu:public' })), 401, UNAUTHORIZED);
      await waitFor('the JWKS answer to be dropped', () => big.closed());
      assert.ok(big.sent() < 16 * 1024 * 1024, `the server took ${big.sent()} bytes of the JWKS`);
      const line = log.lines().find((l) => l.msg === 'authentication failed');
      assert.equal(line?.level, 50, JSON.stringify(line));
      assert.equal(line?.reason, 'the JWKS answer is larger than 1048576 bytes (auth.jwt.jwksMaxBytes); it was not read further');
    } finally {
      serveJwks = plainJwks;
    }
  });

  test('a declared Content-Length over the limit is refused before the body; the limit is a setting', async () => {
    const log = captureLog();
    const a = await app({ auth: { jwt: { jwksMaxBytes: 4096 } } }, log.logger);
    serveJwks = hugeJwks(8192, true).handler;
    try {
      exactly(await post(a, [command({ PUBLIC_URL: {} })], await jwt(signer, { scope: 'cfgu:public' })), 401, UNAUTHORIZED);
      const line = log.lines().find((l) => l.msg === 'authentication failed');
      assert.equal(line?.level, 50);
      assert.equal(line?.reason, 'the JWKS answer is 8192 bytes; the limit is 4096 (auth.jwt.jwksMaxBytes)');
    } finally {
      serveJwks = plainJwks;
    }
  });

  test('more keys than jwksMaxKeys (the signing key among them): 401, and the set fetched before stays in use', async () => {
    const log = captureLog();
    const a = await app({ auth: { jwt: { jwksMaxKeys: 3 } } }, log.logger);
    // First a good set, with `signer` only.
    assert.equal((await post(a, [command({ PUBLIC_URL: {} })], await jwt(signer, { scope: 'cfgu:public' }))).statusCode, 200);
    // Then the provider answers 4 keys, `other` among them: refused, and `other` is not learnt.
    const fillers = await Promise.all([1, 2].map(async (i) => (await newSigner(`f-${i}`)).jwk));
    serveJwks = (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(jwksOf(signer.jwk, other.jwk, ...fillers));
    try {
      const fresh = await jwt(other, { sub: 'svc-other', scope: 'cfgu:public' });
      exactly(await post(a, [command({ PUBLIC_URL: {} })], fresh), 401, UNAUTHORIZED);
      const line = log.lines().find((l) => l.msg === 'authentication failed');
      assert.equal(line?.level, 50);
      assert.equal(line?.reason, 'the JWKS holds 4 keys; the limit is 3 (auth.jwt.jwksMaxKeys)');
      // The set of before still verifies `signer`'s tokens (a new token: not from the verified-token cache).
      const again = await post(a, [command({ PUBLIC_URL: {} })], await jwt(signer, { sub: 'svc-again', scope: 'cfgu:public' }));
      assert.equal(again.statusCode, 200, again.body);
      // The same 4 keys within the default limit of 100 are accepted.
      const b = await app({}, log.logger);
      assert.equal((await post(b, [command({ PUBLIC_URL: {} })], fresh)).statusCode, 200);
    } finally {
      serveJwks = plainJwks;
    }
  });
});

// ---- 5. the CLI ----------------------------------------------------------------------------------------------------
describe('cfgu never drops a key silently: __proto__ is stored, a name no store can hold is a usage error', () => {
  const files = () => ({ 'app.cfgu.json': '{ "keys": { "__proto__": {}, "toString": {}, "A": {} } }', 'data.json': [] });

  test('upsert --kv __proto__=V and -k __proto__ -v V write the value as an ordinary key', async () => {
    for (const args of [['--kv', '__proto__=V', '--kv', 'A=1'], ['-k', '__proto__', '-v', 'V', '-k', 'A', '-v', '1']]) {
      const cwd = project(files());
      const r = await runCli(['upsert', '--schema', 'app.cfgu.json', ...args], { cwd });
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stdout, '2 changes in store "main", root set:\n+ __proto__ = "V"\n+ A = "1"\n');
      assert.deepEqual(JSON.parse(readFileSync(join(cwd, 'data.json'), 'utf8')), [
        { set: '', key: '__proto__', value: 'V' },
        { set: '', key: 'A', value: '1' },
      ]);
    }
  });

  test('eval --override takes __proto__ and toString as keys, not as given twice', async () => {
    const cwd = project(files());
    const r = await runCli(['eval', '--schema', 'app.cfgu.json', '--override', '__proto__=p', '--override', 'toString=t'], { cwd });
    assert.equal(r.code, 0, r.stderr);
    const result = JSON.parse(r.stdout) as Record<string, { value: string }>;
    assert.equal(Object.getOwnPropertyDescriptor(result, '__proto__')?.value.value, 'p');
    assert.equal(Object.getOwnPropertyDescriptor(result, 'toString')?.value.value, 't');
  });

  test('a key that is not a ConfigKey, or a reserved word: exit 2 with the reason, from every flag; nothing written', async () => {
    const cases: Array<[string[], string]> = [
      [['--kv', 'a b=1'], '--kv: key "a b" must match ^[A-Za-z0-9_-]+$'],
      [['--kv', 'x.y=1'], '--kv: key "x.y" must match ^[A-Za-z0-9_-]+$'],
      [['-k', 'this', '-v', '1'], '-k: key "this" is a reserved word'],
      [['-k', 'Config_Set'], '-k: key "Config_Set" is a reserved word'],
    ];
    for (const [args, message] of cases) {
      const cwd = project(files());
      const r = await runCli(['upsert', '--schema', 'app.cfgu.json', '--kv', 'A=1', ...args], { cwd });
      assert.equal(r.code, 2, r.stderr);
      assert.equal(r.stderr, `cfgu upsert: ${message}\nRun "cfgu upsert --help" for usage.\n`);
      assert.equal(r.stdout, '');
      assert.deepEqual(JSON.parse(readFileSync(join(cwd, 'data.json'), 'utf8')), []);
    }
  });
});
