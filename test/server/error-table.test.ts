/**
 * Every row of the "HTTP errors" table of the semantics (and of docs/server.md), each with its exact status, its
 * exact `application/problem+json` body and its headers; plus: 401 before 404 for anonymous callers, and the log
 * of failing requests never holding a bearer key, a value or an override (asserted on captured log lines).
 * In-process (buildServer + inject) over the real `.configu` loader, json-file stores and expression sandbox.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pino, type Logger } from 'pino';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { buildServer, settingsWith, type SettingsOverrides } from '../../src/server/index.js';
import { loadConfiguration } from '../../src/config/index.js';
import { createStoreRegistry, type StoreRegistry } from '../../src/stores/index.js';
import { createSandboxEvaluator } from '../../src/expressions/index.js';
import type { ExpressionEvaluator } from '../../src/core/ports.js';
import { captureLog, removeTempDirs, tempDir, writeJson } from './helpers.js';
import { waitFor } from '../helpers/wait.js';

const KEY = 'audit-key-9f8e7d6c5b';
let registry: StoreRegistry;
let evaluator: ExpressionEvaluator;
const apps: FastifyInstance[] = [];

const capture = captureLog;

async function app(
  overrides: SettingsOverrides = {},
  logger: Logger = pino({ level: 'silent' }) as unknown as Logger,
  withEvaluator: ExpressionEvaluator = evaluator,
): Promise<FastifyInstance> {
  const a = await buildServer({ registry, evaluator: withEvaluator, settings: settingsWith(overrides), logger, ready: true });
  apps.push(a);
  return a;
}

const post = (a: FastifyInstance, payload: string, headers: Record<string, string> = {}) =>
  a.inject({ method: 'POST', url: '/export', headers: { 'content-type': 'application/json', ...headers }, payload });

/** Status, problem+json content type and the exact body. */
function exactly(r: LightMyRequestResponse, status: number, body: Record<string, unknown>): void {
  assert.equal(r.statusCode, status, r.body);
  assert.equal(r.headers['content-type'], 'application/problem+json; charset=utf-8');
  assert.deepEqual(r.json(), body);
}

before(async () => {
  const dir = tempDir();
  writeJson(join(dir, 'data.json'), [{ set: '', key: 'A', value: 'abc' }]);
  writeFileSync(join(dir, 'broken.json'), '{ not json');
  writeJson(join(dir, '.configu'), {
    stores: {
      main: { type: 'json-file', configuration: { path: 'data.json' } },
      broken: { type: 'json-file', configuration: { path: 'broken.json' } },
    },
  });
  registry = createStoreRegistry(await loadConfiguration({ file: join(dir, '.configu') }), { logger: { warn: () => undefined } });
  await registry.init();
  evaluator = await createSandboxEvaluator({ workers: 1, spares: 0, timeoutMs: 200, memoryMb: 16 });
});

after(async () => {
  for (const a of apps) await a.close();
  await registry?.close();
  await evaluator?.close();
  removeTempDirs();
});

const invalidRequest = (detail: string, issues?: unknown[]) => ({
  type: 'urn:cfgu:problem:invalid-request',
  title: 'Invalid Request',
  status: 400,
  detail,
  ...(issues ? { issues } : {}),
});
const validationFailed = (detail: string, errors: unknown[]) => ({
  type: 'urn:cfgu:problem:validation-failed',
  title: 'Validation Failed',
  status: 422,
  detail,
  errors,
});

describe('HTTP errors table: exact status and body for every row', () => {
  test('400: body not JSON', async () => {
    exactly(await post(await app(), '[{"schema": '), 400, invalidRequest('the request body is not valid JSON'));
  });

  test('400: not an array of commands, and an empty array', async () => {
    const a = await app();
    exactly(await post(a, '{"schema":{"keys":{"A":{}}}}'), 400, invalidRequest('the request body is not a valid pipeline: / must be array', [{ path: '/', message: 'must be array' }]));
    exactly(
      await post(a, '[]'),
      400,
      invalidRequest('the request body is not a valid pipeline: / must NOT have fewer than 1 items', [{ path: '/', message: 'must NOT have fewer than 1 items' }]),
    );
  });

  test('400: invalid schema, invalid key, invalid set', async () => {
    const a = await app();
    const typeMessage = '`type` of key "A" was removed in Cfgu v1: every stored value is a string, so it needs no replacement (write a `test` expression for a stricter check)';
    exactly(await post(a, '[{"store":"main","schema":{"keys":{"A":{"type":"String"}}}}]'), 400, {
      type: 'urn:cfgu:problem:invalid-schema',
      title: 'Invalid Schema',
      status: 400,
      detail: typeMessage,
      issues: [{ path: '/0/schema/keys/A/type', message: typeMessage }],
    });
    exactly(await post(a, '[{"store":"main","schema":{"keys":{}}}]'), 400, {
      type: 'urn:cfgu:problem:invalid-schema',
      title: 'Invalid Schema',
      status: 400,
      detail: '`keys` must declare at least one key',
      issues: [{ path: '/0/schema/keys', message: '`keys` must declare at least one key' }],
    });
    exactly(await post(a, '[{"store":"main","schema":{"keys":{"not a key":{}}}}]'), 400, {
      type: 'urn:cfgu:problem:invalid-schema',
      title: 'Invalid Schema',
      status: 400,
      detail: 'key "not a key" must match ^[A-Za-z0-9_-]+$',
      issues: [{ path: '/0/schema/keys/not a key', message: 'key "not a key" must match ^[A-Za-z0-9_-]+$' }],
    });
    exactly(await post(a, '[{"store":"main","set":"prod//eu","schema":{"keys":{"A":{}}}}]'), 400, {
      type: 'urn:cfgu:problem:invalid-set',
      title: 'Invalid Set',
      status: 400,
      detail: 'set path "prod//eu" has an empty segment',
      issues: [{ path: '/0/set', message: 'set path "prod//eu" has an empty segment' }],
    });
  });

  test('415: JSON declared in a charset other than UTF-8; utf-8 and utf8 in any case are fine', async () => {
    const a = await app();
    const body = JSON.stringify([{ store: 'main', schema: { keys: { A: {} } } }]);
    for (const type of ['application/json; charset=utf-16', 'application/json;charset="ISO-8859-1"']) {
      const r = await a.inject({ method: 'POST', url: '/export', headers: { 'content-type': type }, payload: body });
      exactly(r, 415, {
        type: 'about:blank',
        title: 'Unsupported Media Type',
        status: 415,
        detail: 'the request body must be JSON in UTF-8 (Content-Type: application/json; charset=utf-8)',
      });
    }
    for (const type of ['application/json; charset=UTF-8', 'application/json; charset=utf8']) {
      const r = await a.inject({ method: 'POST', url: '/export', headers: { 'content-type': type }, payload: body });
      assert.equal(r.statusCode, 200, `${type}: ${r.body}`);
    }
  });

  test('415: a Content-Type other than JSON', async () => {
    const r = await post(await app(), '[]', { 'content-type': 'text/plain' });
    exactly(r, 415, { type: 'about:blank', title: 'Unsupported Media Type', status: 415, detail: 'the request body must be JSON (Content-Type: application/json)' });
  });

  test('413: body, commands and keys over the configured limits', async () => {
    const a = await app({ limits: { bodyBytes: 2048, commands: 3, keys: 4 } });
    const limit = (detail: string) => ({ type: 'urn:cfgu:problem:limit-exceeded', title: 'Limit Exceeded', status: 413, detail });
    exactly(await post(a, JSON.stringify([{ schema: { keys: { A: { description: 'x'.repeat(3000) } } } }])), 413, limit('the request body is larger than the configured limit'));
    exactly(await post(a, JSON.stringify(Array.from({ length: 4 }, () => ({ schema: { keys: { A: {} } } })))), 413, limit('the pipeline has 4 commands; the limit is 3'));
    exactly(await post(a, JSON.stringify([{ schema: { keys: { A: {}, B: {}, C: {}, D: {}, E: {} } } }])), 413, limit('command 0 declares 5 keys; the limit is 4'));
  });

  test('400: unknown store, and no store given with no default store', async () => {
    const a = await app();
    exactly(await post(a, JSON.stringify([{ store: 'nope', schema: { keys: { A: {} } } }])), 400, {
      type: 'urn:cfgu:problem:unknown-store',
      title: 'Unknown Store',
      status: 400,
      detail: 'unknown store "nope"; known stores: "main", "broken"',
      knownStores: ['main', 'broken'],
      store: 'nope',
    });
    // Two stores, neither marked default: a command without `store` has none.
    exactly(await post(a, JSON.stringify([{ schema: { keys: { A: {} } } }])), 400, {
      type: 'urn:cfgu:problem:unknown-store',
      title: 'Unknown Store',
      status: 400,
      detail: 'no store was given and there is no default store; known stores: "main", "broken"',
      knownStores: ['main', 'broken'],
    });
  });

  test('401 with WWW-Authenticate: Bearer when the key is missing or wrong', async () => {
    const a = await app({ auth: { enabled: true, presharedKeys: [KEY] } });
    for (const headers of [{}, { authorization: 'Bearer not-the-key-000' }] as Array<Record<string, string>>) {
      const r = await post(a, '[{"store":"main","schema":{"keys":{"A":{}}}}]', headers);
      exactly(r, 401, { type: 'urn:cfgu:problem:unauthorized', title: 'Unauthorized', status: 401, detail: 'a valid bearer key is required (Authorization: Bearer <key>)' });
      assert.equal(r.headers['www-authenticate'], 'Bearer realm="cfgu"');
    }
  });

  test('401 before 404: an anonymous caller cannot probe the route map', async () => {
    const a = await app({ auth: { enabled: true, presharedKeys: [KEY] } });
    const anonymous = await a.inject({ method: 'GET', url: '/no-such-route' });
    assert.equal(anonymous.statusCode, 401);
    assert.equal(anonymous.headers['www-authenticate'], 'Bearer realm="cfgu"');
    const keyed = await a.inject({ method: 'GET', url: '/no-such-route', headers: { authorization: `Bearer ${KEY}` } });
    exactly(keyed, 404, { type: 'about:blank', title: 'Not Found', status: 404, detail: 'no route GET /no-such-route' });
  });

  test('422: required, pattern, enum, schema and test failures, all listed', async () => {
    const r = await post(
      await app(),
      JSON.stringify([
        {
          store: 'main',
          schema: {
            keys: {
              A: { pattern: '^[0-9]+$' },
              B: { schema: { type: 'integer' } },
              C: { required: true },
              D: { enum: ['x', 'y'] },
              E: { test: '$.value.length < 2' },
            },
          },
          configs: { B: 'word', D: 'z', E: 'long' },
        },
      ]),
    );
    exactly(
      r,
      422,
      validationFailed('5 keys failed validation', [
        { command: 0, key: 'A', rule: 'pattern', message: 'the value of key "A" does not match the pattern ^[0-9]+$' },
        { command: 0, key: 'B', rule: 'schema', message: 'the value of key "B" does not match its `schema`: data must be integer' },
        { command: 0, key: 'C', rule: 'required', message: 'key "C" is required but has no value' },
        { command: 0, key: 'D', rule: 'enum', message: 'the value of key "D" is not one of the allowed values: "x", "y"' },
        { command: 0, key: 'E', rule: 'test', message: 'the value of key "E" failed the test $.value.length < 2' },
      ]),
    );
  });

  test('422: a bad override (undeclared key, const key)', async () => {
    const a = await app();
    exactly(
      await post(a, JSON.stringify([{ store: 'main', schema: { keys: { A: {} } }, configs: { Z: 'y' } }])),
      422,
      validationFailed('1 key failed validation', [{ command: 0, key: 'Z', rule: 'override', message: 'override for key "Z", which the command\'s schema does not declare' }]),
    );
    const r = await post(a, JSON.stringify([{ store: 'main', schema: { keys: { K: { const: 'k' } } }, configs: { K: 'y' } }]));
    assert.equal(r.statusCode, 422, r.body);
    assert.deepEqual(r.json().errors.map((e: { key: string; rule: string }) => [e.key, e.rule]), [['K', 'override']]);
  });

  test('422: a const cycle names the cycle; a const that throws says why', async () => {
    const a = await app();
    exactly(
      await post(a, JSON.stringify([{ store: 'main', schema: { keys: { X: { const: '{{ $.configs.Y.value }}' }, Y: { const: '{{ $.configs.X.value }}' } } } }])),
      422,
      validationFailed('2 keys failed validation', [
        { command: 0, key: 'X', rule: 'const', message: '`const` expressions form a cycle: X -> Y -> X' },
        { command: 0, key: 'Y', rule: 'const', message: '`const` expressions form a cycle: X -> Y -> X' },
      ]),
    );
    exactly(
      await post(a, JSON.stringify([{ store: 'main', schema: { keys: { X: { const: '{{ null.boom }}' } } } }])),
      422,
      validationFailed('1 key failed validation', [{ command: 0, key: 'X', rule: 'const', message: '`const` of key "X" failed: Cannot read properties of null (reading \'boom\')' }]),
    );
  });

  test('422: an expression over its time limit or its memory limit says which limit', async () => {
    const a = await app();
    const spin = '(() => { while (true) {} })()';
    exactly(
      await post(a, JSON.stringify([{ store: 'main', schema: { keys: { A: { test: spin } } } }])),
      422,
      validationFailed('1 key failed validation', [{ command: 0, key: 'A', rule: 'test', message: `the test ${spin} of key "A" failed: exceeded the time limit of 200 ms` }]),
    );
    // The memory bomb on a sandbox whose time limit cannot come first, even on a loaded machine: which limit a bomb
    // hits is then decided by memory alone.
    const roomy = await createSandboxEvaluator({ workers: 1, spares: 0, timeoutMs: 60_000, memoryMb: 16 });
    try {
      const bomb = '(() => { const a = []; while (true) a.push(new Array(100000).fill(1)); })()';
      exactly(
        await post(await app({}, undefined, roomy), JSON.stringify([{ store: 'main', schema: { keys: { A: { test: bomb } } } }])),
        422,
        validationFailed('1 key failed validation', [{ command: 0, key: 'A', rule: 'test', message: `the test ${bomb} of key "A" failed: exceeded the sandbox memory limit of 16 MB` }]),
      );
    } finally {
      await roomy.close();
    }
    const constSpin = '{{ (() => { while (true) {} })() }}';
    const r = await post(a, JSON.stringify([{ store: 'main', schema: { keys: { C: { const: constSpin } } } }]));
    assert.equal(r.statusCode, 422, r.body);
    const [failure] = r.json().errors;
    assert.equal(failure.rule, 'const');
    assert.match(failure.message, /exceeded the time limit of 200 ms$/);
  });

  test('503 with Retry-After: a store that cannot be read', async () => {
    const r = await post(await app(), JSON.stringify([{ store: 'broken', schema: { keys: { A: {} } } }]));
    exactly(r, 503, { type: 'urn:cfgu:problem:store-unavailable', title: 'Store Unavailable', status: 503, detail: 'store "broken" cannot be reached or read; retry later' });
    assert.match(String(r.headers['retry-after']), /^[1-9]\d*$/);
  });
});

describe('logs of failing requests never hold keys, values or overrides', () => {
  test('401 with a wrong key, 400, 422 and 503 requests: captured log lines hold none of the secrets', async () => {
    const { logger, raw, lines } = capture();
    const a = await app({ auth: { enabled: true, presharedKeys: [KEY] } }, logger);
    const auth = { authorization: `Bearer ${KEY}` };
    // A wrong key that looks like a real one.
    await post(a, '[{"store":"main","schema":{"keys":{"A":{}}}}]', { authorization: 'Bearer wrong-secret-key-4242' });
    // 400 whose body holds a would-be secret.
    await post(a, JSON.stringify([{ store: 'main', schema: { keys: { A: {} } }, configs: { A: 'body-secret-1111' }, extra: 'x' }]), auth);
    // 422: an override that fails its test, and an undeclared override.
    await post(
      a,
      JSON.stringify([{ store: 'main', schema: { keys: { P: { test: '$.value === "other"' } } }, configs: { P: 'override-secret-2222', Q: 'override-secret-3333' } }]),
      auth,
    );
    // 200 whose stored value is "abc": the value is not logged either.
    await post(a, JSON.stringify([{ store: 'main', schema: { keys: { A: {} } } }]), auth);
    // 503.
    await post(a, JSON.stringify([{ store: 'broken', schema: { keys: { A: {} } }, configs: { A: 'override-secret-4444' } }]), auth);
    // A request is logged once its answer is sent: wait for the five lines.
    const reqLines = await waitFor('five request log lines', () => {
      const got = lines().filter((l) => l.msg === 'request');
      return got.length >= 5 ? got : undefined;
    });
    assert.deepEqual(reqLines.map((l) => l.status), [401, 400, 422, 200, 503]);
    for (const l of reqLines) assert.equal(typeof l.reqId, 'string');
    for (const secret of [KEY, 'wrong-secret-key-4242', 'body-secret-1111', 'override-secret-2222', 'override-secret-3333', 'override-secret-4444', '"abc"']) {
      assert.ok(!raw().includes(secret), `the log holds ${secret}:\n${raw()}`);
    }
    assert.doesNotMatch(raw(), /authorization/i);
  });
});

describe('trust proxy', () => {
  test('the logged client address comes from X-Forwarded-For only when trustProxy is on', async () => {
    for (const [trustProxy, expected] of [
      [false, '127.0.0.1'],
      [true, '203.0.113.7'],
    ] as const) {
      const { logger, lines } = capture();
      const a = await app({ http: { trustProxy } }, logger);
      // Not /live: a successful health probe has no request line (log.probes).
      const r = await a.inject({ method: 'GET', url: '/nowhere', headers: { 'x-forwarded-for': '203.0.113.7' } });
      assert.equal(r.statusCode, 404);
      const line = lines().find((l) => l.msg === 'request');
      assert.equal(line?.ip, expected, `trustProxy ${trustProxy}`);
      await a.close();
    }
  });
});

describe('host-side bounds of a request (issue 10): exact status and body', () => {
  const limit = (detail: string) => ({ type: 'urn:cfgu:problem:limit-exceeded', title: 'Limit Exceeded', status: 413, detail });
  const invalidSchema = (message: string, path: string) => ({
    type: 'urn:cfgu:problem:invalid-schema',
    title: 'Invalid Schema',
    status: 400,
    detail: message,
    issues: [{ path, message }],
  });
  const ok = (r: LightMyRequestResponse, body: unknown) => {
    assert.equal(r.statusCode, 200, r.body);
    assert.deepEqual(r.json(), body);
  };

  test('413: set depth (default 32 segments), store lookups, const template length and expressions', async () => {
    const a = await app();
    const path = (n: number) => Array.from({ length: n }, () => 'a').join('/');
    ok(await post(a, JSON.stringify([{ store: 'main', set: path(32), schema: { keys: { A: null } } }])), { A: 'abc' });
    exactly(await post(a, JSON.stringify([{ store: 'main', set: path(33), schema: { keys: { A: null } } }])), 413, limit('command 0: the set path has 33 segments; the limit is 32'));
    // The issue's input: 10,000 keys at a set 3,000 segments deep.
    const keys = Object.fromEntries(Array.from({ length: 10_000 }, (_, i) => [`K${i}`, null]));
    exactly(await post(a, JSON.stringify([{ store: 'main', set: path(3000), schema: { keys } }])), 413, limit('command 0: the set path has 3000 segments; the limit is 32'));

    const b = await app({ limits: { lookups: 5, templateBytes: 20, templateExpressions: 2 } });
    exactly(
      await post(b, JSON.stringify([{ store: 'main', set: 'x/y', schema: { keys: { A: null, B: null } } }])),
      413,
      limit("the pipeline reads 6 store entries (each command's keys times the sets of its hierarchy); the limit is 5"),
    );
    exactly(
      await post(b, JSON.stringify([{ store: 'main', schema: { keys: { C: { const: `{{ "${'x'.repeat(20)}" }}` } } } }])),
      413,
      limit('command 0: the `const` of key "C" is 28 bytes long; the limit is 20'),
    );
    exactly(await post(b, JSON.stringify([{ store: 'main', schema: { keys: { C: { const: '{{1}}{{2}}<%3%>' } } } }])), 413, limit('command 0: the `const` of key "C" has 3 expressions; the limit is 2'));
  });

  test('422: a const value over its size limit, and const values over the request total (later commands not run)', async () => {
    const a = await app({ limits: { valueBytes: 1000, outputBytes: 2500 } });
    const command = (key: string, n: number) => ({ store: 'main', schema: { keys: { [key]: { const: `{{ "x".repeat(${n}) }}` } } } });
    exactly(await post(a, JSON.stringify([command('C', 1001), command('D', 1)])), 422, validationFailed('1 key failed validation', [
      { command: 0, key: 'C', rule: 'const', message: 'the value of `const` of key "C" is 1001 bytes; the limit is 1000' },
    ]));
    exactly(await post(a, JSON.stringify(Array.from({ length: 12 }, (_, i) => command(`C${i}`, 1000)))), 422, validationFailed('1 key failed validation', [
      { command: 2, key: 'C2', rule: 'const', message: 'the value of `const` of key "C2" brings the values computed by `const` in this request to 3000 bytes; the limit is 2500' },
    ]));
    ok(await post(a, JSON.stringify([command('C', 1000), command('D', 1000)])), { C: 'x'.repeat(1000), D: 'x'.repeat(1000) });
  });

  test('400: a declaration nested deeper than 64 levels (an enum of 1,600 nested arrays), a `schema` deeper than 32', async () => {
    const a = await app();
    const deep = '['.repeat(1600) + ']'.repeat(1600);
    const message = '`enum` of key "E" is nested more than 64 levels deep';
    exactly(await post(a, `[{"store":"main","schema":{"keys":{"E":{"enum":[${deep}],"default":${deep}}}}}]`), 400, invalidSchema(message, '/0/schema/keys/E/enum'));
    // A `schema` declaration nests at most 32 levels (the sandbox compiles it): 32 nested `items` are 33 levels.
    const items = '{"items":'.repeat(32) + '{}' + '}'.repeat(32);
    exactly(await post(a, `[{"store":"main","schema":{"keys":{"S":{"schema":${items}}}}}]`), 400, invalidSchema('`schema` of key "S" is nested more than 32 levels deep', '/0/schema/keys/S/schema'));
  });

  test('400: non-finite numbers are refused; the answer does not depend on what came before', async () => {
    const a = await app();
    const infinite = (key: string, where: string) => invalidSchema(`\`${where}\` of key "${key}" holds a number that is not finite (such as 1e400); cfgu refuses them`, `/0/schema/keys/${key}/${where}`);
    const nullMaximum = (key: string) => invalidSchema(`\`schema\` of key "${key}" is not a valid JSON Schema: /maximum must be number`, `/0/schema/keys/${key}/schema`);
    const maximum = (key: string, v: string) => post(a, `[{"store":"main","schema":{"keys":{"${key}":{"schema":{"maximum":${v}}}}}}]`);
    const enumOf = (key: string, v: string) => post(a, `[{"store":"main","schema":{"keys":{"${key}":{"enum":[${v}]}}}}]`);
    // Each pair in both orders (a key name of its own per order, so neither answer can come from the other's cache entry).
    for (let round = 0; round < 2; round++) {
      exactly(await maximum('M1', '1e400'), 400, infinite('M1', 'schema'));
      exactly(await maximum('M1', 'null'), 400, nullMaximum('M1'));
      exactly(await maximum('M2', 'null'), 400, nullMaximum('M2'));
      exactly(await maximum('M2', '1e400'), 400, infinite('M2', 'schema'));
      exactly(await enumOf('E1', '1e400'), 400, infinite('E1', 'enum'));
      ok(await enumOf('E1', 'null'), { E1: '' });
      ok(await enumOf('E2', 'null'), { E2: '' });
      exactly(await enumOf('E2', '-1e400'), 400, infinite('E2', 'enum'));
    }
  });

  test('413: a body nesting more than 10,000 arrays or objects is refused before it is parsed; 10,000 levels and brackets in strings are not (issue 31)', async () => {
    const a = await app();
    const tooDeep = limit('the request body nests more than 10000 arrays or objects inside one another; the limit is 10000');
    const arrays = (n: number) => '['.repeat(n) + ']'.repeat(n);
    const objects = (n: number) => '{"a":'.repeat(n) + '1' + '}'.repeat(n);
    // Where a review's attack put them: 400,000 arrays in an override, and variants in every part of a command.
    exactly(await post(a, `[{"store":"main","schema":{"keys":{"A":{}}},"configs":{"A":${arrays(400_000)}}}]`), 413, tooDeep);
    exactly(await post(a, `[{"store":"main","schema":{"keys":{"A":{"default":"x","enum":${arrays(20_000)}}}}}]`), 413, tooDeep);
    exactly(await post(a, `[{"store":"main","schema":{"keys":{"A":{"schema":${objects(10_000)}}}}}]`), 413, tooDeep);
    exactly(await post(a, arrays(10_001)), 413, tooDeep);
    // Unbalanced text is judged by the deepest level it opens (the parser would refuse it anyway).
    exactly(await post(a, '['.repeat(10_001)), 413, tooDeep);
    // 10,000 levels in all goes on to the usual checks, with their precise answers (here: not a pipeline, 400).
    exactly(await post(a, arrays(10_000)), 400, {
      type: 'urn:cfgu:problem:invalid-request',
      title: 'Invalid Request',
      status: 400,
      detail: 'the request body is not a valid pipeline: /0 must be object',
      issues: [{ path: '/0', message: 'must be object' }],
    });
    // Brackets inside strings (escaped quotes included) are text, not nesting.
    const brackets = '['.repeat(20_000);
    ok(await post(a, JSON.stringify([{ store: 'main', schema: { keys: { BRACKETS: { default: `\\"${brackets}` } } } }])), { BRACKETS: `\\"${brackets}` });
  });

  test('a hidden key named `toString` whose value is the configs: 200, or 422 for an expression that cannot print them; never 500 (issue 31)', async () => {
    const a = await app();
    const hiddenConfigs = { hidden: true, const: '{{ $.configs }}' };
    // The hidden value is JSON with a `toString` member: making its redaction forms once threw on the host (500).
    ok(await post(a, JSON.stringify([{ store: 'main', schema: { keys: { toString: hiddenConfigs, B: { const: '{{ 1 }}' } } } }])), { B: 1 });
    ok(await post(a, JSON.stringify([{ store: 'main', schema: { keys: { B: { default: 'x' }, toString: hiddenConfigs } } }])), { B: 'x' });
    ok(await post(a, JSON.stringify([{ store: 'main', schema: { keys: { valueOf: { default: 'v' }, toString: hiddenConfigs } } }])), { valueOf: 'v' });
    const r = await post(a, JSON.stringify([{ store: 'main', schema: { keys: { B: { const: '{{ String($.configs) }}' }, toString: hiddenConfigs } } }]));
    assert.equal(r.statusCode, 422, r.body);
    assert.equal(r.headers['content-type'], 'application/problem+json; charset=utf-8');
    const body = r.json();
    assert.deepEqual({ ...body, errors: undefined }, { type: 'urn:cfgu:problem:validation-failed', title: 'Validation Failed', status: 422, detail: '1 key failed validation', errors: undefined });
    assert.equal(body.errors.length, 1);
    assert.deepEqual({ ...body.errors[0], message: undefined }, { command: 0, key: 'B', rule: 'const', message: undefined });
    assert.match(body.errors[0].message, /^`const` of key "B" failed: Cannot convert object to primitive/);
  });

  test('400: a `schema` with `$async` is refused as unsupported, wherever it declares it (issue 31)', async () => {
    const a = await app();
    const refused = (key: string, at: string) =>
      invalidSchema(`\`schema\` of key "${key}" uses \`$async\` (at ${at || '(root)'}), which cfgu does not support: values are validated synchronously`, `/0/schema/keys/${key}/schema${at}`);
    // The fuzzer's case: an integer schema marked $async answered 200 with a value that is no integer.
    exactly(await post(a, JSON.stringify([{ store: 'main', schema: { keys: { A: { schema: { $async: true, type: 'integer' } } } }, configs: { A: 'x1' } }])), 400, refused('A', ''));
    exactly(await post(a, JSON.stringify([{ store: 'main', schema: { keys: { B: { default: '1', schema: { $async: false, type: 'string' } } } } }])), 400, refused('B', ''));
    exactly(await post(a, JSON.stringify([{ store: 'main', schema: { keys: { C: { default: '[]', schema: { type: 'array', items: [{ $async: true }] } } } } }])), 400, refused('C', '/items/0'));
    exactly(await post(a, JSON.stringify([{ store: 'main', schema: { keys: { D: { default: '{}', schema: { $defs: { x: { $async: true } } } } } } }])), 400, refused('D', '/$defs/x'));
    // A property that happens to be named `$async` is a name, not the keyword.
    ok(await post(a, JSON.stringify([{ store: 'main', schema: { keys: { E: { default: '{"$async":1}', schema: { type: 'object', properties: { $async: { type: 'number' } } } } } } }])), { E: { $async: 1 } });
  });

  test('400: an invalid schema never carries another request\'s text', async () => {
    const a = await app();
    const secret = await post(a, JSON.stringify([{ store: 'main', schema: { keys: { S: { schema: { properties: { secretField: { type: 5 } } } } } } }]));
    assert.equal(secret.statusCode, 400);
    assert.match(secret.body, /secretField/);
    const message = '`schema` of key "B" is not a valid JSON Schema: /$schema is not a meta-schema cfgu can check against';
    const other = await post(a, JSON.stringify([{ store: 'main', schema: { keys: { B: { schema: { $schema: 'https://example.com/x' } } } } }]));
    exactly(other, 400, invalidSchema(message, '/0/schema/keys/B/schema'));
  });

  test('200: a value that is the text of deeply nested JSON stays a string (const and default)', async () => {
    const a = await app();
    const deep = '['.repeat(5000) + ']'.repeat(5000);
    ok(await post(a, JSON.stringify([{ store: 'main', schema: { keys: { C: { const: "{{ '['.repeat(5000) + ']'.repeat(5000) }}" } } } }])), { C: deep });
    ok(await post(a, JSON.stringify([{ store: 'main', schema: { keys: { D: { default: deep } } } }])), { D: deep });
    ok(await post(a, JSON.stringify([{ store: 'main', schema: { keys: { D: null } }, configs: { D: deep } }])), { D: deep });
    // 64 levels are still a value.
    const fine = '['.repeat(64) + ']'.repeat(64);
    ok(await post(a, JSON.stringify([{ store: 'main', schema: { keys: { D: { default: fine } } } }])), { D: JSON.parse(fine) });
  });

  test('200: a default listed in enum passes the enum check (null, and 5 under a string type)', async () => {
    const a = await app();
    ok(await post(a, '[{"store":"main","schema":{"keys":{"N":{"default":null,"enum":[null]}}}}]'), { N: 'null' });
    ok(await post(a, '[{"store":"main","schema":{"keys":{"F":{"default":5,"enum":[5],"schema":{"type":"string"}}}}}]'), { F: '5' });
  });
});
