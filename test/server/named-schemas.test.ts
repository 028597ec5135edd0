/**
 * Named schemas in the app (buildServer + inject, the real engine, store registry and sandbox): a command naming a
 * schema of `.configu`'s `schemas` answers exactly as the same schema inline; the refusals of a name (unknown, a file
 * path, a URL entry, a server without named schemas) and of a name where an object belongs (and back), each with its
 * exact problem body; GET /schemas and GET /schemas/{name} (ETag, 304, 404); scopes (a scoped credential sees and uses
 * only the schemas whose every key it may read; a named schema's keys are judged by its own labels); a reload through
 * the registry (valid: served at once; invalid: the last good version stays, logged and counted).
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino, type Logger } from 'pino';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { buildServer, settingsWith } from '../../src/server/index.js';
import { load, type Loaded } from '../../src/server/process/start.js';
import { NamedSchemas } from '../../src/server/schemas/registry.js';
import { createStoreRegistry, type StoreRegistry } from '../../src/stores/index.js';
import { loadConfiguration } from '../../src/config/index.js';
import { createSandboxEvaluator } from '../../src/expressions/index.js';
import type { ExpressionEvaluator } from '../../src/core/ports.js';
import { removeTempDirs, tempDir, writeJson } from './helpers.js';

const sha256 = (t: string) => createHash('sha256').update(t, 'utf8').digest('hex');
const PRESHARED = 'preshared-key-0123456789';
const PUBLIC_TOKEN = 'public-token-0123456789';
const WIDE_TOKEN = 'wide-token-0123456789';

let dir: string;
let registry: StoreRegistry;
let evaluator: ExpressionEvaluator;
const apps: FastifyInstance[] = [];
const silent = pino({ level: 'silent' }) as unknown as Logger;

const APP_YAML = `keys:
  GREETING:
    label: public
  PORT:
    test: Number.isInteger($.value) && $.value > 0
    default: 8080
  LOG_LEVEL:
    enum: [debug, info, warn, error]
    default: info
  URL:
    const: "http://{{ $.configs.GREETING.value }}:{{ $.configs.PORT.value }}"
  SHARED:
    label: ops
`;
const APP_KEYS = {
  GREETING: { label: 'public' },
  PORT: { test: 'Number.isInteger($.value) && $.value > 0', default: 8080 },
  LOG_LEVEL: { enum: ['debug', 'info', 'warn', 'error'], default: 'info' },
  URL: { const: 'http://{{ $.configs.GREETING.value }}:{{ $.configs.PORT.value }}' },
  SHARED: { label: 'ops' },
};

/** Write `text` to `file` at once (a rename), as an editor's save does: a watcher never reads half of it. */
function replaceFile(file: string, text: string): void {
  writeFileSync(`${file}.tmp`, text);
  renameSync(`${file}.tmp`, file);
}

function configu(name: string, proxy: Record<string, unknown> = {}): string {
  return writeJson(join(dir, name), {
    stores: { main: { type: 'json-file', configuration: { path: 'data.json' }, default: true } },
    schemas: { app: 'app.cfgu.yaml', greeting: 'greeting.cfgu.json', remote: 'https://example.com/remote.cfgu.json' },
    interface: { proxy },
  });
}

const loadConfigu = (file: string): Promise<Loaded> => load({ config: file, flags: { workers: '1' }, env: {}, cwd: dir });

async function app(loaded: Loaded, logger: Logger = silent): Promise<FastifyInstance> {
  const a = await buildServer({ registry, evaluator, settings: loaded.settings, keyLabels: loaded.keyLabels, schemas: loaded.schemas, logger, auditLogger: false, ready: true });
  apps.push(a);
  return a;
}

const post = (a: FastifyInstance, body: unknown, bearer?: string, headers: Record<string, string> = {}) =>
  a.inject({
    method: 'POST',
    url: '/export',
    headers: { 'content-type': 'application/json', ...(bearer ? { authorization: `Bearer ${bearer}` } : {}), ...headers },
    payload: JSON.stringify(body),
  });

const get = (a: FastifyInstance, url: string, bearer?: string, headers: Record<string, string> = {}) =>
  a.inject({ method: 'GET', url, headers: { ...(bearer ? { authorization: `Bearer ${bearer}` } : {}), ...headers } });

function exactly(r: LightMyRequestResponse, status: number, body: unknown): void {
  assert.equal(r.statusCode, status, r.body);
  assert.match(String(r.headers['content-type']), /^application\/problem\+json/);
  assert.deepEqual(r.json(), body);
}

const unknown = (schema: string, detail: string, closestSchemas: string[] = []) => ({
  type: 'urn:cfgu:problem:unknown-schema',
  title: 'Unknown Schema',
  status: 400,
  detail: `unknown schema "${schema}": ${detail}`,
  schema,
  closestSchemas,
});

const invalid = (path: string, message: string) => ({
  type: 'urn:cfgu:problem:invalid-request',
  title: 'Invalid Request',
  status: 400,
  detail: `the request body is not a valid pipeline: ${path} ${message}`,
  issues: [{ path, message }],
});

before(async () => {
  dir = tempDir();
  writeJson(join(dir, 'data.json'), [
    { set: '', key: 'GREETING', value: 'hello' },
    { set: '', key: 'PORT', value: '3000' },
    { set: 'prod', key: 'PORT', value: '8443' },
    { set: '', key: 'SHARED', value: 'both' },
  ]);
  writeFileSync(join(dir, 'app.cfgu.yaml'), APP_YAML);
  writeJson(join(dir, 'greeting.cfgu.json'), { keys: { GREETING: { label: 'public' }, SHARED: { label: 'public' } } });
  registry = createStoreRegistry(await loadConfiguration({ file: configu('stores.configu') }), { logger: { warn: () => undefined } });
  await registry.init();
  evaluator = await createSandboxEvaluator({ workers: 1, spares: 0, timeoutMs: 2000, memoryMb: 64 });
});

after(async () => {
  for (const a of apps) await a.close();
  await registry?.close();
  await evaluator?.close();
  removeTempDirs();
});

describe('a command naming a schema', () => {
  test('answers exactly as the same schema inline (body and ETag), alone and in a pipeline with inline commands', async () => {
    const loaded = await loadConfigu(configu('open.configu'));
    assert.deepEqual(loaded.warnings, ['schema "remote" is a URL, which the server does not fetch: requests cannot name it and its labels grant nothing']);
    const a = await app(loaded);
    for (const set of ['', 'prod']) {
      const named = await post(a, [{ store: 'main', set, schema: 'app', configs: { LOG_LEVEL: 'debug' } }]);
      const inline = await post(a, [{ store: 'main', set, schema: { keys: APP_KEYS }, configs: { LOG_LEVEL: 'debug' } }]);
      assert.equal(named.statusCode, 200, named.body);
      assert.equal(named.body, inline.body);
      assert.equal(named.headers.etag, inline.headers.etag);
    }
    assert.deepEqual((await post(a, [{ schema: 'app' }])).json(), { GREETING: 'hello', PORT: 3000, LOG_LEVEL: 'info', URL: 'http://hello:3000', SHARED: 'both' });
    const mixed = [{ schema: 'greeting' }, { set: 'prod', schema: { keys: { PORT: {} } } }];
    const mixedInline = [{ schema: { keys: { GREETING: { label: 'public' }, SHARED: { label: 'public' } } } }, mixed[1]];
    const m = await post(a, mixed);
    assert.equal(m.statusCode, 200, m.body);
    assert.equal(m.body, (await post(a, mixedInline)).body);
    // Validation failures are the same too (the index of the command, the key, the rule).
    const bad = await post(a, [{ schema: 'app', configs: { LOG_LEVEL: 'loud' } }]);
    assert.equal(bad.statusCode, 422);
    assert.equal(bad.body, (await post(a, [{ schema: { keys: APP_KEYS }, configs: { LOG_LEVEL: 'loud' } }])).body);
  });

  test('a name the server does not hold: 400 CFGU_UNKNOWN_SCHEMA with the closest names; a file path, a URL entry', async () => {
    const a = await app(await loadConfigu(configu('open.configu')));
    exactly(await post(a, [{ schema: 'ap' }]), 400, unknown('ap', 'did you mean "app"?', ['app']));
    exactly(await post(a, [{ schema: 'greting' }]), 400, unknown('greting', 'did you mean "greeting"?', ['greeting']));
    exactly(await post(a, [{ schema: 'nothing-like-it' }]), 400, unknown('nothing-like-it', 'no schema of the server has a close name'));
    // The second command's name is judged too; nothing is read.
    exactly(await post(a, [{ schema: 'app' }, { schema: 'App2' }]), 400, unknown('App2', 'did you mean "app"?', ['app']));
    // A file where a name belongs.
    exactly(
      await post(a, [{ schema: 'app.cfgu.yaml' }]),
      400,
      unknown('app.cfgu.yaml', 'a request names one of the server\'s schemas, never a file; did you mean "app"?', ['app']),
    );
    exactly(
      await post(a, [{ schema: '/etc/passwd' }]),
      400,
      unknown('/etc/passwd', 'a request names one of the server\'s schemas, never a file'),
    );
    exactly(await post(a, [{ schema: 'remote' }]), 400, unknown('remote', 'it names a URL in .configu, which the server does not fetch'));
    // A server without named schemas.
    const bare = await buildServer({ registry, evaluator, settings: settingsWith({}), logger: false, auditLogger: false, ready: true });
    apps.push(bare);
    exactly(await post(bare, [{ schema: 'app' }]), 400, unknown('app', 'the server holds no named schemas'));
  });

  test('a name where the object belongs and the reverse, and other shapes: 400 with the exact issue', async () => {
    const a = await app(await loadConfigu(configu('open.configu')));
    const objectOrName = 'must be an object (the schema) or a string (the name of one of the server\'s schemas)';
    for (const schema of [42, null, true, ['app']]) exactly(await post(a, [{ schema }]), 400, invalid('/0/schema', objectOrName));
    exactly(await post(a, [{ schema: '' }]), 400, invalid('/0/schema', 'must be the name of one of the server\'s schemas, not an empty string'));
    exactly(
      await post(a, [{ schema: { keys: 'app' } }]),
      400,
      invalid('/0/schema/keys', 'must be an object (key name -> declaration); to use one of the server\'s schemas, give its name as `schema` itself ("schema": "app")'),
    );
    // An object naming the schema: the object is read as a schema, which has no `keys`.
    exactly(await post(a, [{ schema: { name: 'app' } }]), 400, invalid('/0/schema/keys', 'is required'));
  });
});

describe('the other routes that take a schema', () => {
  test('POST /explain and POST /matrix take a name as POST /export does, answering as the same schema inline', async () => {
    const a = await app(await loadConfigu(configu('open.configu')));
    const ask = (url: string, body: unknown) =>
      a.inject({ method: 'POST', url, headers: { 'content-type': 'application/json' }, payload: JSON.stringify(body) });
    const named = await ask('/explain', [{ store: 'main', set: 'prod', schema: 'app' }]);
    const inline = await ask('/explain', [{ store: 'main', set: 'prod', schema: { keys: APP_KEYS } }]);
    assert.equal(named.statusCode, 200, named.body);
    assert.equal(named.body, inline.body);
    const matrixNamed = await ask('/matrix', { store: 'main', schema: 'app', sets: ['', 'prod'] });
    const matrixInline = await ask('/matrix', { store: 'main', schema: { keys: APP_KEYS }, sets: ['', 'prod'] });
    assert.equal(matrixNamed.statusCode, 200, matrixNamed.body);
    assert.equal(matrixNamed.body, matrixInline.body);
    exactly(await ask('/explain', [{ schema: 'ap' }]), 400, unknown('ap', 'did you mean "app"?', ['app']));
    exactly(await ask('/matrix', { store: 'main', schema: 'ap', sets: ['prod'] }), 400, unknown('ap', 'did you mean "app"?', ['app']));
  });
});

describe('GET /schemas and GET /schemas/{name}', () => {
  test('the list (name, keys, labels); one schema as declared, with a strong ETag and 304; 404 for an unknown name', async () => {
    const a = await app(await loadConfigu(configu('open.configu')));
    const list = await get(a, '/schemas');
    assert.equal(list.statusCode, 200, list.body);
    assert.deepEqual(list.json(), {
      schemas: [
        { name: 'app', keys: 5, labels: ['ops', 'public'] },
        { name: 'greeting', keys: 2, labels: ['public'] },
      ],
    });
    const one = await get(a, '/schemas/app');
    assert.equal(one.statusCode, 200, one.body);
    assert.match(String(one.headers['content-type']), /^application\/json/);
    assert.deepEqual(one.json(), { keys: APP_KEYS });
    assert.equal(one.headers.etag, `"${createHash('sha256').update(one.body).digest('base64url')}"`);
    // What it answers is a body a command can carry: the same answer as the name.
    assert.equal((await post(a, [{ schema: one.json() }])).body, (await post(a, [{ schema: 'app' }])).body);
    const again = await get(a, '/schemas/app', undefined, { 'if-none-match': String(one.headers.etag) });
    assert.equal(again.statusCode, 304);
    assert.equal(again.body, '');
    assert.equal(again.headers.etag, one.headers.etag);
    assert.equal((await get(a, '/schemas/app', undefined, { 'if-none-match': '"other"' })).statusCode, 200);
    exactly(await get(a, '/schemas/ap'), 404, { type: 'about:blank', title: 'Not Found', status: 404, detail: 'unknown schema "ap": did you mean "app"?', schema: 'ap', closestSchemas: ['app'] });
    exactly(await get(a, '/schemas/remote'), 404, {
      type: 'about:blank',
      title: 'Not Found',
      status: 404,
      detail: 'unknown schema "remote": it names a URL in .configu, which the server does not fetch',
      schema: 'remote',
      closestSchemas: [],
    });
    exactly(await a.inject({ method: 'POST', url: '/schemas' }), 405, { type: 'about:blank', title: 'Method Not Allowed', status: 405, detail: 'POST is not allowed on /schemas; allowed: GET, HEAD' });
    // /schemas/{name}: the same for every name, held or not (a 405 says nothing of which schemas exist).
    for (const url of ['/schemas/app', '/schemas/unknown']) {
      for (const method of ['POST', 'PUT', 'DELETE'] as const) {
        const r = await a.inject({ method, url: `${url}?x=1`, payload: method === 'DELETE' ? undefined : {} });
        exactly(r, 405, { type: 'about:blank', title: 'Method Not Allowed', status: 405, detail: `${method} is not allowed on ${url}; allowed: GET, HEAD` });
        assert.equal(r.headers.allow, 'GET, HEAD');
      }
    }
    const head = await a.inject({ method: 'HEAD', url: '/schemas/app' });
    assert.equal(head.statusCode, 200);
    assert.equal(head.headers.etag, one.headers.etag);
    // Only one segment stands for a name: a deeper path is no route.
    exactly(await a.inject({ method: 'POST', url: '/schemas/app/x' }), 404, { type: 'about:blank', title: 'Not Found', status: 404, detail: 'no route POST /schemas/app/x' });
  });
});

describe('scopes and named schemas', () => {
  const proxy = {
    auth: {
      enabled: true,
      presharedKeys: [PRESHARED],
      credentials: [
        { name: 'public-reader', sha256: sha256(PUBLIC_TOKEN), stores: ['main'], sets: ['', '**'], labels: ['public'] },
        { name: 'wide', sha256: sha256(WIDE_TOKEN), stores: ['main'], sets: [''], keys: ['*'] },
      ],
    },
  };
  const refusedRoot = {
    type: 'urn:cfgu:problem:forbidden',
    title: 'Forbidden',
    status: 403,
    detail: '1 of 1 command is outside the scope of this credential: command 0 (store "main", set "")',
    refused: [{ command: 0, store: 'main', set: '' }],
  };

  test('GET /schemas and /schemas/{name}: 401 without a credential; a scope sees only the schemas whose every key it may read', async () => {
    const a = await app(await loadConfigu(configu('auth.configu', proxy)));
    const UNAUTHORIZED = {
      type: 'urn:cfgu:problem:unauthorized',
      title: 'Unauthorized',
      status: 401,
      detail: 'a valid bearer key is required (Authorization: Bearer <key>)',
    };
    for (const url of ['/schemas', '/schemas/app']) {
      const r = await get(a, url);
      exactly(r, 401, UNAUTHORIZED);
      assert.equal(r.headers['www-authenticate'], 'Bearer realm="cfgu"');
    }
    assert.deepEqual((await get(a, '/schemas', PRESHARED)).json().schemas.map((s: { name: string }) => s.name), ['app', 'greeting']);
    assert.deepEqual((await get(a, '/schemas', WIDE_TOKEN)).json().schemas.map((s: { name: string }) => s.name), ['app', 'greeting']);
    // `app` declares PORT, LOG_LEVEL and URL, which carry no label: the public scope cannot use it, nor see it.
    assert.deepEqual((await get(a, '/schemas', PUBLIC_TOKEN)).json(), { schemas: [{ name: 'greeting', keys: 2, labels: ['public'] }] });
    assert.deepEqual((await get(a, '/schemas/greeting', PUBLIC_TOKEN)).json(), { keys: { GREETING: { label: 'public' }, SHARED: { label: 'public' } } });
    exactly(await get(a, '/schemas/app', PUBLIC_TOKEN), 404, {
      type: 'about:blank',
      title: 'Not Found',
      status: 404,
      detail: 'unknown schema "app": no schema of the server has a close name',
      schema: 'app',
      closestSchemas: [],
    });
    assert.equal((await get(a, '/schemas/app', WIDE_TOKEN)).statusCode, 200);
  });

  test('POST /export: a schema the scope may not use whole is unknown to it; a named schema\'s keys carry its own labels', async () => {
    const a = await app(await loadConfigu(configu('auth.configu', proxy)));
    exactly(await post(a, [{ schema: 'app' }], PUBLIC_TOKEN), 400, unknown('app', 'no schema of the server has a close name'));
    exactly(await post(a, [{ schema: 'greetin' }], PUBLIC_TOKEN), 400, unknown('greetin', 'did you mean "greeting"?', ['greeting']));
    // SHARED is `public` in greeting.cfgu.json and `ops` in app.cfgu.yaml. Inline, a key carries only the labels every
    // server schema declaring it agrees on (none): refused. Named `greeting`, it carries that schema's labels.
    exactly(await post(a, [{ schema: { keys: { GREETING: {}, SHARED: {} } } }], PUBLIC_TOKEN), 403, refusedRoot);
    const named = await post(a, [{ schema: 'greeting' }], PUBLIC_TOKEN);
    assert.equal(named.statusCode, 200, named.body);
    assert.deepEqual(named.json(), { GREETING: 'hello', SHARED: 'both' });
    // The store and set of the command are judged as ever.
    const wideProd = await post(a, [{ set: 'prod', schema: 'app' }], WIDE_TOKEN);
    exactly(wideProd, 403, { ...refusedRoot, detail: '1 of 1 command is outside the scope of this credential: command 0 (store "main", set "prod")', refused: [{ command: 0, store: 'main', set: 'prod' }] });
    assert.equal((await post(a, [{ schema: 'app' }], WIDE_TOKEN)).statusCode, 200);
    // Full access: every name.
    assert.equal((await post(a, [{ schema: 'app' }], PRESHARED)).statusCode, 200);
  });
});

describe('a reload through the registry', () => {
  test('valid: the next request uses it, the ETag moves; invalid: the last good version stays, logged (warn) and counted', async () => {
    const file = join(dir, 'reload.cfgu.json');
    writeJson(file, { keys: { GREETING: {} } });
    const { schemas } = NamedSchemas.load({ file: join(dir, 'x.configu'), schemas: { r: file } });
    let raw = '';
    const logger = pino({ level: 'info' }, new Writable({ write: (c, _e, cb) => ((raw += c.toString()), cb()) })) as unknown as Logger;
    const a = await buildServer({ registry, evaluator, settings: settingsWith({ metrics: { enabled: true } }), schemas, logger, auditLogger: false, ready: true });
    apps.push(a);
    const before = await get(a, '/schemas/r');
    assert.deepEqual((await post(a, [{ schema: 'r' }])).json(), { GREETING: 'hello' });

    replaceFile(file, JSON.stringify({ keys: { GREETING: {}, PORT: {} } }));
    assert.equal(schemas.reload('r')?.kind, 'changed');
    assert.deepEqual((await post(a, [{ schema: 'r' }])).json(), { GREETING: 'hello', PORT: 3000 });
    const changed = await get(a, '/schemas/r', undefined, { 'if-none-match': String(before.headers.etag) });
    assert.equal(changed.statusCode, 200);
    assert.notEqual(changed.headers.etag, before.headers.etag);

    replaceFile(file, '{ "keys": { "GREETING": ');
    const failed = schemas.reload('r');
    assert.deepEqual(failed, { kind: 'failed', name: 'r', path: file, problem: `${file}: line 1, column 25: not valid JSON: unexpected end of the file` });
    // Looked at again without a change: not reported twice.
    assert.equal(schemas.reload('r'), undefined);
    assert.deepEqual((await post(a, [{ schema: 'r' }])).json(), { GREETING: 'hello', PORT: 3000 });
    const lines = raw.split('\n').filter(Boolean).map((l) => JSON.parse(l));
    assert.deepEqual(
      lines.filter((l) => /^schema/.test(l.msg)).map((l) => [l.level, l.msg, l.schema]),
      [
        [30, 'schema reloaded', 'r'],
        [40, `schema "r" not reloaded: ${file}: line 1, column 25: not valid JSON: unexpected end of the file; the last good version stays in use`, 'r'],
      ],
    );
    const metrics = (await get(a, '/metrics')).body;
    assert.match(metrics, /^cfgu_schema_reload_failures_total\{schema="r"\} 1$/m);
    assert.match(metrics, /^cfgu_schemas\{state="stale"\} 1$/m);
    assert.match(metrics, /^cfgu_schemas\{state="current"\} 0$/m);

    replaceFile(file, JSON.stringify({ keys: { PORT: {} } }));
    assert.equal(schemas.reload('r')?.kind, 'changed');
    assert.deepEqual((await post(a, [{ schema: 'r' }])).json(), { PORT: 3000 });
    assert.match((await get(a, '/metrics')).body, /^cfgu_schemas\{state="current"\} 1$/m);
  });
});
