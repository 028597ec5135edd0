/**
 * Concurrent writes through two servers (two in-process apps, each with its own store registry and connection pool,
 * as two `cfgu serve` processes have) over one PostgreSQL table: 20 writers, 1,000 writes to one set, each with the
 * revision its writer last saw. Every accepted write is in the history exactly once, at the revision its answer
 * gave, in order; every refused one was a 409 naming the current revision (which the writer then uses).
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { buildServer } from '../../src/server/index.js';
import { load } from '../../src/server/process/start.js';
import { createStoreRegistry, type StoreRegistry } from '../../src/stores/index.js';
import { loadConfiguration } from '../../src/config/index.js';
import { removeTempDirs, tempDir, writeJson } from './helpers.js';
import { PG } from '../stores/kinds.js';
import { dropPostgresTables } from '../helpers/plain-clients.js';
import { probeTcp, requireService } from '../helpers/services.js';
import { assertRecordedInOrder, writeConcurrently } from './write-load.js';

const WRITERS = 20;
const WRITES = 1000;
const table = `writes_${randomBytes(4).toString('hex')}`;
const registries: StoreRegistry[] = [];
const apps: FastifyInstance[] = [];

after(async () => {
  for (const a of apps) await a.close();
  for (const r of registries) await r.close();
  await dropPostgresTables(PG, [table, `${table}_history`, `${table}_revisions`]).catch(() => undefined);
  removeTempDirs();
});

test('two servers, one PostgreSQL table, 20 writers: every accepted write recorded once and in order, the others 409', async (t) => {
  if (!(await requireService(t, 'postgresql', probeTcp(PG.port)))) return;
  const dir = tempDir('cfgu-writes-pg-');
  const file = writeJson(join(dir, '.configu'), { stores: { main: { type: 'postgresql', configuration: { ...PG, tableName: table }, default: true } } });
  for (let i = 0; i < 2; i++) {
    const registry = createStoreRegistry(await loadConfiguration({ file }), { logger: { warn: () => undefined } });
    registries.push(registry);
    await registry.init();
    const loaded = await load({ config: file, flags: { workers: '1' }, env: {}, cwd: dir });
    apps.push(await buildServer({ registry, settings: loaded.settings, logger: false, auditLogger: false, ready: true }));
  }
  const accepted = await writeConcurrently(apps, 'prod', WRITERS, WRITES);
  assert.ok(accepted.length < WRITES, 'some writes were refused (409)');
  await assertRecordedInOrder(apps[0]!, 'prod', accepted);
});

test('PostgreSQL: a dry run, a write, the history and a rollback with its preview', async (t) => {
  if (!(await requireService(t, 'postgresql', probeTcp(PG.port)))) return;
  const a = apps[0];
  if (!a) return t.skip('the servers of the test before did not start');
  const send = (url: string, body: unknown) => a.inject({ method: 'POST', url, headers: { 'content-type': 'application/json' }, payload: JSON.stringify(body) });
  const schema = { keys: { HOST: {}, PORT: { required: true } } };
  const answer = (dryRun: boolean, revision: number, changes: unknown[]) => ({ store: 'main', set: 'staging', dryRun, revision, changes, impact: [], impactTruncated: false });
  let r = await send('/upsert', { set: 'staging', schema, values: { HOST: 'a.example', PORT: 80 }, dryRun: true });
  assert.deepEqual([r.statusCode, r.json()], [200, answer(true, 0, [{ key: 'HOST', before: null, after: 'a.example' }, { key: 'PORT', before: null, after: '80' }])]);
  r = await send('/upsert', { set: 'staging', schema, values: { HOST: 'a.example', PORT: 80 }, expectedRevision: 0, message: 'first' });
  assert.deepEqual([r.statusCode, r.json()], [200, answer(false, 1, [{ key: 'HOST', before: null, after: 'a.example' }, { key: 'PORT', before: null, after: '80' }])]);
  r = await send('/upsert', { set: 'staging', schema, values: { HOST: 'b.example', PORT: null }, expectedRevision: 1 });
  assert.deepEqual([r.statusCode, r.json()], [200, answer(false, 2, [{ key: 'HOST', before: 'a.example', after: 'b.example' }, { key: 'PORT', before: '80', after: null }])]);
  const history = await a.inject({ method: 'GET', url: '/history?set=staging' });
  assert.deepEqual(history.json().records.map((x: { revision: number; message: string | null; subject: string }) => [x.revision, x.message, x.subject]), [[2, null, 'anonymous'], [1, 'first', 'anonymous']]);
  const restored = [{ key: 'HOST', before: 'b.example', after: 'a.example' }, { key: 'PORT', before: null, after: '80' }];
  r = await send('/rollback', { set: 'staging', schema, toRevision: 1, dryRun: true });
  assert.deepEqual([r.statusCode, r.json()], [200, answer(true, 2, restored)]);
  r = await send('/rollback', { set: 'staging', schema, toRevision: 1, expectedRevision: 2 });
  assert.deepEqual([r.statusCode, r.json()], [200, answer(false, 3, restored)]);
  const exported = await send('/export', [{ set: 'staging', schema }]);
  assert.deepEqual(exported.json(), { HOST: 'a.example', PORT: 80 });
});
