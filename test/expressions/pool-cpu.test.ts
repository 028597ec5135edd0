// The time limit charges a job the CPU time its child actually used, not the time the child waited for a CPU.
//
// The child is made to wait on purpose: it is pinned to one CPU together with a busy-looping process and given the
// lowest priority (nice 19), so the kernel runs it only a sliver of the time. How long it waited is read from the
// kernel (/proc/<pid>/task/*/schedstat, the time its threads were runnable but not running), not from a clock here.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { createSandboxEvaluator, type SandboxEvaluator } from '../../src/expressions/index.js';
import { oneTest, outcomeOf } from './helpers.js';
import { waitFor } from '../helpers/wait.js';
import { requireOrSkip } from '../helpers/services.js';

const pools: SandboxEvaluator[] = [];
const hogs: ChildProcess[] = [];
after(async () => {
  for (const h of hogs) if (h.exitCode === null && h.signalCode === null) h.kill('SIGKILL');
  for (const p of pools) await p.close();
});

/** A thread's scheduler statistics (ns): time it ran on a CPU, time it was runnable but waited for one. */
function schedstat(pid: number, tid: number): { ran: bigint; waited: bigint } {
  const [ran, waited] = readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ');
  return { ran: BigInt(ran!), waited: BigInt(waited!) };
}

/** CPU time of every thread of a process so far (ns). */
function ranNs(pid: number): bigint {
  let sum = 0n;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      sum += schedstat(pid, Number(tid)).ran;
    } catch {
      // a thread that ended meanwhile
    }
  }
  return sum;
}

/** Runs a command and fails the test with its output when it fails. */
function must(cmd: string, args: string[]): void {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  assert.equal(r.status, 0, `${cmd} ${args.join(' ')}: ${r.stderr}`);
}

test('a job whose child waits for a CPU longer than the time limit is not killed: only its own CPU time counts', async (t) => {
  const tools = ['taskset', 'renice'].filter((c) => spawnSync('sh', ['-c', `command -v ${c}`], { stdio: 'ignore' }).status !== 0);
  if (tools.length || !existsSync('/proc/self/schedstat')) {
    requireOrSkip(t, `taskset and renice (util-linux) and /proc/<pid>/schedstat (missing: ${tools.join(', ') || 'schedstat'})`, 'install util-linux');
    return;
  }
  const budgetMs = 100;
  const pool = createSandboxEvaluator({ workers: 1, spares: 0, timeoutMs: budgetMs });
  pools.push(pool);
  await pool.ready();
  const [child] = pool.pids();
  assert.ok(child);
  // The child's main thread (the one that runs the isolate's code) shares the first CPU it may use with a busy loop,
  // at a lower priority. Its other threads, isolated-vm's timer among them, are left alone: the time limit's wall
  // allowance still fires on time.
  const cpu = /Cpus_allowed_list:\s*(\d+)/.exec(readFileSync(`/proc/${child}/status`, 'utf8'))![1]!;
  must('taskset', ['-p', '-c', cpu, String(child)]);
  must('renice', ['-n', '10', '-p', String(child)]);
  const hog = spawn('taskset', ['-c', cpu, process.execPath, '-e', 'for (;;) {}'], { stdio: 'ignore' });
  hogs.push(hog);
  await waitFor('the CPU hog to run', () => {
    try {
      return BigInt(readFileSync(`/proc/${hog.pid}/schedstat`, 'utf8').split(' ')[0]!) > 20_000_000n;
    } catch {
      return false;
    }
  });

  // CPU work far under the budget that, with the thread starved, takes longer than the budget in wall-clock time. The
  // scheduler decides how long the thread waits, not the test: the work doubles (while its CPU time stays under a
  // quarter of the budget) until a run waited longer than the budget. Every run must pass.
  const work = (n: number) => `(() => { let x = 0; for (let i = 0; i < ${n}; i++) x = (x + i * 7) % 1000003; return x >= 0 })()`;
  let iterations = 100_000;
  const runs: string[] = [];
  let shown = false;
  for (let run = 0; run < 12 && !shown; run++) {
    const before = { ...schedstat(child!, child!), all: ranNs(child!) };
    const r = await pool.run(oneTest(work(iterations)));
    assert.equal(outcomeOf(r.tests), 'ok', `run ${run} (${iterations} iterations): ${JSON.stringify(r.tests)}; before: ${runs.join(', ')}`);
    assert.deepEqual(pool.pids(), [child], 'the child was not replaced');
    const waitedMs = Number(schedstat(child!, child!).waited - before.waited) / 1e6;
    const ranMs = Number(ranNs(child!) - before.all) / 1e6;
    runs.push(`${iterations}: ran ${ranMs.toFixed(1)} ms, waited ${waitedMs.toFixed(1)} ms`);
    shown = waitedMs > budgetMs;
    if (ranMs < budgetMs / 4) iterations *= 2;
  }
  assert.ok(shown, `no run waited longer than the budget for a CPU: ${runs.join(', ')}`);
  t.diagnostic(runs.join(', '));
  hog.kill('SIGKILL');
});

test('an endless loop is still stopped at the time limit, and the child serves the next job', async () => {
  const pool = createSandboxEvaluator({ workers: 1, spares: 0, timeoutMs: 50 });
  pools.push(pool);
  await pool.ready();
  const r = await pool.run(oneTest('(() => { while (true) {} })()'));
  assert.deepEqual(outcomeOf(r.tests), { kind: 'time-limit', message: 'exceeded the time limit of 50 ms' });
  assert.equal(outcomeOf((await pool.run(oneTest('$.value === 8080'))).tests), 'ok');
});
