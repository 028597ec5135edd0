import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BodyCache } from '../../src/server/http/body/body-cache.js';
import { CacheBudget, estimateBodyBytes } from '../../src/core/cache-budget.js';
import { rememberPasses } from '../../src/server/http/body/body-validation.js';
import { isDeepFrozen } from '../../src/core/index.js';

const body = (n: number, pad = 300) => JSON.stringify([{ schema: { keys: { [`K${n}`]: { description: 'x'.repeat(pad) } } } }]);

test('a cached body is returned for the exact same text only, deep-frozen', () => {
  const cache = new BodyCache(new CacheBudget(64 * 1024 * 1024));
  const text = body(1);
  const value = cache.add(text, JSON.parse(text)) as Array<{ schema: { keys: Record<string, unknown> } }>;
  assert.ok(isDeepFrozen(value) && isDeepFrozen(value[0]!.schema.keys));
  assert.equal(cache.get(text), value);
  assert.equal(cache.get(`${text} `), undefined);
  assert.throws(() => {
    (value[0]!.schema.keys as Record<string, unknown>).INJECTED = {};
  }, TypeError);
});

test('bounded by the estimated memory of its bodies, least recently used evicted first; tiny and huge bodies are not kept', () => {
  const one = estimateBodyBytes(body(1, 800).length, false, { objects: 5, slots: 5, atRecordDepth: 1 });
  // Room for eight bodies of ~850 characters (each estimated at `one` bytes), not nine; one body may take an eighth.
  const budget = new CacheBudget(Math.floor(8.5 * one));
  const cache = new BodyCache(budget, 256);
  const texts = [1, 2, 3, 4, 5, 6, 7, 8, 9].map((n) => body(n, 800));
  for (const t of texts.slice(0, 8)) cache.add(t, JSON.parse(t));
  assert.equal(cache.size, 8);
  assert.equal(cache.bytes(), 8 * one);
  cache.get(texts[0]!); // the first is now the most recent
  cache.add(texts[8]!, JSON.parse(texts[8]!)); // over the ceiling: the least recently used (the second) goes
  assert.equal(cache.size, 8);
  for (const t of [texts[0]!, ...texts.slice(2)]) assert.ok(cache.get(t));
  assert.equal(cache.get(texts[1]!), undefined);
  assert.ok(budget.totalBytes() <= budget.limitBytes);
  const tiny = '[1]';
  assert.deepEqual(cache.add(tiny, [1]), [1]);
  assert.equal(cache.get(tiny), undefined);
  // Larger than an eighth of the ceiling: not kept.
  const huge = body(4, 2000);
  cache.add(huge, JSON.parse(huge));
  assert.equal(cache.get(huge), undefined);
});

test('a body is weighed by what it holds, not by its text: 3 characters of `{},` count as an object each', () => {
  const budget = new CacheBudget(64 * 1024 * 1024);
  const cache = new BodyCache(budget, 256);
  const objects = `[${'{},'.repeat(10_000)}{}]`;
  const text = JSON.stringify(['x'.repeat(objects.length - 4)]);
  cache.add(objects, JSON.parse(objects));
  const ofObjects = cache.bytes();
  cache.add(text, JSON.parse(text));
  const ofText = cache.bytes() - ofObjects;
  // Same length of text; measured 89 bytes a frozen empty object against 1-2 bytes a character (bench/RESULTS.md).
  assert.ok(ofObjects > 8 * ofText, `${ofObjects} vs ${ofText}`);
  assert.ok(ofObjects >= 10_001 * 89, `${ofObjects}`);
});

test('a body check is skipped only for a deep-frozen value that passed it before', () => {
  const calls: unknown[] = [];
  const check = Object.assign(
    (data: unknown) => {
      calls.push(data);
      const ok = Array.isArray(data) && data.length > 0;
      check.errors = ok ? null : [{ message: 'must be a non-empty array' }];
      return ok;
    },
    { errors: null as unknown },
  );
  const wrapped = rememberPasses(check as never) as unknown as ((d: unknown) => boolean) & { errors: unknown; schemaEnv: unknown };
  const cache = new BodyCache(new CacheBudget(64 * 1024 * 1024));
  const frozenGood = cache.add(body(1), JSON.parse(body(1)));
  const frozenBad = cache.add('{"x":1}', { x: 1 });
  const loose = JSON.parse(body(2));
  for (let i = 0; i < 3; i++) {
    assert.equal(wrapped(frozenGood), true);
    assert.equal(wrapped(frozenBad), false);
    assert.deepEqual(wrapped.errors, [{ message: 'must be a non-empty array' }]);
    assert.equal(wrapped(loose), true);
  }
  // The frozen passing value was checked once; the failing one and the unfrozen one every time.
  assert.equal(calls.filter((c) => c === frozenGood).length, 1);
  assert.equal(calls.filter((c) => c === frozenBad).length, 3);
  assert.equal(calls.filter((c) => c === loose).length, 3);
  assert.equal(wrapped.schemaEnv, undefined);
});

test('a body is frozen all through, but recorded as deep-frozen only down to its declarations (issue 31)', () => {
  const cache = new BodyCache(new CacheBudget(64 * 1024 * 1024));
  const text = JSON.stringify([{ schema: { keys: { K: { enum: [[1, [2]]], schema: { type: 'array' } } } }, configs: { K: [[['deep']]] } }]);
  type Body = Array<{ schema: { keys: { K: { enum: unknown[][]; schema: object } } }; configs: { K: unknown[][][] } }>;
  const value = cache.add(text, JSON.parse(text)) as Body;
  const command = value[0]!;
  const declaration = command.schema.keys.K;
  // Recorded: what the engine and the body check cache by identity (levels 0 to 4).
  for (const o of [value, command, command.schema, command.schema.keys, declaration, command.configs, command.configs.K, command.configs.K[0]!]) {
    assert.ok(isDeepFrozen(o));
  }
  // Deeper levels: frozen, not recorded (a weak-set entry each would cost garbage collection for every nested array).
  for (const o of [declaration.enum, declaration.enum[0]!, declaration.schema, command.configs.K[0]![0]!]) {
    assert.ok(Object.isFrozen(o));
    assert.equal(isDeepFrozen(o), false);
  }
  assert.throws(() => (command.configs.K[0]![0] as unknown[]).push('x'), TypeError);
});
