// State the sandbox's libraries keep between jobs (docs/expressions.md, "State the libraries keep"), attacked the way
// a client would: all jobs run in one child (workers: 1, so they share one isolate), under three clients. For each
// piece of state: (a) a job that reads it is never answered a stale kept answer (the answer kept for alice is what a
// run now gives, or the job is not kept at all); (b) what one client does to it does not change what another client's
// later job sees; (c) nothing in Error.stack, a function's name or any value counts what other jobs did.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createSandboxEvaluator, type SandboxEvaluator } from '../../src/expressions/index.js';
import { type ExpressionJob } from '../../src/core/ports.js';
import { CONFIGS, INPUT } from '../expressions/helpers.js';

let ev: SandboxEvaluator;
before(async () => {
  ev = createSandboxEvaluator({ workers: 1, spares: 0, timeoutMs: 2000, memoryMb: 128 });
  await ev.ready();
});
after(() => ev.close());

const constJob = (expression: string): ExpressionJob => {
  // A const template: `}}` would end the expression early.
  assert.ok(!expression.includes('}}'), expression);
  return { input: INPUT, configs: CONFIGS, consts: [{ key: 'C', template: `{{ ${expression} }}` }], tests: [] };
};

/** The value of one expression, for `client` (kept answers apply) or for none (always run). */
async function valueOf(expression: string, client?: string, sandbox = ev): Promise<string> {
  const result = await sandbox.run(constJob(expression), client === undefined ? undefined : { client });
  const c = result.consts[0]!;
  assert.equal(c.ok, true, `${expression}: ${JSON.stringify(c)}`);
  return c.value!;
}

/** A job of `client` that tries something; what it answers does not matter (most attempts throw). */
async function attempt(expression: string, client = 'bob'): Promise<void> {
  await ev.run(constJob(`(() => { try { ${expression}; return 'done' } catch (e) { return 'refused' } })()`), { client });
}

/**
 * (a) for state made unobservable: alice reads it (her answer may be kept), bob works on it, then alice's same job is
 * answered exactly what a run now gives (a job without a client always runs).
 */
async function assertSteady(read: string, disturb: string[]): Promise<string> {
  const first = await valueOf(read, 'alice');
  for (const d of disturb) await attempt(d);
  const again = await valueOf(read, 'alice');
  const now = await valueOf(read);
  assert.equal(again, now, `alice was answered a stale value for ${read}`);
  assert.equal(first, now, `${read} changed with another client's jobs`);
  return now;
}

/** (a) for state a read of which marks the job: the same job twice for one client runs twice. */
async function assertNotKept(read: string): Promise<void> {
  const given = ev.answersGiven();
  const first = await valueOf(read, 'alice');
  const second = await valueOf(read, 'alice');
  assert.equal(ev.answersGiven(), given, `${read} was answered from a kept answer`);
  assert.notEqual(second, first, `${read} answered the same counter twice`);
}

/** The frames of an error thrown inside lodash's template code (the first names the template's source URL). */
const templateFrame = (call: string) => `(() => { try { ${call}; return 'no error' } catch (e) { return e.stack.split('\\n')[1].trim() } })()`;

describe('lodash', () => {
  it("(a, c) a template's name in stack traces counts nothing: the same whoever compiled templates before", async () => {
    const forms = [
      templateFrame("_.template('<% throw new Error(1) %>')()"),
      templateFrame("_('<% throw new Error(1) %>').template()()"),
      templateFrame("_.chain('<% throw new Error(1) %>').template().value()()"),
      templateFrame("(0, _.map(['<% throw new Error(1) %>'], _.template)[0])()"),
    ];
    const compileMany = "for (let i = 0; i < 5; i++) { _.template('x'); _('y').template(); _.chain('z').template().value() }";
    for (const read of forms) {
      assert.equal(await assertSteady(read, [compileMany, compileMany]), 'at eval (lodash.templateSource:10:8)');
    }
    // A source URL of the caller's is kept, and templates work as before (also as an iteratee).
    assert.equal(await valueOf(templateFrame("_.template('<% throw new Error(1) %>', { sourceURL: 'mine.js' })()")), 'at eval (mine.js:10:8)');
    assert.equal(await valueOf("_.map(['<%= a %>', '<%- b %>'], _.template).map((t) => t({ a: 1, b: '<' })).join()"), '1,&lt;');
    assert.equal(await valueOf("_.template('<%= a %>', { imports: { q: 1 } })({ a: 2 })"), '2');
    assert.equal(await valueOf('[_.template.name, _.template.length, _.uniqueId.name, _.uniqueId.length].join()'), 'template,3,uniqueId,1');
  });

  it('(a) _.uniqueId in every form marks its job: never answered from a kept answer', async () => {
    for (const read of ['_.uniqueId("u")', "_('u').uniqueId()", "_.chain('u').uniqueId().value()", "_.map(['u'], _.uniqueId)[0]"]) {
      await assertNotKept(read);
    }
  });

  it("(b) templateSettings, mixin, memoize's cache class and iteratee cannot be changed for another client", async () => {
    const attempts = [
      "_.templateSettings.interpolate = /\\[\\[([\\s\\S]+?)\\]\\]/g",
      "Object.defineProperty(_.templateSettings, 'interpolate', { value: /\\[\\[([\\s\\S]+?)\\]\\]/g })",
      '_.templateSettings.imports.evil = 1',
      '_.mixin({ evil: () => 1 })',
      '_.mixin(_, { template: () => () => "pwned" })',
      '_.memoize.Cache = WeakMap',
      '_.iteratee = () => () => true',
      '_.runInContext().template = () => () => "pwned"',
    ];
    for (const a of attempts) await attempt(a);
    assert.equal(
      await valueOf("[_.template('<%= a %>[[a]]')({ a: 1 }), typeof _.evil, _.memoize.Cache.name, _.filter([1, 2], (x) => x > 1).length, 'evil' in _.templateSettings.imports].join()", 'carol'),
      '1[[a]],undefined,MapCache,1,false',
    );
  });
});

describe('validator', () => {
  // The options object a caller passes is filled with the module's defaults, arrays included.
  const shared = [
    ['isEmail', "validator.isEmail('a@b.co', o)", 'o.host_blacklist.push("victim.example")', "validator.isEmail('x@victim.example')"],
    ['isEmail', "validator.isEmail('a@b.co', o)", 'o.host_whitelist.push("only.example")', "validator.isEmail('x@victim.example')"],
    ['isURL', "validator.isURL('http://a.co', o)", 'o.protocols.length = 0', "validator.isURL('http://victim.example')"],
    ['isDate', "validator.isDate('2020/01/02', o)", 'o.delimiters.length = 0', "validator.isDate('2020/01/02')"],
    ['isCurrency', "validator.isCurrency('1.00', o)", 'o.digits_after_decimal[0] = 3', "validator.isCurrency('1.00')"],
  ] as const;

  it("(b) a default array handed out in one client's options cannot be changed for another client", async () => {
    for (const [name, call, change, victim] of shared) {
      await attempt(`const o = {}; ${call}; ${change}`);
      assert.equal(await valueOf(victim, 'carol'), 'true', `${name}: ${change}`);
    }
  });

  it('(a) a job that reads the defaults is answered what a run gives now', async () => {
    const read = "(() => { const o = {}; validator.isEmail('a@b.co', o); validator.isURL('http://a.co', o); return JSON.stringify(o) })()";
    const disturb = shared.map(([, call, change]) => `const o = {}; ${call}; ${change}`);
    assert.match(await assertSteady(read, disturb), /"host_blacklist":\[\],"host_whitelist":\[\]/);
  });
});

describe('zod', () => {
  const attempts = [
    "z.config({ customError: () => 'hacked' })",
    "z.config(z.locales.de())",
    "z.globalRegistry.add(z.string(), { id: 'bob-secret' })",
    "z.string().meta({ id: 'bob-meta', description: 'bob' })",
    "z.string().register(z.globalRegistry, { id: 'bob-registered' })",
    "Map.prototype.set.call(z.globalRegistry._idmap, 'bob-map', z.string())",
    'z.core.globalConfig.jitless = true',
    "Object.defineProperty(z.core.globalConfig, 'customError', { value: () => 'hacked' })",
  ];

  it("(a, b) the global config and registry: another client's changes are not seen, reads are steady", async () => {
    const read =
      "JSON.stringify([z.string().safeParse(1).error.issues[0].message, z.globalRegistry._idmap.size, [...z.globalRegistry._idmap.keys()], " +
      'z.globalRegistry.get(z.string()) ?? null, Object.keys(z.core.globalConfig), z.toJSONSchema(z.object({ a: z.string().meta({ id: "a" }) }))])';
    const seen = await assertSteady(read, attempts);
    assert.ok(!seen.includes('bob') && !seen.includes('hacked'), seen);
    assert.ok(seen.startsWith('["Invalid input: expected string, received number",0,[]'), seen);
  });
});

describe('chai', () => {
  it('(a, b) config, plugins and assertion prototypes: another client cannot change messages or add methods', async () => {
    const attempts = [
      'expect(1).constructor.includeStack = true',
      'expect(1).constructor.showDiff = false',
      "expect(1).constructor.addMethod('evil', function () { this.assert(true, '', '') })",
      "expect(1).constructor.addProperty('evil', function () {})",
      "Object.defineProperty(Object.getPrototypeOf(expect(1)), 'evil', { value: 1 })",
      "assert.evil = () => true",
      "expect.evil = () => true",
    ];
    const read =
      "(() => { const out = []; try { expect(Array.from({ length: 60 }, (_, i) => i)).to.deep.equal([]) } catch (e) { out.push(e.message, 'stack' in e) } " +
      "out.push('evil' in expect(1), typeof assert.evil, typeof expect.evil, expect(1).constructor.includeStack, expect(1).constructor.showDiff); return JSON.stringify(out) })()";
    const seen = await assertSteady(read, attempts);
    assert.deepEqual(JSON.parse(seen).slice(1), [true, false, 'undefined', 'undefined', false, true]);
    // The message is truncated as chai's default config says (truncateThreshold 40).
    assert.equal(JSON.parse(seen)[0], 'expected [ Array(60) ] to deeply equal []');
  });
});

describe('JSON Schema (Ajv)', () => {
  /**
   * The stack as seen by a getter (`holder[key]`) that a compiled validator calls: the validators' frames and the
   * runtime's next to them.
   */
  const validatorFrames = (schema: string, data = "{ a: 'x' }", holder = 'data', key = 'a') =>
    `(() => { let s = 'not called'; const data = ${data}; Object.defineProperty(${holder}, '${key}', { enumerable: true, get() { s = new Error('x').stack; return 'x' } }); ` +
    `try { JSONSchema.validate(${schema}, data) } catch (e) {} return s.split('\\n').slice(2, 5).map((l) => l.trim()).join('|') })()`;
  const others = Array.from(
    { length: 12 },
    (_, i) =>
      `JSONSchema.validate({ type: 'object', properties: { ['p${i}']: { type: 'string', format: '${['email', 'uri', 'date', 'ipv4'][i % 4]}', pattern: '^x${i}' } }, required: ['p${i}'] }, { p${i}: 'x${i}' })`,
  );
  const metaRef = "JSONSchema.validate({ properties: { m: { $ref: 'http://json-schema.org/draft-07/schema#' } } }, { m: { type: 'string' } })";

  it('(a, c) a validator shows the same names and positions whoever compiled schemas before, cached or not', async () => {
    const reads = [
      validatorFrames("{ type: 'object', properties: { a: { type: 'string', format: 'email', pattern: '^x' } } }"),
      // The getter is called by the meta-schema's validator, compiled for this schema's `$ref`.
      validatorFrames("{ type: 'object', properties: { a: { $ref: 'http://json-schema.org/draft-07/schema#' } } }", '{ a: {} }', 'data.a', 'type'),
      validatorFrames("{ definitions: { s: { type: 'string', minLength: 1 } }, type: 'object', properties: { a: { $ref: '#/definitions/s' } } }"),
    ];
    // A child of its own that never compiled anything else: what these reads must give.
    const fresh = createSandboxEvaluator({ workers: 1, spares: 0, timeoutMs: 2000, memoryMb: 128 });
    try {
      await fresh.ready();
      // This child has compiled other schemas first (bob's); the fresh child has not.
      for (const other of others) await attempt(other);
      for (const read of reads) {
        const expected = await valueOf(read, undefined, fresh);
        assert.match(expected, /^at validate\d+ \(eval at compileSchema \(cfgu-sandbox\.js:\d+:\d+\), <anonymous>:\d+:\d+\)\|at /, expected);
        assert.equal(await assertSteady(read, [...others, metaRef]), expected, read);
        // A cache hit (another expression, the same schema) shows the same frames as the first compile.
        assert.equal(await valueOf(`${read} + ''`, 'alice'), expected);
      }
    } finally {
      await fresh.close();
    }
  });

  it("(b) a schema another client registered ($id) or referenced is not seen: the same answer as in a fresh child", async () => {
    await attempt("JSONSchema.validate({ $id: 'https://cfgu.test/shared', type: 'string' }, 'x')");
    await attempt("JSONSchema.validate({ $schema: 'http://json-schema.org/draft-07/schema#/definitions/nonNegativeInteger', type: 'string' }, 'x')");
    const read = "(() => { try { return String(JSONSchema.validate({ $ref: 'https://cfgu.test/shared' }, 1)) } catch (e) { return e.message } })()";
    assert.equal(await assertSteady(read, []), "can't resolve reference https://cfgu.test/shared from id #");
    const pointer = "(() => { try { return String(JSONSchema.validate({ $schema: 'http://json-schema.org/draft-07/schema#/definitions/nonNegativeInteger', type: 'string' }, 'x')) } catch (e) { return e.message } })()";
    assert.equal(await assertSteady(pointer, []), 'schema is invalid: data must be integer');
  });
});
