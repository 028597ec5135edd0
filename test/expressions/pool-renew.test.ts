// An isolate disposed at its memory limit, or left with too full a heap, is replaced inside its child process
// ("renewal"): the child keeps serving with the same pid, the new isolate is sealed like the first, and the jobs the
// host had written behind the failing one run with their own outcome.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { FLUSH_LINE } from '../../src/expressions/wire/protocol.js';
import { SEALED_WALK, closedAfterFile, oneTest, outcomeOf } from './helpers.js';

// Reaches the memory limit with large strings: the isolate is disposed (the process does not abort).
const BOMB = "(() => { const a = []; for (;;) a.push('y'.repeat(1 << 20) + a.length); })()";
// Leaves 56 MB live at its end: over half of a 96 MB heap, under the limit.
const LITTER = '(() => { const a = []; for (let i = 0; i < 56; i++) a.push(new Array(1 << 17).fill(i)); return a.length === 56; })()';
const MEMORY = { kind: 'memory-limit', message: 'exceeded the sandbox memory limit of 64 MB' };

const pool = closedAfterFile();

describe('sandbox pool: isolates renewed inside their child', () => {
  it('a memory bomb followed (pipelined) by light jobs on one child: the light jobs pass, the pid stays', async () => {
    // No spare: only the one child can answer. The budget is CPU time, generous so the bomb meets its memory limit.
    const ev = pool({ workers: 1, spares: 0, timeoutMs: 10_000, memoryMb: 64 });
    await ev.ready();
    const pids = ev.pids();
    const before = ev.replacements();
    for (let round = 0; round < 2; round++) {
      const results = await Promise.all([BOMB, '$.value === 8080', 'true', '_.isNumber($.value)'].map((e) => ev.run(oneTest(e))));
      assert.deepEqual(outcomeOf(results[0]!.tests), MEMORY, `round ${round}`);
      results.slice(1).forEach((r, i) => assert.equal(outcomeOf(r.tests), 'ok', `round ${round}, light job ${i}`));
    }
    assert.deepEqual(ev.pids(), pids);
    assert.equal(ev.replacements().spawns, before.spawns);
    assert.equal(ev.replacements().renewals, before.renewals + 2);
  });

  it('the renewed isolate is sealed: the attacker walk finds nothing writable, and no state of the bomb survives', async () => {
    const ev = pool({ workers: 1, spares: 0, timeoutMs: 10_000, memoryMb: 64 });
    await ev.ready();
    const pids = ev.pids();
    // The bomb leaves what it can in the realm before dying: a match in the RegExp statics, a write attempt on a global.
    const bomb = "(() => { /(s3cret)/.exec('bomb-s3cret'); try { globalThis.left = 's3cret' } catch (e) {} const a = []; for (;;) a.push('y'.repeat(1 << 20) + a.length); })()";
    assert.deepEqual(outcomeOf((await ev.run(oneTest(bomb))).tests), MEMORY);
    assert.deepEqual(ev.pids(), pids);
    assert.equal(outcomeOf((await ev.run(oneTest(SEALED_WALK))).tests), 'ok');
    assert.equal(outcomeOf((await ev.run(oneTest("!RegExp.input.includes('s3cret') && RegExp.$1 !== 's3cret' && typeof left === 'undefined'"))).tests), 'ok');
    assert.equal(outcomeOf((await ev.run(oneTest("z.object({ a: z.string() }).safeParse({ a: 'x' }).success && JSONSchema.validate({ type: 'number' }, $.value)"))).tests), 'ok');
  });

  it('a job that leaves the heap over half full renews the isolate; the jobs behind it pass on the same child', async () => {
    const ev = pool({ workers: 1, spares: 0, timeoutMs: 10_000, memoryMb: 96 });
    await ev.ready();
    const pids = ev.pids();
    const before = ev.replacements();
    const results = await Promise.all([LITTER, 'true', '$.value === 8080'].map((e) => ev.run(oneTest(e))));
    results.forEach((r, i) => assert.equal(outcomeOf(r.tests), 'ok', `job ${i}`));
    assert.equal(ev.replacements().renewals, before.renewals + 1);
    assert.equal(ev.replacements().spawns, before.spawns);
    assert.deepEqual(ev.pids(), pids);
  });
});

describe('sandbox child: the renewal protocol', () => {
  it('answers the bomb, says renew, drops the lines before the flush, and is ready again with a sealed isolate', async () => {
    const childFile = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'dist', 'sandbox-child.js');
    const bundle = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'dist', 'sandbox', 'libraries.js');
    const config = JSON.stringify({ bundle, timeoutMs: 10_000, memoryMb: 64, retireHeapMb: 32 });
    const child = spawn(process.execPath, ['--no-node-snapshot', childFile, config], { stdio: ['pipe', 'pipe', 'ignore'], env: {} });
    try {
      const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
      const next = async (): Promise<Record<string, unknown>> => JSON.parse((await lines.next()).value as string) as Record<string, unknown>;
      const job = (expression: string) => JSON.stringify({ t: 'bool', expression, context: null }) + '\n';
      const first = await next();
      assert.equal(first.t, 'ready');
      assert.equal(first.renewals, 0);
      // The two jobs after the bomb answer `false` if they ever run.
      child.stdin.write(job(BOMB) + job('1 === 2') + job('2 === 3'));
      const answer = await next();
      assert.deepEqual({ ...answer, cpu: undefined }, { t: 'value', ok: false, ...MEMORY, cpu: undefined });
      assert.deepEqual(await next(), { t: 'renew' });
      child.stdin.write(FLUSH_LINE + '\n');
      const renewed = await next();
      assert.equal(renewed.t, 'ready');
      assert.equal(renewed.renewals, 1);
      const seal = renewed.seal as { unsealed: string[]; unfixable: string[]; frozen: number };
      assert.deepEqual(seal.unsealed, []);
      assert.deepEqual(seal.unfixable, []);
      assert.equal(seal.frozen, (first.seal as { frozen: number }).frozen);
      child.stdin.write(job('1 === 1'));
      const after = await next();
      assert.deepEqual({ ...after, cpu: undefined }, { t: 'value', ok: true, value: true, cpu: undefined });
      assert.equal(child.exitCode, null);
    } finally {
      child.kill('SIGKILL');
    }
  });
});
