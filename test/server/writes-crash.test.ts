/**
 * Crash safety of writes through the server: a real `cfgu serve` takes a stream of writes (four writers, each with
 * the revision it last saw) and is killed with SIGKILL in the middle of it, twice; started again on the same store,
 * its history and its stored values agree: revisions 1..N each once, every write answered 200 before the kill is in
 * the history with its value, and the stored value is the last revision's (a write cut by the kill is either in both
 * or in neither). For json-file and SQLite (files of the test's own) and PostgreSQL (a table of the test's own).
 */
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { freePort, removeTempDirs, spawnCfgu, tempDir, writeJson } from './helpers.js';
import { PG } from '../stores/kinds.js';
import { dropPostgresTables } from '../helpers/plain-clients.js';
import { probeTcp, requireService, type Probe } from '../helpers/services.js';
import { waitFor } from '../helpers/wait.js';

const RUN = randomBytes(3).toString('hex');
const table = `crash_${RUN}`;
const cleanups: Array<() => Promise<unknown>> = [];

after(async () => {
  for (const c of cleanups) await c().catch(() => undefined);
  removeTempDirs();
});

const SCHEMA = { keys: { COUNTER: {} } };

const answering = (base: string) =>
  waitFor(`${base} answers /ready`, async () => (await fetch(`${base}/ready`).catch(() => undefined))?.status === 200 || undefined);

const post = (base: string, url: string, body: unknown) =>
  fetch(`${base}${url}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

const cases: Array<{ kind: string; store: (dir: string) => Record<string, unknown>; service?: Probe }> = [
  { kind: 'json-file', store: () => ({ type: 'json-file', configuration: { path: 'data.json' } }) },
  { kind: 'sqlite', store: () => ({ type: 'sqlite', configuration: { database: 'data.db', tableName: 'config' } }) },
  { kind: 'postgresql', store: () => ({ type: 'postgresql', configuration: { ...PG, tableName: table } }), service: probeTcp(PG.port) },
];

describe('a server killed (SIGKILL) in the middle of a stream of writes, then started again: history and stored values agree', () => {
  for (const c of cases) {
    test(c.kind, async (t) => {
      if (c.service && !(await requireService(t, c.kind, c.service))) return;
      if (c.kind === 'postgresql') cleanups.push(() => dropPostgresTables(PG, [table, `${table}_history`, `${table}_revisions`]));
      const dir = tempDir(`cfgu-crash-${c.kind}-`);
      const config = writeJson(join(dir, '.configu'), { stores: { main: { ...c.store(dir), default: true } } });
      const port = await freePort();
      const base = `http://127.0.0.1:${port}`;
      const accepted = new Map<number, string>();
      for (let round = 0; round < 2; round++) {
        const server = spawnCfgu(['serve', '--config', config, '--workers', '1', '--port', String(port), '--host', '127.0.0.1'], {}, dir);
        t.after(async () => {
          if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill('SIGKILL');
          await server.exited;
        });
        await answering(base);
        let killed = false;
        let n = 0;
        const writer = async (w: number): Promise<void> => {
          let expected = accepted.size;
          while (!killed) {
            const value = `r${round}-w${w}-${n++}`;
            let r: Response;
            try {
              r = await post(base, '/upsert', { set: 'prod', schema: SCHEMA, values: { COUNTER: value }, expectedRevision: expected });
            } catch {
              return; // the server is gone
            }
            const body = (await r.json().catch(() => undefined)) as { revision?: number; currentRevision?: number } | undefined;
            if (r.status === 200 && body?.revision !== undefined) {
              accepted.set(body.revision, value);
              expected = body.revision;
            } else if (r.status === 409 && body?.currentRevision !== undefined) {
              expected = body.currentRevision;
            } else if (r.status === 503 && r.headers.get('retry-after')) {
              // The store's lock is still held by the killed server (a json-file lock is taken over once its holder
              // stopped refreshing it, docs/stores.md): the server says to come back, and nothing was written.
              await new Promise((done) => setTimeout(done, 100));
            } else {
              assert.fail(`unexpected answer ${r.status}: ${JSON.stringify(body)}`);
            }
          }
        };
        const writers = Array.from({ length: 4 }, (_, w) => writer(w));
        // Kill once this round has had writes accepted, while the writers keep sending.
        const before = accepted.size;
        await waitFor('20 more writes accepted', () => accepted.size >= before + 20 || undefined);
        server.child.kill('SIGKILL');
        killed = true;
        await server.exited;
        await Promise.all(writers);
      }
      // Started again: what the history says and what the store holds.
      const server = spawnCfgu(['serve', '--config', config, '--workers', '1', '--port', String(port), '--host', '127.0.0.1'], {}, dir);
      t.after(async () => {
        if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill('SIGKILL');
        await server.exited;
      });
      await answering(base);
      const records: Array<{ revision: number; recorded: boolean; changes: Array<{ key: string; after: string | null }> }> = [];
      let cursor: number | undefined;
      for (;;) {
        const r = await fetch(`${base}/history?set=prod&limit=1000${cursor ? `&before=${cursor}` : ''}`);
        assert.equal(r.status, 200);
        const page = (await r.json()) as { records: typeof records; next?: number };
        records.push(...page.records);
        cursor = page.next;
        if (cursor === undefined) break;
      }
      records.reverse();
      assert.deepEqual(records.map((r) => r.revision), records.map((_, i) => i + 1), 'revisions 1..N, each once');
      assert.ok(records.every((r) => r.recorded), 'every record is a write through cfgu (nothing found changed outside it)');
      for (const [revision, value] of accepted) {
        assert.deepEqual(records[revision - 1]?.changes.map((ch) => [ch.key, ch.after]), [['COUNTER', value]], `revision ${revision}`);
      }
      const last = records.at(-1)!.changes[0]!.after;
      const exported = await post(base, '/export', [{ set: 'prod', schema: SCHEMA }]);
      assert.deepEqual(await exported.json(), { COUNTER: last });
    });
  }
});
