/**
 * explainPipeline (src/core/explain.ts, docs/explain.md): the explanation of every key of every command, with exact
 * values: each origin, candidates down a three-set hierarchy, overrides and defaults, a const reading a piped key, all
 * tests of a key when one fails, hidden keys with and without `revealHidden`, sets the caller may not read, a pipeline
 * stopped by an output limit, and that the values are the export's.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { explainPipeline, exportPipeline, UnknownStoreError, type EvalCommandInput, type ExplainOptions, type KeyExplanation, type EvalResult } from '../../src/core/index.js';
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

/**
 * Explain `commands` over a fresh fixture: the outcome, the fixture's store, and `key(name, command = 0)`, the
 * explanation of one key by one command (which must exist).
 */
async function explained(commands: readonly EvalCommandInput[], options?: ExplainOptions) {
  const { deps, main } = fixture();
  const out = await explainPipeline(commands, deps, options);
  const key = (name: string, command = 0): KeyExplanation => {
    const c = out.explanations[command];
    assert.ok(c, `no explanation of command ${command}`);
    return keyOf(c, name);
  };
  return { out, main, key };
}

test('every origin: store (three sets deep, the nearest wins), override, default, const, empty, lazy', async () => {
  const { out, key } = await explained([
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
  ]);
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
  assert.deepEqual(key('HOST'), {
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
  assert.deepEqual(key('PORT'), {
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
  assert.deepEqual(key('DEBUG'), {
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
  assert.deepEqual(key('MISSING'), {
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
  assert.deepEqual(key('NAME'), {
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
  assert.deepEqual(key('LAZY'), {
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
  assert.deepEqual(key('URL'), {
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
  const { out, key } = await explained([
    { set: 'prod', schema: { keys: { REGION: { default: 'eu' }, HOST: {} } } },
    { set: 'prod/eu', schema: { keys: { URL: { const: 'https://{{ $.configs.HOST.value }}/{{ $.configs.REGION.value }}' } } } },
    { set: '', schema: { keys: { OTHER: { default: 'x' } } } },
  ]);
  assert.equal(out.ok, true);
  const second = out.explanations[1]!;
  assert.deepEqual(
    second.keys.map((k) => k.key),
    ['REGION', 'HOST', 'URL'],
  );
  assert.deepEqual(key('REGION', 1), {
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
  assert.deepEqual(key('HOST', 1).piped, { command: 0 });
  assert.equal(key('HOST', 1).set, 'prod');
  assert.deepEqual(key('URL', 1), {
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
  const { out, key } = await explained([
    { set: 'prod', schema: { keys: { HOST: {} } } },
    { set: 'prod', schema: { keys: { HOST: { const: 'computed.example' } } } },
    { set: 'prod', schema: { keys: { X: {} } } },
  ]);
  assert.equal(out.ok, true);
  // Command 0's record keeps the value it gave, although the engine later computed a const into the same entry.
  assert.deepEqual([key('HOST').value, key('HOST').origin], ['prod.example', 'store']);
  const second = key('HOST', 1);
  assert.deepEqual([second.value, second.origin, second.piped, second.const?.computed], ['computed.example', 'const', undefined, true]);
  assert.deepEqual(key('HOST', 2).piped, { command: 1 });
});

test('a key piped from the pipeline\'s input (the CLI\'s standard input) says command null', async () => {
  const pipe: EvalResult = { FROM_STDIN: { key: 'FROM_STDIN', value: 'yes', origin: 'override', cfgu: {}, set: 'dev' } };
  const { key } = await explained([{ set: 'prod', schema: { keys: { A: { default: 1 } } } }], { pipe });
  const k = key('FROM_STDIN');
  assert.deepEqual([k.piped, k.origin, k.set, k.declared], [{ command: null }, 'override', 'dev', false]);
});

test('a failing test among passing ones: every test with its outcome, and the explanation still given', async () => {
  const { out, key } = await explained([
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
  ]);
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
  const port = key('PORT');
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
  assert.deepEqual(key('HOST').tests, [{ index: 0, expression: '$.value.endsWith(".example")', passed: true }]);
  // A test of a key without a value is not run (docs/engine.md, "Value constraints on present values only").
  assert.deepEqual(key('EMPTY').tests, [{ index: 0, expression: '$.value === "never"', passed: null, skipped: 'the key has no value' }]);
});

test('tests after a key\'s pattern and schema checks are matched to the right outcome', async () => {
  const { key } = await explained([
    { set: 'prod', schema: { keys: { HOST: { pattern: '^[0-9]+$', schema: { type: 'string' }, test: ['$.value.length > 100', '$.value.length > 3'] } } } },
  ]);
  const host = key('HOST');
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
  const { out, key } = await explained([
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
  ]);
  assert.equal(out.ok, false);
  const c = out.explanations[0]!;
  assert.deepEqual(key('NEED').failures, [{ rule: 'required', message: 'key "NEED" is required but has no value' }]);
  assert.deepEqual(key('MODE').failures, [{ rule: 'enum', message: 'the value of key "MODE" is not one of the allowed values: "a", "b"' }]);
  const bad = key('BAD');
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
  const { out, key } = await explained(HIDDEN_PIPELINE);
  assert.equal(out.ok, false);
  assert.deepEqual(key('PASS'), {
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
  assert.deepEqual(key('DSN'), {
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
  const { key } = await explained(HIDDEN_PIPELINE, { revealHidden: true });
  const pass = key('PASS');
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
  assert.deepEqual(key('DSN').const!.reads, [{ key: 'PASS', origin: 'store', value: 's3cr3t-pass' }]);
});

test('a hidden override is withheld too', async () => {
  const { out, key } = await explained([{ set: 'prod', schema: { keys: { PASS: { hidden: true } } }, configs: { PASS: 'given-secret' } }]);
  const pass = key('PASS');
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
  const asked: Array<[string, number]> = [];
  const { key } = await explained([{ set: 'prod/eu', schema: { keys: { HOST: {} } } }], {
    mayReadSet: (set, command) => {
      asked.push([set, command]);
      return set === 'prod/eu';
    },
  });
  assert.deepEqual(key('HOST').candidates, [
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
  const { out, key } = await explained(
    [
      { set: 'prod', schema: { keys: { BIG: { const: '{{ "x".repeat(100) }}' } } } },
      { store: 'main', set: 'prod', schema: { keys: { HOST: {} } } },
    ],
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
  assert.deepEqual(key('BIG').failures, [{ rule: 'const', message: 'the value of `const` of key "BIG" is 100 bytes; the limit is 10' }]);
  assert.equal(key('BIG').const!.computed, false);
});

test('errors other than validation are thrown as the export throws them', async () => {
  await assert.rejects(explained([{ store: 'nope', schema: { keys: { A: {} } } }]), UnknownStoreError);
});

test('explaining leaves the export path alone: the engine reads the store once per command, as for an export', async () => {
  const { main } = await explained([{ set: 'prod/eu', schema: { keys: { HOST: {}, PORT: {} } } }]);
  assert.equal(main.reads, 1);
});

test('a key this command declares hidden but whose piped winner is not: the value shown (the export gives it), the declaration\'s default withheld', async () => {
  const { out, key } = await explained([
    { set: 'prod', schema: { keys: { DEBUG: {} } } },
    { set: '', schema: { keys: { DEBUG: { hidden: true, default: 'internal-default' } } } },
  ]);
  assert.deepEqual(out.values, { DEBUG: false });
  const debug = key('DEBUG', 1);
  assert.deepEqual(
    { hidden: debug.hidden, value: debug.value, piped: debug.piped, default: debug.default },
    { hidden: false, value: 'false', piped: { command: 0 }, default: { withheld: 'hidden' } },
  );
  assert.equal(JSON.stringify(out).includes('internal-default'), false);
});
