/**
 * POST /explain (docs/explain.md, "Over HTTP"; docs/server.md): the explanation of a pipeline over the real engine,
 * the real `.configu` loader and json-file store, and the real expression sandbox, in-process (buildServer + inject).
 * Exact bodies for every origin, a three-set-deep shadowing, a const reading a piped key, a failing test among passing
 * ones (200 with `ok: false`), hidden keys; and the access rules of POST /export applied the same way: scoped
 * credentials refused whole (403, nothing read), shadowed values at sets the credential may not read withheld, key
 * and label scopes, authentication on and off, the audit line, 400 and 413 as the export answers them.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { pino, type Logger } from 'pino';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { buildServer, settingsWith, type SettingsOverrides } from '../../src/server/index.js';
import { resolveSettings } from '../../src/server/process/resolve-settings.js';
import type { KeyLabels } from '../../src/server/access/key-labels.js';
import { loadConfiguration } from '../../src/config/index.js';
import { createStoreRegistry, type StoreRegistry } from '../../src/stores/index.js';
import { createSandboxEvaluator } from '../../src/expressions/index.js';
import type { ExpressionEvaluator } from '../../src/core/ports.js';
import { captureLog, removeTempDirs, tempDir, writeJson } from './helpers.js';
import { countingResolver } from '../helpers/engine.js';
import { byDesign, failingOnHidden, failingOnHiddenErrors, planted } from '../helpers/capture.js';
import { waitFor } from '../helpers/wait.js';

const PASSWORD = planted('explain-route');
const PRESHARED = 'preshared-key-explain-0a1b2c';
const sha256 = (t: string) => createHash('sha256').update(t, 'utf8').digest('hex');
const EU_TOKEN = `cfgu_eu-${randomUUID()}`;
const PROD_TOKEN = `cfgu_prod-${randomUUID()}`;
const KEYS_TOKEN = `cfgu_keys-${randomUUID()}`;
const GHOST_TOKEN = `cfgu_ghost-${randomUUID()}`;

let dir: string;
let registry: StoreRegistry;
let evaluator: ExpressionEvaluator;
const reads: string[] = [];
const counting = countingResolver(() => registry, reads);
const apps: FastifyInstance[] = [];
const silent = pino({ level: 'silent' }) as unknown as Logger;

before(async () => {
  dir = tempDir('cfgu-explain-');
  writeJson(join(dir, 'main.json'), [
    { set: '', key: 'HOST', value: 'localhost' },
    { set: 'prod', key: 'HOST', value: 'shop.example' },
    { set: 'prod/eu', key: 'HOST', value: 'eu.shop.example' },
    { set: 'prod/eu/west', key: 'HOST', value: 'west.eu.shop.example' },
    { set: '', key: 'PORT', value: '80' },
    { set: '', key: 'LEVEL', value: 'info' },
    { set: 'prod', key: 'LEVEL', value: 'warn' },
    { set: 'prod', key: 'DB_PASSWORD', value: PASSWORD },
    { set: '', key: 'PUBLIC_URL', value: 'https://shop.example' },
  ]);
  writeJson(join(dir, '.configu'), { stores: { main: { type: 'json-file', configuration: { path: 'main.json' } } } });
  registry = createStoreRegistry(await loadConfiguration({ file: join(dir, '.configu') }), { logger: { warn: () => undefined } });
  await registry.init();
  evaluator = await createSandboxEvaluator({ workers: 1, spares: 0 });
});

after(async () => {
  for (const a of apps) await a.close();
  await registry?.close();
  await evaluator?.close();
  removeTempDirs();
});

/** A server without authentication. */
async function open(overrides: SettingsOverrides = {}): Promise<FastifyInstance> {
  const a = await buildServer({ registry: counting, evaluator, settings: settingsWith(overrides), logger: silent, ready: true });
  apps.push(a);
  return a;
}

const credentials = () => [
  { name: 'eu-only', sha256: sha256(EU_TOKEN), stores: ['main'], sets: ['prod/eu'] },
  { name: 'prod-down', sha256: sha256(PROD_TOKEN), stores: ['main'], sets: ['prod/**'] },
  { name: 'public-keys', sha256: sha256(KEYS_TOKEN), stores: ['*'], sets: ['**'], keys: ['PUBLIC_*'], labels: ['public'] },
  { name: 'ghost', sha256: sha256(GHOST_TOKEN), stores: ['main', 'ghost'], sets: ['**'] },
];

/** A server with authentication on: a preshared key and the scoped credentials above, settings as `.configu` gives them. */
async function secured(options: { logger?: Logger; keyLabels?: KeyLabels; proxy?: Record<string, unknown> } = {}): Promise<FastifyInstance> {
  const fileSettings = { auth: { enabled: true, presharedKeys: [PRESHARED], credentials: credentials() }, ...(options.proxy ?? {}) };
  const settings = resolveSettings({ fileSettings, file: join(dir, '.configu'), env: {} });
  const a = await buildServer({
    registry: counting,
    evaluator,
    settings: { ...settings, workers: 1 },
    logger: options.logger ?? silent,
    ready: true,
    ...(options.keyLabels ? { keyLabels: options.keyLabels } : {}),
  });
  apps.push(a);
  return a;
}

const post = (a: FastifyInstance, url: string, body: unknown, bearer?: string, headers: Record<string, string> = {}) =>
  a.inject({
    method: 'POST',
    url,
    headers: { 'content-type': 'application/json', ...(bearer ? { authorization: `Bearer ${bearer}` } : {}), ...headers },
    payload: typeof body === 'string' ? body : JSON.stringify(body),
  });
const explain = (a: FastifyInstance, body: unknown, bearer?: string, headers?: Record<string, string>) => post(a, '/explain', body, bearer, headers);

/** A 200 explanation: JSON, never cached, no ETag. */
function explanation(r: LightMyRequestResponse): any {
  assert.equal(r.statusCode, 200, r.body);
  assert.equal(r.headers['content-type'], 'application/json; charset=utf-8');
  assert.equal(r.headers['cache-control'], 'no-store');
  assert.equal(r.headers.etag, undefined);
  return r.json();
}

function problem(r: LightMyRequestResponse, status: number, expected: Record<string, unknown>): void {
  assert.equal(r.statusCode, status, r.body);
  assert.equal(r.headers['content-type'], 'application/problem+json; charset=utf-8');
  assert.deepEqual(r.json(), expected);
}

/** A key's explanation: the fields every key has, with those given. */
const key = (fields: Record<string, unknown>) => ({ declared: true, hidden: false, candidates: [], tests: [], failures: [], ...fields });
/** The answer for one command, evaluated. */
const answer = (values: unknown, command: Record<string, unknown>, failures: unknown[] = []) => ({
  version: 1,
  ok: values !== null,
  values,
  failures,
  explanations: [{ command: 0, store: 'main', evaluated: true, ...command }],
  backupStores: [],
});
const won = (set: string, value: string) => ({ set, status: 'won', value });
const shadowed = (set: string, value: string) => ({ set, status: 'shadowed', value });

describe('the explanation', () => {
  test('every origin: store, empty, default, override, const; the default shown when the store won', async () => {
    const a = await open();
    const body = [
      {
        store: 'main',
        set: 'prod/eu',
        schema: {
          keys: {
            HOST: {},
            MISSING: {},
            MODE: { default: 'dev' },
            LEVEL: {},
            PORT: { default: 8080 },
            URL: { const: 'https://{{ $.configs.HOST.value }}:{{ $.configs.PORT.value }}' },
          },
        },
        configs: { LEVEL: 'debug' },
      },
    ];
    assert.deepEqual(
      explanation(await explain(a, body)),
      answer(
        { HOST: 'eu.shop.example', MISSING: '', MODE: 'dev', LEVEL: 'debug', PORT: 80, URL: 'https://eu.shop.example:80' },
        {
          set: 'prod/eu',
          hierarchy: ['', 'prod', 'prod/eu'],
          keys: [
            key({
              key: 'HOST',
              value: 'eu.shop.example',
              exported: 'eu.shop.example',
              origin: 'store',
              set: 'prod/eu',
              candidates: [shadowed('', 'localhost'), shadowed('prod', 'shop.example'), won('prod/eu', 'eu.shop.example')],
            }),
            key({ key: 'MISSING', value: '', exported: '', origin: 'empty', set: 'prod/eu' }),
            key({ key: 'MODE', value: 'dev', exported: 'dev', origin: 'default', set: 'prod/eu', default: { value: 'dev' } }),
            key({
              key: 'LEVEL',
              value: 'debug',
              exported: 'debug',
              origin: 'override',
              set: 'prod/eu',
              candidates: [shadowed('', 'info'), { set: 'prod', status: 'overridden', value: 'warn' }],
              override: { value: 'debug' },
            }),
            key({ key: 'PORT', value: '80', exported: 80, origin: 'store', set: '', candidates: [won('', '80')], default: { value: '8080' } }),
            key({
              key: 'URL',
              value: 'https://eu.shop.example:80',
              exported: 'https://eu.shop.example:80',
              origin: 'const',
              set: 'prod/eu',
              const: {
                template: 'https://{{ $.configs.HOST.value }}:{{ $.configs.PORT.value }}',
                computed: true,
                reads: [
                  { key: 'HOST', origin: 'store', value: 'eu.shop.example' },
                  { key: 'PORT', origin: 'store', value: '80' },
                ],
              },
            }),
          ],
        },
      ),
    );
  });

  test('shadowing three sets deep: every ancestor\'s value listed, root first, the nearest one won', async () => {
    const a = await open();
    const r = await explain(a, [{ store: 'main', set: 'prod/eu/west', schema: { keys: { HOST: {} } } }]);
    assert.deepEqual(
      explanation(r),
      answer(
        { HOST: 'west.eu.shop.example' },
        {
          set: 'prod/eu/west',
          hierarchy: ['', 'prod', 'prod/eu', 'prod/eu/west'],
          keys: [
            key({
              key: 'HOST',
              value: 'west.eu.shop.example',
              exported: 'west.eu.shop.example',
              origin: 'store',
              set: 'prod/eu/west',
              candidates: [shadowed('', 'localhost'), shadowed('prod', 'shop.example'), shadowed('prod/eu', 'eu.shop.example'), won('prod/eu/west', 'west.eu.shop.example')],
            }),
          ],
        },
      ),
    );
  });

  test('a const reading a piped key: the key carried through from command 0, the const\'s read of it', async () => {
    const a = await open();
    const body = [
      { store: 'main', set: 'prod', schema: { keys: { HOST: {} } } },
      { store: 'main', set: 'prod/eu', schema: { keys: { URL: { const: 'https://{{ $.configs.HOST.value }}/' } } } },
    ];
    const host = key({
      key: 'HOST',
      value: 'shop.example',
      exported: 'shop.example',
      origin: 'store',
      set: 'prod',
      candidates: [shadowed('', 'localhost'), won('prod', 'shop.example')],
    });
    assert.deepEqual(explanation(await explain(a, body)), {
      version: 1,
      ok: true,
      values: { HOST: 'shop.example', URL: 'https://shop.example/' },
      failures: [],
      explanations: [
        { command: 0, store: 'main', set: 'prod', hierarchy: ['', 'prod'], evaluated: true, keys: [host] },
        {
          command: 1,
          store: 'main',
          set: 'prod/eu',
          hierarchy: ['', 'prod', 'prod/eu'],
          evaluated: true,
          keys: [
            key({ key: 'HOST', declared: false, value: 'shop.example', exported: 'shop.example', origin: 'store', set: 'prod', piped: { command: 0 } }),
            key({
              key: 'URL',
              value: 'https://shop.example/',
              exported: 'https://shop.example/',
              origin: 'const',
              set: 'prod/eu',
              const: { template: 'https://{{ $.configs.HOST.value }}/', computed: true, reads: [{ key: 'HOST', origin: 'store', value: 'shop.example' }] },
            }),
          ],
        },
      ],
      backupStores: [],
    });
  });

  test('a failing test among passing ones: 200 with ok false, the failures of the export\'s 422, each test marked', async () => {
    const a = await open();
    const body = [{ store: 'main', set: 'prod', schema: { keys: { PORT: { test: ['$.value > 0', '$.value >= 1024', '$.value < 65536'] } } } }];
    const message = 'the value of key "PORT" failed the test $.value >= 1024';
    assert.deepEqual(
      explanation(await explain(a, body)),
      answer(
        null,
        {
          set: 'prod',
          hierarchy: ['', 'prod'],
          keys: [
            key({
              key: 'PORT',
              value: '80',
              exported: 80,
              origin: 'store',
              set: '',
              candidates: [won('', '80')],
              tests: [
                { index: 0, expression: '$.value > 0', passed: true },
                { index: 1, expression: '$.value >= 1024', passed: false, message },
                { index: 2, expression: '$.value < 65536', passed: true },
              ],
              failures: [{ rule: 'test', message }],
            }),
          ],
        },
        [{ command: 0, key: 'PORT', rule: 'test', message }],
      ),
    );
    // The export of the same body: 422, whose `errors` are the explanation's `failures`.
    problem(await post(a, '/export', body), 422, {
      type: 'urn:cfgu:problem:validation-failed',
      title: 'Validation Failed',
      status: 422,
      detail: '1 key failed validation',
      errors: [{ command: 0, key: 'PORT', rule: 'test', message }],
    });
  });

  test('a hidden key: its value, candidates and default withheld, in const reads too; failure messages redacted', async () => {
    const a = await open();
    const derived = `postgres://app:${PASSWORD}@db/shop`;
    byDesign(derived); // a const computed from a hidden key is exported (docs/security.md)
    const body = [
      {
        store: 'main',
        set: 'prod',
        schema: {
          keys: {
            DB_PASSWORD: { hidden: true, default: 'changeme' },
            DB_URL: { const: 'postgres://app:{{ $.configs.DB_PASSWORD.value }}@db/shop' },
          },
        },
      },
    ];
    const r = await explain(a, body);
    assert.deepEqual(
      explanation(r),
      answer(
        { DB_URL: derived },
        {
          set: 'prod',
          hierarchy: ['', 'prod'],
          keys: [
            key({
              key: 'DB_PASSWORD',
              hidden: true,
              withheld: 'hidden',
              origin: 'store',
              set: 'prod',
              candidates: [{ set: 'prod', status: 'won', withheld: 'hidden' }],
              default: { withheld: 'hidden' },
            }),
            key({
              key: 'DB_URL',
              value: derived,
              exported: derived,
              origin: 'const',
              set: 'prod',
              derivedFromHidden: true,
              const: {
                template: 'postgres://app:{{ $.configs.DB_PASSWORD.value }}@db/shop',
                computed: true,
                reads: [{ key: 'DB_PASSWORD', origin: 'store', withheld: 'hidden' }],
              },
            }),
          ],
        },
      ),
    );
    // The failing paths that could quote the value (test/helpers/capture.ts): the messages are the export's, redacted.
    const failing = [{ store: 'main', set: 'prod', schema: { keys: failingOnHidden('DB_PASSWORD') } }];
    const out = explanation(await explain(a, failing));
    assert.ok(!JSON.stringify(out).includes(PASSWORD.slice(-10)), 'the planted value never leaves');
    assert.equal(out.ok, false);
    assert.deepEqual(out.failures, failingOnHiddenErrors('DB_PASSWORD'));
    const [password, url, json] = out.explanations[0].keys;
    assert.deepEqual(
      password.tests.map((t: { message?: string }) => t.message),
      failingOnHiddenErrors('DB_PASSWORD').slice(0, 3).map((e) => e.message),
    );
    assert.equal(password.withheld, 'hidden');
    assert.deepEqual(url.const.reads, [{ key: 'DB_PASSWORD', origin: 'store', withheld: 'hidden' }]);
    assert.equal(url.withheld, 'hidden');
    assert.deepEqual(
      json.failures,
      failingOnHiddenErrors('DB_PASSWORD')
        .filter((e) => e.key === 'DB_PASSWORD_JSON')
        .map(({ rule, message }) => ({ rule, message })),
    );
    assert.deepEqual(json.const.reads, [{ key: 'DB_PASSWORD', origin: 'store', withheld: 'hidden' }]);
  });

  test('never conditional, never a watch: If-None-Match, Prefer: wait and Accept: text/event-stream get the explanation', async () => {
    const a = await open();
    const body = [{ store: 'main', set: 'prod', schema: { keys: { HOST: {} } } }];
    const exported = await post(a, '/export', body);
    const etag = exported.headers.etag as string;
    assert.ok(etag);
    const plain = explanation(await explain(a, body));
    const variants: Array<Record<string, string>> = [{ 'if-none-match': etag }, { 'if-none-match': etag, prefer: 'wait=5' }, { accept: 'text/event-stream' }];
    for (const headers of variants) {
      assert.deepEqual(explanation(await explain(a, body, undefined, headers)), plain);
    }
    assert.equal(a.cfgu.watch.watchers, 0);
  });

  test('GET /explain: 405 with Allow: POST', async () => {
    const a = await open();
    const r = await a.inject({ method: 'GET', url: '/explain' });
    assert.equal(r.headers.allow, 'POST');
    problem(r, 405, { type: 'about:blank', title: 'Method Not Allowed', status: 405, detail: 'GET is not allowed on /explain; allowed: POST' });
  });
});

describe('errors answered as POST /export answers them', () => {
  test('an invalid body: 400, the same problem as the export\'s', async () => {
    const a = await open();
    const expected = {
      type: 'urn:cfgu:problem:invalid-request',
      title: 'Invalid Request',
      status: 400,
      detail: 'the request body is not a valid pipeline: /0/schema is required',
      issues: [{ path: '/0/schema', message: 'is required' }],
    };
    problem(await explain(a, [{ store: 'main', set: 'prod' }]), 400, expected);
    problem(await post(a, '/export', [{ store: 'main', set: 'prod' }]), 400, expected);
  });

  test('limits: 413 for too many commands and too many keys, before the body is validated', async () => {
    const a = await open({ limits: { commands: 2, keys: 3 } });
    const limit = (detail: string) => ({ type: 'urn:cfgu:problem:limit-exceeded', title: 'Limit Exceeded', status: 413, detail });
    problem(await explain(a, [{}, {}, {}]), 413, limit('the pipeline has 3 commands; the limit is 2'));
    problem(await explain(a, [{ schema: { keys: { A: {}, B: {}, C: {}, D: {} } }, nonsense: true }]), 413, limit('command 0 declares 4 keys; the limit is 3'));
    const small = await open({ limits: { bodyBytes: 1024 } });
    problem(
      await explain(small, [{ schema: { keys: { A: { description: 'x'.repeat(2000) } } } }]),
      413,
      limit('the request body is larger than the configured limit'),
    );
  });

  test('an unknown store: 400 listing the known stores', async () => {
    const a = await open();
    problem(await explain(a, [{ store: 'nope', schema: { keys: { HOST: {} } } }]), 400, {
      type: 'urn:cfgu:problem:unknown-store',
      title: 'Unknown Store',
      status: 400,
      detail: 'unknown store "nope"; known stores: "main"',
      store: 'nope',
      knownStores: ['main'],
    });
  });
});

describe('access (docs/security.md, "Explanations")', () => {
  const body = (set: string, keys: Record<string, unknown> = { HOST: {}, PORT: {} }) => [{ store: 'main', set, schema: { keys } }];
  const forbidden = (detail: string, refused: unknown[]) => ({ type: 'urn:cfgu:problem:forbidden', title: 'Forbidden', status: 403, detail, refused });

  test('authentication on: 401 without a key, the explanation with the preshared key (full access: every value)', async () => {
    const a = await secured();
    problem(await explain(a, body('prod/eu')), 401, {
      type: 'urn:cfgu:problem:unauthorized',
      title: 'Unauthorized',
      status: 401,
      detail: 'a valid bearer key is required (Authorization: Bearer <key>)',
    });
    const out = explanation(await explain(a, body('prod/eu'), PRESHARED));
    assert.deepEqual(out.explanations[0].keys[0].candidates, [shadowed('', 'localhost'), shadowed('prod', 'shop.example'), won('prod/eu', 'eu.shop.example')]);
  });

  test('a scoped credential out of scope: 403 with the export\'s body, nothing read', async () => {
    const a = await secured();
    reads.length = 0;
    const pipeline = [...body('prod/eu'), ...body('prod')];
    const expected = forbidden('1 of 2 commands is outside the scope of this credential: command 1 (store "main", set "prod")', [{ command: 1, store: 'main', set: 'prod' }]);
    problem(await explain(a, pipeline, EU_TOKEN), 403, expected);
    assert.deepEqual(reads, [], 'no store was read');
    problem(await post(a, '/export', pipeline, EU_TOKEN), 403, expected);
  });

  test('a credential for prod/eu but not prod: shadowed values at the root and prod withheld, the winner shown', async () => {
    const a = await secured();
    const eu = explanation(await explain(a, body('prod/eu'), EU_TOKEN));
    assert.deepEqual(
      eu,
      answer(
        { HOST: 'eu.shop.example', PORT: 80 },
        {
          set: 'prod/eu',
          hierarchy: ['', 'prod', 'prod/eu'],
          keys: [
            key({
              key: 'HOST',
              value: 'eu.shop.example',
              exported: 'eu.shop.example',
              origin: 'store',
              set: 'prod/eu',
              candidates: [
                { set: '', status: 'shadowed', withheld: 'scope' },
                { set: 'prod', status: 'shadowed', withheld: 'scope' },
                won('prod/eu', 'eu.shop.example'),
              ],
            }),
            // The root's value won: the export gives it to this credential (a set reads its ancestors' values).
            key({ key: 'PORT', value: '80', exported: 80, origin: 'store', set: '', candidates: [won('', '80')] }),
          ],
        },
      ),
    );
    // prod/** reads prod and below, not the root.
    const prod = explanation(await explain(a, body('prod/eu', { HOST: {} }), PROD_TOKEN));
    assert.deepEqual(prod.explanations[0].keys[0].candidates, [
      { set: '', status: 'shadowed', withheld: 'scope' },
      shadowed('prod', 'shop.example'),
      won('prod/eu', 'eu.shop.example'),
    ]);
    // The export of the same body answers the same values as the explanation's `values`.
    const exported = await post(a, '/export', body('prod/eu'), EU_TOKEN);
    assert.equal(exported.statusCode, 200, exported.body);
    assert.deepEqual(exported.json(), eu.values);
  });

  test('key and label scopes: a command declaring a key outside them is refused whole (403), as the export refuses it', async () => {
    const labels: KeyLabels = new Map([['HOST', new Set(['public'])]]);
    const a = await secured({ keyLabels: labels });
    const allowed = explanation(await explain(a, body('prod', { PUBLIC_URL: {}, HOST: {} }), KEYS_TOKEN));
    assert.deepEqual(allowed.values, { PUBLIC_URL: 'https://shop.example', HOST: 'shop.example' });
    reads.length = 0;
    const expected = forbidden('1 of 1 command is outside the scope of this credential: command 0 (store "main", set "prod")', [{ command: 0, store: 'main', set: 'prod' }]);
    problem(await explain(a, body('prod', { PUBLIC_URL: {}, DB_PASSWORD: { hidden: true } }), KEYS_TOKEN), 403, expected);
    assert.deepEqual(reads, []);
  });

  test('an unknown store a scoped credential may name: 400 listing only the stores it may name', async () => {
    const a = await secured();
    problem(await explain(a, [{ store: 'ghost', schema: { keys: { HOST: {} } } }], GHOST_TOKEN), 400, {
      type: 'urn:cfgu:problem:unknown-store',
      title: 'Unknown Store',
      status: 400,
      detail: 'unknown store "ghost"; known stores: "main"',
      store: 'ghost',
      knownStores: ['main'],
    });
  });

  test('the audit line: who, which commands, how many keys explained, marked explain', async () => {
    const log = captureLog();
    const a = await secured({ logger: log.logger });
    const id = `x-${randomUUID()}`;
    explanation(await explain(a, body('prod/eu'), EU_TOKEN, { 'x-request-id': id }));
    const line = await waitFor('the audit line', () => log.lines().find((l) => l.msg === 'audit' && l.requestId === id));
    const { time: _time, pid: _pid, ...rest } = line as Record<string, unknown>;
    assert.deepEqual(rest, {
      level: 'info',
      msg: 'audit',
      requestId: id,
      subject: 'eu-only',
      auth: 'credential',
      client: '127.0.0.1',
      commands: [{ store: 'main', set: 'prod/eu' }],
      keys: 2,
      status: 200,
      explain: true,
    });
  });

  test('rate limits: the settings of POST /export, a budget per route; 429 over it, nothing read', async () => {
    const a = await secured({ proxy: { rateLimit: { enabled: true, max: 2, windowSeconds: 3600 } } });
    for (let i = 0; i < 2; i++) explanation(await explain(a, body('prod/eu'), EU_TOKEN));
    reads.length = 0;
    const r = await explain(a, body('prod/eu'), EU_TOKEN);
    const retry = Number(r.headers['retry-after']);
    assert.ok(Number.isInteger(retry) && retry >= 1 && retry <= 3600, `Retry-After ${r.headers['retry-after']}`);
    problem(r, 429, { type: 'urn:cfgu:problem:rate-limited', title: 'Too Many Requests', status: 429, detail: `more than 2 requests in 3600 s; retry after ${retry} s` });
    assert.deepEqual(reads, [], 'a limited request reads nothing');
    // @fastify/rate-limit keeps one budget per route: the export's is untouched.
    assert.equal((await post(a, '/export', body('prod/eu'), EU_TOKEN)).statusCode, 200);
  });
});
