/**
 * The concurrent-writes check of the write routes, shared by writes-concurrency.test.ts (PostgreSQL) and
 * writes-concurrency-kinds.test.ts (every other kind two servers can share): `writers` writers send `writes` writes to
 * one set through the given servers in turn, each with the revision it last saw. Every accepted write must be in the
 * history exactly once, at the revision its answer gave, in order, with its request id and value; every refused one
 * a 409 naming the current revision (which the writer then uses).
 */
import assert from 'node:assert/strict';
import type { FastifyInstance } from 'fastify';

export interface Accepted {
  revision: number;
  requestId: string;
  value: string;
}

export async function writeConcurrently(servers: readonly FastifyInstance[], set: string, writers = 20, writes = 1000): Promise<Accepted[]> {
  const accepted: Accepted[] = [];
  let conflicts = 0;
  let next = 0;
  const writer = async (w: number): Promise<void> => {
    let expected = 0;
    for (;;) {
      const n = next++;
      if (n >= writes) return;
      const value = `w${w}-${n}`;
      const r = await servers[n % servers.length]!.inject({
        method: 'POST',
        url: '/upsert',
        headers: { 'content-type': 'application/json' },
        payload: JSON.stringify({ set, schema: { keys: { COUNTER: {} } }, values: { COUNTER: value }, expectedRevision: expected }),
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
  await Promise.all(Array.from({ length: writers }, (_, w) => writer(w)));
  assert.equal(accepted.length + conflicts, writes);
  assert.ok(accepted.length > 0, 'some writes were accepted');
  return accepted;
}

/** The set's history read through `server`, page by page, oldest first; checked against the accepted writes. */
export async function assertRecordedInOrder(server: FastifyInstance, set: string, accepted: readonly Accepted[]): Promise<void> {
  const records: Array<{ revision: number; requestId: string; changes: Array<{ key: string; after: string }> }> = [];
  let before: number | undefined;
  for (;;) {
    const r = await server.inject({ method: 'GET', url: `/history?set=${encodeURIComponent(set)}&limit=1000${before ? `&before=${before}` : ''}` });
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
}
