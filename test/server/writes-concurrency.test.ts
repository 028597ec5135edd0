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
  const accepted: Array<{ revision: number; requestId: string; value: string }> = [];
  let conflicts = 0;
  let next = 0;
  const writer = async (w: number): Promise<void> => {
    let expected = 0;
    for (;;) {
      const n = next++;
      if (n >= WRITES) return;
      const value = `w${w}-${n}`;
      const r = await apps[n % 2]!.inject({
        method: 'POST',
        url: '/upsert',
        headers: { 'content-type': 'application/json' },
        payload: JSON.stringify({ set: 'prod', schema: { keys: { COUNTER: {} } }, values: { COUNTER: value }, expectedRevision: expected }),
      });
      if (r.statusCode === 200) {
        const revision = r.json().revision as number;
        accepted.push({ revision, requestId: String(r.headers['x-request-id']), value });
        expected = revision;
        continue;
      }
      assert.equal(r.statusCode, 409, r.body);
      const body = r.json();
      assert.deepEqual(Object.keys(body).sort(), ['currentRevision', 'detail', 'expectedRevision', 'set', 'status', 'store', 'title', 'type']);
      assert.equal(body.expectedRevision, expected);
      assert.ok(body.currentRevision > expected, r.body);
      conflicts++;
      expected = body.currentRevision;
    }
  };
  await Promise.all(Array.from({ length: WRITERS }, (_, w) => writer(w)));
  assert.equal(accepted.length + conflicts, WRITES);
  assert.ok(accepted.length > 0 && conflicts > 0, `accepted ${accepted.length}, conflicts ${conflicts}`);

  // The history, page by page, oldest last.
  const records: Array<{ revision: number; requestId: string; changes: Array<{ key: string; after: string }> }> = [];
  let before: number | undefined;
  for (;;) {
    const r = await apps[0]!.inject({ method: 'GET', url: `/history?set=prod&limit=1000${before ? `&before=${before}` : ''}` });
    assert.equal(r.statusCode, 200, r.body);
    records.push(...r.json().records);
    before = r.json().next;
    if (before === undefined) break;
  }
  records.reverse();
  assert.deepEqual(records.map((r) => r.revision), accepted.map((_, i) => i + 1), 'revisions 1..N, each once');
  const byRevision = new Map(accepted.map((a) => [a.revision, a]));
  assert.equal(byRevision.size, accepted.length, 'no revision answered twice');
  for (const record of records) {
    const a = byRevision.get(record.revision)!;
    assert.equal(record.requestId, a.requestId);
    assert.deepEqual(record.changes.map((c) => [c.key, c.after]), [['COUNTER', a.value]]);
  }
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
