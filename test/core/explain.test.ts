/**
 * explainPipeline (src/core/explain.ts, docs/explain.md): the explanation of every key of every command, with exact
 * values: each origin, candidates down a three-set hierarchy, overrides and defaults, a const reading a piped key, all
 * tests of a key when one fails, hidden keys with and without `revealHidden`, sets the caller may not read, a pipeline
 * stopped by an output limit, and that the values are the export's.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { explainPipeline, exportPipeline, UnknownStoreError, type EvalCommandInput, type KeyExplanation, type EvalResult } from '../../src/core/index.js';
import { MemoryStore, MemoryResolver, HostEvaluator } from '../helpers/engine.js';

function fixture() {
  const main = new MemoryStore('main', 'json-file', [
    { set: '', key: 'HOST', value: 'root.example' },
    { set: 'prod', key: 'HOST', value: 'prod.example' },
    { set: 'prod/eu', key: 'HOST', value: 'eu.example' },
    { set: '', key: 'PORT', value: '80' },
    { set: 'prod', key: 'DEBUG', value: 'false' },
    { set: 'prod', key: 'LAZY', value: 'from-store' },
    { set: '', key: 'PASS', value: 'root-pass-0' },
    { set: 'prod', key: 'PASS', value: 's3cr3t-pass' },
  ]);
  const stores = new MemoryResolver([main], 'main');
  const expressions = new HostEvaluator();
  return { main, stores, expressions, deps: { stores, expressions } };
}

const keyOf = (explained: { keys: KeyExplanation[] }, key: string): KeyExplanation => {
  const k = explained.keys.find((e) => e.key === key);
  assert.ok(k, `no explanation of ${key}`);
  return k;
};

test('every origin: store (three sets deep, the nearest wins), override, default, const, empty, lazy', async () => {
  const { deps } = fixture();
  const out = await explainPipeline(
    [
      {
        set: 'prod/eu',
        schema: {
          keys: {
            HOST: {},
            PORT: { default: 8080 },
            DEBUG: { default: true },
            MISSING: {},
            NAME: { default: 'svc' },
            LAZY: { lazy: true },
            URL: { const: 'http://{{ $.configs.HOST.value }}:{{ $.configs.PORT.value }}' },
          },
        },
        configs: { PORT: 9090 },
      },
    ],
    deps,
  );
  assert.equal(out.version, 1);
  assert.equal(out.ok, true);
  assert.deepEqual(out.failures, []);
  assert.deepEqual(out.values, { HOST: 'eu.example', PORT: 9090, DEBUG: false, MISSING: '', NAME: 'svc', LAZY: '', URL: 'http://eu.example:9090' });
  assert.equal(out.explanations.length, 1);
  const [c] = out.explanations;
  assert.deepEqual(
    { command: c!.command, store: c!.store, set: c!.set, hierarchy: c!.hierarchy, evaluated: c!.evaluated },
    { command: 0, store: 'main', set: 'prod/eu', hierarchy: ['', 'prod', 'prod/eu'], evaluated: true },
  );
  assert.deepEqual(
    c!.keys.map((k) => k.key),
    ['HOST', 'PORT', 'DEBUG', 'MISSING', 'NAME', 'LAZY', 'URL'],
  );
  assert.deepEqual(keyOf(c!, 'HOST'), {
    key: 'HOST',
    declared: true,
    hidden: false,
    value: 'eu.example',
    exported: 'eu.example',
    origin: 'store',
    set: 'prod/eu',
    candidates: [
      { set: '', status: 'shadowed', value: 'root.example' },
      { set: 'prod', status: 'shadowed', value: 'prod.example' },
      { set: 'prod/eu', status: 'won', value: 'eu.example' },
    ],
    tests: [],
    failures: [],
  });
  assert.deepEqual(keyOf(c!, 'PORT'), {
    key: 'PORT',
    declared: true,
    hidden: false,
    value: '9090',
    exported: 9090,
    origin: 'override',
    set: 'prod/eu',
    candidates: [{ set: '', status: 'overridden', value: '80' }],
    override: { value: '9090' },
    default: { value: '8080' },
    tests: [],
    failures: [],
  });
  // A default declared but not used: the store's value won.
  assert.deepEqual(keyOf(c!, 'DEBUG'), {
    key: 'DEBUG',
    declared: true,
    hidden: false,
    value: 'false',
    exported: false,
    origin: 'store',
    set: 'prod',
    candidates: [{ set: 'prod', status: 'won', value: 'false' }],
    default: { value: 'true' },
    tests: [],
    failures: [],
  });
  assert.deepEqual(keyOf(c!, 'MISSING'), {
    key: 'MISSING',
    declared: true,
    hidden: false,
    value: '',
    exported: '',
    origin: 'empty',
    set: 'prod/eu',
    candidates: [],
    tests: [],
    failures: [],
  });
  assert.deepEqual(keyOf(c!, 'NAME'), {
    key: 'NAME',
    declared: true,
    hidden: false,
    value: 'svc',
    exported: 'svc',
    origin: 'default',
    set: 'prod/eu',
    candidates: [],
    default: { value: 'svc' },
    tests: [],
    failures: [],
  });
  // The store holds a value for LAZY, but a lazy key is never read from it.
  assert.deepEqual(keyOf(c!, 'LAZY'), {
    key: 'LAZY',
    declared: true,
    hidden: false,
    value: '',
    exported: '',
    origin: 'empty',
    set: 'prod/eu',
    lazy: true,
    candidates: [],
    tests: [],
    failures: [],
  });
  assert.deepEqual(keyOf(c!, 'URL'), {
    key: 'URL',
    declared: true,
    hidden: false,
    value: 'http://eu.example:9090',
    exported: 'http://eu.example:9090',
    origin: 'const',
    set: 'prod/eu',
    candidates: [],
    const: {
      template: 'http://{{ $.configs.HOST.value }}:{{ $.configs.PORT.value }}',
      computed: true,
      reads: [
        { key: 'HOST', origin: 'store', value: 'eu.example' },
        { key: 'PORT', origin: 'override', value: '9090' },
      ],
    },
    tests: [],
    failures: [],
  });
});

test('the values are exactly what exportPipeline answers for the same pipeline', async () => {
  const { deps } = fixture();
  const commands: EvalCommandInput[] = [
    { set: 'prod', schema: { keys: { HOST: {}, PASS: { hidden: true }, N: { default: 3, schema: { type: 'number' } } } } },
    { set: 'prod/eu', schema: { keys: { HOST: {}, URL: { const: '{{ $.configs.HOST.value }}/{{ $.configs.N.value }}' } } } },
  ];
  const exported = await exportPipeline(commands, deps);
  const explained = await explainPipeline(commands, deps, { revealHidden: true });
  assert.deepEqual(explained.values, exported.configs);
  assert.deepEqual(Object.keys(explained.values!), Object.keys(exported.configs));
  assert.deepEqual(explained.backupStores, exported.backupStores);
});

test('piped keys: the command that supplied them, and a const of a later command reading one', async () => {
  const { deps } = fixture();
  const out = await explainPipeline(
    [
      { set: 'prod', schema: { keys: { REGION: { default: 'eu' }, HOST: {} } } },
      { set: 'prod/eu', schema: { keys: { URL: { const: 'https://{{ $.configs.HOST.value }}/{{ $.configs.REGION.value }}' } } } },
      { set: '', schema: { keys: { OTHER: { default: 'x' } } } },
    ],
    deps,
  );
  assert.equal(out.ok, true);
  const second = out.explanations[1]!;
  assert.deepEqual(
    second.keys.map((k) => k.key),
    ['REGION', 'HOST', 'URL'],
  );
  assert.deepEqual(keyOf(second, 'REGION'), {
    key: 'REGION',
    declared: false,
    hidden: false,
    value: 'eu',
    exported: 'eu',
    origin: 'default',
    set: 'prod',
    piped: { command: 0 },
    candidates: [],
    tests: [],
    failures: [],
  });
  assert.deepEqual(keyOf(second, 'HOST').piped, { command: 0 });
  assert.equal(keyOf(second, 'HOST').set, 'prod');
  assert.deepEqual(keyOf(second, 'URL'), {
    key: 'URL',
    declared: true,
    hidden: false,
    value: 'https://prod.example/eu',
    exported: 'https://prod.example/eu',
    origin: 'const',
    set: 'prod/eu',
    candidates: [],
    const: {
      template: 'https://{{ $.configs.HOST.value }}/{{ $.configs.REGION.value }}',
      computed: true,
      reads: [
        { key: 'HOST', origin: 'store', value: 'prod.example' },
        { key: 'REGION', origin: 'default', value: 'eu' },
      ],
    },
    tests: [],
    failures: [],
  });
  // Two commands on, the const's value is said to come from the command that computed it.
  const third = out.explanations[2]!;
  assert.deepEqual(
    third.keys.map((k) => [k.key, k.piped?.command ?? 'own']),
    [
      ['REGION', 0],
      ['HOST', 0],
      ['URL', 1],
      ['OTHER', 'own'],
    ],
  );
});

test('a const that replaces a piped value is this command\'s value, and later commands say so', async () => {
  const { deps } = fixture();
  const out = await explainPipeline(
    [
      { set: 'prod', schema: { keys: { HOST: {} } } },
      { set: 'prod', schema: { keys: { HOST: { const: 'computed.example' } } } },
      { set: 'prod', schema: { keys: { X: {} } } },
    ],
    deps,
  );
  assert.equal(out.ok, true);
  // Command 0's record keeps the value it gave, although the engine later computed a const into the same entry.
  assert.deepEqual([keyOf(out.explanations[0]!, 'HOST').value, keyOf(out.explanations[0]!, 'HOST').origin], ['prod.example', 'store']);
  const second = keyOf(out.explanations[1]!, 'HOST');
  assert.deepEqual([second.value, second.origin, second.piped, second.const?.computed], ['computed.example', 'const', undefined, true]);
  assert.deepEqual(keyOf(out.explanations[2]!, 'HOST').piped, { command: 1 });
});

test('a key piped from the pipeline\'s input (the CLI\'s standard input) says command null', async () => {
  const { deps } = fixture();
  const pipe: EvalResult = { FROM_STDIN: { key: 'FROM_STDIN', value: 'yes', origin: 'override', cfgu: {}, set: 'dev' } };
  const out = await explainPipeline([{ set: 'prod', schema: { keys: { A: { default: 1 } } } }], deps, { pipe });
  const k = keyOf(out.explanations[0]!, 'FROM_STDIN');
  assert.deepEqual([k.piped, k.origin, k.set, k.declared], [{ command: null }, 'override', 'dev', false]);
});

test('a failing test among passing ones: every test with its outcome, and the explanation still given', async () => {
  const { deps } = fixture();
  const out = await explainPipeline(
    [
      {
        set: 'prod',
        schema: {
          keys: {
            PORT: { test: ['$.value > 0', '$.value > 1000', '$.value < 65536', '$.configs.NOPE.value.length > 0'] },
            HOST: { required: true, test: '$.value.endsWith(".example")' },
            EMPTY: { test: '$.value === "never"' },
          },
        },
      },
    ],
    deps,
  );
  assert.equal(out.ok, false);
  assert.equal(out.values, null);
  assert.deepEqual(out.failures, [
    { command: 0, key: 'PORT', rule: 'test', message: 'the value of key "PORT" failed the test $.value > 1000' },
    {
      command: 0,
      key: 'PORT',
      rule: 'test',
      message: "the test $.configs.NOPE.value.length > 0 of key \"PORT\" failed: Cannot read properties of undefined (reading 'value')",
    },
  ]);
  const port = keyOf(out.explanations[0]!, 'PORT');
  assert.deepEqual(port.tests, [
    { index: 0, expression: '$.value > 0', passed: true },
    { index: 1, expression: '$.value > 1000', passed: false, message: 'the value of key "PORT" failed the test $.value > 1000' },
    { index: 2, expression: '$.value < 65536', passed: true },
    {
      index: 3,
      expression: '$.configs.NOPE.value.length > 0',
      passed: false,
      message: "the test $.configs.NOPE.value.length > 0 of key \"PORT\" failed: Cannot read properties of undefined (reading 'value')",
    },
  ]);
  assert.deepEqual(port.failures, [
    { rule: 'test', message: 'the value of key "PORT" failed the test $.value > 1000' },
    { rule: 'test', message: "the test $.configs.NOPE.value.length > 0 of key \"PORT\" failed: Cannot read properties of undefined (reading 'value')" },
  ]);
  assert.deepEqual(keyOf(out.explanations[0]!, 'HOST').tests, [{ index: 0, expression: '$.value.endsWith(".example")', passed: true }]);
  // A test of a key without a value is not run (docs/engine.md, "Value constraints on present values only").
  assert.deepEqual(keyOf(out.explanations[0]!, 'EMPTY').tests, [{ index: 0, expression: '$.value === "never"', passed: null, skipped: 'the key has no value' }]);
});

test('tests after a key\'s pattern and schema checks are matched to the right outcome', async () => {
  const { deps } = fixture();
  const out = await explainPipeline(
    [{ set: 'prod', schema: { keys: { HOST: { pattern: '^[0-9]+$', schema: { type: 'string' }, test: ['$.value.length > 100', '$.value.length > 3'] } } } }],
    deps,
  );
  const host = keyOf(out.explanations[0]!, 'HOST');
  assert.deepEqual(host.tests, [
    { index: 0, expression: '$.value.length > 100', passed: false, message: 'the value of key "HOST" failed the test $.value.length > 100' },
    { index: 1, expression: '$.value.length > 3', passed: true },
  ]);
  assert.deepEqual(
    host.failures.map((f) => f.rule),
    ['pattern', 'test'],
  );
});

test('required, enum and override failures are the key\'s failures; a failed const is not computed and its tests are not run', async () => {
  const { deps } = fixture();
  const out = await explainPipeline(
    [
      {
        set: 'prod',
        schema: {
          keys: {
            NEED: { required: true },
            MODE: { enum: ['a', 'b'] },
            BAD: { const: '{{ $.configs.NOPE.value.x }}', test: '$.value === "x"' },
          },
        },
        configs: { MODE: 'c', UNDECLARED: 'x' },
      },
    ],
    deps,
  );
  assert.equal(out.ok, false);
  const c = out.explanations[0]!;
  assert.deepEqual(keyOf(c, 'NEED').failures, [{ rule: 'required', message: 'key "NEED" is required but has no value' }]);
  assert.deepEqual(keyOf(c, 'MODE').failures, [{ rule: 'enum', message: 'the value of key "MODE" is not one of the allowed values: "a", "b"' }]);
  const bad = keyOf(c, 'BAD');
  assert.deepEqual([bad.origin, bad.const?.computed, bad.const?.reads], ['empty', false, []]);
  assert.deepEqual(bad.tests, [{ index: 0, expression: '$.value === "x"', passed: null, skipped: 'its `const` failed' }]);
  assert.deepEqual(
    bad.failures.map((f) => f.rule),
    ['const'],
  );
  // The override of an undeclared key has no key in the result: it is among the pipeline's failures only.
  assert.ok(out.failures.some((f) => f.key === 'UNDECLARED' && f.rule === 'override'));
  assert.equal(
    c.keys.some((k) => k.key === 'UNDECLARED'),
    false,
  );
});

const HIDDEN_PIPELINE: EvalCommandInput[] = [
  {
    set: 'prod',
    schema: {
      keys: {
        PASS: { hidden: true, default: 'fallback-pw', test: '(() => { throw new Error("bad " + $.storedValue) })()' },
        DSN: { const: 'db://app:{{ $.configs.PASS.value }}@host' },
        HOST: {},
      },
    },
    configs: {},
  },
];

test('a hidden key without revealHidden: its value, candidates, default and the const reads of it are withheld', async () => {
  const { deps } = fixture();
  const out = await explainPipeline(HIDDEN_PIPELINE, deps);
  assert.equal(out.ok, false);
  const c = out.explanations[0]!;
  assert.deepEqual(keyOf(c, 'PASS'), {
    key: 'PASS',
    declared: true,
    hidden: true,
    withheld: 'hidden',
    origin: 'store',
    set: 'prod',
    candidates: [
      { set: '', status: 'shadowed', withheld: 'hidden' },
      { set: 'prod', status: 'won', withheld: 'hidden' },
    ],
    default: { withheld: 'hidden' },
    tests: [
      { index: 0, expression: '(() => { throw new Error("bad " + $.storedValue) })()', passed: false, message: 'the test (() => { throw new Error("bad " + $.storedValue) })() of key "PASS" failed: bad [hidden]' },
    ],
    failures: [{ rule: 'test', message: 'the test (() => { throw new Error("bad " + $.storedValue) })() of key "PASS" failed: bad [hidden]' }],
  });
  // The const's own value is exported (docs/security.md), so it is shown; its read of the hidden key is not.
  assert.deepEqual(keyOf(c, 'DSN'), {
    key: 'DSN',
    declared: true,
    hidden: false,
    value: 'db://app:s3cr3t-pass@host',
    exported: 'db://app:s3cr3t-pass@host',
    origin: 'const',
    set: 'prod',
    derivedFromHidden: true,
    candidates: [],
    const: { template: 'db://app:{{ $.configs.PASS.value }}@host', computed: true, reads: [{ key: 'PASS', origin: 'store', withheld: 'hidden' }] },
    tests: [],
    failures: [],
  });
  // Nowhere in the explanation but in the const's value (which the export gives too) is the hidden value or its default.
  const text = JSON.stringify(out).replaceAll('db://app:s3cr3t-pass@host', '');
  assert.equal(text.includes('s3cr3t'), false);
  assert.equal(text.includes('root-pass-0'), false);
  assert.equal(text.includes('fallback-pw'), false);
});

test('a hidden key with revealHidden: every value shown; messages stay redacted as the engine wrote them', async () => {
  const { deps } = fixture();
  const out = await explainPipeline(HIDDEN_PIPELINE, deps, { revealHidden: true });
  const c = out.explanations[0]!;
  const pass = keyOf(c, 'PASS');
  assert.deepEqual(
    { value: pass.value, withheld: pass.withheld, exported: pass.exported, candidates: pass.candidates, default: pass.default },
    {
      value: 's3cr3t-pass',
      withheld: undefined,
      exported: undefined,
      candidates: [
        { set: '', status: 'shadowed', value: 'root-pass-0' },
        { set: 'prod', status: 'won', value: 's3cr3t-pass' },
      ],
      default: { value: 'fallback-pw' },
    },
  );
  assert.equal(pass.tests[0]!.message, 'the test (() => { throw new Error("bad " + $.storedValue) })() of key "PASS" failed: bad [hidden]');
  assert.deepEqual(keyOf(c, 'DSN').const!.reads, [{ key: 'PASS', origin: 'store', value: 's3cr3t-pass' }]);
});

test('a hidden override is withheld too', async () => {
  const { deps } = fixture();
  const out = await explainPipeline([{ set: 'prod', schema: { keys: { PASS: { hidden: true } } }, configs: { PASS: 'given-secret' } }], deps);
  const pass = keyOf(out.explanations[0]!, 'PASS');
  assert.deepEqual(
    [pass.withheld, pass.override, pass.candidates],
    [
      'hidden',
      { withheld: 'hidden' },
      [
        { set: '', status: 'shadowed', withheld: 'hidden' },
        { set: 'prod', status: 'overridden', withheld: 'hidden' },
      ],
    ],
  );
  assert.equal(JSON.stringify(out).includes('given-secret'), false);
});

test('mayReadSet: a shadowed value at a set the caller may not read is withheld; the winner is the export\'s value', async () => {
  const { deps } = fixture();
  const asked: Array<[string, number]> = [];
  const out = await explainPipeline([{ set: 'prod/eu', schema: { keys: { HOST: {} } } }], deps, {
    mayReadSet: (set, command) => {
      asked.push([set, command]);
      return set === 'prod/eu';
    },
  });
  assert.deepEqual(keyOf(out.explanations[0]!, 'HOST').candidates, [
    { set: '', status: 'shadowed', withheld: 'scope' },
    { set: 'prod', status: 'shadowed', withheld: 'scope' },
    { set: 'prod/eu', status: 'won', value: 'eu.example' },
  ]);
  assert.deepEqual(asked, [
    ['', 0],
    ['prod', 0],
  ]);
});

test('a pipeline stopped by an output limit: the commands after it are not evaluated', async () => {
  const { deps } = fixture();
  const out = await explainPipeline(
    [
      { set: 'prod', schema: { keys: { BIG: { const: '{{ "x".repeat(100) }}' } } } },
      { store: 'main', set: 'prod', schema: { keys: { HOST: {} } } },
    ],
    deps,
    { limits: { valueBytes: 10 } },
  );
  assert.equal(out.ok, false);
  assert.deepEqual(
    out.explanations.map((c) => [c.command, c.evaluated, c.keys.length]),
    [
      [0, true, 1],
      [1, false, 0],
    ],
  );
  assert.deepEqual(out.explanations[1], { command: 1, store: 'main', set: 'prod', hierarchy: [], evaluated: false, keys: [] });
  assert.deepEqual(keyOf(out.explanations[0]!, 'BIG').failures, [{ rule: 'const', message: 'the value of `const` of key "BIG" is 100 bytes; the limit is 10' }]);
  assert.equal(keyOf(out.explanations[0]!, 'BIG').const!.computed, false);
});

test('errors other than validation are thrown as the export throws them', async () => {
  const { deps } = fixture();
  await assert.rejects(explainPipeline([{ store: 'nope', schema: { keys: { A: {} } } }], deps), UnknownStoreError);
});

test('explaining leaves the export path alone: the engine reads the store once per command, as for an export', async () => {
  const { deps, main } = fixture();
  await explainPipeline([{ set: 'prod/eu', schema: { keys: { HOST: {}, PORT: {} } } }], deps);
  assert.equal(main.reads, 1);
});

test('a key this command declares hidden but whose piped winner is not: the value shown (the export gives it), the declaration\'s default withheld', async () => {
  const { deps } = fixture();
  const out = await explainPipeline(
    [
      { set: 'prod', schema: { keys: { DEBUG: {} } } },
      { set: '', schema: { keys: { DEBUG: { hidden: true, default: 'internal-default' } } } },
    ],
    deps,
  );
  assert.deepEqual(out.values, { DEBUG: false });
  const debug = keyOf(out.explanations[1]!, 'DEBUG');
  assert.deepEqual(
    { hidden: debug.hidden, value: debug.value, piped: debug.piped, default: debug.default },
    { hidden: false, value: 'false', piped: { command: 0 }, default: { withheld: 'hidden' } },
  );
  assert.equal(JSON.stringify(out).includes('internal-default'), false);
});
