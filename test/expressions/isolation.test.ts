// Cross-job isolation, attacked the way an attacker would: in one child (workers: 1, so every job shares one isolate)
// an attacking job runs, then a victim job with a secret, then a collecting job. The collector must learn nothing and
// the victim must get its own, correct answer. Each case is one finding of issue 10.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createSandboxEvaluator, type SandboxEvaluator } from '../../src/expressions/index.js';
import type { ExpressionJob, TestOutcome } from '../../src/core/ports.js';
import { INPUT, SEALED_WALK, view } from './helpers.js';

const SECRET = 'victim-s3cret-7f3a9c';
let ev: SandboxEvaluator;
before(async () => {
  // A generous budget: the graph walk below visits every object of the realm on a possibly loaded machine.
  ev = createSandboxEvaluator({ workers: 1, spares: 0, timeoutMs: 5000, memoryMb: 128 });
  await ev.ready();
});
after(() => ev.close());

/** One job: key K with stored value `value`, the given test expressions. */
async function run(expressions: string[], value = 'x', key = 'K'): Promise<TestOutcome[]> {
  const job: ExpressionJob = {
    input: INPUT,
    configs: { [key]: view(key, value, value), OVERRIDE: view('OVERRIDE', `override-${SECRET}`, `override-${SECRET}`, { origin: 'override' }) },
    consts: [],
    tests: [{ key, expressions }],
  };
  return (await ev.run(job)).tests;
}
const failure = (index: number, message: string, key = 'K') => ({ key, index, ok: false, kind: 'error', message });

/** The host's own `schema` check, as src/core/eval.ts writes it. */
const hostCheck = (schema: unknown) => `JSONSchema.validate(${JSON.stringify(schema)}, $.value)`;

function assertNoSecret(outcomes: TestOutcome[]): void {
  assert.ok(!JSON.stringify(outcomes).includes(SECRET), JSON.stringify(outcomes));
}

describe('isolation between jobs of one child', () => {
  it('finding 1: a schema with a hidden getter reading its caller cannot spy on later jobs', async () => {
    // The attacker's schema equals the victim's in JSON; a non-enumerable getter (sloppy, made with Function) records
    // what its caller was called with, and keeps it on itself.
    const attack = `(() => {
      const spy = Function('return function spy() { try { const c = spy.caller; if (c) spy.loot.push(JSON.stringify(Array.from(c.arguments))) } catch (e) {} return 8 }')();
      spy.loot = [];
      const schema = { type: 'string', minLength: 8 };
      Object.defineProperty(schema, 'hidden', { get: spy, enumerable: false });
      Object.defineProperty(schema, 'minLength', { get: spy, enumerable: false });
      try { JSONSchema.validate(schema, 'attacker-value') } catch (e) {}
      return spy.loot.length === 0;
    })()`;
    assert.deepEqual(await run([attack]), []);
    // The victim: the host's literal check and the same schema written in a test.
    assert.deepEqual(await run([hostCheck({ type: 'string', minLength: 8 }), "JSONSchema.validate({ type: 'string', minLength: 8 }, $.value)"], SECRET), []);
    assert.deepEqual(await run([hostCheck({ type: 'string', minLength: 8 })], 'short'), [failure(0, 'data must NOT have fewer than 8 characters')]);
    // The collector validates the same schema with data whose getter climbs to the validator and its schema.
    const collect = `(() => {
      const found = [];
      const probe = Function('found', 'return function probe() { let f = probe.caller; for (let i = 0; f && i < 20; i++) { found.push(f); try { f = f.caller } catch (e) { break } } return "probe-value" }')(found);
      const data = Object.defineProperty({}, 'x', { get: probe, enumerable: true });
      try { JSONSchema.validate({ type: 'string', minLength: 8 }, data) } catch (e) {}
      try { JSONSchema.validate({ type: 'object', properties: { x: { type: 'string', minLength: 8 } } }, data) } catch (e) {}
      const loot = found.map((f) => { try { return JSON.stringify([f.schema, Array.from(f.arguments || [])]) } catch (e) { return String(e) } });
      if (found.length) throw new Error('reached ' + found.length + ' frames: ' + loot.join(' '));
      return true;
    })()`;
    const collected = await run([collect]);
    assert.deepEqual(collected, []);
    assertNoSecret(collected);
  });

  it('finding 2: toJSON cannot make a cached validator stand for another schema', async () => {
    const poison = "JSONSchema.validate({ toJSON() { return { type: 'number' } } }, 'abc')";
    assert.deepEqual(await run([poison]), [
      failure(0, 'JSONSchema.validate(schema, data): the schema must be plain JSON data, found a function (at /toJSON)'),
    ]);
    const proxied = "JSONSchema.validate(new Proxy({ type: 'number' }, { get: (t, k) => k === 'type' ? 'string' : t[k] }), 'abc')";
    // A Proxy answers the copy with what its traps say (here: type number), once; its `get` trap is never used.
    assert.deepEqual(await run([proxied]), [failure(0, 'data must be number')]);
    // A later `schema` check on a number must still refuse a non-number.
    assert.deepEqual(await run([hostCheck({ type: 'number' })], 'abc'), [failure(0, 'data must be number')]);
    assert.deepEqual(await run(["JSONSchema.validate({ type: 'number' }, $.value)"], 'abc'), [failure(0, 'data must be number')]);
  });

  it('finding 3: accessors the sandbox installed are frozen; a property written on one is gone', async () => {
    const writes = [
      "Object.getOwnPropertyDescriptor(Object.prototype, 'toString').get.x = 1",
      "Object.getOwnPropertyDescriptor(Object.prototype, 'toString').set.x = 1",
      "Object.getOwnPropertyDescriptor(Error.prototype, 'message').get.x = 1",
    ];
    assert.deepEqual(await run(writes), writes.map((_w, i) => failure(i, 'Cannot add property x, object is not extensible')));
    assert.deepEqual(
      await run([
        "Object.getOwnPropertyDescriptor(Object.prototype, 'toString').get.x === undefined",
        "Object.getOwnPropertyDescriptor(Error.prototype, 'message').get.x === undefined",
      ]),
      [],
    );
  });

  it('everything reachable from globalThis is frozen, except per-job containers and regexps', async () => {
    assert.deepEqual(await run([SEALED_WALK]), []);
  });

  it('finding 10: 1e400 and null are different schemas, whatever ran before', async () => {
    const big = failure(0, 'JSONSchema.validate(schema, data): the schema must be plain JSON data, found the non-finite number Infinity (at /maximum)');
    const nul = failure(0, 'schema is invalid: data/maximum must be number');
    const order1 = [await run(['JSONSchema.validate({ maximum: null }, 1)']), await run(['JSONSchema.validate({ maximum: 1e400 }, 1)'])];
    const order2 = [await run(['JSONSchema.validate({ maximum: 1e400 }, 1)']), await run(['JSONSchema.validate({ maximum: null }, 1)'])];
    assert.deepEqual(order1, [[nul], [big]]);
    assert.deepEqual(order2, [[big], [nul]]);
    const enumBig = await run(['JSONSchema.validate({ enum: [1e400] }, null)']);
    assert.deepEqual(enumBig, [failure(0, 'JSONSchema.validate(schema, data): the schema must be plain JSON data, found the non-finite number Infinity (at /enum/0)')]);
    assert.deepEqual(await run(['JSONSchema.validate({ enum: [null] }, null)']), []);
    assert.deepEqual(await run(['JSONSchema.validate({ enum: [1e400] }, null)']), enumBig);
  });

  it("finding 10: an invalid schema's error text never reaches another job", async () => {
    const text = (name: string) =>
      `schema is invalid: data/properties/${name}/type must be equal to one of the allowed values, data/properties/${name}/type must be array, data/properties/${name}/type must match a schema in anyOf`;
    assert.deepEqual(await run([hostCheck({ properties: { secretField: { type: 5 } } })]), [failure(0, text('secretField'))]);
    assert.deepEqual(await run([hostCheck({ properties: { other: { type: 5 } } })]), [failure(0, text('other'))]);
    assert.deepEqual(await run([hostCheck({ properties: { secretField: { type: 5 } } })]), [failure(0, text('secretField'))]);
  });

  it('finding 12: "$async" is refused, never a silent pass', async () => {
    const refused = 'JSONSchema.validate(schema, data): "$async" schemas are not supported (validation is synchronous)';
    assert.deepEqual(await run([hostCheck({ $async: true, type: 'number' })], 'abc'), [failure(0, refused)]);
    assert.deepEqual(await run(["JSONSchema.validate({ properties: { a: { $async: true } } }, {})"]), [failure(0, refused)]);
    assert.deepEqual(await run([hostCheck({ $async: false, type: 'number' })], 'abc'), [failure(0, 'data must be number')]);
  });

  it('finding 13: `import(` in a string is text; a real import() fails with the documented message', async () => {
    const imp = 'dynamic import() is not available in the sandbox';
    assert.deepEqual(
      await run(["'import(' !== 'x'", '`${"a"}import(`.length === 8', "/import\\(/.test('import(')", "({ import(x) { return x } }).import(true)", "({}).import === undefined"]),
      [],
    );
    assert.deepEqual(await run(["import('x')"]), [failure(0, imp)]);
    assert.deepEqual(await run(['[import /* c */ ("node:fs")]']), [failure(0, imp)]);
    assert.deepEqual(await run(['`${import("x")}`']), [failure(0, imp)]);
    assert.deepEqual(await run(["1 / 2 / import('x')"]), [failure(0, imp)]);
  });
});
