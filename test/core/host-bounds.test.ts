/**
 * Host-side bounds of the engine (issue 10, findings 4, 7, 9, 10, 11, 14): the `const` analysis is linear (measured by
 * its own step counter, not by time), request limits (LimitError) and output limits (rule `const`), exact schema
 * cache keys, the byte bound of that cache, one `enum` rule for declarations and evaluation, deep JSON values.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  coerceValue,
  evaluatePipeline,
  exportPipeline,
  prepareSchema,
  InputError,
  LimitError,
  ValidationError,
  DEFAULT_ENGINE_LIMITS,
  type EvalCommandInput,
} from '../../src/core/index.js';
import { configureSchemaCache, constAnalysisSteps, schemaCacheStats } from '../../src/core/schema.js';
import { CacheBudget } from '../../src/core/cache-budget.js';
import { MAX_VALUE_DEPTH } from '../../src/core/coerce.js';
import { MAX_DECLARATION_DEPTH, MAX_SCHEMA_DEPTH, jsonShapeIssue } from '../../src/core/schema-check.js';
import { analyseTemplate, parseTemplate } from '../../src/core/template.js';
import { MemoryStore, MemoryResolver, HostEvaluator } from '../helpers/engine.js';

/** Steps the analysis takes to prepare `schema` (a schema not seen before, so nothing comes from the cache). */
function stepsFor(schema: unknown): number {
  const before = constAnalysisSteps();
  prepareSchema(schema);
  return constAnalysisSteps() - before;
}

let fresh = 0;
/** Schemas of n consts in the shapes that were quadratic or worse; a fresh key prefix each call defeats the cache. */
const shapes: Record<string, (n: number) => { keys: Record<string, unknown> }> = {
  // The issue's input: each template one long name made of other names' characters.
  'long tokens': (n) => {
    const p = `a0${fresh++}_`;
    const keys: Record<string, unknown> = {};
    for (let i = 0; i < n; i++) keys[`${p}${i}`] = { const: `{{${'a0'.repeat(30)}}}` };
    return { keys };
  },
  // A chain where every const also names the first: n edges to one key, and a depth-n dependency path.
  'chain to the first': (n) => {
    const p = `c${fresh++}_`;
    const keys: Record<string, unknown> = { [`${p}0`]: { const: 'x' } };
    for (let i = 1; i < n; i++) keys[`${p}${i}`] = { const: `{{ $.configs.${p}${i - 1}.value + $.configs.${p}0.value }}` };
    return { keys };
  },
  // One cycle through every const, each also naming the first: the old cycle search copied the stack per back edge.
  'one big cycle': (n) => {
    const p = `y${fresh++}_`;
    const keys: Record<string, unknown> = {};
    for (let i = 0; i < n; i++) keys[`${p}${i}`] = { const: `{{ ${p}${(i + 1) % n} }} {{ ${p}0 }}` };
    return { keys };
  },
};

for (const [name, make] of Object.entries(shapes)) {
  test(`const analysis is linear: ${name}`, () => {
    const small = make(1000);
    const large = make(4000);
    const s = stepsFor(small);
    const l = stepsFor(large);
    // Four times the input: linear work grows about four times, quadratic work sixteen times.
    assert.ok(l / s < 4.6, `steps grew ${(l / s).toFixed(2)}x for 4x the input (${s} -> ${l})`);
    // And in absolute terms: a few steps per character of the schema text.
    assert.ok(l <= 3 * JSON.stringify(large).length, `${l} steps for ${JSON.stringify(large).length} characters`);
  });
}

test('analyseTemplate finds exactly the names parseTemplate expression parts hold as whole tokens', () => {
  let seed = 7;
  const rand = (n: number) => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed % n;
  };
  const alphabet = ['{{', '}}', '<%', '%>', 'A', 'B', 'AB', 'B-A', '_', ' ', '.', "'", '{', '}', '%', '<', 'x'];
  const names = new Set(['A', 'B', 'AB', 'B-A', 'x']);
  for (let run = 0; run < 3000; run++) {
    const template = Array.from({ length: 1 + rand(14) }, () => alphabet[rand(alphabet.length)]).join('');
    const parts = parseTemplate(template).filter((p) => p.kind === 'expr');
    const tokens = new Set(parts.flatMap((p) => (p.kind === 'expr' ? p.source.match(/[A-Za-z0-9_-]+/g) ?? [] : [])));
    const expected = [...names].filter((n) => tokens.has(n)).sort();
    const got = analyseTemplate(template, names);
    assert.deepEqual([...got.references].sort(), expected, template);
    assert.equal(got.expressions, parts.length, template);
  }
});

test('parseTemplate with both openers, repeated and unclosed', () => {
  assert.deepEqual(parseTemplate('a{{x}}b<%y%>c{{z}}d'), [
    { kind: 'text', text: 'a' },
    { kind: 'expr', source: 'x' },
    { kind: 'text', text: 'b' },
    { kind: 'expr', source: 'y' },
    { kind: 'text', text: 'c' },
    { kind: 'expr', source: 'z' },
    { kind: 'text', text: 'd' },
  ]);
  assert.deepEqual(parseTemplate('{{ a <% b %> }}<%c%>'), [
    { kind: 'expr', source: 'a <% b %>' },
    { kind: 'expr', source: 'c' },
  ]);
  assert.deepEqual(parseTemplate('<% a {{ b }} %>{{c}} {{ d'), [
    { kind: 'expr', source: 'a {{ b }}' },
    { kind: 'expr', source: 'c' },
    { kind: 'text', text: ' {{ d' },
  ]);
  assert.equal(parseTemplate('{{a}}'.repeat(20_000)).length, 20_000);
});

test('a chain of 30,000 consts is ordered without overflowing the stack', () => {
  const keys: Record<string, unknown> = {};
  const n = 30_000;
  for (let i = 0; i < n; i++) keys[`K${i}`] = { const: i === n - 1 ? 'end' : `{{ K${i + 1} }}` };
  const s = prepareSchema({ keys });
  assert.equal(s.constCycles.size, 0);
  assert.equal(s.constOrder.length, n);
  assert.equal(s.constOrder[0], `K${n - 1}`);
  assert.equal(s.constOrder[n - 1], 'K0');
});

test('cycles: every key of a circle fails with one shortest cycle, long cycles shortened', () => {
  const s = prepareSchema({ keys: { A: { const: '{{B}}' }, B: { const: '{{C}} {{A}}' }, C: { const: '{{A}}' }, D: { const: '{{A}}' } } });
  assert.deepEqual([...s.constCycles], [
    ['A', 'A -> B -> A'],
    ['B', 'A -> B -> A'],
    ['C', 'A -> B -> A'],
  ]);
  assert.deepEqual(s.constOrder, ['D']);
  const keys: Record<string, unknown> = {};
  for (let i = 0; i < 20; i++) keys[`R${i}`] = { const: `{{ R${(i + 1) % 20} }}` };
  const long = prepareSchema({ keys });
  assert.equal(long.constCycles.get('R7'), 'R0 -> R1 -> R2 -> R3 -> R4 -> R5 -> R6 -> R7 -> … (12 more) -> R0');
});

// ------------------------------------------------------------------ request limits (413)

function deps(configs: Array<{ set: string; key: string; value: string }> = []) {
  const stores = new MemoryResolver([new MemoryStore('main', 'in-memory', configs)], 'main');
  return { stores, expressions: new HostEvaluator() };
}

async function limitMessage(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof LimitError, String(e));
    return e.message;
  }
  assert.fail('expected a LimitError');
}

test('set depth: at the limit evaluates, one more segment is a LimitError before any store read', async () => {
  const d = deps([{ set: 'a/a', key: 'K', value: 'deep' }]);
  const path = (n: number) => Array.from({ length: n }, () => 'a').join('/');
  const at = await exportPipeline([{ set: `/${path(3)}/`, schema: { keys: { K: null } } }], d, { limits: { setDepth: 3 } });
  assert.deepEqual(at.configs, { K: 'deep' });
  const main = d.stores.stores.get('main')!;
  const reads = main.reads;
  assert.equal(
    await limitMessage(exportPipeline([{ set: path(4), schema: { keys: { K: null } } }], d, { limits: { setDepth: 3 } })),
    'command 0: the set path has 4 segments; the limit is 3',
  );
  assert.equal(main.reads, reads);
  // The default: 32.
  assert.equal(DEFAULT_ENGINE_LIMITS.setDepth, 32);
  assert.equal(
    await limitMessage(exportPipeline([{ set: path(3000), schema: { keys: { K: null } } }], d)),
    'command 0: the set path has 3000 segments; the limit is 32',
  );
});

test('store lookups: keys times sets, summed over the pipeline', async () => {
  const d = deps();
  const keys = { A: null, B: null, C: { lazy: true }, D: { const: 'x' } };
  // 2 store keys x 3 sets = 6 per command.
  const command = { set: 'x/y', schema: { keys } };
  await exportPipeline([command, command], d, { limits: { lookups: 12 } });
  assert.equal(
    await limitMessage(exportPipeline([command, command], d, { limits: { lookups: 11 } })),
    "the pipeline reads 12 store entries (each command's keys times the sets of its hierarchy); the limit is 11",
  );
  // Without a store (defaults only) nothing is read.
  await evaluatePipeline([command, command], { defaultsOnly: true, expressions: d.expressions }, { limits: { lookups: 0 } });
});

test('const templates: length and number of expressions', async () => {
  const d = deps();
  const template = '{{ 1 }}é{{ 2 }}';
  const limits = { templateBytes: Buffer.byteLength(template), templateExpressions: 2 };
  const ok = await exportPipeline([{ schema: { keys: { T: { const: template } } } }], d, { limits });
  assert.deepEqual(ok.configs, { T: '1é2' });
  assert.equal(
    await limitMessage(exportPipeline([{ schema: { keys: { T: { const: `${template} ` } } } }], d, { limits })),
    'command 0: the `const` of key "T" is 17 bytes long; the limit is 16',
  );
  assert.equal(
    await limitMessage(exportPipeline([{ schema: { keys: { T: { const: '{{1}}{{2}}<%3%>' } } } }], d, { limits })),
    'command 0: the `const` of key "T" has 3 expressions; the limit is 2',
  );
  // A limit is found before the commands' other problems (a bad set in command 0 here).
  assert.equal(
    await limitMessage(exportPipeline([{ set: 'bad set', schema: { keys: { A: null } } }, { schema: { keys: { T: { const: '{{1}}{{2}}<%3%>' } } } }], d, { limits })),
    'command 1: the `const` of key "T" has 3 expressions; the limit is 2',
  );
});

// ------------------------------------------------------------------ output limits (422, rule const)

async function failuresOf(p: Promise<unknown>) {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof ValidationError, String(e));
    return e.failures;
  }
  assert.fail('expected a ValidationError');
}

test('one const value over valueBytes fails its key; the commands after it do not run', async () => {
  const d = deps();
  const big = (n: number, key: string): EvalCommandInput => ({ schema: { keys: { [key]: { const: `{{ "é".repeat(${n}) }}` } } } });
  const ok = await exportPipeline([big(50, 'A')], d, { limits: { valueBytes: 100 } });
  assert.equal(ok.configs.A, 'é'.repeat(50));
  d.expressions.jobs.length = 0;
  assert.deepEqual(await failuresOf(exportPipeline([big(51, 'A'), big(1, 'B')], d, { limits: { valueBytes: 100 } })), [
    { command: 0, key: 'A', rule: 'const', message: 'the value of `const` of key "A" is 102 bytes; the limit is 100' },
  ]);
  assert.equal(d.expressions.jobs.length, 1);
});

test('the const values a request holds are bounded in total, across the pipe', async () => {
  const d = deps();
  const command = (key: string): EvalCommandInput => ({ schema: { keys: { [key]: { const: '{{ "x".repeat(40) }}' } } } });
  const limits = { outputBytes: 100 };
  const two = await exportPipeline([command('A'), command('B')], d, { limits });
  assert.deepEqual(Object.keys(two.configs), ['A', 'B']);
  d.expressions.jobs.length = 0;
  assert.deepEqual(await failuresOf(exportPipeline([command('A'), command('B'), command('C'), command('D')], d, { limits })), [
    { command: 2, key: 'C', rule: 'const', message: 'the value of `const` of key "C" brings the values computed by `const` in this request to 120 bytes; the limit is 100' },
  ]);
  assert.equal(d.expressions.jobs.length, 3);
  // A key computed again by a later command counts once: its new value replaces the old one.
  const again = await exportPipeline([command('A'), command('A'), command('A'), command('B')], d, { limits });
  assert.deepEqual(Object.keys(again.configs), ['A', 'B']);
});

// ------------------------------------------------------------------ declarations (400)

function issuesOf(schema: unknown) {
  try {
    prepareSchema(schema);
  } catch (e) {
    assert.ok(e instanceof InputError, String(e));
    return e.issues;
  }
  assert.fail('expected an InputError');
}

test('declarations nest at most 64 levels; deeper is a 400 issue, not a stack overflow', () => {
  const nest = (n: number): unknown => (n === 0 ? 1 : [nest(n - 1)]);
  prepareSchema({ keys: { E: { enum: nest(64) as unknown[] } } });
  assert.deepEqual(issuesOf({ keys: { E: { enum: nest(65) } } }), [{ path: '/keys/E/enum', message: '`enum` of key "E" is nested more than 64 levels deep' }]);
  assert.deepEqual(issuesOf({ keys: { E: { enum: nest(1600), default: nest(1599) } } }), [
    { path: '/keys/E/enum', message: '`enum` of key "E" is nested more than 64 levels deep' },
  ]);
  assert.deepEqual(issuesOf({ keys: { E: { schema: { not: nest(100) } } } }), [{ path: '/keys/E/schema', message: '`schema` of key "E" is nested more than 32 levels deep' }]);
  assert.deepEqual(issuesOf({ keys: { E: null }, extra: nest(100) }), [{ path: '/extra', message: 'the schema is nested more than 64 levels deep' }]);
  assert.deepEqual(issuesOf({ keys: nest(100) }), [{ path: '/keys', message: '`keys` is nested more than 64 levels deep' }]);
});

test('a `schema` declaration nests at most 32 levels (the sandbox compiles it); other properties and top-level ones keep 64', () => {
  /** `n` nested `items`: levels 1 (the outer object) to n + 1 (the innermost `{}`). */
  const items = (n: number): unknown => (n === 0 ? {} : { items: items(n - 1) });
  prepareSchema({ keys: { S: { schema: items(31) as object } } });
  assert.deepEqual(issuesOf({ keys: { S: { schema: items(32) } } }), [{ path: '/keys/S/schema', message: '`schema` of key "S" is nested more than 32 levels deep' }]);
  assert.equal(MAX_SCHEMA_DEPTH, 32);
  assert.equal(MAX_DECLARATION_DEPTH, 64);
  // The same nesting in an `enum` value, and in a top-level property named `schema`, is within 64.
  prepareSchema({ keys: { E: { enum: [items(62)] as unknown[] } } });
  assert.equal(jsonShapeIssue({ keys: {}, schema: items(62) }), undefined);
});

test('non-finite numbers and non-JSON values are refused, so the cache text is exact', () => {
  const inf = issuesOf({ keys: { M: { schema: { maximum: Infinity } } } });
  assert.deepEqual(inf, [{ path: '/keys/M/schema', message: '`schema` of key "M" holds a number that is not finite (such as 1e400); cfgu refuses them' }]);
  // `null` in the same place has its own answer, before and after the Infinity one.
  const nul = issuesOf({ keys: { M: { schema: { maximum: null } } } });
  assert.match(nul[0]!.message, /is not a valid JSON Schema: \/maximum must be number/);
  assert.deepEqual(issuesOf({ keys: { M: { schema: { maximum: Infinity } } } }), inf);
  assert.deepEqual(issuesOf({ keys: { M: { enum: [NaN] } } }), [{ path: '/keys/M/enum', message: '`enum` of key "M" holds a number that is not finite (such as 1e400); cfgu refuses them' }]);
  prepareSchema({ keys: { M: { enum: [null] } } });
  assert.deepEqual(issuesOf({ keys: { M: { default: undefined } } }), [{ path: '/keys/M/default', message: '`default` of key "M" holds a value that is not JSON' }]);
  assert.deepEqual(issuesOf({ keys: { M: { default: new Date(0) } } }), [{ path: '/keys/M/default', message: '`default` of key "M" holds a value that is not JSON' }]);
});

test('a cached failure carries only its own text: a later schema that Ajv cannot check does not get its errors', () => {
  const first = issuesOf({ keys: { A: { schema: { properties: { secretField: { type: 5 } } } } } });
  assert.match(first[0]!.message, /secretField/);
  assert.deepEqual(issuesOf({ keys: { B: { schema: { $schema: 'https://example.com/unknown' } } } }), [
    { path: '/keys/B/schema', message: '`schema` of key "B" is not a valid JSON Schema: /$schema is not a meta-schema cfgu can check against' },
  ]);
});

test('the prepared-schema cache is bounded by the estimated memory of what it holds (issue 31)', () => {
  const saved = schemaCacheStats().limits;
  const budget = new CacheBudget(2_000_000);
  try {
    configureSchemaCache({ budget });
    // 200 keys each: about 600 bytes a key beyond its text, whatever the text's length.
    const wide = (i: number) => ({ keys: Object.fromEntries(Array.from({ length: 200 }, (_, k) => [`W${i}_${k}`, {}])) });
    for (let i = 0; i < 40; i++) {
      prepareSchema(wide(i));
      assert.ok(budget.totalBytes() <= budget.limitBytes, `${budget.totalBytes()} bytes`);
    }
    const stats = schemaCacheStats();
    assert.ok(stats.bytes <= 2_000_000, `${stats.bytes} bytes cached`);
    assert.ok(stats.entries < 40 && stats.entries > 5, `${stats.entries} entries`);
    // A schema larger than an eighth of the ceiling is prepared but not kept.
    const entries = stats.entries;
    assert.equal(prepareSchema({ keys: { HUGE: { description: 'y'.repeat(300_000) } } }).keys.length, 1);
    assert.ok(schemaCacheStats().entries <= entries);
    assert.ok(schemaCacheStats().bytes <= 2_000_000);
  } finally {
    configureSchemaCache({ budget: saved.budget, entries: saved.entries });
  }
});

// ------------------------------------------------------------------ enum and default agree

test('a default the declaration check accepts passes the enum check, and one it refuses fails it', async () => {
  const values: unknown[] = [null, 5, '5', 'null', true, 'true', [1], '[1]', { a: 1 }, '{"a":1}', '', 0, 1.5, 'x'];
  const types: Array<string | undefined> = [undefined, 'string', 'number', 'array', 'object', 'boolean', 'null'];
  // Only the enum check is asked about: this evaluator passes every `schema` check.
  class PassingEvaluator extends HostEvaluator {
    override async run() {
      return { consts: [], tests: [] };
    }
  }
  const d = { defaultsOnly: true, expressions: new PassingEvaluator() };
  const counts = { accepted: 0, refused: 0 };
  for (const type of types) {
    for (const def of values) {
      for (const item of values) {
        const constraints: Record<string, unknown> = { enum: [item], ...(type ? { schema: { type } } : {}) };
        let declared = true;
        try {
          prepareSchema({ keys: { K: { ...constraints, default: def } } });
        } catch (e) {
          assert.ok(e instanceof InputError);
          assert.deepEqual(e.issues.map((i) => i.path), ['/keys/K/default']);
          declared = false;
        }
        if (declared) {
          counts.accepted++;
          await evaluatePipeline([{ schema: { keys: { K: { ...constraints, default: def } } } } as EvalCommandInput], d);
        } else {
          // The same text given as an override is what the default would have been: the enum check refuses it.
          counts.refused++;
          const failures = await failuresOf(evaluatePipeline([{ schema: { keys: { K: constraints } }, configs: { K: def } } as EvalCommandInput], d));
          assert.deepEqual(failures.map((f) => f.rule), ['enum'], JSON.stringify({ def, item, type }));
        }
      }
    }
  }
  assert.ok(counts.accepted > 100 && counts.refused > 100, JSON.stringify(counts));
});

test('the two declarations of finding 14 evaluate', async () => {
  const d = { defaultsOnly: true, expressions: new HostEvaluator() };
  const a = await exportPipeline([{ schema: { keys: { N: { default: null, enum: [null] } } } } as EvalCommandInput], d);
  assert.deepEqual(a.configs, { N: 'null' });
  const b = await exportPipeline([{ schema: { keys: { F: { default: 5, enum: [5], schema: { type: 'string' } } } } } as EvalCommandInput], d);
  assert.deepEqual(b.configs, { F: '5' });
  // The text rule does not loosen the value rule: a stored "6" is still refused.
  const failures = await failuresOf(exportPipeline([{ schema: { keys: { F: { enum: [5], schema: { type: 'string' } } } }, configs: { F: 6 } } as EvalCommandInput], d));
  assert.deepEqual(failures.map((f) => f.rule), ['enum']);
});

// ------------------------------------------------------------------ deep JSON values

test('a value whose JSON nests deeper than MAX_VALUE_DEPTH stays a string', () => {
  const text = (n: number) => '['.repeat(n) + ']'.repeat(n);
  assert.equal(MAX_VALUE_DEPTH, 64);
  assert.equal(JSON.stringify(coerceValue(text(64))), text(64));
  assert.equal(coerceValue(text(65)), text(65));
  assert.equal(coerceValue(text(5000)), text(5000));
  const objects = (n: number) => '{"a":'.repeat(n) + '1' + '}'.repeat(n);
  assert.deepEqual(JSON.stringify(coerceValue(objects(64))), objects(64));
  assert.equal(coerceValue(objects(65), 'object'), objects(65));
  // Wide is not deep.
  const wide = `[${Array.from({ length: 1000 }, () => '[[1]]').join(',')}]`;
  assert.equal(JSON.stringify(coerceValue(wide)), wide);
});
