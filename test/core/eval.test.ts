import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  evaluatePipeline,
  exportPipeline,
  ValidationError,
  InputError,
  UnknownStoreError,
  StoreUnavailableError,
  SandboxUnavailableError,
  ErrorCodes,
  type EvalCommandInput,
  type EvalFailure,
} from '../../src/core/index.js';
import { freezeDeep } from '../../src/core/frozen.js';
import { MemoryStore, MemoryResolver, HostEvaluator } from '../helpers/engine.js';

function fixture() {
  const main = new MemoryStore('main', 'json-file', [
    { set: '', key: 'HOST', value: 'root.example' },
    { set: '', key: 'PORT', value: '80' },
    { set: 'prod', key: 'HOST', value: 'prod.example' },
    { set: 'prod/eu', key: 'HOST', value: 'eu.example' },
    { set: 'prod', key: 'DEBUG', value: 'false' },
    { set: 'prod', key: 'LAZY', value: 'from-store' },
    { set: 'prod', key: 'C', value: 'from-store' },
  ]);
  const other = new MemoryStore('other', 'sqlite', [{ set: '', key: 'TOKEN', value: 's3cret' }]);
  const stores = new MemoryResolver([main, other], 'main');
  const expressions = new HostEvaluator();
  return { main, other, stores, expressions, deps: { stores, expressions } };
}

async function failuresOf(p: Promise<unknown>): Promise<EvalFailure[]> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof ValidationError, String(e));
    assert.equal(e.code, ErrorCodes.VALIDATION_FAILED);
    return e.failures;
  }
  assert.fail('evaluation succeeded');
}

test('origins: empty, store (deepest set wins), override, default, const', async () => {
  const { deps } = fixture();
  const { result } = await evaluatePipeline(
    [
      {
        set: 'prod/eu',
        schema: {
          keys: {
            HOST: {},
            PORT: {},
            DEBUG: { default: true },
            MISSING: {},
            NAME: { default: 'svc' },
            OVR: {},
            URL: { const: 'http://{{ $.configs.HOST.value }}:{{ $.configs.PORT.value }}' },
          },
        },
        configs: { OVR: 'x', PORT: 8080 },
      },
    ],
    deps,
  );
  const view = Object.fromEntries(Object.entries(result).map(([k, e]) => [k, [e.value, e.origin, e.set]]));
  assert.deepEqual(view, {
    HOST: ['eu.example', 'store', 'prod/eu'],
    PORT: ['8080', 'override', 'prod/eu'],
    DEBUG: ['false', 'store', 'prod'],
    MISSING: ['', 'empty', 'prod/eu'],
    NAME: ['svc', 'default', 'prod/eu'],
    OVR: ['x', 'override', 'prod/eu'],
    URL: ['http://eu.example:8080', 'const', 'prod/eu'],
  });
});

test('a command reads its store once for every key and set (one batched round trip)', async () => {
  const { deps, main } = fixture();
  await evaluatePipeline([{ set: 'prod/eu', schema: { keys: { HOST: {}, PORT: {}, DEBUG: {} } } }], deps);
  assert.equal(main.reads, 1);
});

test('const and lazy keys are never read from the store; lazy takes only overrides', async () => {
  const { deps } = fixture();
  const { result } = await evaluatePipeline(
    [{ set: 'prod', schema: { keys: { LAZY: { lazy: true }, C: { const: 'computed' }, L2: { lazy: true } } }, configs: { L2: 'given' } }],
    deps,
  );
  assert.deepEqual([result.LAZY!.value, result.LAZY!.origin], ['', 'empty']);
  assert.deepEqual([result.C!.value, result.C!.origin], ['computed', 'const']);
  assert.deepEqual([result.L2!.value, result.L2!.origin], ['given', 'override']);
});

test('falsy defaults are real defaults, stringified as stored', async () => {
  const { deps } = fixture();
  const { configs } = await exportPipeline(
    [{ schema: { keys: { F: { default: false }, Z: { default: 0 }, E: { default: '' }, A: { default: [] }, O: { default: { a: 1 } }, N: { default: null } } } }],
    deps,
  );
  assert.deepEqual(configs, { F: false, Z: 0, E: '', A: [], O: { a: 1 }, N: 'null' });
});

test('override values: non-strings JSON-stringified; empty-string override keeps origin override', async () => {
  const { deps } = fixture();
  const { result } = await evaluatePipeline(
    [{ schema: { keys: { HOST: {}, B: {}, O: {}, N: {}, D: { default: 'd' } } }, configs: { HOST: '', B: true, O: { x: [1] }, N: null, D: '' } }],
    deps,
  );
  assert.deepEqual(
    Object.values(result).map((e) => [e.key, e.value, e.origin]),
    [
      ['HOST', '', 'override'],
      ['B', 'true', 'override'],
      ['O', '{"x":[1]}', 'override'],
      ['N', 'null', 'override'],
      ['D', '', 'override'],
    ],
  );
});

test('overrides for undeclared or const keys are errors, all collected', async () => {
  const { deps } = fixture();
  const failures = await failuresOf(
    evaluatePipeline([{ schema: { keys: { A: {}, C: { const: 'x' } } }, configs: { NOPE: '1', C: '2', 'bad key': 1 } }], deps),
  );
  assert.deepEqual(failures, [
    { command: 0, key: 'NOPE', rule: 'override', message: 'override for key "NOPE", which the command\'s schema does not declare' },
    { command: 0, key: 'bad key', rule: 'override', message: 'override for an invalid key: key "bad key" must match ^[A-Za-z0-9_-]+$' },
    { command: 0, key: 'C', rule: 'override', message: 'key "C" is computed by `const` and cannot be overridden' },
  ]);
});

test('pipe: carry-through, empty never wins, empty loses, non-default beats default, otherwise current stays; winner keeps its Cfgu', async () => {
  const { deps } = fixture();
  const commands: EvalCommandInput[] = [
    {
      schema: {
        keys: {
          ONLY_PREV: {},
          PREV_EMPTY: {},
          CUR_EMPTY: {},
          PREV_STORE_CUR_DEFAULT: {},
          PREV_DEFAULT_CUR_DEFAULT: { default: 'prev' },
          BOTH_SET: {},
          SECRET: { hidden: true },
        },
      },
      configs: { ONLY_PREV: 'p', CUR_EMPTY: 'p', PREV_STORE_CUR_DEFAULT: 'p', BOTH_SET: 'p', SECRET: 'hide-me' },
    },
    {
      schema: {
        keys: {
          PREV_EMPTY: { default: 'c' },
          CUR_EMPTY: {},
          PREV_STORE_CUR_DEFAULT: { default: 'c' },
          PREV_DEFAULT_CUR_DEFAULT: { default: 'cur' },
          BOTH_SET: {},
          SECRET: {},
          NEW: { default: 'n' },
        },
      },
      configs: { BOTH_SET: 'c' },
    },
  ];
  const { result } = await evaluatePipeline(commands, deps);
  assert.deepEqual(
    Object.values(result).map((e) => [e.key, e.value, e.origin]),
    [
      ['ONLY_PREV', 'p', 'override'],
      ['PREV_EMPTY', 'c', 'default'],
      ['CUR_EMPTY', 'p', 'override'],
      ['PREV_STORE_CUR_DEFAULT', 'p', 'override'],
      ['PREV_DEFAULT_CUR_DEFAULT', 'cur', 'default'],
      ['BOTH_SET', 'c', 'override'],
      ['SECRET', 'hide-me', 'override'],
      ['NEW', 'n', 'default'],
    ],
  );
  // SECRET's value came from the first command, where it is hidden: it stays hidden.
  const { configs } = await exportPipeline(commands, deps);
  assert.equal('SECRET' in configs, false);
  assert.equal(configs.ONLY_PREV, 'p');
});

test('pipe across two stores; a later command may not override the hidden flag of the winner', async () => {
  const { deps } = fixture();
  const { configs, backupStores } = await exportPipeline(
    [
      { store: 'other', schema: { keys: { TOKEN: { hidden: true } } } },
      { store: 'main', set: 'prod', schema: { keys: { HOST: {}, AUTH: { const: 'Bearer {{ $.configs.TOKEN.value }}' } } } },
    ],
    deps,
  );
  assert.deepEqual(configs, { HOST: 'prod.example', AUTH: 'Bearer s3cret' });
  assert.deepEqual(backupStores, []);
});

test('export: hidden keys left out, values coerced, schema.type wins', async () => {
  const { deps } = fixture();
  const { configs } = await exportPipeline(
    [
      {
        schema: {
          keys: {
            PORT: {},
            PORT_S: { schema: { type: 'string' } },
            H: { hidden: true, default: 'x' },
            BIG: {},
            INF: {},
            ZERO: {},
            ONE: {},
            NUL: {},
            Q: {},
            OBJ: {},
            ARR: {},
          },
        },
        configs: { PORT_S: '8080', BIG: '12345678901234567890', INF: '1e400', ZERO: '007', ONE: '1.0', NUL: 'null', Q: '"q"', OBJ: '{"a":{"b":1}}', ARR: '[1,"x"]' },
      },
    ],
    deps,
  );
  assert.deepEqual(configs, {
    PORT: 80,
    PORT_S: '8080',
    BIG: '12345678901234567890',
    INF: '1e400',
    ZERO: '007',
    ONE: 1,
    NUL: 'null',
    Q: '"q"',
    OBJ: { a: { b: 1 } },
    ARR: [1, 'x'],
  });
});

test('validation: required, enum (deep and stored-string), pattern, schema, test; all failures of all commands collected', async () => {
  const { deps } = fixture();
  const failures = await failuresOf(
    evaluatePipeline(
      [
        {
          schema: {
            keys: {
              REQ: { required: true },
              E1: { enum: ['a', 'b'] },
              E2: { enum: ['1', '2'] },
              E3: { enum: [{ a: 1 }] },
              P: { pattern: '^[0-9]+$' },
              S: { schema: { type: 'number' } },
              T: { test: ['$.value > 10', '$.value < 5'] },
              OPTIONAL_TYPED: { pattern: '^x$', test: 'false' },
            },
          },
          configs: { E1: 'c', E2: '1', E3: '{"a": 1}', P: '12a', S: 'abc', T: 7 },
        },
        { schema: { keys: { REQ2: { required: true }, THROWS: { test: 'null.x' } } }, configs: { THROWS: 'v' } },
      ],
      deps,
    ),
  );
  assert.deepEqual(failures, [
    { command: 0, key: 'REQ', rule: 'required', message: 'key "REQ" is required but has no value' },
    { command: 0, key: 'E1', rule: 'enum', message: 'the value of key "E1" is not one of the allowed values: "a", "b"' },
    { command: 0, key: 'P', rule: 'pattern', message: 'the value of key "P" does not match the pattern ^[0-9]+$' },
    { command: 0, key: 'S', rule: 'schema', message: 'the value of key "S" does not match its `schema`: must be number' },
    { command: 0, key: 'T', rule: 'test', message: 'the value of key "T" failed the test $.value > 10' },
    { command: 0, key: 'T', rule: 'test', message: 'the value of key "T" failed the test $.value < 5' },
    { command: 1, key: 'REQ2', rule: 'required', message: 'key "REQ2" is required but has no value' },
    { command: 1, key: 'THROWS', rule: 'test', message: "the test null.x of key \"THROWS\" failed: Cannot read properties of null (reading 'x')" },
  ]);
});

test('a required key satisfied by the pipe passes', async () => {
  const { deps } = fixture();
  const { result } = await evaluatePipeline(
    [{ schema: { keys: { A: {} } }, configs: { A: 'x' } }, { schema: { keys: { A: { required: true } } } }],
    deps,
  );
  assert.equal(result.A!.value, 'x');
});

test('tests see $.value, $.storedValue, $.origin, $.labels, $.configs and $.input', async () => {
  const { deps, expressions } = fixture();
  await evaluatePipeline(
    [{ set: 'prod', schema: { keys: { HOST: { label: 'net', test: '$.configs.HOST.value === $.value' }, N: { default: 5, test: '$.value === 5' } } } }],
    deps,
  );
  const job = expressions.jobs.at(-1)!;
  assert.deepEqual(job.input, { store: { type: 'json-file' }, set: { path: 'prod', hierarchy: ['', 'prod'] }, schema: { keys: { HOST: { label: 'net', test: '$.configs.HOST.value === $.value' }, N: { default: 5, test: '$.value === 5' } } } });
  assert.deepEqual(job.configs.HOST, { key: 'HOST', storedValue: 'prod.example', value: 'prod.example', origin: 'store', cfgu: { label: 'net', test: '$.configs.HOST.value === $.value' }, labels: ['net'] });
  assert.deepEqual(job.configs.N!.value, 5);
  assert.equal(job.configs.N!.storedValue, '5');
});

test('commands without expressions never call the sandbox', async () => {
  const { stores } = fixture();
  const { configs } = await exportPipeline([{ schema: { keys: { HOST: { enum: ['root.example'] }, X: { default: 1, required: false } } } }], { stores });
  assert.deepEqual(configs, { HOST: 'root.example', X: 1 });
  // A test on a key that ends empty is not run (absence is governed by `required` alone), so no sandbox is needed.
  assert.deepEqual((await exportPipeline([{ schema: { keys: { Y: { test: 'false' } } } }], { stores })).configs, { Y: '' });
  await assert.rejects(
    exportPipeline([{ schema: { keys: { X: { test: 'true' } } }, configs: { X: 'present' } }], { stores }),
    (e: unknown) => e instanceof SandboxUnavailableError && e.message === 'this schema uses expressions, but no expression evaluator is configured',
  );
});

test('const: dependency order, coercion seen by later consts, cycle and error failures', async () => {
  const { deps } = fixture();
  const { result } = await evaluatePipeline(
    [
      {
        schema: {
          keys: {
            DOUBLE: { const: '{{ $.configs.NUM.value * 2 }}' },
            NUM: { const: '{{ 20 + 1 }}' },
            TYPED: { const: '{{ typeof $.configs.NUM.value }}' },
          },
        },
      },
    ],
    deps,
  );
  assert.deepEqual([result.NUM!.value, result.DOUBLE!.value, result.TYPED!.value], ['21', '42', 'number']);

  const failures = await failuresOf(
    evaluatePipeline([{ schema: { keys: { A: { const: '{{ $.configs.B.value }}' }, B: { const: '{{ $.configs.A.value }}' }, BAD: { const: '{{ nope() }}', test: 'true' } } } }], deps),
  );
  assert.deepEqual(failures, [
    { command: 0, key: 'A', rule: 'const', message: '`const` expressions form a cycle: A -> B -> A' },
    { command: 0, key: 'B', rule: 'const', message: '`const` expressions form a cycle: A -> B -> A' },
    { command: 0, key: 'BAD', rule: 'const', message: '`const` of key "BAD" failed: nope is not defined' },
  ]);
});

test('input errors: every problem of every command at once, with paths', async () => {
  const { deps } = fixture();
  await assert.rejects(
    evaluatePipeline([{ schema: { keys: { A: { options: ['x'] } } } }, { set: 'a//b', schema: { keys: { B: {} } } }] as unknown as EvalCommandInput[], deps),
    (e: unknown) => {
      assert.ok(e instanceof InputError);
      assert.equal(e.code, ErrorCodes.INVALID_SCHEMA);
      assert.deepEqual(e.issues, [
        { path: '/0/schema/keys/A/options', message: '`options` of key "A" was renamed `enum` in Cfgu v1' },
        { path: '/1/set', message: 'set path "a//b" has an empty segment' },
      ]);
      return true;
    },
  );
  await assert.rejects(evaluatePipeline([], deps), (e: unknown) => e instanceof InputError && e.code === ErrorCodes.INVALID_INPUT);
  await assert.rejects(
    evaluatePipeline([{ set: 'x y', schema: { keys: { A: {} } } }], deps),
    (e: unknown) => e instanceof InputError && e.code === ErrorCodes.INVALID_SET && e.message === 'set path "x y" has an invalid segment: key "x y" must match ^[A-Za-z0-9_-]+$',
  );
});

test('unknown store names the known stores; no default store', async () => {
  const { deps } = fixture();
  await assert.rejects(
    evaluatePipeline([{ store: 'nope', schema: { keys: { A: {} } } }], deps),
    (e: unknown) => e instanceof UnknownStoreError && e.message === 'unknown store "nope"; known stores: "main", "other"',
  );
  const noDefault = new MemoryResolver([new MemoryStore('a'), new MemoryStore('b')]);
  await assert.rejects(
    evaluatePipeline([{ schema: { keys: { A: {} } } }], { stores: noDefault }),
    (e: unknown) => e instanceof UnknownStoreError && e.message === 'no store was given and there is no default store; known stores: "a", "b"',
  );
});

test('a store that cannot be reached fails the evaluation with StoreUnavailableError', async () => {
  const { deps, other } = fixture();
  other.down = true;
  await assert.rejects(
    evaluatePipeline([{ schema: { keys: { A: {} } } }, { store: 'other', schema: { keys: { TOKEN: {} } } }], deps),
    (e: unknown) => e instanceof StoreUnavailableError && e.store === 'other',
  );
});

test('--defaults mode: no store is resolved or read', async () => {
  const { main, expressions } = fixture();
  const { configs } = await exportPipeline([{ store: 'does-not-matter', schema: { keys: { HOST: { default: 'd' }, X: {} } } }], { expressions, defaultsOnly: true });
  assert.deepEqual(configs, { HOST: 'd', X: '' });
  assert.equal(main.reads, 0);
});

test('a pipe can be given from outside (CLI stdin)', async () => {
  const { deps } = fixture();
  const first = await evaluatePipeline([{ schema: { keys: { A: {} } }, configs: { A: '1' } }], deps);
  const { result } = await evaluatePipeline([{ schema: { keys: { B: { default: 2 } } } }], deps, { pipe: first.result });
  assert.deepEqual(Object.keys(result), ['A', 'B']);
});

test('one schema object asked for with one set, then another, then the first again: each answer is its own set\'s', async () => {
  const { deps, main } = fixture();
  // A deep-frozen schema is prepared once and kept by identity, as the server's body cache hands it out.
  // Its own key list, so that no other test of this file has prepared it; the root set is asked for first.
  const schema = freezeDeep({ keys: { HOST: {}, PORT: {}, DEBUG: {}, SET_SWITCH: {} } });
  const at = async (set: string) => (await exportPipeline([{ store: 'main', set, schema }], deps)).configs;
  const root = { HOST: 'root.example', PORT: 80, DEBUG: '', SET_SWITCH: '' };
  const eu = { HOST: 'eu.example', PORT: 80, DEBUG: false, SET_SWITCH: '' };
  for (let round = 0; round < 2; round++) {
    assert.deepEqual(await at(''), root);
    assert.deepEqual(await at('prod/eu'), eu);
    assert.deepEqual(await at('prod/eu'), eu);
  }
  // A write between two requests is seen by the next one.
  main.data.set('prod/eu\u0000PORT', '8443');
  assert.deepEqual(await at('prod/eu'), { ...eu, PORT: 8443 });
});
