/**
 * In-process tests of the HTTP app (buildServer + inject) over the real engine, the real `.configu` loader and store
 * registry, and the real expression sandbox: every route and every row of the error table.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino, type Logger } from 'pino';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { buildServer, Lifecycle, settingsWith, type SettingsOverrides } from '../../src/server/index.js';
import { loadConfiguration } from '../../src/config/index.js';
import { createStoreRegistry, type StoreRegistry } from '../../src/stores/index.js';
import type { StoreRegistryWithStatus } from '../../src/stores/registry.js';
import { createSandboxEvaluator } from '../../src/expressions/index.js';
import type { ExpressionEvaluator } from '../../src/core/ports.js';
import type { StoreResolver } from '../../src/core/ports.js';
import { removeTempDirs, tempDir, writeJson } from './helpers.js';
import { failingOnHidden, failingOnHiddenErrors, lineRecorder, planted } from '../helpers/capture.js';

const KEY = 'test-key-0123456789';
/** The stored value of the hidden key API_TOKEN: a planted secret (test/helpers/capture.ts). */
const API_TOKEN = planted('routes');
let dir: string;
let registry: StoreRegistry;
let evaluator: ExpressionEvaluator;
const apps: FastifyInstance[] = [];
const silent = pino({ level: 'silent' }) as unknown as Logger;

/** Captured JSON log lines of an app. */
function captureLogger(): { logger: Logger; lines: () => Array<Record<string, any>>; raw: () => string } {
  let raw = '';
  const captured = lineRecorder('log-line');
  const stream = new Writable({
    write(chunk, _enc, cb) {
      raw += chunk.toString();
      captured.write(chunk);
      cb();
    },
  });
  const logger = pino({ level: 'info', redact: { paths: ['req.headers.authorization', 'headers.authorization'], censor: '[redacted]' } }, stream) as unknown as Logger;
  return { logger, raw: () => raw, lines: () => raw.split('\n').filter(Boolean).map((l) => JSON.parse(l)) };
}

async function app(overrides: SettingsOverrides = {}, extra: Partial<Parameters<typeof buildServer>[0]> = {}): Promise<FastifyInstance> {
  const a = await buildServer({
    registry,
    evaluator,
    settings: settingsWith(overrides),
    logger: silent,
    ready: true,
    ...extra,
  });
  apps.push(a);
  return a;
}

const exportReq = (a: FastifyInstance, body: unknown, headers: Record<string, string> = {}) =>
  a.inject({ method: 'POST', url: '/export', headers: { 'content-type': 'application/json', ...headers }, payload: JSON.stringify(body) });

function problemOf(r: LightMyRequestResponse, status: number): Record<string, any> {
  assert.equal(r.statusCode, status, r.body);
  assert.match(String(r.headers['content-type']), /^application\/problem\+json/);
  const p = r.json();
  assert.equal(p.status, status);
  assert.equal(typeof p.type, 'string');
  assert.equal(typeof p.title, 'string');
  assert.equal(typeof p.detail, 'string');
  assert.doesNotMatch(r.body, /\n\s+at |\/tmp\/|node_modules|\.configu/, 'no stack or path in a problem body');
  return p;
}

before(async () => {
  dir = tempDir();
  writeJson(join(dir, 'data.json'), [
    { set: '', key: 'GREETING', value: 'hello' },
    { set: '', key: 'PORT', value: '3000' },
    { set: '', key: 'LOG_LEVEL', value: 'info' },
    { set: 'prod', key: 'PORT', value: '8443' },
    { set: 'prod', key: 'FLAGS', value: '{"beta":false}' },
    { set: 'prod/eu', key: 'REGION', value: 'eu-west-1' },
    { set: '', key: 'MODE', value: 'fast' },
    { set: 'prod', key: 'API_TOKEN', value: API_TOKEN },
  ]);
  writeJson(join(dir, 'flaky.json'), [{ set: '', key: 'A', value: 'from-store' }]);
  writeFileSync(join(dir, 'broken.json'), '{ this is not json');
  writeJson(join(dir, '.configu'), {
    backup: 'backup.sqlite',
    stores: {
      main: { type: 'json-file', configuration: { path: 'data.json' }, default: true },
      memory: { type: 'in-memory' },
      broken: { type: 'json-file', configuration: { path: 'broken.json' } },
      flaky: { type: 'json-file', configuration: { path: 'flaky.json' }, backup: true },
    },
  });
  const loaded = await loadConfiguration({ file: join(dir, '.configu') });
  registry = createStoreRegistry(loaded, { logger: { warn: () => undefined } });
  await registry.init();
  evaluator = await createSandboxEvaluator({ workers: 1, spares: 0, timeoutMs: 2000, memoryMb: 64 });
});

after(async () => {
  for (const a of apps) await a.close();
  await registry?.close();
  await evaluator?.close();
  removeTempDirs();
});

describe('GET /live and GET /ready', () => {
  test('/live answers uptime in seconds', async () => {
    const a = await app();
    const r = await a.inject({ method: 'GET', url: '/live' });
    assert.equal(r.statusCode, 200);
    assert.match(String(r.headers['content-type']), /^application\/json/);
    const body = r.json();
    assert.deepEqual(Object.keys(body), ['uptime']);
    assert.equal(typeof body.uptime, 'number');
    assert.ok(body.uptime >= 0);
  });

  test('/ready: 503 with an empty body while starting, 200 once ready, 503 again from the start of shutdown', async () => {
    const lifecycle = new Lifecycle();
    const a = await app({}, { lifecycle, ready: false });
    let r = await a.inject({ method: 'GET', url: '/ready' });
    assert.equal(r.statusCode, 503);
    assert.equal(r.body, '');
    lifecycle.markReady();
    r = await a.inject({ method: 'GET', url: '/ready' });
    assert.equal(r.statusCode, 200);
    assert.deepEqual(r.json(), { status: 'ready' });
    lifecycle.beginShutdown();
    r = await a.inject({ method: 'GET', url: '/ready' });
    assert.equal(r.statusCode, 503);
    assert.equal(r.body, '');
    lifecycle.markReady(); // shutdown is one-way
    r = await a.inject({ method: 'GET', url: '/ready' });
    assert.equal(r.statusCode, 503);
  });

  test('HEAD works on the health routes', async () => {
    const a = await app();
    const r = await a.inject({ method: 'HEAD', url: '/live' });
    assert.equal(r.statusCode, 200);
  });
});

describe('POST /export', () => {
  test('exports coerced values over the set hierarchy with overrides, defaults, enum scalars, null Cfgus, hidden keys', async () => {
    const a = await app();
    const r = await exportReq(a, [
      {
        store: 'main',
        set: 'prod/eu',
        schema: {
          keys: {
            GREETING: null,
            PORT: { test: 'Number.isInteger($.value)' },
            REGION: { enum: ['us-east-1', 'eu-west-1'] },
            FLAGS: {},
            LOG_LEVEL: { enum: ['debug', 'info'] },
            RETRIES: { default: 0 },
            DEBUG: { default: false },
            LEVEL: { enum: [1, 2, 3], default: 2 },
            MODE: { hidden: true },
            SECRET: { default: 'x', hidden: true },
          },
        },
        configs: { LOG_LEVEL: 'debug' },
      },
    ]);
    assert.equal(r.statusCode, 200, r.body);
    assert.match(String(r.headers['content-type']), /^application\/json/);
    assert.equal(r.headers['x-configu-backup'], undefined);
    assert.equal(r.headers['cache-control'], 'no-store');
    assert.deepEqual(r.json(), {
      GREETING: 'hello',
      PORT: 8443,
      REGION: 'eu-west-1',
      FLAGS: { beta: false },
      LOG_LEVEL: 'debug',
      RETRIES: 0,
      DEBUG: false,
      LEVEL: 2,
    });
  });

  test('a hidden key holding a planted secret: failing tests and consts built from it never show it, in the answer or the log; the export omits it', async () => {
    const { logger, raw, lines } = captureLogger();
    const a = await app({}, { logger });
    const bad = await exportReq(a, [{ set: 'prod', schema: { keys: failingOnHidden('API_TOKEN') } }]);
    assert.deepEqual(problemOf(bad, 422).errors, failingOnHiddenErrors('API_TOKEN'));
    const ok = await exportReq(a, [{ set: 'prod', schema: { keys: { API_TOKEN: { hidden: true }, TOKEN_LENGTH: { const: '{{ $.configs.API_TOKEN.value.length }}' }, PORT: {} } } }]);
    assert.equal(ok.statusCode, 200, ok.body);
    assert.deepEqual(ok.json(), { TOKEN_LENGTH: API_TOKEN.length, PORT: 8443 });
    assert.deepEqual(lines().filter((l) => l.msg === 'request').map((l) => l.status), [422, 200]);
    assert.ok(!raw().includes(API_TOKEN));
  });

  test('the default store is used when a command names none; a pipeline pipes results along', async () => {
    const a = await app();
    const r = await exportReq(a, [
      { schema: { keys: { GREETING: {} } } },
      { store: 'memory', schema: { keys: { URL: { const: '{{ $.configs.GREETING.value }}-world' } } } },
    ]);
    assert.equal(r.statusCode, 200, r.body);
    assert.deepEqual(r.json(), { GREETING: 'hello', URL: 'hello-world' });
  });

  test('X-Configu-Backup names the stores answered from the backup', async () => {
    const a = await app();
    const body = [{ store: 'flaky', schema: { keys: { A: {} } } }];
    let r = await exportReq(a, body);
    assert.equal(r.statusCode, 200, r.body);
    assert.deepEqual(r.json(), { A: 'from-store' });
    (registry as StoreRegistryWithStatus).backup!.flush(); // the backup copy is written off the request path: write it now
    writeFileSync(join(dir, 'flaky.json'), '[ broken'); // seen by the next request (the file is checked on each one)
    r = await exportReq(a, body);
    assert.equal(r.statusCode, 200, r.body);
    assert.deepEqual(r.json(), { A: 'from-store' });
    assert.equal(r.headers['x-configu-backup'], 'flaky');
  });

  test('accepts application/*+json and a charset', async () => {
    const a = await app();
    const r = await a.inject({
      method: 'POST',
      url: '/export',
      headers: { 'content-type': 'application/vnd.cfgu+json; charset=utf-8' },
      payload: JSON.stringify([{ schema: { keys: { GREETING: {} } } }]),
    });
    assert.equal(r.statusCode, 200, r.body);
  });
});

describe('error table', () => {
  test('400: malformed JSON', async () => {
    const a = await app();
    const r = await a.inject({ method: 'POST', url: '/export', headers: { 'content-type': 'application/json' }, payload: '[{"schema": ' });
    const p = problemOf(r, 400);
    assert.equal(p.type, 'urn:cfgu:problem:invalid-request');
    assert.equal(p.detail, 'the request body is not valid JSON');
  });

  test('400: a __proto__ property (prototype-poisoning protection), with a detail that says so', async () => {
    const a = await app();
    const r = await a.inject({
      method: 'POST',
      url: '/export',
      headers: { 'content-type': 'application/json' },
      payload: '[{"schema":{"keys":{"__proto__":{"default":"x"}}}}]',
    });
    const p = problemOf(r, 400);
    assert.equal(p.type, 'urn:cfgu:problem:invalid-request');
    assert.equal(p.detail, 'the request body contains a `__proto__` or `constructor.prototype` property, which the server refuses');
  });

  test('a body the cache keeps is checked again while it fails, and passes again once it passed (body-validation.ts)', async () => {
    const a = await app();
    // Over the body cache's floor, so the same parsed (frozen) value comes back for the same text.
    const pad = 'x'.repeat(400);
    const bad = [{ schema: { keys: { A: { description: pad } } }, store: 'main', extra: true }];
    for (let i = 0; i < 3; i++) {
      const p = problemOf(await exportReq(a, bad), 400);
      assert.deepEqual(p.issues, [{ path: '/0/extra', message: 'is not an allowed property' }], `round ${i}`);
    }
    const good = [{ store: 'main', schema: { keys: { A: { description: pad, default: 'a' } } } }];
    for (let i = 0; i < 3; i++) {
      const r = await exportReq(a, good);
      assert.equal(r.statusCode, 200, r.body);
      assert.deepEqual(r.json(), { A: 'a' });
    }
  });

  test('400: empty body, not an array, an empty array, unknown properties, a missing schema', async () => {
    const a = await app();
    let r = await a.inject({ method: 'POST', url: '/export', headers: { 'content-type': 'application/json' }, payload: '' });
    assert.equal(problemOf(r, 400).type, 'urn:cfgu:problem:invalid-request');

    r = await exportReq(a, { schema: { keys: {} } });
    let p = problemOf(r, 400);
    assert.deepEqual(p.issues, [{ path: '/', message: 'must be array' }]);

    r = await exportReq(a, []);
    p = problemOf(r, 400);
    assert.match(p.detail, /fewer than 1 items/);

    r = await exportReq(a, [{ schema: { keys: { A: {} } }, store: 'main', extra: true }]);
    p = problemOf(r, 400);
    assert.deepEqual(p.issues, [{ path: '/0/extra', message: 'is not an allowed property' }]);

    r = await exportReq(a, [{ schema: { keys: { A: {} }, other: 1 } }]);
    assert.deepEqual(problemOf(r, 400).issues, [{ path: '/0/schema/other', message: 'is not an allowed property' }]);

    r = await exportReq(a, [{ store: 'main' }]);
    assert.deepEqual(problemOf(r, 400).issues, [{ path: '/0/schema', message: 'is required' }]);

    r = await exportReq(a, [{ schema: { keys: { A: 'text' } } }]);
    assert.equal(problemOf(r, 400).issues[0].path, '/0/schema/keys/A');

    r = await exportReq(a, [{ set: 5, schema: { keys: { A: {} } } }]);
    assert.equal(problemOf(r, 400).issues[0].path, '/0/set', 'no type coercion');
  });

  test('400: invalid schema, key and set come from the engine with the right type', async () => {
    const a = await app();
    let r = await exportReq(a, [{ schema: { keys: { A: { type: 'String' } } } }]);
    let p = problemOf(r, 400);
    assert.equal(p.type, 'urn:cfgu:problem:invalid-schema');
    assert.match(p.detail, /test/, 'the v0 property names its replacement');

    r = await exportReq(a, [{ schema: { keys: { 'not a key': {} } } }]);
    p = problemOf(r, 400);
    assert.match(p.type, /^urn:cfgu:problem:invalid-(key|schema)$/);
    assert.match(p.detail, /not a key/);

    r = await exportReq(a, [{ set: 'prod//eu', schema: { keys: { A: {} } } }]);
    p = problemOf(r, 400);
    assert.equal(p.type, 'urn:cfgu:problem:invalid-set');

    r = await exportReq(a, [{ schema: { keys: {} } }]);
    problemOf(r, 400);
  });

  test('400: unknown store names the store and the known stores', async () => {
    const a = await app();
    const r = await exportReq(a, [{ store: 'nope', schema: { keys: { A: {} } } }]);
    const p = problemOf(r, 400);
    assert.equal(p.type, 'urn:cfgu:problem:unknown-store');
    assert.equal(p.store, 'nope');
    assert.deepEqual([...p.knownStores].sort(), ['broken', 'flaky', 'main', 'memory']);
    assert.match(p.detail, /"nope"/);
    for (const n of ['main', 'memory', 'broken', 'flaky']) assert.match(p.detail, new RegExp(`"${n}"`));
  });

  test('422: required, enum and test failures are all listed in errors', async () => {
    const a = await app();
    const r = await exportReq(a, [
      { schema: { keys: { GREETING: {} } } },
      {
        set: 'prod',
        schema: {
          keys: {
            MISSING: { required: true },
            LOG_LEVEL: { enum: ['debug', 'warn'] },
            PORT: { test: '$.value < 1024' },
          },
        },
      },
    ]);
    const p = problemOf(r, 422);
    assert.equal(p.type, 'urn:cfgu:problem:validation-failed');
    const byRule = Object.fromEntries(p.errors.map((e: any) => [e.rule, e]));
    assert.deepEqual(Object.keys(byRule).sort(), ['enum', 'required', 'test']);
    assert.deepEqual({ ...byRule.required, message: undefined }, { command: 1, key: 'MISSING', rule: 'required', message: undefined });
    assert.equal(byRule.enum.key, 'LOG_LEVEL');
    assert.equal(byRule.test.key, 'PORT');
    for (const e of p.errors) {
      assert.equal(e.command, 1);
      assert.equal(typeof e.message, 'string');
      assert.ok(e.message.length > 0);
    }
  });

  test('422: an override for an undeclared key', async () => {
    const a = await app();
    const r = await exportReq(a, [{ schema: { keys: { A: {} } }, configs: { B: 'x' } }]);
    const p = problemOf(r, 422);
    assert.equal(p.errors[0].rule, 'override');
  });

  test('415: a Content-Type other than JSON', async () => {
    const a = await app();
    for (const ct of ['text/plain', 'application/x-www-form-urlencoded', 'application/xml']) {
      const r = await a.inject({ method: 'POST', url: '/export', headers: { 'content-type': ct }, payload: '[]' });
      const p = problemOf(r, 415);
      assert.equal(p.type, 'about:blank');
      assert.equal(p.title, 'Unsupported Media Type');
    }
  });

  test('413: body, commands and keys over the limits', async () => {
    const a = await app({ limits: { bodyBytes: 2048, commands: 3, keys: 4 } });
    let r = await exportReq(a, [{ schema: { keys: { A: { description: 'x'.repeat(3000) } } } }]);
    let p = problemOf(r, 413);
    assert.equal(p.type, 'urn:cfgu:problem:limit-exceeded');

    r = await exportReq(a, Array.from({ length: 4 }, () => ({ schema: { keys: { A: {} } } })));
    p = problemOf(r, 413);
    assert.equal(p.detail, 'the pipeline has 4 commands; the limit is 3');

    r = await exportReq(a, [{ schema: { keys: { A: {} } } }, { schema: { keys: { A: {}, B: {}, C: {}, D: {}, E: {} } } }]);
    p = problemOf(r, 413);
    assert.equal(p.detail, 'command 1 declares 5 keys; the limit is 4');

    // at the limits: fine
    r = await exportReq(a, Array.from({ length: 3 }, () => ({ store: 'memory', schema: { keys: { A: {}, B: {}, C: {}, D: {} } } })));
    assert.equal(r.statusCode, 200, r.body);
  });

  test('413 with the default limits: 51 commands, 10,001 keys', async () => {
    const a = await app();
    let r = await exportReq(a, Array.from({ length: 51 }, () => ({ schema: { keys: { A: {} } } })));
    assert.equal(problemOf(r, 413).detail, 'the pipeline has 51 commands; the limit is 50');
    const keys: Record<string, null> = {};
    for (let i = 0; i <= 10_000; i++) keys[`K${i}`] = null;
    r = await exportReq(a, [{ schema: { keys } }]);
    assert.equal(problemOf(r, 413).detail, 'command 0 declares 10001 keys; the limit is 10000');
  });

  test('404 for an unknown route, 405 with Allow for a wrong method', async () => {
    const a = await app();
    let r = await a.inject({ method: 'GET', url: '/nope?x=1' });
    let p = problemOf(r, 404);
    assert.deepEqual(p, { type: 'about:blank', title: 'Not Found', status: 404, detail: 'no route GET /nope' });

    r = await a.inject({ method: 'GET', url: '/export' });
    p = problemOf(r, 405);
    assert.equal(r.headers.allow, 'POST');
    assert.equal(p.title, 'Method Not Allowed');

    r = await a.inject({ method: 'POST', url: '/live' });
    problemOf(r, 405);
    assert.equal(r.headers.allow, 'GET, HEAD');
  });

  test('503 with Retry-After when a store cannot be read', async () => {
    const a = await app();
    const r = await exportReq(a, [{ store: 'broken', schema: { keys: { A: {} } } }]);
    const p = problemOf(r, 503);
    assert.equal(p.type, 'urn:cfgu:problem:store-unavailable');
    assert.match(String(r.headers['retry-after']), /^\d+$/);
    assert.match(p.detail, /"broken"/);
  });

  test('503 with Retry-After for a postgres store on a closed port', async () => {
    const port = 1; // privileged and unused: nothing listens there
    const pgDir = tempDir();
    writeJson(join(pgDir, '.configu'), {
      stores: { pg: { type: 'postgres', configuration: { host: '127.0.0.1', port, username: 'u', password: 'p', database: 'd', timeout: 1000 } } },
    });
    const pgRegistry = createStoreRegistry(await loadConfiguration({ file: join(pgDir, '.configu') }), { logger: { warn: () => undefined } });
    await pgRegistry.init();
    try {
      const a = await app({}, { registry: pgRegistry });
      const r = await exportReq(a, [{ store: 'pg', schema: { keys: { A: {} } } }]);
      problemOf(r, 503);
      assert.match(String(r.headers['retry-after']), /^\d+$/);
      assert.doesNotMatch(r.body, /ECONNREFUSED|127\.0\.0\.1|password/);
    } finally {
      await pgRegistry.close();
    }
  });

  test('500: a generic body; the detail goes to the log with the request id', async () => {
    const { logger, lines, raw } = captureLogger();
    const failing: StoreResolver = {
      names: () => ['x'],
      resolve: () => {
        throw new Error('boom at /srv/secret/path with password hunter2');
      },
    };
    const a = await app({}, { registry: failing, logger });
    const r = await exportReq(a, [{ store: 'x', schema: { keys: { A: {} } } }], { 'x-request-id': 'req-500-test' });
    const p = problemOf(r, 500);
    assert.deepEqual(p, {
      type: 'about:blank',
      title: 'Internal Server Error',
      status: 500,
      detail: 'the server could not process the request; quote the request id to the operator',
      requestId: 'req-500-test',
    });
    assert.doesNotMatch(r.body, /boom|hunter2|secret/);
    const logged = lines().find((l) => l.msg === 'request failed');
    assert.ok(logged, raw());
    assert.equal(logged.reqId, 'req-500-test');
    assert.match(JSON.stringify(logged.err), /boom/);
  });
});

describe('auth', () => {
  test('off: /export needs no key', async () => {
    const a = await app();
    const r = await exportReq(a, [{ schema: { keys: { GREETING: {} } } }]);
    assert.equal(r.statusCode, 200);
  });

  test('on: 401 with WWW-Authenticate without or with a wrong key; 200 with a right one; health stays open', async () => {
    const a = await app({ auth: { enabled: true, presharedKeys: ['another-key-abcdef', KEY] } });
    const body = [{ schema: { keys: { GREETING: {} } } }];
    const wrong: Array<Record<string, string>> = [{}, { authorization: 'Bearer wrong-key-000000' }, { authorization: KEY }, { authorization: `Basic ${KEY}` }, { authorization: `Bearer ${KEY}x` }];
    for (const headers of wrong) {
      const r = await exportReq(a, body, headers);
      const p = problemOf(r, 401);
      assert.equal(r.headers['www-authenticate'], 'Bearer realm="cfgu"');
      assert.deepEqual(p, {
        type: 'urn:cfgu:problem:unauthorized',
        title: 'Unauthorized',
        status: 401,
        detail: 'a valid bearer key is required (Authorization: Bearer <key>)',
      });
    }
    for (const k of [KEY, 'another-key-abcdef']) {
      const r = await exportReq(a, body, { authorization: `Bearer ${k}` });
      assert.equal(r.statusCode, 200, r.body);
    }
    assert.equal((await exportReq(a, body, { authorization: `bearer ${KEY}` })).statusCode, 200, 'the scheme is case-insensitive');
    assert.equal((await a.inject({ method: 'GET', url: '/live' })).statusCode, 200);
    assert.equal((await a.inject({ method: 'GET', url: '/ready' })).statusCode, 200);
    // 401 comes before the body is even parsed
    const r = await a.inject({ method: 'POST', url: '/export', headers: { 'content-type': 'text/plain' }, payload: 'x' });
    problemOf(r, 401);
  });

  test('on: /docs and /openapi.json need the key unless docs are public', async () => {
    const a = await app({ auth: { enabled: true, presharedKeys: [KEY] } });
    for (const url of ['/docs', '/docs/', '/openapi.json', '/docs/json']) {
      problemOf(await a.inject({ method: 'GET', url }), 401);
      const ok = await a.inject({ method: 'GET', url, headers: { authorization: `Bearer ${KEY}` } });
      assert.equal(ok.statusCode, 200, url);
    }
    const pub = await app({ auth: { enabled: true, presharedKeys: [KEY] }, docs: { public: true } });
    for (const url of ['/docs/', '/openapi.json']) assert.equal((await pub.inject({ method: 'GET', url })).statusCode, 200, url);
    problemOf(await exportReq(pub, [{ schema: { keys: { A: {} } } }]), 401);
    const doc = (await pub.inject({ method: 'GET', url: '/openapi.json' })).json();
    assert.deepEqual(doc.paths['/export'].post.security, [{ bearer: [] }]);
    assert.equal(doc.components.securitySchemes.bearer.scheme, 'bearer');
  });
});

describe('docs', () => {
  test('/openapi.json documents every route, the request schema with examples and every error response', async () => {
    const a = await app();
    const r = await a.inject({ method: 'GET', url: '/openapi.json' });
    assert.equal(r.statusCode, 200);
    const doc = r.json();
    assert.equal(doc.openapi, '3.1.0');
    assert.deepEqual(Object.keys(doc.paths).sort(), ['/changes', '/explain', '/export', '/history', '/live', '/matrix', '/ready', '/rollback', '/schemas', '/schemas/{name}', '/session', '/sets', '/stores', '/upsert']);
    const changes = doc.paths['/changes'].get;
    assert.match(changes.responses['200'].description, /^A stream of Server-Sent Events: first `event: ready`/);
    assert.deepEqual(changes.responses['200'].content['text/event-stream'].schema, { type: 'string' });
    for (const s of ['400', '401', '403', '405', '429', '500', '503']) assert.ok(changes.responses[s].content['application/problem+json'], `/changes response ${s}`);
    const matrix = doc.paths['/matrix'].post;
    assert.ok(matrix.requestBody.content['application/json'].schema);
    for (const s of ['200', '400', '401', '403', '405', '413', '415', '422', '500', '503']) assert.ok(matrix.responses[s], `/matrix response ${s}`);
    const op = doc.paths['/export'].post;
    const media = op.requestBody.content['application/json'];
    assert.ok(media.schema);
    assert.ok(media.example || media.examples, 'request examples');
    for (const s of ['200', '400', '401', '405', '413', '415', '422', '500', '503']) assert.ok(op.responses[s], `response ${s}`);
    assert.ok(op.responses['422'].content['application/problem+json']);
    assert.ok(op.responses['503'].headers['Retry-After']);
    assert.ok(doc.paths['/ready'].get.responses['503']);
    // Both schema routes answer another method with 405 and Allow.
    for (const path of ['/schemas', '/schemas/{name}']) assert.ok(doc.paths[path].get.responses['405'].headers.Allow, `${path} response 405`);
    assert.ok(doc.components.schemas.Cfgu && doc.components.schemas.EvalCommand && doc.components.schemas.Problem);
    // default and enum items may be any JSON value
    assert.equal(doc.components.schemas.Cfgu.properties.default.type, undefined);
    assert.equal(doc.components.schemas.Cfgu.properties.enum.items, undefined);
  });

  test('/docs serves the interactive page and its assets locally', async () => {
    const a = await app();
    let r = await a.inject({ method: 'GET', url: '/docs' });
    assert.equal(r.statusCode, 200);
    assert.match(String(r.headers['content-type']), /text\/html/);
    assert.doesNotMatch(r.body, /https?:\/\/(?!localhost)[^"']*\.(js|css)/, 'no CDN assets');
    r = await a.inject({ method: 'GET', url: '/docs/static/swagger-ui-bundle.js' });
    assert.equal(r.statusCode, 200);
  });

  test('docs can be turned off', async () => {
    const a = await app({ docs: { enabled: false } });
    problemOf(await a.inject({ method: 'GET', url: '/docs' }), 404);
    problemOf(await a.inject({ method: 'GET', url: '/openapi.json' }), 404);
  });
});

describe('logs and request ids', () => {
  test('one line per request with the request id; no body, value, override or key in the log', async () => {
    const { logger, raw, lines } = captureLogger();
    const a = await app({ auth: { enabled: true, presharedKeys: [KEY] } }, { logger });
    const r = await exportReq(
      a,
      [{ schema: { keys: { GREETING: {}, PASSWORD: {} } }, configs: { PASSWORD: 'override-value-s3cret' } }],
      { authorization: `Bearer ${KEY}`, 'x-request-id': 'abc-123' },
    );
    assert.equal(r.statusCode, 200, r.body);
    assert.equal(r.headers['x-request-id'], 'abc-123');
    const reqLines = lines().filter((l) => l.msg === 'request');
    assert.equal(reqLines.length, 1);
    assert.equal(reqLines[0]!.reqId, 'abc-123');
    assert.equal(reqLines[0]!.status, 200);
    assert.equal(reqLines[0]!.path, '/export');
    assert.doesNotMatch(raw(), /override-value-s3cret|hello|test-key-0123456789|GREETING/);
  });

  test('a generated id when none (or an unsafe one) is given', async () => {
    const a = await app();
    let r = await a.inject({ method: 'GET', url: '/live' });
    assert.match(String(r.headers['x-request-id']), /^[0-9a-f-]{36}$/);
    r = await a.inject({ method: 'GET', url: '/live', headers: { 'x-request-id': 'bad id\twith spaces' } });
    assert.match(String(r.headers['x-request-id']), /^[0-9a-f-]{36}$/);
  });

  test('log.enabled false: no request lines', async () => {
    const { logger, lines } = captureLogger();
    const a = await app({ log: { enabled: false } }, { logger });
    assert.equal((await exportReq(a, [{ schema: { keys: { GREETING: {} } } }])).statusCode, 200);
    assert.equal((await a.inject({ method: 'GET', url: '/nowhere' })).statusCode, 404);
    assert.equal(lines().filter((l) => l.msg === 'request').length, 0);
  });

  test('successful health probes have no request line unless log.probes; a failed /ready always has one', async () => {
    for (const probes of [false, true]) {
      const { logger, lines } = captureLogger();
      const lifecycle = new Lifecycle();
      const a = await app({ log: { enabled: true, probes } }, { logger, lifecycle, ready: false });
      assert.equal((await a.inject({ method: 'GET', url: '/ready' })).statusCode, 503);
      lifecycle.markReady();
      assert.equal((await a.inject({ method: 'GET', url: '/ready' })).statusCode, 200);
      assert.equal((await a.inject({ method: 'GET', url: '/live' })).statusCode, 200);
      assert.equal((await a.inject({ method: 'HEAD', url: '/live' })).statusCode, 200);
      assert.equal((await exportReq(a, [{ schema: { keys: { GREETING: {} } } }])).statusCode, 200);
      const got = lines()
        .filter((l) => l.msg === 'request')
        .map((l) => `${l.method} ${l.path} ${l.status}`);
      assert.deepEqual(got, probes ? ['GET /ready 503', 'GET /ready 200', 'GET /live 200', 'HEAD /live 200', 'POST /export 200'] : ['GET /ready 503', 'POST /export 200'], `probes ${probes}`);
    }
  });
});

describe('CORS', () => {
  test('allowed origins get CORS headers; the preflight needs no key', async () => {
    const a = await app({ http: { allowedOrigins: ['https://app.example.com'] }, auth: { enabled: true, presharedKeys: [KEY] } });
    const pre = await a.inject({
      method: 'OPTIONS',
      url: '/export',
      headers: { origin: 'https://app.example.com', 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization,content-type' },
    });
    assert.equal(pre.statusCode, 204);
    assert.equal(pre.headers['access-control-allow-origin'], 'https://app.example.com');
    const r = await exportReq(a, [{ schema: { keys: { GREETING: {} } } }], { origin: 'https://app.example.com', authorization: `Bearer ${KEY}` });
    assert.equal(r.statusCode, 200);
    assert.equal(r.headers['access-control-allow-origin'], 'https://app.example.com');
    const other = await exportReq(a, [{ schema: { keys: { GREETING: {} } } }], { origin: 'https://evil.example.com', authorization: `Bearer ${KEY}` });
    assert.equal(other.headers['access-control-allow-origin'], undefined);
  });

  test('no CORS headers by default', async () => {
    const a = await app();
    const r = await a.inject({ method: 'GET', url: '/live', headers: { origin: 'https://app.example.com' } });
    assert.equal(r.headers['access-control-allow-origin'], undefined);
  });
});
