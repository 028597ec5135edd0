import { test } from 'node:test';
import assert from 'node:assert/strict';
import { upsert, ValidationError, InputError, ErrorCodes, type EvalFailure } from '../../src/core/index.js';
import { MemoryStore, HostEvaluator } from '../helpers/engine.js';

const schema = {
  keys: {
    HOST: { pattern: '^[a-z.]+$' },
    PORT: { test: 'Number.isInteger($.value)', schema: { type: 'number' } },
    ENV: { enum: ['dev', 'prod'] },
    URL: { const: '{{ $.configs.HOST.value }}' },
    SESSION: { lazy: true },
    NOTE: {},
    PORT_ABOVE: { test: '$.value > $.configs.PORT.value' },
  },
};

function store() {
  return new MemoryStore('s', 'in-memory', [
    { set: 'prod', key: 'HOST', value: 'old.example' },
    { set: 'prod', key: 'NOTE', value: 'keep me' },
    { set: '', key: 'PORT', value: '80' },
  ]);
}

async function failuresOf(p: Promise<unknown>): Promise<EvalFailure[]> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof ValidationError, String(e));
    return e.failures;
  }
  assert.fail('upsert succeeded');
}

test('writes only what changed, deletes empty values, reports before/after', async () => {
  const s = store();
  const { changes } = await upsert({
    store: s,
    set: 'prod',
    schema,
    values: { HOST: 'new.example', NOTE: 'keep me', ENV: 'prod', PORT: '' },
    expressions: new HostEvaluator(),
  });
  assert.deepEqual(changes, [
    { key: 'HOST', before: 'old.example', after: 'new.example' },
    { key: 'ENV', before: '', after: 'prod' },
  ]);
  assert.equal(s.get('prod', 'HOST'), 'new.example');
  assert.equal(s.get('prod', 'ENV'), 'prod');
  assert.equal(s.get('', 'PORT'), '80'); // PORT was not stored at prod: deleting it there changes nothing
  assert.equal(s.writes, 1);

  const del = await upsert({ store: s, set: 'prod', schema, values: { NOTE: null } });
  assert.deepEqual(del.changes, [{ key: 'NOTE', before: 'keep me', after: '' }]);
  assert.equal(s.get('prod', 'NOTE'), undefined);

  const none = await upsert({ store: s, set: 'prod', schema, values: { HOST: 'new.example' }, expressions: new HostEvaluator() });
  assert.deepEqual(none.changes, []);
  assert.equal(s.writes, 2);
});

test('undeclared, const and lazy keys and every value constraint are collected; nothing is written', async () => {
  const s = store();
  const failures = await failuresOf(
    upsert({
      store: s,
      set: 'prod',
      schema,
      values: { NOPE: 'x', URL: 'x', SESSION: 'x', HOST: 'BAD HOST', PORT: 'abc', ENV: 'staging', PORT_ABOVE: '10' },
      expressions: new HostEvaluator(),
    }),
  );
  assert.deepEqual(failures, [
    { command: 0, key: 'NOPE', rule: 'undeclared', message: 'key "NOPE" is not declared by the schema' },
    { command: 0, key: 'HOST', rule: 'pattern', message: 'the value of key "HOST" does not match the pattern ^[a-z.]+$' },
    { command: 0, key: 'PORT', rule: 'schema', message: 'the value of key "PORT" does not match its `schema`: must be number' },
    { command: 0, key: 'PORT', rule: 'test', message: 'the value of key "PORT" failed the test Number.isInteger($.value)' },
    { command: 0, key: 'ENV', rule: 'enum', message: 'the value of key "ENV" is not one of the allowed values: "dev", "prod"' },
    { command: 0, key: 'URL', rule: 'const', message: 'key "URL" is computed by `const` and cannot be stored' },
    { command: 0, key: 'SESSION', rule: 'lazy', message: 'key "SESSION" is `lazy`: its value only comes from overrides and is never stored' },
    { command: 0, key: 'PORT_ABOVE', rule: 'test', message: 'the value of key "PORT_ABOVE" failed the test $.value > $.configs.PORT.value' },
  ]);
  assert.equal(s.writes, 0);
  assert.equal(s.get('prod', 'HOST'), 'old.example');
});

test('tests see the other stored values of the set hierarchy', async () => {
  const s = store();
  const { changes } = await upsert({ store: s, set: 'prod', schema, values: { PORT_ABOVE: '81' }, expressions: new HostEvaluator() });
  assert.deepEqual(changes, [{ key: 'PORT_ABOVE', before: '', after: '81' }]);
});

test('bad set and bad schema are input errors', async () => {
  await assert.rejects(upsert({ store: store(), set: 'a b', schema, values: {} }), (e: unknown) => e instanceof InputError && e.code === ErrorCodes.INVALID_SET);
  await assert.rejects(
    upsert({ store: store(), schema: { keys: { A: { type: 'String' } } }, values: {} }),
    (e: unknown) => e instanceof InputError && e.issues[0]!.path === '/schema/keys/A/type',
  );
});
