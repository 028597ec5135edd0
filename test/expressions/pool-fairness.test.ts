// The pool under attack: limits count a job's own CPU time (a busy host fails no valid job), a failure lands on the
// job that caused it, clients are served in turn, the queue is bounded, and a request's jobs share a budget.
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createSandboxEvaluator, type SandboxEvaluator } from '../../src/expressions/index.js';
import { requestContext } from '../../src/core/ports.js';
import { oneTest, outcomeOf } from './helpers.js';
import { waitFor } from '../helpers/wait.js';

const SPIN = '(() => { while (true) {} })()';
// Reaches the memory limit after a few large copies, long before its CPU time reaches any budget used here.
const BOMB = "'x'.repeat(2 ** 28).split('')";
// A valid job with a modest real cost (a few ms of CPU).
const MODEST = '(() => { let s = 0; for (let i = 0; i < 3e5; i++) s += i % 7; return s > 0; })()';
// Leaves tens of MB of garbage behind in the isolate's heap.
const LITTER = '(() => { const a = []; for (let i = 0; i < 24; i++) a.push(new Array(1 << 17).fill(i)); return a.length === 24; })()';

const pools: SandboxEvaluator[] = [];
function pool(options: Parameters<typeof createSandboxEvaluator>[0]): SandboxEvaluator {
  const p = createSandboxEvaluator(options);
  pools.push(p);
  return p;
}
const hogs: ChildProcess[] = [];
after(async () => {
  for (const h of hogs) h.kill('SIGKILL');
  for (const p of pools) await p.close();
});

// A busy loop that also ends when its parent is gone: if this test process is killed (a runner's timeout, a SIGKILL
// to the suite), the `after` hook never runs, and a plain `for (;;) {}` would spin on, orphaned, for ever.
const HOG = 'const p = process.ppid; for (;;) { for (let i = 0; i < 1e7; i++); try { process.kill(p, 0); } catch { process.exit(0); } }';

describe('sandbox pool: CPU-time limits', () => {
  it('a job that spins fails with the time limit; valid jobs pass while CPU hogs keep the host busy', async () => {
    const ev = pool({ workers: 2, timeoutMs: 100 });
    await ev.ready();
    // Three processes spinning on a 2-core machine: the children get a fraction of a core, so a wall-clock limit of
    // 100 ms would cut jobs that need far less CPU than that.
    for (let i = 0; i < 3; i++) hogs.push(spawn(process.execPath, ['-e', HOG], { stdio: 'ignore' }));
    const results = await Promise.all([SPIN, ...Array.from({ length: 24 }, () => MODEST)].map((e) => ev.run(oneTest(e))));
    assert.deepEqual(outcomeOf(results[0]!.tests), { kind: 'time-limit', message: 'exceeded the time limit of 100 ms' });
    results.slice(1).forEach((r, i) => assert.equal(outcomeOf(r.tests), 'ok', `valid job ${i}`));
    for (const h of hogs.splice(0)) h.kill('SIGKILL');
  });
});

describe('sandbox pool: blame', () => {
  it('a memory bomb followed (pipelined) by light jobs: only the bomb fails, round after round', async () => {
    const ev = pool({ workers: 1, spares: 1, timeoutMs: 2000 });
    await ev.ready();
    for (let round = 0; round < 4; round++) {
      const results = await Promise.all([BOMB, '$.value === 8080', 'true', '_.isNumber($.value)'].map((e) => ev.run(oneTest(e))));
      assert.deepEqual(outcomeOf(results[0]!.tests), { kind: 'memory-limit', message: 'exceeded the sandbox memory limit of 64 MB' }, `round ${round}`);
      results.slice(1).forEach((r, i) => assert.equal(outcomeOf(r.tests), 'ok', `round ${round}, light job ${i}`));
    }
  });

  it('garbage left near the heap limit by one job never fails the light jobs after it', async () => {
    const ev = pool({ workers: 1, spares: 1, timeoutMs: 2000, memoryMb: 48 });
    await ev.ready();
    for (let round = 0; round < 6; round++) {
      const results = await Promise.all([LITTER, 'true', LITTER, '$.key === "PORT"'].map((e) => ev.run(oneTest(e))));
      results.forEach((r, i) => assert.equal(outcomeOf(r.tests), 'ok', `round ${round}, job ${i}`));
    }
  });

  it('a job that makes V8 abort its child is blamed at once: one new child per bomb, not two', async () => {
    const ev = pool({ workers: 1, spares: 0, timeoutMs: 5000 });
    await ev.ready();
    const before = ev.replacements().spawns;
    // `split` of a 256 MiB string asks V8 for an impossible array: V8 aborts the process with a fatal report.
    assert.equal((outcomeOf((await ev.run(oneTest(`${BOMB}.length > 0`))).tests) as { kind: string }).kind, 'memory-limit');
    await ev.ready();
    assert.equal(ev.replacements().spawns - before, 1);
    assert.equal(outcomeOf((await ev.run(oneTest('true'))).tests), 'ok');
  });

  it('a job at the head of a child killed from outside is run again elsewhere, not blamed', async () => {
    const ev = pool({ workers: 1, spares: 1, timeoutMs: 5000 });
    await ev.ready();
    const [victim] = ev.pids();
    const job = ev.run(oneTest('(() => { let s = 0; for (let i = 0; i < 3e7; i++) s += i; return s > 0; })()'));
    process.kill(victim!, 'SIGKILL');
    assert.equal(outcomeOf((await job).tests), 'ok');
    assert.ok(!ev.pids().includes(victim!));
  });
});

describe('sandbox pool: fairness and bounds', () => {
  it('a client with 200 runaway jobs queued does not hold back another client', async () => {
    const ev = pool({ workers: 1, spares: 0, timeoutMs: 20, clientQueueLimit: 500 });
    await ev.ready();
    let runawaysDone = 0;
    const runaways = Array.from({ length: 200 }, () =>
      ev.run(oneTest(SPIN), { client: 'attacker' }).then(
        () => runawaysDone++,
        () => runawaysDone++,
      ),
    );
    await waitFor('the attacker has a job queued', () => (ev.queued().attacker ?? 0) > 0);
    const victim = await ev.run(oneTest('$.value === 8080'), { client: 'victim' });
    assert.equal(outcomeOf(victim.tests), 'ok');
    // Served in turn: at most the runaways already written to the child, plus one, ran before the victim's job.
    assert.ok(runawaysDone <= 8, `${runawaysDone} runaways finished first`);
    assert.ok((ev.queued().attacker ?? 0) >= 190);
    await ev.close();
    await Promise.all(runaways);
  });

  it('refuses at once beyond the per-client and the total queue bound', async () => {
    const ev = pool({ workers: 1, spares: 0, queueLimit: 3, clientQueueLimit: 2 });
    // A child that never becomes ready: every job waits in the host's queue.
    process.kill(ev.pids()[0]!, 'SIGSTOP');
    const held = [ev.run(oneTest('true'), { client: 'a' }), ev.run(oneTest('true'), { client: 'a' })];
    await assert.rejects(ev.run(oneTest('true'), { client: 'a' }), {
      name: 'SandboxBusyError',
      code: 'CFGU_SANDBOX_BUSY',
      message: 'this client has too many expression jobs waiting; retry later',
    });
    held.push(ev.run(oneTest('true'), { client: 'b' }));
    await assert.rejects(ev.run(oneTest('true'), { client: 'c' }), {
      name: 'SandboxBusyError',
      message: 'the expression sandbox has too many jobs waiting; retry later',
    });
    assert.deepEqual(ev.queued(), { a: 2, b: 1 });
    process.kill(ev.pids()[0]!, 'SIGCONT');
    for (const r of await Promise.all(held)) assert.equal(outcomeOf(r.tests), 'ok');
  });
});

describe('sandbox pool: request budget', () => {
  /**
   * Run `expression` (made distinct each time: a repeat of the same runaway would be answered from memory at no cost)
   * for the request until the request's budget refuses it (at most `max` times).
   */
  async function untilRefused(ev: SandboxEvaluator, ctx: ReturnType<typeof requestContext>, expression: string, max: number, kind: string) {
    for (let i = 0; i < max; i++) {
      let r;
      try {
        r = await ev.run(oneTest(`${expression} || ${i} < 0`), ctx);
      } catch (error) {
        assert.equal((error as Error).name, 'BudgetExceededError');
        return;
      }
      assert.equal((outcomeOf(r.tests) as { kind: string }).kind, kind);
    }
  }

  it('the CPU time of a request’s jobs is bounded: once over it, every later job of the request fails at once', async () => {
    const ev = pool({ workers: 1, timeoutMs: 50, requestCpuMs: 120 });
    await ev.ready();
    const ctx = requestContext('c');
    // Each runaway uses at least 50 ms of CPU: the budget is gone by the third.
    await untilRefused(ev, ctx, SPIN, 3, 'time-limit');
    assert.ok(ctx.usage!.cpuMs > 120);
    await assert.rejects(ev.run(oneTest('true'), ctx), {
      name: 'BudgetExceededError',
      code: 'CFGU_BUDGET_EXCEEDED',
      rule: 'cpu-budget',
      message: "the request's expressions used more than its CPU-time budget of 120 ms",
    });
    // Another request of the same client is not affected.
    assert.equal(outcomeOf((await ev.run(oneTest('true'), requestContext('c'))).tests), 'ok');
  });

  it('the restarts a request causes are bounded', async () => {
    const ev = pool({ workers: 1, timeoutMs: 2000, requestRestarts: 1 });
    await ev.ready();
    const ctx = requestContext('c');
    await untilRefused(ev, ctx, BOMB, 2, 'memory-limit');
    // Each bomb costs its child; the restart is counted when the child's end is seen, after its answer.
    await waitFor('two restarts counted for the request', () => ctx.usage!.restarts >= 2);
    await assert.rejects(ev.run(oneTest('true'), ctx), {
      name: 'BudgetExceededError',
      rule: 'restart-budget',
      message: "the request's expressions caused more than 1 sandbox restarts (its budget)",
    });
    assert.equal(outcomeOf((await ev.run(oneTest('true'), requestContext('c'))).tests), 'ok');
  });
});
