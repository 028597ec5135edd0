// Functional behaviour of the sandbox evaluator: context, every global, templates, consts, trusted rendering, options.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  createSandboxEvaluator,
  expressionOptionsFromEnv,
  ExpressionError,
  type SandboxEvaluator,
} from '../../src/expressions/index.js';
import { CONFIGS, INPUT, oneTest, outcomeOf, view } from './helpers.js';

let ev: SandboxEvaluator;
before(async () => {
  ev = createSandboxEvaluator({ workers: 2, spares: 0 });
  await ev.ready();
});
after(() => ev.close());

const check = async (expression: string, key = 'PORT') => outcomeOf((await ev.run(oneTest(expression, key))).tests);

describe('context $', () => {
  it('exposes value, storedValue, key, origin, cfgu, labels', async () => {
    assert.equal(await check("$.value === 8080 && $.storedValue === '8080' && $.key === 'PORT' && $.origin === 'store'"), 'ok');
    assert.equal(await check("$.cfgu.schema.type === 'number' && $.labels[0] === 'net'"), 'ok');
  });
  it('exposes $.configs and $.input', async () => {
    assert.equal(await check("$.configs.HOST.value === 'db.example.com' && $.configs.HOST.origin === 'store' && $.configs.PORT.key === 'PORT'"), 'ok');
    assert.equal(await check("$.input.store.type === 'in-memory' && $.input.set.path === 'prod/eu' && $.input.set.hierarchy.length === 3 && 'PORT' in $.input.schema.keys"), 'ok');
  });
  it('a key without a config is empty', async () => {
    assert.equal(await check("$.origin === 'empty' && $.value === '' && $.key === 'NOPE'", 'NOPE'), 'ok');
  });
});

describe('globals', () => {
  it('lodash', async () => {
    assert.equal(await check("_.isString($.storedValue) && _.get($, 'configs.HOST.value') === 'db.example.com' && _.uniq([1,1,2]).length === 2"), 'ok');
  });
  it('validator', async () => {
    assert.equal(await check('validator.isPort($.storedValue) && validator.isFQDN($.configs.HOST.value)'), 'ok');
    assert.deepEqual(await check("validator.isEmail('nope')"), { kind: 'falsy', message: `test "validator.isEmail('nope')" evaluated to false` });
  });
  it('JSONSchema / jsonschema: valid and invalid', async () => {
    assert.equal(await check("JSONSchema.validate({ type: 'number', maximum: 65535 }, $.value) === true"), 'ok');
    assert.equal(await check("jsonschema.validate({ type: 'string', format: 'hostname' }, $.configs.HOST.value)"), 'ok');
    assert.deepEqual(await check("JSONSchema.validate({ type: 'number', maximum: 1000 }, $.value)"), { kind: 'error', message: 'data must be <= 1000' });
    assert.deepEqual(await check("JSONSchema.validate({ type: 'object', required: ['a'] }, {})"), { kind: 'error', message: "data must have required property 'a'" });
    // A schema $id registered by one call does not survive into the next.
    assert.equal(await check("JSONSchema.validate({ $id: 'x', type: 'number' }, 1) && JSONSchema.validate({ $id: 'x', type: 'number' }, 2)"), 'ok');
  });
  it('zod: parse ok and throw', async () => {
    assert.equal(await check('z.number().int().min(1).max(65535).parse($.value) === 8080'), 'ok');
    assert.equal(await check("z.object({ host: z.string() }).safeParse({ host: 1 }).success === false"), 'ok');
    assert.deepEqual(await check('z.string().parse($.value)'), { kind: 'error', message: '✖ Invalid input: expected string, received number' });
    assert.deepEqual(await check("z.enum(['a', 'b']).parse('c')"), { kind: 'error', message: '✖ Invalid option: expected one of "a"|"b"' });
  });
  it('chai: expect, assert, should', async () => {
    assert.equal(await check("expect($.value).to.be.a('number').and.to.be.above(1000)"), 'ok');
    assert.deepEqual(await check("expect($.value).to.equal(80)"), { kind: 'error', message: 'expected 8080 to equal 80' });
    assert.deepEqual(await check("assert.isString($.value)"), { kind: 'error', message: 'expected 8080 to be a string' });
    assert.deepEqual(await check("assert.equal($.value, 1, 'port must be 1')"), { kind: 'error', message: 'port must be 1: expected 8080 to equal 1' });
    assert.equal(await check("$.storedValue.should.be.a('string')"), 'ok');
    assert.deepEqual(await check("$.storedValue.should.have.lengthOf(2)"), { kind: 'error', message: "expected '8080' to have a length of 2 but got 4" });
  });
});

describe('outcomes', () => {
  it('falsy, thrown, syntax error, several expressions per key', async () => {
    const r = await ev.run({
      input: INPUT,
      configs: CONFIGS,
      consts: [],
      tests: [{ key: 'PORT', expressions: ['$.value > 1', '$.value < 1', "(() => { throw new TypeError('bad port') })()", '$.value >', '$.value > 1;'] }],
    });
    assert.deepEqual(r.tests, [
      { key: 'PORT', index: 1, ok: false, kind: 'falsy', message: 'test "$.value < 1" evaluated to false' },
      { key: 'PORT', index: 2, ok: false, kind: 'error', message: 'bad port' },
      { key: 'PORT', index: 3, ok: false, kind: 'error', message: "Unexpected token ')'" },
    ]);
  });
});

describe('consts and templates', () => {
  it('renders consts in order, updating $.configs with coercion for later consts and tests', async () => {
    const r = await ev.run({
      input: INPUT,
      configs: { ...CONFIGS, NEXT: view('NEXT', '', '', { origin: 'empty', cfgu: { schema: { type: 'string' } } }) },
      consts: [
        { key: 'URL', template: 'http://{{ $.configs.HOST.value }}:<% $.configs.PORT.value %>/' },
        { key: 'NEXT', template: '{{ $.configs.PORT.value + 1 }}' },
        { key: 'N', template: '{{ $.configs.PORT.value + 2 }}' },
        { key: 'OBJ', template: '{{ { a: [1, 2] } }}' },
        { key: 'BAD', template: '{{ nope.x }}' },
        { key: 'PLAIN', template: 'no expressions' },
      ],
      tests: [
        { key: 'URL', expressions: ["$.value === 'http://db.example.com:8080/' && $.origin === 'const'"] },
        { key: 'NEXT', expressions: ["$.value === '8081'"] },
        { key: 'N', expressions: ['$.value === 8082 && $.storedValue === "8082"'] },
        { key: 'OBJ', expressions: ['$.value.a[1] === 2'] },
      ],
    });
    assert.deepEqual(r.consts, [
      { key: 'URL', ok: true, value: 'http://db.example.com:8080/' },
      { key: 'NEXT', ok: true, value: '8081' },
      { key: 'N', ok: true, value: '8082' },
      { key: 'OBJ', ok: true, value: '{"a":[1,2]}' },
      { key: 'BAD', ok: false, kind: 'error', message: 'nope is not defined' },
      { key: 'PLAIN', ok: true, value: 'no expressions' },
    ]);
    assert.deepEqual(r.tests, []);
  });
  it('renderTemplate and evaluateBoolean', async () => {
    assert.equal(await ev.renderTemplate('{{ $.a }}-<% $.b.join(",") %>-{{ null }}', { a: 'x', b: [1, 2] }), 'x-1,2-');
    assert.equal(await ev.evaluateBoolean('$.labels.includes("net")', { labels: ['net'] }), true);
    assert.equal(await ev.evaluateBoolean('$.value > 3', { value: 1 }), false);
    await assert.rejects(ev.evaluateBoolean('$.x.y', {}), (e: unknown) => {
      assert.ok(e instanceof ExpressionError);
      assert.equal(e.kind, 'error');
      assert.equal(e.message, "Cannot read properties of undefined (reading 'y')");
      return true;
    });
    await assert.rejects(ev.renderTemplate('{{ (() => { while (true) {} })() }}', {}), { name: 'ExpressionError', kind: 'time-limit', message: 'exceeded the time limit of 100 ms' });
  });
  it('renderTrusted resolves bare identifiers to the variables, unknown ones to ""', async () => {
    assert.equal(
      await ev.renderTrusted('{"pw": "{{DB_PASSWORD}}", "port": {{ PORT || "8080" }}, "n": "{{ MISSING }}", "u": "{{ _.toUpper(USER) }}"}', {
        DB_PASSWORD: 's3cret',
        USER: 'ann',
      }),
      '{"pw": "s3cret", "port": 8080, "n": "", "u": "ANN"}',
    );
    assert.equal(await ev.renderTrusted('{{ PORT || "8080" }}', { PORT: '9090' }), '9090');
  });
});

describe('expressionOptionsFromEnv', () => {
  it('reads the three variables and rejects nonsense', () => {
    assert.deepEqual(expressionOptionsFromEnv({}), {});
    assert.deepEqual(
      expressionOptionsFromEnv({ CONFIGU_EXPRESSION_TIMEOUT_MS: '250', CONFIGU_EXPRESSION_MEMORY_MB: '128', CONFIGU_EXPRESSION_WORKERS: '4' }),
      { timeoutMs: 250, memoryMb: 128, workers: 4 },
    );
    assert.throws(() => expressionOptionsFromEnv({ CONFIGU_EXPRESSION_TIMEOUT_MS: 'fast' }), /CONFIGU_EXPRESSION_TIMEOUT_MS must be an integer/);
  });
});
