/** The engine running on the real sandbox (not the host-realm test evaluator). */
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { exportPipeline, ValidationError, type EvalFailure, type EvalCommandInput } from '../../src/core/index.js';
import { createSandboxEvaluator } from '../../src/expressions/index.js';
import { MemoryStore, MemoryResolver } from '../helpers/engine.js';
import { MAX_SCHEMA_DEPTH } from '../../src/core/schema-check.js';

const expressions = createSandboxEvaluator({ workers: 2, spares: 0, timeoutMs: 200 });
after(() => expressions.close());
const stores = new MemoryResolver(
  [new MemoryStore('main', 'json-file', [{ set: 'prod', key: 'HOST', value: 'db.example.com' }, { set: '', key: 'PORT', value: '5432' }])],
  'main',
);
const deps = { stores, expressions };

async function failuresOf(commands: EvalCommandInput[]): Promise<EvalFailure[]> {
  try {
    await exportPipeline(commands, deps);
  } catch (e) {
    assert.ok(e instanceof ValidationError, String(e));
    return e.failures;
  }
  assert.fail('evaluation succeeded');
}

test('consts, tests and library globals evaluate in the sandbox', async () => {
  const { configs } = await exportPipeline(
    [
      {
        set: 'prod',
        schema: {
          keys: {
            HOST: { test: ['validator.isFQDN($.value)', '_.isString($.value)', 'z.string().min(3).parse($.value) && true'] },
            PORT: { test: 'expect($.value).to.be.a("number") || true', schema: { type: 'integer', maximum: 65535 } },
            URL: { const: 'postgres://{{ $.configs.HOST.value }}:<% $.configs.PORT.value + 1 %>/{{ $.input.set.path }}' },
            KIND: { const: '{{ $.input.store.type }}' },
          },
        },
      },
    ],
    deps,
  );
  assert.deepEqual(configs, { HOST: 'db.example.com', PORT: 5432, URL: 'postgres://db.example.com:5433/prod', KIND: 'json-file' });
});

test('schema validation in the sandbox: the same schema twice (cached compile), right answers both times', async () => {
  const schema = { keys: { N: { schema: { type: 'integer', minimum: 10 } } } };
  assert.deepEqual((await exportPipeline([{ schema, configs: { N: 12 } }], deps)).configs, { N: 12 });
  assert.deepEqual(await failuresOf([{ schema, configs: { N: 3 } }]), [
    { command: 0, key: 'N', rule: 'schema', message: 'the value of key "N" does not match its `schema`: data must be >= 10' },
  ]);
  assert.deepEqual((await exportPipeline([{ schema, configs: { N: 10 } }], deps)).configs, { N: 10 });
});

test('a catastrophic-backtracking pattern is stopped by the time limit, not the event loop', async () => {
  let ticks = 0;
  const timer = setInterval(() => ticks++, 5);
  const failures = await failuresOf([{ schema: { keys: { P: { pattern: '^(a+)+$' } } }, configs: { P: `${'a'.repeat(40)}!` } }]);
  clearInterval(timer);
  assert.deepEqual(failures, [
    { command: 0, key: 'P', rule: 'pattern', message: 'the `pattern` check of key "P" failed: exceeded the time limit of 200 ms' },
  ]);
  assert.ok(ticks >= 10, `the event loop kept running (${ticks} ticks)`);
  // The sandbox still answers afterwards.
  assert.deepEqual((await exportPipeline([{ schema: { keys: { P: { pattern: '^a+$' } } }, configs: { P: 'aaa' } }], deps)).configs, { P: 'aaa' });
});

test('an expression reaching for the host gets a failure, not the host', async () => {
  const failures = await failuresOf([
    { schema: { keys: { X: { const: "{{ ({}).constructor.constructor('return process')().pid }}" }, Y: { default: 1, test: 'typeof require === "function"' } } } },
  ]);
  assert.equal(failures.length, 2);
  assert.equal(failures[0]!.rule, 'const');
  assert.match(failures[0]!.message, /^`const` of key "X" failed: .*process is not defined/);
  assert.deepEqual(failures[1], { command: 0, key: 'Y', rule: 'test', message: 'the value of key "Y" failed the test typeof require === "function"' });
});

test('an endless loop in a test is a 422-class failure naming the limit', async () => {
  assert.deepEqual(await failuresOf([{ schema: { keys: { S: { default: 'x', test: '(() => { while (true) {} })()' } } } }]), [
    { command: 0, key: 'S', rule: 'test', message: 'the test (() => { while (true) {} })() of key "S" failed: exceeded the time limit of 200 ms' },
  ]);
});

test('keys named __proto__, constructor and toString are ordinary keys (store, override, pipe, const, export)', async () => {
  const protoStores = new MemoryResolver([new MemoryStore('m', 'in-memory', [{ set: '', key: '__proto__', value: 'stored' }])], 'm');
  // Parsed from JSON text, as a request body is: `__proto__` is an own property there.
  const body = JSON.parse(
    '[{"schema":{"keys":{"__proto__":{"test":"$.value === \\"stored\\""},"constructor":{"default":"c"}}}},' +
      '{"schema":{"keys":{"toString":{"const":"{{ $.configs.__proto__.value }}-{{ $.configs.constructor.value }}"}}},"configs":{}}]',
  );
  const { configs } = await exportPipeline(body, { stores: protoStores, expressions });
  assert.deepEqual(Object.keys(configs), ['__proto__', 'constructor', 'toString']);
  assert.equal(Object.getPrototypeOf(configs), Object.prototype);
  assert.equal(JSON.stringify(configs), '{"__proto__":"stored","constructor":"c","toString":"stored-c"}');
  const overridden = await exportPipeline(JSON.parse('[{"schema":{"keys":{"__proto__":{}}},"configs":{"__proto__":"over"}}]'), { stores: protoStores, expressions });
  assert.equal(JSON.stringify(overridden.configs), '{"__proto__":"over"}');
});

test('the same in a schema of more than 64 keys, whose records have no prototype (names.ts, newRecord)', async () => {
  const protoStores = new MemoryResolver([new MemoryStore('m', 'in-memory', [{ set: '', key: '__proto__', value: 'stored' }, { set: '', key: 'K_3', value: 'three' }])], 'm');
  const filler = Array.from({ length: 80 }, (_, i) => `"K_${i}":{"default":"${i}"}`).join(',');
  const body = JSON.parse(
    `[{"schema":{"keys":{"__proto__":{"test":"$.value === \\"stored\\""},"constructor":{"default":"c"},${filler}}}},` +
      `{"schema":{"keys":{"toString":{"const":"{{ $.configs.__proto__.value }}-{{ $.configs.constructor.value }}-{{ $.configs.K_3.value }}"},"hasOwnProperty":{},${filler}}},"configs":{"hasOwnProperty":"h"}}]`,
  );
  const { configs } = await exportPipeline(body, { stores: protoStores, expressions });
  const keys = Object.keys(configs);
  assert.equal(keys.length, 84);
  assert.deepEqual(keys.slice(0, 2), ['__proto__', 'constructor']);
  assert.deepEqual(keys.slice(-2), ['toString', 'hasOwnProperty']);
  const parsed = JSON.parse(JSON.stringify(configs));
  assert.equal(parsed.constructor, 'c');
  assert.equal(parsed.toString, 'stored-c-three');
  assert.equal(parsed.hasOwnProperty, 'h');
  assert.equal(parsed.K_3, 'three');
  assert.equal(parsed.K_79, 79);
  assert.ok(JSON.stringify(configs).startsWith('{"__proto__":"stored","constructor":"c","K_0":0,'));
});

test('a `schema` declaration at the nesting limit compiles as the first job of a fresh sandbox child', async () => {
  // MAX_SCHEMA_DEPTH (32): a fresh child runs the compiler unoptimised, its deepest stack; 63 levels failed there.
  const fresh = createSandboxEvaluator({ workers: 1, spares: 0 });
  try {
    let schema: Record<string, unknown> = { type: 'string' };
    for (let i = 0; i < MAX_SCHEMA_DEPTH - 1; i++) schema = { items: schema };
    const nested = (leaf: string) => '['.repeat(MAX_SCHEMA_DEPTH - 1) + leaf + ']'.repeat(MAX_SCHEMA_DEPTH - 1);
    const run = (value: string) => exportPipeline([{ schema: { keys: { N: { schema } } }, configs: { N: value } }], { stores, expressions: fresh });
    assert.deepEqual((await run(nested('"deep"'))).configs.N, JSON.parse(nested('"deep"')));
    await assert.rejects(run(nested('5')), (e: unknown) => {
      assert.ok(e instanceof ValidationError);
      assert.equal(e.failures.length, 1);
      assert.equal(e.failures[0]!.rule, 'schema');
      assert.match(e.failures[0]!.message, /^the value of key "N" does not match its `schema`: data(\/0){31} must be string$/);
      return true;
    });
  } finally {
    await fresh.close();
  }
});
