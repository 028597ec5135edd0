/**
 * The write routes (docs/server.md, "Writes"): POST /upsert, GET /history, POST /rollback over a json-file store, with
 * the server's named schema `app` judging the impact. Every refusal of the contract with its exact problem body, and
 * after each refusal nothing written and nothing recorded; the happy paths (write, dry run, history paging, rollback
 * with a preview); write grants and read-only stores; the audit line of a write (never a value).
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pino, type Logger } from 'pino';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { buildServer } from '../../src/server/index.js';
import { load, type Loaded } from '../../src/server/process/start.js';
import { createStoreRegistry, type StoreRegistry } from '../../src/stores/index.js';
import { loadConfiguration } from '../../src/config/index.js';
import { createSandboxEvaluator } from '../../src/expressions/index.js';
import type { ExpressionEvaluator } from '../../src/core/index.js';
import { SignJWT, exportJWK, generateKeyPair, type CryptoKey } from 'jose';
import { removeTempDirs, tempDir, writeJson } from './helpers.js';

const sha256 = (t: string) => createHash('sha256').update(t, 'utf8').digest('hex');
const PRESHARED = 'preshared-key-writes-0123456789';
const READER = 'reader-token-0123456789';
const LOGGER = 'log-writer-token-0123456789';
const BREAKER = 'breaker-token-0123456789';

const APP = {
  keys: {
    GREETING: { label: 'public' },
    PORT: { pattern: '^[0-9]+$' },
    LOG_LEVEL: { enum: ['debug', 'info', 'warn', 'error'] },
    API_URL: { required: true },
    SECRET: { hidden: true },
    URL: { const: 'http://{{ $.configs.GREETING.value }}:{{ $.configs.PORT.value }}' },
    LOCAL: { lazy: true },
  },
};
const DATA = [
  { set: '', key: 'API_URL', value: 'https://api.example.com' },
  { set: '', key: 'GREETING', value: 'hello' },
  { set: '', key: 'LOG_LEVEL', value: 'info' },
  { set: '', key: 'PORT', value: '3000' },
  { set: '', key: 'SECRET', value: 's3cr3t' },
  { set: 'prod', key: 'PORT', value: '8443' },
  { set: 'prod/eu', key: 'LOG_LEVEL', value: 'debug' },
];

let dir: string;
let registry: StoreRegistry;
let evaluator: ExpressionEvaluator;
let loaded: Loaded;
let a: FastifyInstance;
let jwtKey: CryptoKey;
const audit: Array<Record<string, unknown>> = [];

function configu(): string {
  return writeJson(join(dir, '.configu'), {
    stores: {
      main: { type: 'json-file', configuration: { path: 'data.json' }, default: true },
      ro: { type: 'json-file', configuration: { path: 'ro.json' }, readOnly: true },
    },
    schemas: { app: 'app.cfgu.json' },
    interface: {
      proxy: {
        limits: { keys: 4 },
        auth: {
          enabled: true,
          presharedKeys: [PRESHARED],
          credentials: [
            { name: 'reader', sha256: sha256(READER), stores: ['main'], sets: ['**'] },
            { name: 'log-writer', sha256: sha256(LOGGER), stores: ['main'], sets: ['prod/**'], keys: ['LOG_LEVEL'], write: true },
            { name: 'breaker', sha256: sha256(BREAKER), stores: ['*'], sets: ['**'], write: true, breaking: true },
          ],
          jwt: {
            jwksFile: 'jwks.json',
            issuer: 'https://idp.test.example',
            audience: 'cfgu',
            grants: [{ claim: 'scope', value: 'cfgu:levels', stores: ['main'], sets: ['prod/**'], keys: ['LOG_LEVEL'], write: true }],
          },
        },
      },
    },
  });
}

const send = (method: 'POST' | 'GET', url: string, body?: unknown, bearer = PRESHARED) =>
  a.inject({
    method,
    url,
    headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), authorization: `Bearer ${bearer}` },
    ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
  });
const upsert = (body: Record<string, unknown>, bearer?: string) => send('POST', '/upsert', { store: 'main', schema: 'app', ...body }, bearer);
const rollback = (body: Record<string, unknown>, bearer?: string) => send('POST', '/rollback', { store: 'main', schema: 'app', ...body }, bearer);
const history = (query: string, bearer?: string) => send('GET', `/history?${query}`, undefined, bearer);

function exactly(r: LightMyRequestResponse, status: number, body: unknown): void {
  assert.equal(r.statusCode, status, r.body);
  assert.match(String(r.headers['content-type']), status >= 400 ? /^application\/problem\+json/ : /^application\/json/);
  assert.deepEqual(r.json(), body);
}

const data = () => readFileSync(join(dir, 'data.json'), 'utf8');
const revisionOf = async (set: string) => (await registry.resolve('main').revisions!.revision(set)).revision;

/** Run `refused`, then check it wrote nothing and recorded nothing. */
async function changesNothing(refused: () => Promise<void>): Promise<void> {
  const text = data();
  const revisions = await Promise.all(['', 'prod', 'prod/eu'].map(revisionOf));
  await refused();
  assert.equal(data(), text, 'the data is unchanged');
  assert.deepEqual(await Promise.all(['', 'prod', 'prod/eu'].map(revisionOf)), revisions, 'no revision recorded');
}

before(async () => {
  dir = tempDir('cfgu-writes-');
  writeJson(join(dir, 'data.json'), DATA);
  writeJson(join(dir, 'ro.json'), DATA);
  writeJson(join(dir, 'app.cfgu.json'), APP);
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
  jwtKey = privateKey;
  writeJson(join(dir, 'jwks.json'), { keys: [{ ...(await exportJWK(publicKey)), kid: 'k1', alg: 'ES256', use: 'sig' }] });
  const file = configu();
  registry = createStoreRegistry(await loadConfiguration({ file }), { logger: { warn: () => undefined } });
  await registry.init();
  evaluator = await createSandboxEvaluator({ workers: 1, spares: 0, timeoutMs: 2000, memoryMb: 64 });
  loaded = await load({ config: file, flags: { workers: '1' }, env: {}, cwd: dir });
  const auditLogger = pino({ level: 'info' }, { write: (line: string) => void audit.push(JSON.parse(line)) }) as unknown as Logger;
  a = await buildServer({ registry, evaluator, settings: loaded.settings, keyLabels: loaded.keyLabels, schemas: loaded.schemas, logger: false, auditLogger, ready: true });
});

after(async () => {
  await a?.close();
  await registry?.close();
  await evaluator?.close();
  removeTempDirs();
});

const forbiddenWrite = (set: string, keys: string[]) => ({
  type: 'urn:cfgu:problem:forbidden',
  title: 'Forbidden',
  status: 403,
  detail: `this credential may not write ${keys.length === 1 ? 'key' : 'keys'} ${keys.map((k) => `"${k}"`).join(', ')} of set "${set}" in store "main"; nothing was written`,
  store: 'main',
  set,
  right: 'write',
  keys,
});

// The tests run in order: each starts from the state the one before left.
describe('POST /upsert refuses, and a refused write changes nothing and records nothing', () => {
  test('400: an unknown store (naming the known ones), an invalid set, an unknown schema', async () => {
    await changesNothing(async () => {
      exactly(await upsert({ store: 'nope', set: 'prod', values: { PORT: 1 } }), 400, {
        type: 'urn:cfgu:problem:unknown-store',
        title: 'Unknown Store',
        status: 400,
        detail: 'unknown store "nope"; known stores: "main", "ro"',
        knownStores: ['main', 'ro'],
        store: 'nope',
      });
      exactly(await upsert({ set: 'a//b', values: { PORT: 1 } }), 400, {
        type: 'urn:cfgu:problem:invalid-set',
        title: 'Invalid Set',
        status: 400,
        detail: 'set path "a//b" has an empty segment',
        issues: [{ path: '/set', message: 'set path "a//b" has an empty segment' }],
      });
      exactly(await upsert({ schema: 'ap', values: { PORT: 1 } }), 400, {
        type: 'urn:cfgu:problem:unknown-schema',
        title: 'Unknown Schema',
        status: 400,
        detail: 'unknown schema "ap": did you mean "app"?',
        schema: 'ap',
        closestSchemas: ['app'],
      });
    });
  });

  test('400: an undeclared key, a const key and a lazy key, each named', async () => {
    await changesNothing(async () => {
      exactly(await upsert({ values: { NOPE: 1, URL: 'x', LOCAL: 'y' } }), 400, {
        type: 'urn:cfgu:problem:invalid-key',
        title: 'Invalid Key',
        status: 400,
        detail: 'key "NOPE" is not declared by the schema (and 2 more)',
        issues: [
          { path: '/values/NOPE', message: 'key "NOPE" is not declared by the schema' },
          { path: '/values/URL', message: 'key "URL" is computed by `const` and cannot be stored' },
          { path: '/values/LOCAL', message: 'key "LOCAL" is `lazy`: its value only comes from overrides and is never stored' },
        ],
      });
    });
  });

  test('400: a body that is not a write', async () => {
    await changesNothing(async () => {
      exactly(await send('POST', '/upsert', { values: { PORT: 1 } }), 400, {
        type: 'urn:cfgu:problem:invalid-request',
        title: 'Invalid Request',
        status: 400,
        detail: 'the request body is not a valid write: /schema is required',
        issues: [{ path: '/schema', message: 'is required' }],
      });
    });
  });

  test('422: values failing their pattern and enum, every failure listed', async () => {
    await changesNothing(async () => {
      exactly(await upsert({ values: { PORT: 'abc', LOG_LEVEL: 'loud' } }), 422, {
        type: 'urn:cfgu:problem:validation-failed',
        title: 'Validation Failed',
        status: 422,
        detail: '2 keys failed validation',
        errors: [
          { command: 0, key: 'PORT', rule: 'pattern', message: 'the value of key "PORT" does not match the pattern ^[0-9]+$' },
          { command: 0, key: 'LOG_LEVEL', rule: 'enum', message: 'the value of key "LOG_LEVEL" is not one of the allowed values: "debug", "info", "warn", "error"' },
        ],
      });
    });
  });

  test('422 write-breaks: removing a required key breaks the schema at the set and every set under it, with the impact', async () => {
    const impact = ['', 'prod', 'prod/eu'].map((set) => ({
      schema: 'app',
      set,
      status: 'breaks',
      changed: ['API_URL'],
      failures: [{ key: 'API_URL', rule: 'required', message: 'key "API_URL" is required but has no value' }],
    }));
    const body = {
      type: 'urn:cfgu:problem:write-breaks',
      title: 'Write Breaks a Schema',
      status: 422,
      detail: 'the write would make schema "app" at set "", schema "app" at set "prod", schema "app" at set "prod/eu" fail, which passed before; nothing was written (allowBreaking needs the right to break)',
      impact,
    };
    await changesNothing(async () => {
      exactly(await upsert({ values: { API_URL: null } }), 422, body);
      // A dry run answers as the write would.
      exactly(await upsert({ values: { API_URL: '' }, dryRun: true }), 422, body);
    });
  });

  test('403: no write right (a read-only grant; a write grant for other keys), naming the keys refused', async () => {
    await changesNothing(async () => {
      exactly(await upsert({ set: 'prod', values: { PORT: 1 } }, READER), 403, forbiddenWrite('prod', ['PORT']));
      exactly(await upsert({ set: 'prod/eu', values: { PORT: 1, LOG_LEVEL: 'warn', GREETING: 'x' } }, LOGGER), 403, forbiddenWrite('prod/eu', ['GREETING', 'PORT']));
      exactly(await upsert({ set: 'staging', values: { LOG_LEVEL: 'warn' } }, LOGGER), 403, forbiddenWrite('staging', ['LOG_LEVEL']));
      // allowBreaking without the right to break.
      exactly(await upsert({ set: 'prod', values: { LOG_LEVEL: 'nope' } }, LOGGER), 422, {
        type: 'urn:cfgu:problem:validation-failed',
        title: 'Validation Failed',
        status: 422,
        detail: '1 key failed validation',
        errors: [{ command: 0, key: 'LOG_LEVEL', rule: 'enum', message: 'the value of key "LOG_LEVEL" is not one of the allowed values: "debug", "info", "warn", "error"' }],
      });
    });
  });

  test('403 read-only-store: a store .configu declares readOnly', async () => {
    const before = readFileSync(join(dir, 'ro.json'), 'utf8');
    exactly(await upsert({ store: 'ro', values: { PORT: 1 } }), 403, {
      type: 'urn:cfgu:problem:read-only-store',
      title: 'Read-Only Store',
      status: 403,
      detail: 'store "ro" is read-only (.configu declares it readOnly: true); nothing was written',
      store: 'ro',
    });
    assert.equal(readFileSync(join(dir, 'ro.json'), 'utf8'), before);
    // Its audit line: refused, no value.
    const line = audit[audit.length - 1]!;
    assert.deepEqual([line.status, line.write], [403, { route: 'upsert', store: 'ro', set: '', keys: 1, dryRun: false, outcome: 'refused' }]);
  });

  test('413: more keys than limits.keys', async () => {
    await changesNothing(async () => {
      exactly(await upsert({ values: { PORT: 1, LOG_LEVEL: 'warn', GREETING: 'x', API_URL: 'y', SECRET: 'z' } }), 413, {
        type: 'urn:cfgu:problem:limit-exceeded',
        title: 'Limit Exceeded',
        status: 413,
        detail: 'the write has 5 keys; the limit is 4',
      });
    });
  });
});

describe('writes, history and rollback', () => {
  let requestId = '';

  test('a dry run shows the changes and the impact, at the current revision, and writes nothing', async () => {
    await changesNothing(async () => {
      exactly(await upsert({ set: 'prod', values: { PORT: 9000 }, dryRun: true }), 200, {
        store: 'main',
        set: 'prod',
        dryRun: true,
        revision: 0,
        changes: [{ key: 'PORT', before: '8443', after: '9000' }],
        impact: [
          { schema: 'app', set: 'prod', status: 'changes', changed: ['PORT', 'URL'], failures: [] },
          { schema: 'app', set: 'prod/eu', status: 'changes', changed: ['PORT', 'URL'], failures: [] },
        ],
        impactTruncated: false,
      });
    });
  });

  test('a write: the changes (a hidden value shown to full access), the new revision; the data has it', async () => {
    const r = await upsert({ set: 'prod', values: { PORT: 9000, SECRET: 'x' }, message: 'more ports', expectedRevision: 0 });
    requestId = String(r.headers['x-request-id']);
    assert.equal(r.headers['cache-control'], 'no-store');
    // Revision 1 records the values the set held before cfgu kept its history; the write is revision 2.
    exactly(r, 200, {
      store: 'main',
      set: 'prod',
      dryRun: false,
      revision: 2,
      changes: [
        { key: 'PORT', before: '8443', after: '9000' },
        { key: 'SECRET', before: null, after: 'x' },
      ],
      impact: [
        { schema: 'app', set: 'prod', status: 'changes', changed: ['PORT', 'SECRET', 'URL'], failures: [] },
        { schema: 'app', set: 'prod/eu', status: 'changes', changed: ['PORT', 'SECRET', 'URL'], failures: [] },
      ],
      impactTruncated: false,
    });
    assert.ok(JSON.parse(data()).some((c: { set: string; key: string; value: string }) => c.set === 'prod' && c.key === 'PORT' && c.value === '9000'));
    const line = audit.find((l) => l.requestId === requestId)!;
    assert.deepEqual(line.write, { route: 'upsert', store: 'main', set: 'prod', keys: 2, dryRun: false, outcome: 'written' });
    assert.equal(line.status, 200);
    assert.ok(!JSON.stringify(line).includes('9000') && !JSON.stringify(line).includes('"x"'), 'no value in the audit line');
  });

  test('409: a write against a revision that is no longer current names the current one', async () => {
    await changesNothing(async () => {
      exactly(await upsert({ set: 'prod', values: { PORT: 1 }, expectedRevision: 1 }), 409, {
        type: 'urn:cfgu:problem:revision-conflict',
        title: 'Revision Conflict',
        status: 409,
        detail: 'set "prod" of store "main" is at revision 2, not 1: it changed since it was read; nothing was written',
        store: 'main',
        set: 'prod',
        expectedRevision: 1,
        currentRevision: 2,
      });
    });
  });

  test('a scoped writer writes the keys it may; nothing changed: the current revision', async () => {
    exactly(await upsert({ set: 'prod', values: { LOG_LEVEL: 'warn' }, expectedRevision: 2 }, LOGGER), 200, {
      store: 'main',
      set: 'prod',
      dryRun: false,
      revision: 3,
      changes: [{ key: 'LOG_LEVEL', before: null, after: 'warn' }],
      impact: [
        { schema: 'app', set: 'prod', status: 'changes', changed: ['LOG_LEVEL'], failures: [] },
        { schema: 'app', set: 'prod/eu', status: 'unchanged', changed: [], failures: [] },
      ],
      impactTruncated: false,
    });
    exactly(await upsert({ set: 'prod', values: { LOG_LEVEL: 'warn' } }, LOGGER), 200, {
      store: 'main',
      set: 'prod',
      dryRun: false,
      revision: 3,
      changes: [],
      impact: [],
      impactTruncated: false,
    });
  });

  test('GET /history: newest first, paged with next; values masked for a caller who may not read them', async () => {
    const first = await history('store=main&set=prod&limit=2');
    assert.equal(first.statusCode, 200, first.body);
    const page = first.json();
    assert.equal(first.headers['cache-control'], 'no-store');
    assert.deepEqual(page.records.map((r: { revision: number }) => r.revision), [3, 2]);
    assert.equal(page.next, 2);
    assert.deepEqual(page.records[1], {
      revision: 2,
      time: page.records[1].time,
      subject: 'preshared:1',
      requestId,
      message: 'more ports',
      recorded: true,
      changes: [
        { key: 'PORT', before: '8443', after: '9000' },
        { key: 'SECRET', before: null, after: 'x' },
      ],
    });
    assert.equal(page.records[0].subject, 'log-writer');
    const second = (await history('store=main&set=prod&limit=2&before=2')).json();
    assert.deepEqual(second, {
      store: 'main',
      set: 'prod',
      records: [
        {
          revision: 1,
          time: second.records[0].time,
          subject: null,
          requestId: null,
          message: 'values present before cfgu kept the history of this set; not recorded',
          recorded: false,
          changes: [{ key: 'PORT', before: null, after: '8443' }],
        },
      ],
    });
    // The log writer may read LOG_LEVEL only; a reader may read every key but the hidden SECRET.
    const masked = (await history('store=main&set=prod&limit=2', LOGGER)).json();
    assert.deepEqual(masked.records[1].changes, [
      { key: 'PORT', before: { hidden: true }, after: { hidden: true } },
      { key: 'SECRET', before: { hidden: true }, after: { hidden: true } },
    ]);
    assert.deepEqual(masked.records[0].changes, [{ key: 'LOG_LEVEL', before: null, after: 'warn' }]);
    const reader = (await history('store=main&set=prod&limit=2&key=SECRET', READER)).json();
    assert.deepEqual(reader.records.map((r: { revision: number }) => r.revision), [2]);
    assert.deepEqual(reader.records[0].changes[1], { key: 'SECRET', before: { hidden: true }, after: { hidden: true } });
  });

  test('GET /history refuses a set outside every grant and a bad query', async () => {
    exactly(await history('store=main&set=staging', LOGGER), 403, {
      type: 'urn:cfgu:problem:forbidden',
      title: 'Forbidden',
      status: 403,
      detail: '1 of 1 command is outside the scope of this credential: command 0 (store "main", set "staging")',
      refused: [{ command: 0, store: 'main', set: 'staging' }],
    });
    exactly(await history('limit=abc'), 400, {
      type: 'urn:cfgu:problem:invalid-request',
      title: 'Invalid Request',
      status: 400,
      detail: 'the query string is not valid: /limit must match pattern "^([1-9][0-9]{0,2}|1000)$"',
      issues: [{ path: '/limit', message: 'must match pattern "^([1-9][0-9]{0,2}|1000)$"' }],
    });
  });

  test('POST /rollback: a preview, then the values as of revision 1 restored as a new revision', async () => {
    const restored = {
      store: 'main',
      set: 'prod',
      changes: [
        { key: 'LOG_LEVEL', before: 'warn', after: null },
        { key: 'PORT', before: '9000', after: '8443' },
        { key: 'SECRET', before: 'x', after: null },
      ],
      impact: [
        { schema: 'app', set: 'prod', status: 'changes', changed: ['PORT', 'LOG_LEVEL', 'SECRET', 'URL'], failures: [] },
        { schema: 'app', set: 'prod/eu', status: 'changes', changed: ['PORT', 'SECRET', 'URL'], failures: [] },
      ],
      impactTruncated: false,
    };
    await changesNothing(async () => {
      exactly(await rollback({ set: 'prod', toRevision: 1, dryRun: true }), 200, { ...restored, dryRun: true, revision: 3 });
    });
    exactly(await rollback({ set: 'prod', toRevision: 1, expectedRevision: 3 }), 200, { ...restored, dryRun: false, revision: 4 });
    const [record] = (await history('store=main&set=prod&limit=1')).json().records;
    assert.equal(record.message, 'rollback to revision 1');
    // Only some keys, back to revision 2.
    exactly(await rollback({ set: 'prod', toRevision: 2, keys: ['PORT'], message: 'port back' }), 200, {
      store: 'main',
      set: 'prod',
      dryRun: false,
      revision: 5,
      changes: [{ key: 'PORT', before: '8443', after: '9000' }],
      impact: [
        { schema: 'app', set: 'prod', status: 'changes', changed: ['PORT', 'URL'], failures: [] },
        { schema: 'app', set: 'prod/eu', status: 'changes', changed: ['PORT', 'URL'], failures: [] },
      ],
      impactTruncated: false,
    });
  });

  test('POST /rollback: 400 for a revision the set does not have (another set\'s, or none)', async () => {
    await changesNothing(async () => {
      exactly(await rollback({ set: 'prod', toRevision: 99 }), 400, {
        type: 'urn:cfgu:problem:invalid-request',
        title: 'Invalid Request',
        status: 400,
        detail: 'set "prod" of store "main" has no revision 99 in its history (its current revision is 5)',
        issues: [{ path: '/toRevision', message: 'is not a revision of set "prod"' }],
      });
      // `prod/eu` was never written through cfgu: revision 1 is another set's.
      exactly(await rollback({ set: 'prod/eu', toRevision: 1 }), 400, {
        type: 'urn:cfgu:problem:invalid-request',
        title: 'Invalid Request',
        status: 400,
        detail: 'set "prod/eu" of store "main" has no revision 1 in its history (its current revision is 0)',
        issues: [{ path: '/toRevision', message: 'is not a revision of set "prod/eu"' }],
      });
    });
  });

  test('a breaking write with allowBreaking: refused without the right to break, written with it', async () => {
    await changesNothing(async () => {
      exactly(await upsert({ values: { API_URL: null }, allowBreaking: true }, READER), 403, forbiddenWrite('', ['API_URL']));
    });
    const r = await upsert({ values: { API_URL: null }, allowBreaking: true }, BREAKER);
    assert.equal(r.statusCode, 200, r.body);
    assert.deepEqual(r.json().changes, [{ key: 'API_URL', before: 'https://api.example.com', after: null }]);
    assert.deepEqual(r.json().impact.map((i: { status: string }) => i.status), ['breaks', 'breaks', 'breaks']);
    // And fixed again: `fixes`.
    const fixed = await upsert({ values: { API_URL: 'https://api.example.com' } });
    assert.deepEqual(fixed.json().impact.map((i: { status: string }) => i.status), ['fixes', 'fixes', 'fixes']);
  });
});

test('a JWT grant with write: true writes the keys it covers, and nothing else', async () => {
  const token = await new SignJWT({ sub: 'svc-levels', scope: 'cfgu:levels' })
    .setProtectedHeader({ alg: 'ES256', kid: 'k1' })
    .setIssuer('https://idp.test.example')
    .setAudience('cfgu')
    .setIssuedAt()
    .setExpirationTime('5m')
    .sign(jwtKey);
  await changesNothing(async () => {
    exactly(await upsert({ set: 'prod/eu', values: { PORT: 1, LOG_LEVEL: 'error' } }, token), 403, forbiddenWrite('prod/eu', ['PORT']));
  });
  const r = await upsert({ set: 'prod/eu', values: { LOG_LEVEL: 'error' }, message: 'quieter' }, token);
  assert.equal(r.statusCode, 200, r.body);
  assert.deepEqual(r.json().changes, [{ key: 'LOG_LEVEL', before: 'debug', after: 'error' }]);
  const [record] = (await history('store=main&set=prod/eu&limit=1', token)).json().records;
  assert.deepEqual([record.subject, record.message, record.changes], ['svc-levels', 'quieter', [{ key: 'LOG_LEVEL', before: 'debug', after: 'error' }]]);
});

test('the write routes are counted in /metrics by route and outcome (cfgu_writes_total)', async () => {
  const count = async (route: string, outcome: string): Promise<number> => {
    const r = await a.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${PRESHARED}` } });
    assert.equal(r.statusCode, 200, r.body);
    const line = r.body.split('\n').find((l) => l.startsWith(`cfgu_writes_total{route="${route}",outcome="${outcome}"} `));
    return line === undefined ? 0 : Number(line.split(' ').pop());
  };
  const written = await count('upsert', 'written');
  const dryRuns = await count('upsert', 'dry-run');
  const refused = await count('upsert', 'refused');
  const reads = await count('history', 'read');
  // A set of this test's own, which no other test writes: the write changes a value.
  assert.equal((await send('POST', '/upsert', { set: 'prod/metrics', schema: 'app', values: { LOG_LEVEL: 'warn' }, dryRun: true })).statusCode, 200);
  assert.equal((await send('POST', '/upsert', { set: 'prod/metrics', schema: 'app', values: { UNDECLARED: 'x' } })).statusCode, 400);
  const wrote = await send('POST', '/upsert', { set: 'prod/metrics', schema: 'app', values: { LOG_LEVEL: 'error' } });
  assert.equal(wrote.statusCode, 200, wrote.body);
  assert.equal(wrote.json().changes.length, 1);
  assert.equal((await send('GET', '/history?set=prod')).statusCode, 200);
  assert.equal(await count('upsert', 'dry-run'), dryRuns + 1);
  assert.equal(await count('upsert', 'refused'), refused + 1);
  assert.equal(await count('upsert', 'written'), written + 1);
  assert.equal(await count('history', 'read'), reads + 1);
});
