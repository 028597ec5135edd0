// Runaways (jobs that hit the time or the memory limit): a repeat of the same job by the same client is answered from
// memory without running; a client whose jobs keep hitting limits is served last, through a slow lane; no other
// client is refused or slowed because of it (src/expressions/host/runaways.ts).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { requestContext, type ExpressionJob } from '../../src/core/ports.js';
import { RunawayMemo, SlowLane, OFFENDER_STRIKES, STRIKE_HALF_LIFE_MS } from '../../src/expressions/host/runaways.js';
import { CONFIGS, INPUT, closedAfterFile, oneTest, outcomeOf, view } from './helpers.js';

// `split` of a 256 MiB string: V8 aborts the child with a fatal report (one new child per bomb that runs).
const BOMB = "'x'.repeat(2 ** 28).split('').length > 0";
/** The n-th endless loop: the same work, a distinct expression text. */
const spin = (n: number) => `(() => { let i = ${n}; while (true) { i++ } })()`;

const pool = closedAfterFile();

/** A job whose one test is `expression` on key PORT, whose stored value is `value`. */
function withValue(expression: string, value: string): ExpressionJob {
  return { input: INPUT, configs: { ...CONFIGS, PORT: view('PORT', value, value) }, consts: [], tests: [{ key: 'PORT', expressions: [expression] }] };
}

describe('runaway memo: a repeated runaway is refused without running', () => {
  it('the same bomb and the same loop of the same client again: the identical answer, no new run, no new child', async () => {
    const ev = pool({ workers: 1, spares: 0, timeoutMs: 100 });
    await ev.ready();
    const spawns = ev.replacements().spawns;
    const first = await ev.run(oneTest(BOMB), requestContext('a'));
    assert.deepEqual(outcomeOf(first.tests), { kind: 'memory-limit', message: 'exceeded the sandbox memory limit of 64 MB' });
    await ev.ready();
    assert.equal(ev.replacements().spawns, spawns + 1);
    const again = await ev.run(oneTest(BOMB), requestContext('a'));
    assert.deepEqual(again, first);
    assert.equal(ev.runawaysRefused(), 1);
    assert.equal(ev.replacements().spawns, spawns + 1, 'the repeat cost no child');

    const loop = await ev.run(oneTest(spin(0)), requestContext('a'));
    assert.deepEqual(outcomeOf(loop.tests), { kind: 'time-limit', message: 'exceeded the time limit of 100 ms' });
    assert.deepEqual(await ev.run(oneTest(spin(0)), requestContext('a')), loop);
    assert.equal(ev.runawaysRefused(), 2);
    // Anything else in the job makes another job, which runs.
    await ev.run(oneTest(spin(0), 'HOST'), requestContext('a'));
    assert.equal(ev.runawaysRefused(), 2);
  });

  it('keyed by client and the whole job: another client’s identical job runs, and the same expression with other values passes', async () => {
    const ev = pool({ workers: 1, spares: 0, timeoutMs: 50 });
    await ev.ready();
    const ON_VALUE = '$.value === "spin" ? (() => { while (true) {} })() : true';
    const bad = await ev.run(withValue(ON_VALUE, 'spin'), requestContext('a'));
    assert.equal((outcomeOf(bad.tests) as { kind: string }).kind, 'time-limit');
    // The expression alone is not what failed: with another value it passes, for the same client and for another.
    assert.equal(outcomeOf((await ev.run(withValue(ON_VALUE, 'fine'), requestContext('a'))).tests), 'ok');
    assert.equal(outcomeOf((await ev.run(withValue(ON_VALUE, 'fine'), requestContext('b'))).tests), 'ok');
    // Client b's identical runaway runs (it is not told what a sent): it is not refused from a's memory.
    assert.equal((outcomeOf((await ev.run(withValue(ON_VALUE, 'spin'), requestContext('b'))).tests) as { kind: string }).kind, 'time-limit');
    assert.equal(ev.runawaysRefused(), 0);
    await ev.run(withValue(ON_VALUE, 'spin'), requestContext('a'));
    assert.equal(ev.runawaysRefused(), 1);
  });

  it('bounded: with room for one answer, a second runaway pushes the first out and the first runs again', async () => {
    const ev = pool({ workers: 1, spares: 0, timeoutMs: 50, runawayMemo: 1 });
    await ev.ready();
    await ev.run(oneTest(spin(1)), requestContext('a'));
    await ev.run(oneTest(spin(2)), requestContext('a'));
    await ev.run(oneTest(spin(1)), requestContext('a'));
    assert.equal(ev.runawaysRefused(), 0);
    await ev.run(oneTest(spin(1)), requestContext('a'));
    assert.equal(ev.runawaysRefused(), 1);
  });

  it('runawayMemo 0 keeps nothing', async () => {
    const ev = pool({ workers: 1, spares: 0, timeoutMs: 50, runawayMemo: 0 });
    await ev.ready();
    await ev.run(oneTest(spin(3)), requestContext('a'));
    await ev.run(oneTest(spin(3)), requestContext('a'));
    assert.equal(ev.runawaysRefused(), 0);
  });
});

describe('RunawayMemo: bounds and lifetime', () => {
  const answer = (message: string) => ({ consts: [], tests: [{ key: 'K', index: 0, ok: false, kind: 'time-limit' as const, message }] });

  it('expires: an answer is given until its lifetime is over, and a hit does not extend it', () => {
    let now = 0;
    const memo = new RunawayMemo(10, 1000, 100, () => now);
    memo.set('k', answer('m'));
    now = 99;
    assert.ok(memo.get('k'));
    now = 100;
    assert.equal(memo.get('k'), undefined);
    assert.equal(memo.size, 0);
    assert.equal(memo.given, 1);
  });

  it('holds at most `max` entries and `maxChars` characters, the oldest going first', () => {
    const memo = new RunawayMemo(2, 1000, 1000, () => 0);
    memo.set('a', answer('m'));
    memo.set('b', answer('m'));
    memo.set('c', answer('m'));
    assert.equal(memo.size, 2);
    assert.equal(memo.get('a'), undefined);
    assert.ok(memo.get('b') && memo.get('c'));

    const small = new RunawayMemo(100, 40, 1000, () => 0);
    for (let i = 0; i < 10; i++) small.set(`key-${i}`, answer('x'.repeat(10)));
    assert.ok(small.size <= 2, `${small.size} entries`);
    assert.ok(small.get('key-9'));
    // An answer larger than the whole memo is not kept at all.
    small.set('big', answer('x'.repeat(100)));
    assert.equal(small.get('big'), undefined);
  });
});

describe('SlowLane: strikes decay', () => {
  it('a client is an offender from OFFENDER_STRIKES limits in a row, and no longer once they have decayed', () => {
    let now = 0;
    const lane = new SlowLane(() => now);
    for (let i = 1; i < OFFENDER_STRIKES; i++) lane.strike('a');
    assert.equal(lane.isOffender('a'), false);
    lane.strike('a');
    assert.equal(lane.isOffender('a'), true);
    assert.equal(lane.isOffender('b'), false);
    now += STRIKE_HALF_LIFE_MS;
    assert.equal(lane.isOffender('a'), false);
    // A memory limit (a sandbox lost) weighs two: two bombs make an offender.
    lane.strike('c', 2);
    assert.equal(lane.isOffender('c'), false);
    lane.strike('c', 2);
    assert.equal(lane.isOffender('c'), true);
  });
});

describe('slow lane: a client whose jobs keep hitting limits', () => {
  it('is served after the other clients’ waiting jobs', async () => {
    const ev = pool({ workers: 1, spares: 0, timeoutMs: 50, answers: 0 });
    await ev.ready();
    // The victim is served now and then: the lane has someone to protect.
    await ev.run(oneTest('$.value === 8080'), requestContext('victim'));
    for (let i = 0; i < OFFENDER_STRIKES; i++) await ev.run(oneTest(spin(10 + i)), requestContext('attacker'));
    assert.equal(ev.isOffender('attacker'), true);
    assert.equal(ev.isOffender('victim'), false);
    const order: string[] = [];
    // The attacker's (valid) job is sent first; every one of the victim's jobs goes before it.
    const attacker = ev.run(oneTest('true'), requestContext('attacker')).then((r) => {
      order.push('attacker');
      return r;
    });
    const victims = Array.from({ length: 20 }, (_, i) =>
      ev.run(oneTest(`$.value === 8080 || ${i} < 0`), requestContext('victim')).then((r) => {
        order.push('victim');
        return r;
      }),
    );
    for (const r of await Promise.all(victims)) assert.equal(outcomeOf(r.tests), 'ok');
    assert.equal(outcomeOf((await attacker).tests), 'ok');
    assert.deepEqual(order, [...Array.from({ length: 20 }, () => 'victim'), 'attacker']);
  });

  it('is refused at once (503) while its runaways keep the lane closed; another client’s job runs meanwhile', async () => {
    // A runaway of 200 ms closes the lane for 9 x 200 ms, longer than an offender's job may wait.
    const ev = pool({ workers: 1, spares: 0, timeoutMs: 200, answers: 0 });
    await ev.ready();
    await ev.run(oneTest('$.value === 8080'), requestContext('victim'));
    for (let i = 0; i < OFFENDER_STRIKES; i++) await ev.run(oneTest(spin(20 + i)), requestContext('attacker'));
    const victim = ev.run(oneTest('$.value === 8080'), requestContext('victim'));
    await assert.rejects(ev.run(oneTest('true'), requestContext('attacker')), {
      name: 'SandboxBusyError',
      message: "this client's expressions keep exceeding their limits; retry later",
    });
    assert.equal(outcomeOf((await victim).tests), 'ok');
  });

  it('is not held back while no other client has been served lately (every request from one address): nobody to protect', async () => {
    const ev = pool({ workers: 1, spares: 0, timeoutMs: 200, answers: 0 });
    await ev.ready();
    for (let i = 0; i < OFFENDER_STRIKES; i++) await ev.run(oneTest(spin(30 + i)), requestContext('alone'));
    assert.equal(ev.isOffender('alone'), true);
    const job = ev.run(oneTest('$.value === 8080'), requestContext('alone'));
    assert.equal(ev.queued().alone, undefined, 'handed to the idle child at once');
    assert.equal(outcomeOf((await job).tests), 'ok');
  });

  it('a valid job of another client is never refused or slowed because of it', async () => {
    const ev = pool({ workers: 1, spares: 0, timeoutMs: 200, answers: 0 });
    await ev.ready();
    const ON_VALUE = '$.value === "spin" ? (() => { while (true) {} })() : true';
    for (let i = 0; i < OFFENDER_STRIKES; i++) await ev.run(withValue(`${ON_VALUE} && ${i} >= 0`, 'spin'), requestContext('attacker'));
    assert.equal(ev.isOffender('attacker'), true);
    // The same expressions, other values, another client: handed to the idle child at once (not held in the queue while
    // the attacker's lane is closed), and they pass.
    for (let i = 0; i < OFFENDER_STRIKES; i++) {
      const job = ev.run(withValue(`${ON_VALUE} && ${i} >= 0`, 'fine'), requestContext('victim'));
      assert.equal(ev.queued().victim, undefined, `victim job ${i} waits on the host`);
      assert.equal(outcomeOf((await job).tests), 'ok');
    }
    assert.equal(ev.isOffender('victim'), false);
    assert.equal(ev.runawaysRefused(), 0);
  });
});
