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
import { assertRecordedInOrder, writeConcurrently } from './write-load.js';

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
      const accepted = await writeConcurrently(servers, SET, WRITERS, WRITES);
      // The history, read through the other server.
      await assertRecordedInOrder(servers[1], SET, accepted);
      // The stored value is the last revision's, as both servers export it.
      const last = accepted.find((a) => a.revision === accepted.length)!;
      for (const s of servers) {
        const r = await s.inject({ method: 'POST', url: '/export', headers: { 'content-type': 'application/json' }, payload: JSON.stringify([{ set: SET, schema: { keys: { COUNTER: {} } } }]) });
        assert.deepEqual(r.json(), { COUNTER: last.value });
      }
    });
  }
});
