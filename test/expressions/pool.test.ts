// The process pool: the host stays responsive, dead or stuck children are replaced, only the in-flight job fails,
// queued jobs are never lost.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createSandboxEvaluator, type SandboxEvaluator } from '../../src/expressions/index.js';
import { oneTest, outcomeOf } from './helpers.js';
import { waitFor } from '../helpers/wait.js';

let ev: SandboxEvaluator;
before(async () => {
  ev = createSandboxEvaluator({ workers: 2, timeoutMs: 200 });
  await ev.ready();
});
after(() => ev.close());

describe('sandbox pool', () => {
  it('keeps the host event loop responsive while an endless loop runs', async () => {
    // A condition, not a clock: the host's timers fire while the job is still pending. The job's answer comes through
    // the poll phase of the event loop, after the timers phase of the same turn, so a host that the machine starved
    // for the job's whole run still counts one tick before the answer (and a blocked host would count none).
    let pending = true;
    let ticksWhilePending = 0;
    const timer = setInterval(() => {
      if (pending) ticksWhilePending++;
    }, 10);
    const r = await ev.run(oneTest('(() => { while (true) {} })()'));
    pending = false;
    clearInterval(timer);
    assert.deepEqual(outcomeOf(r.tests), { kind: 'time-limit', message: 'exceeded the time limit of 200 ms' });
    assert.ok(ticksWhilePending >= 1, 'the host ran its timers while the endless loop ran');
  });

  it('replaces a child that died of memory; only its job fails, queued jobs all complete', async () => {
    const before = ev.pids();
    const jobs = [];
    for (let i = 0; i < 20; i++) jobs.push(ev.run(oneTest(i === 3 ? "'x'.repeat(2 ** 28).split('')" : `$.value === 8080 && ${i} >= 0`)));
    const results = await Promise.all(jobs);
    results.forEach((r, i) => {
      if (i === 3) assert.equal(outcomeOf(r.tests) !== 'ok' && (outcomeOf(r.tests) as { kind: string }).kind, 'memory-limit');
      else assert.equal(outcomeOf(r.tests), 'ok', `job ${i}`);
    });
    await ev.ready();
    const after = ev.pids();
    assert.equal(after.length, 2);
    assert.notDeepEqual(after.sort(), before.sort());
    assert.equal(outcomeOf((await ev.run(oneTest('_.isNumber($.value)'))).tests), 'ok');
  });

  it('the host watchdog kills a stuck child (time-limit) and the next job succeeds', async () => {
    // A pool of its own with a small budget: the watchdog waits for every wall allowance of a job (127 x the budget,
    // see watchdogMs), twice here (the job is run once more before it is blamed).
    const stuck = createSandboxEvaluator({ workers: 2, spares: 0, timeoutMs: 20 });
    try {
      await stuck.ready();
      const [a, b] = stuck.pids();
      // Freeze both children at the OS level: isolated-vm's own timeout cannot fire, only the watchdog can help.
      process.kill(a!, 'SIGSTOP');
      process.kill(b!, 'SIGSTOP');
      const r = await stuck.run(oneTest('true'));
      assert.deepEqual(outcomeOf(r.tests), { kind: 'time-limit', message: 'exceeded the time limit of 20 ms' });
      const other = stuck.pids().find((p) => p === a || p === b);
      if (other) process.kill(other, 'SIGCONT');
      const ok = await stuck.run(oneTest('true'));
      assert.equal(outcomeOf(ok.tests), 'ok');
    } finally {
      await stuck.close();
    }
  });

  it('a builtin V8 cannot interrupt is stopped by the CPU watchdog, blamed at once, and never run a second time', async () => {
    // `new Array(1e9).fill(0)` ignores isolated-vm's timeout; the child can only be killed. Its process shows the CPU
    // time the job used, so the host kills it as soon as that passes what any job may use (cpuWatchdogMs) and answers
    // time-limit without running the job again: exactly one child is replaced. (Before: the wall-clock watchdog, after
    // 127 budgets, then a second run on another child: 27 s of CPU for one expression with a 100 ms budget.)
    const pool = createSandboxEvaluator({ workers: 1, spares: 0, timeoutMs: 100, memoryMb: 64 });
    try {
      await pool.ready();
      const before = pool.replacements();
      const r = await pool.run(oneTest('new Array(1e9).fill(0)'));
      assert.deepEqual(outcomeOf(r.tests), { kind: 'time-limit', message: 'exceeded the time limit of 100 ms' });
      await pool.ready();
      assert.equal(pool.replacements().spawns, before.spawns + 1, 'one kill, no second run');
      assert.equal(outcomeOf((await pool.run(oneTest('true'))).tests), 'ok');
    } finally {
      await pool.close();
    }
  });

  it('replaces a child killed from outside while idle', async () => {
    await ev.ready();
    const [victim] = ev.pids();
    process.kill(victim!, 'SIGKILL');
    await waitFor('the killed child is gone from the pool', () => !ev.pids().includes(victim!));
    await ev.ready();
    const results = await Promise.all([1, 2, 3, 4].map(() => ev.run(oneTest('true'))));
    for (const r of results) assert.equal(outcomeOf(r.tests), 'ok');
  });

  it('jobs pipelined behind a memory bomb in the same child are re-queued and succeed', async () => {
    const single = createSandboxEvaluator({ workers: 1, timeoutMs: 200 });
    try {
      await single.ready();
      const [victim] = single.pids();
      // One child: all four jobs are written into its pipe at once; the first one kills it.
      const results = await Promise.all([
        single.run(oneTest("'x'.repeat(2 ** 28).split('')")),
        single.run(oneTest('$.value === 8080')),
        single.run(oneTest('_.isNumber($.value)')),
        single.run(oneTest('$.key === "PORT"')),
      ]);
      assert.deepEqual(outcomeOf(results[0]!.tests), { kind: 'memory-limit', message: 'exceeded the sandbox memory limit of 64 MB' });
      for (const r of results.slice(1)) assert.equal(outcomeOf(r.tests), 'ok');
      assert.notDeepEqual(single.pids(), [victim]);
    } finally {
      await single.close();
    }
  });

  it('jobs pipelined behind a runaway job in the same child still succeed', async () => {
    const single = createSandboxEvaluator({ workers: 1, timeoutMs: 150 });
    try {
      await single.ready();
      const results = await Promise.all([single.run(oneTest('(() => { while (true) {} })()')), single.run(oneTest('$.value === 8080')), single.run(oneTest('true'))]);
      assert.deepEqual(outcomeOf(results[0]!.tests), { kind: 'time-limit', message: 'exceeded the time limit of 150 ms' });
      for (const r of results.slice(1)) assert.equal(outcomeOf(r.tests), 'ok');
    } finally {
      await single.close();
    }
  });

  it('close() rejects later work', async () => {
    const other = createSandboxEvaluator({ workers: 1 });
    await other.ready();
    await other.close();
    await assert.rejects(other.run(oneTest('true')), { name: 'SandboxUnavailableError' });
  });
});
