// Three cfgu replicas behind HAProxy over one PostgreSQL store (bench/replicas.ts does the work): a rolling restart
// (SIGTERM each replica in turn, start it again, wait for /ready) under continuous load loses no request, every
// replica exits 0, and a value written with `cfgu upsert` is served by every replica on its next request.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { haproxyBinary, runReplicas } from '../../bench/replicas.js';
import { probeTcp, requireOrSkip, requireService } from '../helpers/services.js';

test('rolling restart behind haproxy loses no request; an upserted value is served by every replica', async (t) => {
  if (!haproxyBinary()) {
    requireOrSkip(t, 'haproxy', 'not installed; scripts/test-setup-haproxy.sh installs it');
    return;
  }
  if (!(await requireService(t, 'postgresql', probeTcp(5432)))) return;
  const run = await runReplicas({ clients: 3 });
  assert.deepEqual(run.failures, [], 'every request through the balancer answered 200 with the stored value');
  assert.equal(run.ok, run.requests);
  assert.ok(run.requests > 3 * 3 * 5, `load kept flowing during the restarts (${run.requests} requests)`);
  assert.equal(run.restarts, 3);
  assert.deepEqual(run.exitCodes, [0, 0, 0], 'each replica drained and exited 0 on SIGTERM');
  assert.deepEqual(run.perReplica, Array(3).fill({ status: 200, body: '{"GREETING":"second"}' }));
});
