/**
 * matrixOf (src/core/matrix.ts, docs/explain.md "Comparing sets"): exact cells for each state (ok, missing, test with
 * its index, enum, pattern, const, override) and origin (own set, ancestor, default, const, empty), hidden values
 * withheld and revealed, one store read for all sets, the sets under a prefix (ResolvedStore.list), the limits (413),
 * bad input, the authorize hook running before any read, a store that is down, and the bound on sets at once.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { matrixOf, InputError, LimitError, StoreUnavailableError, exportPipeline, type MatrixCell, type ExpressionJob, type ExpressionResult } from '../../src/core/index.js';
import { MemoryStore, MemoryResolver, HostEvaluator } from '../helpers/engine.js';

function fixture() {
  const main = new MemoryStore('main', 'json-file', [
    { set: '', key: 'TIMEOUT', value: '30' },
    { set: 'prod', key: 'HOST', value: 'prod.example' },
    { set: 'prod', key: 'PORT', value: '80' },
    { set: 'prod', key: 'LEVEL', value: 'verbose' },
    { set: 'prod', key: 'CODE', value: 'abc' },
    { set: 'prod', key: 'PASS', value: 's3cr3t' },
    { set: 'prod/eu', key: 'HOST', value: 'eu.example' },
    { set: 'prod/eu', key: 'PORT', value: '8443' },
    { set: 'prod/eu', key: 'CODE', value: 'EU' },
    { set: 'staging', key: 'PORT', value: 'abc' },
    { set: 'staging', key: 'LEVEL', value: 'debug' },
  ]);
  const stores = new MemoryResolver([main], 'main');
  const expressions = new HostEvaluator();
  return { main, stores, expressions, deps: { stores, expressions } };
}

const schema = {
  keys: {
    HOST: { required: true },
    PORT: { test: ['Number.isInteger($.value)', '$.value > 1000'] },
    LEVEL: { enum: ['debug', 'info'], default: 'info' },
    CODE: { pattern: '^[A-Z]+$' },
    TIMEOUT: {},
    PASS: { hidden: true },
    URL: { const: 'https://{{ $.configs.HOST.value }}' },
  },
};

const enumFailure = { rule: 'enum', message: 'the value of key "LEVEL" is not one of the allowed values: "debug", "info"' } as const;

test('each state and origin, cell by cell; one store read for all sets; hidden values withheld', async () => {
  const { main, deps, expressions } = fixture();
  const m = await matrixOf({ schema, sets: ['prod', 'prod/eu', 'staging'] }, deps);
  assert.equal(main.reads, 1, 'one read for every set of every hierarchy');
  assert.equal(expressions.jobs.length, 3, 'one sandbox job per set');
  assert.deepEqual(
    { version: m.version, store: m.store, sets: m.sets, keys: m.keys, failed: m.failed, fromBackup: m.fromBackup, prefix: m.prefix },
    { version: 1, store: 'main', sets: ['prod', 'prod/eu', 'staging'], keys: ['HOST', 'PORT', 'LEVEL', 'CODE', 'TIMEOUT', 'PASS', 'URL'], failed: [3, 1, 2], fromBackup: false, prefix: undefined },
  );
  const expected: MatrixCell[][] = [
    [
      { state: 'ok', origin: 'store', set: 'prod', value: 'prod.example' },
      { state: 'ok', origin: 'store', set: 'prod/eu', value: 'eu.example' },
      { state: 'missing', origin: 'empty', failures: [{ rule: 'required', message: 'key "HOST" is required but has no value' }] },
    ],
    [
      { state: 'test', origin: 'store', set: 'prod', value: '80', failures: [{ rule: 'test', message: 'the value of key "PORT" failed the test $.value > 1000', test: 1 }] },
      { state: 'ok', origin: 'store', set: 'prod/eu', value: '8443' },
      {
        state: 'test',
        origin: 'store',
        set: 'staging',
        value: 'abc',
        failures: [
          { rule: 'test', message: 'the value of key "PORT" failed the test Number.isInteger($.value)', test: 0 },
          { rule: 'test', message: 'the value of key "PORT" failed the test $.value > 1000', test: 1 },
        ],
      },
    ],
    [
      { state: 'enum', origin: 'store', set: 'prod', value: 'verbose', failures: [enumFailure] },
      { state: 'enum', origin: 'store', set: 'prod', inherited: true, value: 'verbose', failures: [enumFailure] },
      { state: 'ok', origin: 'store', set: 'staging', value: 'debug' },
    ],
    [
      { state: 'pattern', origin: 'store', set: 'prod', value: 'abc', failures: [{ rule: 'pattern', message: 'the value of key "CODE" does not match the pattern ^[A-Z]+$' }] },
      { state: 'ok', origin: 'store', set: 'prod/eu', value: 'EU' },
      { state: 'ok', origin: 'empty' },
    ],
    [
      { state: 'ok', origin: 'store', set: '', inherited: true, value: '30' },
      { state: 'ok', origin: 'store', set: '', inherited: true, value: '30' },
      { state: 'ok', origin: 'store', set: '', inherited: true, value: '30' },
    ],
    [
      { state: 'ok', origin: 'store', set: 'prod', hidden: true, withheld: 'hidden' },
      { state: 'ok', origin: 'store', set: 'prod', inherited: true, hidden: true, withheld: 'hidden' },
      { state: 'ok', origin: 'empty', hidden: true, withheld: 'hidden' },
    ],
    [
      { state: 'ok', origin: 'const', value: 'https://prod.example' },
      { state: 'ok', origin: 'const', value: 'https://eu.example' },
      { state: 'ok', origin: 'const', value: 'https://' },
    ],
  ];
  assert.deepEqual(m.cells, expected);
  assert.ok(!JSON.stringify(m).includes('s3cr3t'), 'the hidden value never appears');
});

test('the cells of a valid set hold the values its export gives', async () => {
  const { deps } = fixture();
  const m = await matrixOf({ schema: { keys: { HOST: {}, TIMEOUT: {}, NAME: { default: 'svc' } } }, sets: ['prod/eu'] }, deps);
  const exported = await exportPipeline([{ set: 'prod/eu', schema: { keys: { HOST: {}, TIMEOUT: {}, NAME: { default: 'svc' } } } }], deps);
  assert.deepEqual(Object.fromEntries(m.keys.map((k, i) => [k, m.cells[i]![0]!.value])), { HOST: 'eu.example', TIMEOUT: '30', NAME: 'svc' });
  assert.deepEqual(exported.configs, { HOST: 'eu.example', TIMEOUT: 30, NAME: 'svc' });
  assert.deepEqual(m.cells[2]![0], { state: 'ok', origin: 'default', value: 'svc' });
});

test('overrides apply at every set; a bad one is state `override`; a failing const is state `const`; revealHidden shows hidden values', async () => {
  const { deps } = fixture();
  const m = await matrixOf(
    { schema: { keys: { HOST: {}, PASS: { hidden: true }, BAD: { const: '{{ nope( }}' } } }, sets: ['prod', 'staging'], configs: { HOST: 'forced', BAD: 'x' } },
    deps,
    { revealHidden: true },
  );
  assert.deepEqual(m.cells[0], [
    { state: 'ok', origin: 'override', value: 'forced' },
    { state: 'ok', origin: 'override', value: 'forced' },
  ]);
  assert.deepEqual(m.cells[1], [
    { state: 'ok', origin: 'store', set: 'prod', hidden: true, value: 's3cr3t' },
    { state: 'ok', origin: 'empty', hidden: true },
  ]);
  const bad = m.cells[2]![0]!;
  assert.equal(bad.state, 'override');
  assert.deepEqual(bad.failures![0], { rule: 'override', message: 'key "BAD" is computed by `const` and cannot be overridden' });
  assert.equal(bad.failures![1]!.rule, 'const');
  assert.deepEqual(m.failed, [1, 1]);
});

test('a prefix: every set the store holds under it, by path; the root set only under ""; one listing, one read', async () => {
  const { main, deps } = fixture();
  const m = await matrixOf({ schema: { keys: { HOST: {} } }, prefix: '/prod/' }, deps);
  assert.deepEqual({ prefix: m.prefix, sets: m.sets, lists: main.lists, reads: main.reads }, { prefix: 'prod', sets: ['prod', 'prod/eu'], lists: 1, reads: 1 });
  const all = await matrixOf({ schema: { keys: { TIMEOUT: {} } }, prefix: '' }, deps);
  assert.deepEqual(all.sets, ['', 'prod', 'prod/eu', 'staging']);
  assert.deepEqual(all.cells[0]![0], { state: 'ok', origin: 'store', set: '', value: '30' });
  const none = await matrixOf({ schema: { keys: { TIMEOUT: {} } }, prefix: 'nowhere' }, deps);
  assert.deepEqual({ sets: none.sets, cells: none.cells, failed: none.failed }, { sets: [], cells: [[]], failed: [] });
});

test('sets given twice (in any spelling) are one column; bad input is refused before anything is read', async () => {
  const { main, deps } = fixture();
  const m = await matrixOf({ schema: { keys: { HOST: {} } }, sets: ['prod', '/prod/', 'staging'] }, deps);
  assert.deepEqual(m.sets, ['prod', 'staging']);
  main.reads = 0;
  await assert.rejects(matrixOf({ schema: { keys: { HOST: {} } }, sets: ['prod'], prefix: 'prod' }, deps), (e: unknown) => {
    assert.ok(e instanceof InputError);
    assert.deepEqual([e.code, e.message, e.issues], ['CFGU_INVALID_INPUT', 'give either `sets` (a list of set paths) or `prefix` (a set path), not both, not neither', [{ path: '/', message: 'exactly one of `sets` and `prefix` is required' }]]);
    return true;
  });
  await assert.rejects(matrixOf({ schema: { keys: { HOST: {} } }, sets: ['prod', 'a//b'] }, deps), (e: unknown) => {
    assert.ok(e instanceof InputError);
    assert.deepEqual([e.code, e.issues], ['CFGU_INVALID_SET', [{ path: '/sets/1', message: 'set path "a//b" has an empty segment' }]]);
    return true;
  });
  await assert.rejects(matrixOf({ schema: { keys: { 'bad key': {} } }, sets: ['prod'] }, deps), (e: unknown) => {
    assert.ok(e instanceof InputError);
    assert.equal(e.code, 'CFGU_INVALID_SCHEMA');
    assert.match(e.issues[0]!.path, /^\/schema\/keys\//);
    return true;
  });
  assert.equal(main.reads, 0);
});

test('limits: sets, cells, the listing, the one read, set depth: 413 with the number', async () => {
  const { main, deps } = fixture();
  const keys = { keys: { A: {}, B: {}, C: {} } };
  const limit = async (p: Promise<unknown>, message: string) =>
    assert.rejects(p, (e: unknown) => {
      assert.ok(e instanceof LimitError);
      assert.equal(e.message, message);
      return true;
    });
  await limit(matrixOf({ schema: keys, sets: ['a', 'b', 'c'] }, deps, { limits: { sets: 2 } }), 'the matrix has 3 sets; the limit is 2');
  await limit(matrixOf({ schema: keys, sets: ['a', 'b'] }, deps, { limits: { cells: 5 } }), 'the matrix has 2 sets of 3 keys, 6 cells; the limit is 5');
  await limit(matrixOf({ schema: keys, prefix: '' }, deps, { limits: { sets: 3 } }), 'the store holds more than 3 sets under the prefix ""; the limit is 3');
  await limit(matrixOf({ schema: keys, prefix: 'prod' }, deps, { limits: { cells: 5 } }), 'the matrix has 2 sets of 3 keys, 6 cells; the limit is 5');
  await limit(matrixOf({ schema: keys, prefix: 'prod' }, deps, { engineLimits: { lookups: 4 } }), 'the sets under the prefix "prod" hold more than 4 keys in all; the limit is 4');
  // prod/eu reads "", prod and prod/eu; staging reads staging: 4 sets of 3 keys.
  await limit(matrixOf({ schema: keys, sets: ['prod/eu', 'staging'] }, deps, { engineLimits: { lookups: 11 } }), 'the matrix reads 12 store entries (the keys times every set of the sets\' hierarchies); the limit is 11');
  await limit(matrixOf({ schema: keys, sets: ['a/b/c'] }, deps, { engineLimits: { setDepth: 2 } }), 'the set path "a/b/c" has 3 segments; the limit is 2');
  assert.equal(main.reads, 0, 'nothing over a limit is read');
  await matrixOf({ schema: keys, sets: ['prod/eu', 'staging'] }, deps, { engineLimits: { lookups: 12 }, limits: { sets: 2, cells: 6 } });
});

test('authorize is told the sets (listed or given) before any value is read; its refusal stops the matrix', async () => {
  const { main, deps } = fixture();
  const told: string[][] = [];
  const refuse = (sets: readonly string[]) => {
    told.push([...sets]);
    throw new Error('refused');
  };
  await assert.rejects(matrixOf({ schema: { keys: { HOST: {} } }, prefix: 'prod' }, deps, { authorize: refuse }), /refused/);
  await assert.rejects(matrixOf({ schema: { keys: { HOST: {} } }, sets: ['staging', 'prod'] }, deps, { authorize: refuse }), /refused/);
  assert.deepEqual(told, [['prod', 'prod/eu'], ['staging', 'prod']]);
  assert.equal(main.reads, 0);
});

test('a store that is down: the listing and the read are StoreUnavailableError; an unknown store is UnknownStoreError', async () => {
  const { main, deps } = fixture();
  main.down = true;
  await assert.rejects(matrixOf({ schema: { keys: { HOST: {} } }, prefix: 'prod' }, deps), StoreUnavailableError);
  await assert.rejects(matrixOf({ schema: { keys: { HOST: {} } }, sets: ['prod'] }, deps), StoreUnavailableError);
  await assert.rejects(matrixOf({ store: 'nope', schema: { keys: { HOST: {} } }, sets: ['prod'] }, deps), { code: 'CFGU_UNKNOWN_STORE' });
});

test('at most `limits.concurrency` sets are evaluated at once', async () => {
  const { stores } = fixture();
  const inner = new HostEvaluator();
  let running = 0;
  let most = 0;
  const gates: Array<() => void> = [];
  const expressions = Object.assign(Object.create(inner) as HostEvaluator, {
    async run(job: ExpressionJob): Promise<ExpressionResult> {
      running++;
      most = Math.max(most, running);
      await new Promise<void>((resolve) => gates.push(resolve));
      running--;
      return inner.run(job);
    },
  });
  const sets = Array.from({ length: 7 }, (_, i) => `s${i}`);
  // A const: every set has a sandbox job (a test of a key without a value would not run).
  const done = matrixOf({ schema: { keys: { A: { const: 'x' } } }, sets }, { stores, expressions }, { limits: { concurrency: 2 } });
  let settled = false;
  void done.finally(() => (settled = true)).catch(() => undefined);
  // Release the jobs one by one as they arrive, until all seven have run (or the matrix failed).
  let released = 0;
  while (released < 7 && !settled) {
    await new Promise((r) => setImmediate(r));
    const next = gates.shift();
    if (next) {
      next();
      released++;
    }
  }
  const m = await done;
  assert.deepEqual(m.cells[0], sets.map(() => ({ state: 'ok', origin: 'const', value: 'x' })));
  assert.equal(most, 2);
});
