// The in-isolate JSON Schema cache stays bounded: distinct schemas (with `$id` or not) never accumulate in Ajv, and the
// realm is verified sealed. Runs the bundle in an isolate of its own to read the runtime's counters (`stats`), which
// expressions cannot reach.
import { before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type IVM from 'isolated-vm';
import { loadSandboxBuild } from '../../src/expressions/isolated-vm.js';

const BUNDLE = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'dist', 'sandbox', 'libraries.js');
if (!existsSync(BUNDLE)) throw new Error('dist/sandbox/libraries.js is missing: run `node scripts/build.mjs` first');

interface Stats {
  generations: number;
  compiles: number;
  bytes: number;
  cached: number;
  ajvScopeValues: number;
  ajvRefs: number;
  ajvSchemas: number;
  metaRefs: number;
  metaSchemas: number;
  validatorLimit: number;
}
let handle: IVM.Reference<(line: string) => string>;
let stats: IVM.Reference<() => string>;
let limits: IVM.Reference<(memoryMb: number) => void>;
let sealReport: { unsealed: string[]; unfixable: string[] };

before(() => {
  const { ivm } = loadSandboxBuild();
  const isolate = new ivm.Isolate({ memoryLimit: 128 });
  const context = isolate.createContextSync();
  isolate.compileScriptSync(readFileSync(BUNDLE, 'utf8')).runSync(context);
  const runtime = context.global.getSync('__cfguRuntime', { reference: true }) as IVM.Reference<Record<string, unknown>>;
  const seal = runtime.getSync('seal', { reference: true }) as IVM.Reference<() => string>;
  handle = runtime.getSync('handle', { reference: true }) as IVM.Reference<(line: string) => string>;
  stats = runtime.getSync('stats', { reference: true }) as IVM.Reference<() => string>;
  limits = runtime.getSync('limits', { reference: true }) as IVM.Reference<(memoryMb: number) => void>;
  sealReport = JSON.parse(seal.applySync(undefined, []) as string);
});

const check = (expression: string, value: unknown): unknown =>
  JSON.parse(handle.applySync(undefined, [JSON.stringify({ t: 'bool', expression, context: { value } })]) as string);
const read = (): Stats => JSON.parse(stats.applySync(undefined, []) as string) as Stats;

describe('JSON Schema cache inside the isolate', () => {
  it('seals everything reachable (the verification walk finds nothing writable)', () => {
    assert.deepEqual(sealReport.unsealed, []);
    assert.deepEqual(sealReport.unfixable, []);
  });

  it('1,200 distinct schemas with $id: the cache keeps at most one generation (500 compiles), ids never pile up', () => {
    const seen: Stats[] = [];
    for (let i = 0; i < 1200; i++) {
      const schema = { $id: `https://example.test/s${i}`, type: 'object', properties: { a: { type: 'string', pattern: `^p${i}` } } };
      assert.deepEqual(check(`JSONSchema.validate(${JSON.stringify(schema)}, $.value)`, { a: `p${i}` }), { t: 'value', ok: true, value: true });
      if (i % 100 === 99) seen.push(read());
    }
    const last = read();
    assert.ok(last.generations >= 3, JSON.stringify(last));
    for (const s of seen) {
      assert.ok(s.compiles <= 500 && s.cached <= 500, JSON.stringify(s));
      // Each compile has an Ajv instance of its own: the last one holds the meta-schema, its alias and that compile's
      // own `$id`, never an earlier one's; the meta-schema checker only the meta-schema and its alias.
      assert.ok(s.ajvRefs <= 3 && s.ajvSchemas <= 2 && s.metaRefs <= 2 && s.metaSchemas <= 2, JSON.stringify(s));
    }
    // What Ajv holds (scope values: compiled functions, schemas, regexps) grows with one generation, then starts over.
    const peak = Math.max(...seen.map((s) => s.ajvScopeValues));
    assert.ok(peak < 500 * 10, `scope values ${peak}`);
    // The same schema again is a cache hit: no compile.
    const before = read().compiles;
    check(`JSONSchema.validate(${JSON.stringify({ $id: 'https://example.test/s1199', type: 'object', properties: { a: { type: 'string', pattern: '^p1199' } } })}, $.value)`, {});
    assert.equal(read().compiles, before);
  });

  it('the cache is bounded by the validators\' estimated memory: from the isolate\'s limit, large schemas are not kept or start a new generation', () => {
    limits.applySync(undefined, [128]);
    const bound = (128 * 1024 * 1024) / 8;
    assert.equal(read().validatorLimit, bound);
    const start = read().generations;
    // ~500 values each: about 250 KB estimated (500 bytes a value), so a 16 MB generation holds about 60.
    const wide = (i: number) => ({ type: 'object', properties: Object.fromEntries(Array.from({ length: 160 }, (_, k) => [`p${k}`, { type: 'string', maxLength: k + i }])) });
    for (let i = 0; i < 100; i++) {
      assert.deepEqual(check(`JSONSchema.validate(${JSON.stringify(wide(i))}, $.value)`, {}), { t: 'value', ok: true, value: true });
      assert.ok(read().bytes <= bound, JSON.stringify(read()));
    }
    assert.ok(read().generations >= start + 1);
    // A schema whose validator alone would pass the bound is compiled, used, and not kept: under an 8 MB isolate's
    // bound (1 MB), an enum of 3,000 values (estimated 1.5 MB).
    limits.applySync(undefined, [8]);
    const big = { enum: Array.from({ length: 3000 }, (_, k) => k) };
    const before = read();
    assert.deepEqual(check(`JSONSchema.validate(${JSON.stringify(big)}, $.value)`, 7), { t: 'value', ok: true, value: true });
    assert.equal(read().cached, before.cached);
    assert.equal(read().bytes, before.bytes);
    limits.applySync(undefined, [128]);
  });

  it('the meta-schema checker holds the same after schemas that name other $schema values (pointers into it)', () => {
    // One check first, so that what the first check registers (the meta-schema's `#` alias) is in the baseline.
    check(`JSONSchema.validate(${JSON.stringify({ $schema: 'http://json-schema.org/draft-07/schema#', type: 'string' })}, $.value)`, 'x');
    const start = read();
    // Each pointer made the shared checker register and compile a validator of its own, for good.
    const pointers = ['definitions/nonNegativeInteger', 'definitions/schemaArray', 'definitions/stringArray', 'properties/title', 'properties/minLength', 'properties/type'];
    for (const pointer of pointers) {
      const schema = { $schema: `http://json-schema.org/draft-07/schema#/${pointer}`, type: 'string' };
      assert.equal((check(`JSONSchema.validate(${JSON.stringify(schema)}, $.value)`, 'x') as { t: string }).t, 'value');
    }
    const end = read();
    assert.equal(end.metaRefs, start.metaRefs, JSON.stringify(end));
    assert.equal(end.metaSchemas, start.metaSchemas, JSON.stringify(end));
  });
});
