// A job whose isolate is disposed at its memory limit (the child answers it, then exits 0): the jobs after it, in
// the same child's pipe or sent to it before it exited, never started there. They must be re-run elsewhere, not
// blamed for a memory limit they never reached (found by the issue audit: a time-limit failure right after a memory
// failure was reported as "exceeded the sandbox memory limit").
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createSandboxEvaluator } from '../../src/expressions/index.js';
import { oneTest, outcomeOf } from './helpers.js';

// The isolate is disposed (a graceful memory-limit answer), the child does not crash.
// A bomb that reaches the memory limit long before its CPU time reaches the budget (its cost is a few large copies).
const BOMB = "'x'.repeat(2 ** 28).split('')";

describe('sandbox pool: after a graceful memory-limit answer', () => {
  it('jobs pipelined behind the memory bomb in the same child succeed', async () => {
    const single = createSandboxEvaluator({ workers: 1, timeoutMs: 500, memoryMb: 16 });
    try {
      await single.ready();
      const results = await Promise.all([
        single.run(oneTest(BOMB)),
        single.run(oneTest('$.value === 8080')),
        single.run(oneTest('true')),
      ]);
      assert.deepEqual(outcomeOf(results[0]!.tests), { kind: 'memory-limit', message: 'exceeded the sandbox memory limit of 16 MB' });
      assert.equal(outcomeOf(results[1]!.tests), 'ok');
      assert.equal(outcomeOf(results[2]!.tests), 'ok');
    } finally {
      await single.close();
    }
  });

  it('the next job, sent right after the answer, reports its own outcome (a time limit stays a time limit)', async () => {
    const single = createSandboxEvaluator({ workers: 1, timeoutMs: 200, memoryMb: 16 });
    try {
      await single.ready();
      const bomb = await single.run(oneTest(BOMB));
      assert.deepEqual(outcomeOf(bomb.tests), { kind: 'memory-limit', message: 'exceeded the sandbox memory limit of 16 MB' });
      const spin = await single.run(oneTest('(() => { while (true) {} })()'));
      assert.deepEqual(outcomeOf(spin.tests), { kind: 'time-limit', message: 'exceeded the time limit of 200 ms' });
      const fine = await single.run(oneTest('$.value === 8080'));
      assert.equal(outcomeOf(fine.tests), 'ok');
    } finally {
      await single.close();
    }
  });
});
