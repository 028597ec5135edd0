/**
 * Concurrent writes through two servers for every store kind whose data two servers can share (json-file, sqlite,
 * MariaDB, Redis, etcd; PostgreSQL has its own file, writes-concurrency.test.ts; in-memory lives in one process): two
 * in-process apps, each with its own store registry and connections, as two `cfgu serve` processes have; 20 writers,
 * 1,000 writes to one set, each with the revision its writer last saw. Every accepted write is in the history exactly
 * once, at the revision its answer gave, in order, with its request id and value; every refused one was a 409 naming
 * the current revision; the stored value is the last revision's. Each kind's names are this run's own, and removed.
 */
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import type { FastifyInstance } from 'fastify';
import { buildServer } from '../../src/server/index.js';
import { load } from '../../src/server/process/start.js';
import { createStoreRegistry, type StoreRegistry } from '../../src/stores/index.js';
import { loadConfiguration } from '../../src/config/index.js';
import { removeTempDirs, tempDir, writeJson } from './helpers.js';
import { KINDS, MY, TMP } from '../stores/kinds.js';
import { dropMariadbTables } from '../helpers/plain-clients.js';
import { requireService } from '../helpers/services.js';

const WRITERS = 20;
const WRITES = 1000;
const RUN = randomBytes(3).toString('hex');
const SET = `writes-${RUN}`;
const registries: StoreRegistry[] = [];
const apps: FastifyInstance[] = [];
const cleanups: Array<() => Promise<unknown>> = [];

after(async () => {
  for (const a of apps) await a.close();
  for (const r of registries) await r.close();
  for (const c of cleanups) await c().catch(() => undefined);
  removeTempDirs();
});

/** The names beside the data that a write through cfgu adds for this run's set, per kind (history, revisions). */
function removeHistory(kind: string, configuration: Record<string, unknown>): () => Promise<unknown> {
  if (kind === 'mariadb') {
    const table = String(configuration.tableName);
    return () => dropMariadbTables(MY, [table, `${table}_history`, `${table}_revisions`]);
  }
  if (kind === 'redis') {
    return async () => {
      const r = new Redis({ host: '127.0.0.1', port: 6379, maxRetriesPerRequest: 1 });
      try {
        await r.del(SET, `cfgu:rev:${SET}`, `cfgu:hist:${SET}`);
      } finally {
        r.disconnect();
      }
    };
  }
  return async () => undefined;
}

async function twoServers(kind: string, configuration: Record<string, unknown>): Promise<[FastifyInstance, FastifyInstance]> {
  const dir = tempDir(`cfgu-writes-${kind}-`);
  const file = writeJson(join(dir, '.configu'), { stores: { main: { type: kind, configuration, default: true } } });
  const made: FastifyInstance[] = [];
  for (let i = 0; i < 2; i++) {
    const registry = createStoreRegistry(await loadConfiguration({ file }), { logger: { warn: () => undefined } });
    registries.push(registry);
    await registry.init();
    const loaded = await load({ config: file, flags: { workers: '1' }, env: {}, cwd: dir });
    const app = await buildServer({ registry, settings: loaded.settings, logger: false, auditLogger: false, ready: true });
    apps.push(app);
    made.push(app);
  }
  return [made[0]!, made[1]!];
}

describe('two servers over one store, 20 writers, 1,000 writes: each accepted write recorded once and in order, the others 409', () => {
  for (const kind of KINDS.filter((k) => k.persistent && k.name !== 'postgresql')) {
    test(kind.name, async (t) => {
      if (kind.service && !(await requireService(t, kind.service.name, kind.service.probe))) return;
      mkdirSync(TMP, { recursive: true });
      const { configuration, cleanup } = await kind.fresh(`w${RUN}`);
      cleanups.push(cleanup, removeHistory(kind.name, configuration));
      const servers = await twoServers(kind.name, configuration);
      const accepted: Array<{ revision: number; requestId: string; value: string }> = [];
      let conflicts = 0;
      let next = 0;
      const writer = async (w: number): Promise<void> => {
        let expected = 0;
        for (;;) {
          const n = next++;
          if (n >= WRITES) return;
          const value = `w${w}-${n}`;
          const r = await servers[n % 2]!.inject({
            method: 'POST',
            url: '/upsert',
            headers: { 'content-type': 'application/json' },
            payload: JSON.stringify({ set: SET, schema: { keys: { COUNTER: {} } }, values: { COUNTER: value }, expectedRevision: expected }),
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
      assert.ok(accepted.length > 0, 'some writes were accepted');

      // The history, page by page (newest first), read through the other server.
      const records: Array<{ revision: number; requestId: string; changes: Array<{ key: string; after: string }> }> = [];
      let before: number | undefined;
      for (;;) {
        const r = await servers[1].inject({ method: 'GET', url: `/history?set=${SET}&limit=1000${before ? `&before=${before}` : ''}` });
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
      // The stored value is the last revision's, as both servers export it.
      const last = byRevision.get(accepted.length)!;
      for (const s of servers) {
        const r = await s.inject({ method: 'POST', url: '/export', headers: { 'content-type': 'application/json' }, payload: JSON.stringify([{ set: SET, schema: { keys: { COUNTER: {} } } }]) });
        assert.deepEqual(r.json(), { COUNTER: last.value });
      }
    });
  }
});
