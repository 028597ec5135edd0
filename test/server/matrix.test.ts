/**
 * POST /matrix (src/server/http/routes/matrix.ts, docs/server.md): exact answers for given sets and for a prefix,
 * hidden values withheld, the limits (413 naming the number), scopes (each set as an export command; a prefix needs a
 * grant of its whole subtree: 403 naming it, nothing read), unknown stores and bad bodies (400), the audit line.
 * In-process (buildServer + inject) over a json-file store; expressions by the test evaluator (test/helpers/engine.ts).
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { pino, type Logger } from 'pino';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { buildServer } from '../../src/server/index.js';
import { resolveSettings } from '../../src/server/process/resolve-settings.js';
import { loadConfiguration } from '../../src/config/index.js';
import { createStoreRegistry, type StoreRegistry } from '../../src/stores/index.js';
import { captureLog, removeTempDirs, tempDir, writeJson } from './helpers.js';
import { countingResolver, HostEvaluator } from '../helpers/engine.js';

const sha256 = (t: string) => createHash('sha256').update(t, 'utf8').digest('hex');
const STAGING_TOKEN = `cfgu_staging-${randomUUID()}`;
const PROD_TOKEN = `cfgu_prod-${randomUUID()}`;
const SECRET = 'S3cret-db-pass-never-shown';

let dir: string;
let registry: StoreRegistry;
const reads: string[] = [];
const apps: FastifyInstance[] = [];
const counting = countingResolver(() => registry, reads);

async function app(proxy: Record<string, unknown> = {}, auditLogger?: Logger): Promise<FastifyInstance> {
  const fileSettings = {
    auth: {
      enabled: true,
      credentials: [
        { name: 'ci-staging', sha256: sha256(STAGING_TOKEN), stores: ['main'], sets: ['staging/**'] },
        { name: 'prod-only', sha256: sha256(PROD_TOKEN), stores: ['main'], sets: ['prod', 'prod/*'] },
      ],
      presharedKeys: ['preshared-key-0a1b2c3d4e'],
    },
    ...proxy,
  };
  const settings = resolveSettings({ fileSettings, file: join(dir, '.configu'), env: {} });
  const a = await buildServer({
    registry: counting,
    evaluator: new HostEvaluator(),
    settings: { ...settings, workers: 1 },
    logger: pino({ level: 'silent' }) as unknown as Logger,
    ready: true,
    ...(auditLogger ? { auditLogger } : {}),
  });
  apps.push(a);
  return a;
}

const post = (a: FastifyInstance, body: unknown, bearer = 'preshared-key-0a1b2c3d4e') =>
  a.inject({ method: 'POST', url: '/matrix', headers: { 'content-type': 'application/json', authorization: `Bearer ${bearer}` }, payload: JSON.stringify(body) });

function exactly(r: LightMyRequestResponse, status: number, expected: Record<string, unknown>): void {
  assert.equal(r.statusCode, status, r.body);
  assert.equal(r.headers['content-type'], 'application/problem+json; charset=utf-8');
  assert.deepEqual(r.json(), expected);
}

const problem = (kind: string, title: string, status: number, detail: string, extra: Record<string, unknown> = {}) => ({
  type: `urn:cfgu:problem:${kind}`,
  title,
  status,
  detail,
  ...extra,
});

const schema = { keys: { HOST: { required: true }, LEVEL: { enum: ['info', 'warn'], default: 'info' }, DB_PASS: { hidden: true } } };

before(async () => {
  dir = tempDir('cfgu-matrix-');
  writeJson(join(dir, 'main.json'), [
    { set: '', key: 'LEVEL', value: 'warn' },
    { set: 'staging', key: 'HOST', value: 'staging.internal' },
    { set: 'staging', key: 'DB_PASS', value: SECRET },
    { set: 'staging/eu', key: 'LEVEL', value: 'verbose' },
    { set: 'prod', key: 'HOST', value: 'prod.internal' },
    { set: 'prod/eu', key: 'HOST', value: 'eu.prod.internal' },
  ]);
  writeJson(join(dir, '.configu'), { stores: { main: { type: 'json-file', configuration: { path: 'main.json' } } } });
  registry = createStoreRegistry(await loadConfiguration({ file: join(dir, '.configu') }), { logger: { warn: () => undefined } });
  await registry.init();
});

after(async () => {
  for (const a of apps) await a.close();
  await registry?.close();
  removeTempDirs();
});

describe('POST /matrix', () => {
  test('given sets: a cell per key and set, hidden values withheld, `failed` per set', async () => {
    const a = await app();
    const r = await post(a, { store: 'main', schema, sets: ['staging', 'staging/eu', 'qa'] });
    assert.equal(r.statusCode, 200, r.body);
    assert.equal(r.headers['content-type'], 'application/json; charset=utf-8');
    assert.ok(!r.body.includes(SECRET));
    assert.deepEqual(r.json(), {
      version: 1,
      store: 'main',
      sets: ['staging', 'staging/eu', 'qa'],
      keys: ['HOST', 'LEVEL', 'DB_PASS'],
      cells: [
        [
          { state: 'ok', origin: 'store', set: 'staging', value: 'staging.internal' },
          { state: 'ok', origin: 'store', set: 'staging', inherited: true, value: 'staging.internal' },
          { state: 'missing', origin: 'empty', failures: [{ rule: 'required', message: 'key "HOST" is required but has no value' }] },
        ],
        [
          { state: 'ok', origin: 'store', set: '', inherited: true, value: 'warn' },
          {
            state: 'enum',
            origin: 'store',
            set: 'staging/eu',
            value: 'verbose',
            failures: [{ rule: 'enum', message: 'the value of key "LEVEL" is not one of the allowed values: "info", "warn"' }],
          },
          { state: 'ok', origin: 'store', set: '', inherited: true, value: 'warn' },
        ],
        [
          { state: 'ok', origin: 'store', set: 'staging', hidden: true, withheld: 'hidden' },
          { state: 'ok', origin: 'store', set: 'staging', inherited: true, hidden: true, withheld: 'hidden' },
          { state: 'ok', origin: 'empty', hidden: true, withheld: 'hidden' },
        ],
      ],
      failed: [0, 1, 1],
      fromBackup: false,
    });
  });

  test('a prefix: every set the store holds under it; the default store when none is named', async () => {
    const a = await app();
    const r = await post(a, { schema: { keys: { HOST: {} } }, prefix: 'prod' });
    assert.equal(r.statusCode, 200, r.body);
    assert.deepEqual(r.json(), {
      version: 1,
      store: 'main',
      prefix: 'prod',
      sets: ['prod', 'prod/eu'],
      keys: ['HOST'],
      cells: [
        [
          { state: 'ok', origin: 'store', set: 'prod', value: 'prod.internal' },
          { state: 'ok', origin: 'store', set: 'prod/eu', value: 'eu.prod.internal' },
        ],
      ],
      failed: [0, 0],
      fromBackup: false,
    });
  });

  test('limits: more sets than limits.matrixSets, more cells than limits.matrixCells, a prefix holding too many sets: 413', async () => {
    const a = await app({ limits: { matrixSets: 2, matrixCells: 5 } });
    reads.length = 0;
    const limit = (detail: string) => problem('limit-exceeded', 'Limit Exceeded', 413, detail);
    exactly(await post(a, { schema, sets: ['a', 'b', 'c'] }), 413, limit('the matrix has 3 sets; the limit is 2'));
    exactly(await post(a, { schema, sets: ['a', 'b'] }), 413, limit('the matrix has 2 sets of 3 keys, 6 cells; the limit is 5'));
    // Before the body is validated: a bad body over a limit is 413 too.
    exactly(await post(a, { schema, sets: ['a', 'b', 'c'], extra: true }), 413, limit('the matrix has 3 sets; the limit is 2'));
    assert.deepEqual(reads, []);
    exactly(await post(a, { schema, prefix: '' }), 413, limit('the store holds more than 2 sets under the prefix ""; the limit is 2'));
    exactly(await post(a, { schema, prefix: 'prod' }), 413, limit('the matrix has 2 sets of 3 keys, 6 cells; the limit is 5'));
  });

  test('bad bodies and an unknown store: 400 with the problem', async () => {
    const a = await app();
    exactly(
      await post(a, { schema, sets: 'prod' }),
      400,
      problem('invalid-request', 'Invalid Request', 400, 'the request body is not a valid matrix request: /sets must be array', { issues: [{ path: '/sets', message: 'must be array' }] }),
    );
    exactly(
      await post(a, { schema, sets: ['prod'], prefix: 'prod' }),
      400,
      problem('invalid-request', 'Invalid Request', 400, 'give either `sets` (a list of set paths) or `prefix` (a set path), not both, not neither', {
        issues: [{ path: '/', message: 'exactly one of `sets` and `prefix` is required' }],
      }),
    );
    exactly(
      await post(a, { schema, sets: ['prod', 'a//b'] }),
      400,
      problem('invalid-set', 'Invalid Set', 400, 'set path "a//b" has an empty segment', { issues: [{ path: '/sets/1', message: 'set path "a//b" has an empty segment' }] }),
    );
    exactly(
      await post(a, { store: 'nope', schema, sets: ['prod'] }),
      400,
      problem('unknown-store', 'Unknown Store', 400, 'unknown store "nope"; known stores: "main"', { store: 'nope', knownStores: ['main'] }),
    );
  });
});

describe('POST /matrix and scopes', () => {
  test('each given set is checked as an export command: one out of scope refuses all, nothing read', async () => {
    const a = await app();
    reads.length = 0;
    exactly(
      await post(a, { store: 'main', schema, sets: ['staging', 'prod', 'staging/eu', 'qa'] }, STAGING_TOKEN),
      403,
      problem('forbidden', 'Forbidden', 403, '2 of 4 sets of store "main" are outside the scope of this credential: "prod", "qa"', {
        refused: [
          { command: 1, store: 'main', set: 'prod' },
          { command: 3, store: 'main', set: 'qa' },
        ],
      }),
    );
    assert.deepEqual(reads, []);
    const r = await post(a, { store: 'main', schema, sets: ['staging', 'staging/eu'] }, STAGING_TOKEN);
    assert.equal(r.statusCode, 200, r.body);
    assert.deepEqual(reads, ['main']);
  });

  test('a prefix needs a grant of its whole subtree: 403 naming it, not even listed', async () => {
    const a = await app();
    reads.length = 0;
    exactly(
      await post(a, { store: 'main', schema, prefix: 'prod' }, PROD_TOKEN),
      403,
      problem('forbidden', 'Forbidden', 403, 'the prefix "prod" of store "main" is outside the scope of this credential: listing it needs a grant of its whole subtree ("prod/**")', {
        refused: [{ command: 0, store: 'main', set: 'prod' }],
      }),
    );
    exactly(
      await post(a, { schema, prefix: '' }, STAGING_TOKEN),
      403,
      problem('forbidden', 'Forbidden', 403, 'the prefix "" of store "main" is outside the scope of this credential: listing it needs a grant of its whole subtree ("**")', {
        refused: [{ command: 0, store: 'main', set: '' }],
      }),
    );
    assert.deepEqual(reads, []);
    const r = await post(a, { schema: { keys: { HOST: {} } }, prefix: 'staging' }, STAGING_TOKEN);
    assert.equal(r.statusCode, 200, r.body);
    assert.deepEqual(r.json().sets, ['staging', 'staging/eu']);
    assert.deepEqual(reads, ['list:main', 'main']);
  });

  test('an unknown store names only the stores the credential may name', async () => {
    const a = await app();
    exactly(
      await post(a, { store: 'nope', schema, sets: ['staging'] }, STAGING_TOKEN),
      403,
      problem('forbidden', 'Forbidden', 403, '1 of 1 set of store "nope" is outside the scope of this credential: "staging"', {
        refused: [{ command: 0, store: 'nope', set: 'staging' }],
      }),
    );
  });

  test('the audit line names the store and each set, or the prefix; never a value', async () => {
    const audit = captureLog();
    const a = await app({}, audit.logger);
    await post(a, { store: 'main', schema, sets: ['staging', '/staging/eu/'] }, STAGING_TOKEN);
    await post(a, { store: 'main', schema, prefix: 'prod' }, PROD_TOKEN);
    const lines = audit.lines().filter((l) => l.msg === 'audit');
    assert.deepEqual(
      lines.map((l) => [l.subject, l.commands, l.keys, l.status]),
      [
        ['ci-staging', [{ store: 'main', set: 'staging' }, { store: 'main', set: 'staging/eu' }], 6, 200],
        ['prod-only', [{ store: 'main', set: 'prod' }], 0, 403],
      ],
    );
    assert.ok(!audit.raw().includes(SECRET));
  });
});
