// Kept answers (SandboxOptions.answers, src/expressions/host/kept-answers.ts): a job that passed and read neither the clock nor
// Math.random is answered again, for the same client, without running; anything else runs every time. The stand-ins
// that notice the clock and chance (src/expressions/isolate/prelude.ts) behave as the originals do.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createSandboxEvaluator, type SandboxEvaluator } from '../../src/expressions/index.js';
import { type ExpressionJob } from '../../src/core/ports.js';
import { CONFIGS, INPUT, oneTest } from './helpers.js';

const constJob = (template: string): ExpressionJob => ({ input: INPUT, configs: CONFIGS, consts: [{ key: 'C', template }], tests: [] });
const ctx = (client: string) => ({ client });

let ev: SandboxEvaluator;
before(async () => {
  ev = createSandboxEvaluator({ workers: 1, spares: 0, timeoutMs: 500 });
  await ev.ready();
});
after(() => ev.close());

/** Run a job twice for one client; how many of the two runs were answered from kept answers, and both results. */
async function twice(job: ExpressionJob, client = 'alice') {
  const given = ev.answersGiven();
  const first = await ev.run(job, ctx(client));
  const second = await ev.run(job, ctx(client));
  return { kept: ev.answersGiven() - given, first, second };
}

describe('kept answers', () => {
  it('a passing job that reads no clock is answered again for its client, with the same answer', async () => {
    const { kept, first, second } = await twice(constJob('{{ $.configs.HOST.value }}:{{ $.configs.PORT.value }}-kept-1'));
    assert.equal(kept, 1);
    assert.deepEqual(second, first);
    assert.deepEqual(first.consts, [{ key: 'C', ok: true, value: 'db.example.com:8080-kept-1' }]);
    // The same job for another client runs again: no client is answered from another's jobs.
    const given = ev.answersGiven();
    assert.deepEqual(await ev.run(constJob('{{ $.configs.HOST.value }}:{{ $.configs.PORT.value }}-kept-1'), ctx('bob')), first);
    assert.equal(ev.answersGiven(), given);
  });

  it('another value is another job', async () => {
    const job = constJob('{{ $.configs.PORT.value + 1 }}');
    await ev.run(job, ctx('alice'));
    const given = ev.answersGiven();
    const changed = { ...job, configs: { ...CONFIGS, PORT: { ...CONFIGS.PORT!, storedValue: '9090', value: 9090 } } };
    assert.deepEqual((await ev.run(changed, ctx('alice'))).consts, [{ key: 'C', ok: true, value: '9091' }]);
    assert.equal(ev.answersGiven(), given);
  });

  for (const [what, template] of [
    ['Date.now()', '{{ Date.now() > 0 }}'],
    ['new Date() without a date', '{{ new Date().getTime() > 0 }}'],
    ['Date() called as a function', '{{ typeof Date() }}'],
    ['Math.random()', '{{ Math.random() < 2 }}'],
    ['lodash _.random', '{{ _.random(1, 1) }}'],
    ['lodash _.shuffle', '{{ _.shuffle([1]).length }}'],
    ['lodash _.now', '{{ _.now() > 0 }}'],
    ['lodash _.uniqueId (a counter that outlives the job)', '{{ _.uniqueId("x").length > 1 }}'],
    ['Intl.DateTimeFormat#format without a date', '{{ new Intl.DateTimeFormat("en").format().length > 0 }}'],
    ['Intl.DateTimeFormat#formatToParts without a date', '{{ new Intl.DateTimeFormat("en").formatToParts().length > 0 }}'],
    ['the clock reached through the constructor of a date', '{{ new (new Date(0).constructor)().getTime() > 0 }}'],
    ['a subclass of Date', '{{ (class extends Date {}) && new (class extends Date {})().getTime() > 0 }}'],
  ] as const) {
    it(`a job that reads the clock or chance runs every time: ${what}`, async () => {
      const { kept, first } = await twice(constJob(template));
      assert.equal(first.consts[0]!.ok, true, JSON.stringify(first));
      assert.equal(kept, 0);
    });
  }

  it('a test reading the clock runs every time, and so does a failing job', async () => {
    assert.equal((await twice(oneTest('Date.now() > 0'))).kept, 0);
    const failing = await twice(oneTest('$.value > 100000'));
    assert.equal(failing.kept, 0);
    assert.equal(failing.second.tests.length, 1);
  });

  it('a date made from a given time is steady, and dates behave as before', async () => {
    const template =
      '{{ [new Date(0).toISOString(), Date.UTC(2020, 0, 1), Date.parse("2020-01-01T00:00:00Z"), new Date(0) instanceof Date, ' +
      'new Date(0).constructor === Date, Object.prototype.toString.call(new Date(0)), Date.name, Date.length, ' +
      'Object.getPrototypeOf(new Date(0)) === Date.prototype, new Intl.DateTimeFormat("en", { timeZone: "UTC" }).format(new Date(0)), ' +
      'Date.now.name, Math.random.name, Object.keys(Date).length, Object.keys(Math).length].join("|") }}';
    const { kept, first } = await twice(constJob(template));
    assert.deepEqual(first.consts, [
      { key: 'C', ok: true, value: '1970-01-01T00:00:00.000Z|1577836800000|1577836800000|true|true|[object Date]|Date|7|true|1/1/1970|now|random|0|0' },
    ]);
    assert.equal(kept, 1);
  });

  it('without a client (the CLI, .configu rendering) nothing is kept', async () => {
    const given = ev.answersGiven();
    const job = constJob('{{ $.configs.HOST.value }}-no-client');
    await ev.run(job);
    await ev.run(job);
    assert.equal(ev.answersGiven(), given);
  });

  it('answers: 0 keeps none', async () => {
    const none = createSandboxEvaluator({ workers: 1, spares: 0, answers: 0 });
    try {
      await none.ready();
      const job = constJob('{{ $.configs.HOST.value }}-off');
      await none.run(job, ctx('alice'));
      await none.run(job, ctx('alice'));
      assert.equal(none.answersGiven(), 0);
    } finally {
      await none.close();
    }
  });
});
