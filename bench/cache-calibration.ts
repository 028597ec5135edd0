/**
 * Calibration of the caches' size estimates (issue 31, "Memory has a ceiling"): for each cache, the heap that one
 * entry really holds, measured as the growth of the heap over many distinct entries of one shape, against what the
 * estimate of src/core/cache-budget.ts (and each cache's own `estimate`) says for them.
 *
 *   node --expose-gc --import tsx bench/cache-calibration.ts
 *
 * Method: per shape, make `n` distinct entries (one character differs), measure `process.memoryUsage().heapUsed`
 * after two full collections before and after inserting them into an unbounded copy of the cache, and divide by `n`.
 * External memory (Buffers) is not involved: every cache holds JS strings and objects only. Printed per shape: text
 * characters per entry, measured bytes per entry, estimated bytes per entry and the ratio estimate / measured (the
 * estimates are meant to be at or above 1: a ceiling computed from them holds).
 */
import { BODY_RECORD_DEPTH } from '../src/server/http/body/body-cache.js';
import { CacheBudget, estimateBodyBytes, estimateSchemaBytes, estimateStaticBytes, estimateAnswerBytes } from '../src/core/cache-budget.js';
import { compiledBytes } from '../src/expressions/isolate/compile.js';
import { validatorBytes } from '../src/expressions/isolate/json-schema.js';
import Ajv from 'ajv';
import addFormats from 'ajv-formats';
import { freezeDeep, freezeCounting } from '../src/core/frozen.js';
import { configureSchemaCache, prepareSchema } from '../src/core/schema.js';
import { StaticRegistry } from '../src/expressions/wire/job-wire.js';

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with node --expose-gc');

function heap(): number {
  gc!();
  gc!();
  return process.memoryUsage().heapUsed;
}

interface Row {
  cache: string;
  shape: string;
  chars: number;
  measured: number;
  estimated: number;
}
const rows: Row[] = [];

function measure(cache: string, shape: string, n: number, make: (i: number) => string, keep: (text: string, i: number) => number): void {
  const texts = Array.from({ length: n }, (_, i) => make(i));
  const held: unknown[] = [];
  let estimated = 0;
  const before = heap();
  for (let i = 0; i < n; i++) {
    const e = keep(texts[i]!, i);
    estimated += e;
  }
  const after = heap();
  held.length = 0;
  // The texts themselves were made before `before`; an entry's own copy of its text is what the cache keeps (the
  // request's string in the server), so the text is counted here once: by what `keep` retains.
  const chars = texts.reduce((s, t) => s + t.length, 0) / n;
  rows.push({ cache, shape, chars, measured: (after - before) / n, estimated: estimated / n });
}

// --- Shapes of request bodies -------------------------------------------------------------------------------------
const pad = (i: number, w = 6) => String(i).padStart(w, '0');
/** A schema of about `bytes` characters: keys with a description and an enum each. */
function bigSchema(bytes: number, salt: number): object {
  const keys: Record<string, unknown> = {};
  let size = 0;
  for (let k = 0; size < bytes; k++) {
    const decl = { description: `Key ${k} of schema ${salt}: the address the service connects to, with its port`, enum: ['alpha', 'beta', 'gamma', `delta${k}`, 'epsilon'], default: 'alpha' };
    keys[`SERVICE_${salt}_KEY_${pad(k)}`] = decl;
    size += 190;
  }
  return { keys };
}
const shapes: Array<[string, number, (i: number) => string]> = [
  ['650 KB schema (descriptions, enums)', 30, (i) => JSON.stringify([{ store: 'default', set: 'dev', schema: bigSchema(650_000, i) }])],
  ['10-key pipeline', 20_000, (i) => JSON.stringify([{ store: 'default', set: `dev/${i}`, schema: { keys: Object.fromEntries(Array.from({ length: 10 }, (_, k) => [`KEY_${k}`, { description: 'The key', required: k < 3, default: `v${k}` }])) } }])],
  ['[{},{},...] 200 KB', 40, (i) => `[${'{},'.repeat(66_000)}{"i":${i}}]`],
  ['[[],[],...] 200 KB', 40, (i) => `[${'[],'.repeat(66_000)}[${i}]]`],
  ['[0,1,...] 200 KB', 40, (i) => `[${i},${Array.from({ length: 40_000 }, (_, k) => k % 1000).join(',')}]`],
  ['["ab",...] 200 KB', 40, (i) => `[${i},${Array.from({ length: 40_000 }, (_, k) => `"s${k % 100}"`).join(',')}]`],
  ['nested configs 200 KB', 40, (i) => JSON.stringify([{ store: 'default', set: `s${i}`, configs: Object.fromEntries(Array.from({ length: 2000 }, (_, k) => [`K${k}`, { a: [1, 2, { b: 'xyzw' }], c: { d: { e: k } } }])) }])],
];

for (const [shape, n, make] of shapes) {
  const kept: Array<[string, unknown]> = [];
  measure('body', shape, n, make, (text) => {
    // What BodyCache.add does: parse, freeze (counting) and keep text -> value. The text is copied so that the entry
    // owns it, as a request's string is owned by the cache once the request is gone.
    const own = (' ' + text).slice(1);
    const value = JSON.parse(own) as object;
    const counts = freezeCounting(value, BODY_RECORD_DEPTH);
    kept.push([own, value]);
    return estimateBodyBytes(own.length, Buffer.byteLength(own) !== own.length, counts);
  });
  kept.length = 0;
}

// --- Prepared schemas ---------------------------------------------------------------------------------------------
const unbounded = new CacheBudget(Number.MAX_SAFE_INTEGER);
configureSchemaCache({ entries: 1_000_000, budget: unbounded });
const schemaShapes: Array<[string, number, (i: number) => string]> = [
  ['650 KB schema (descriptions, enums)', 30, (i) => JSON.stringify(bigSchema(650_000, i))],
  ['10 keys', 20_000, (i) => JSON.stringify({ keys: Object.fromEntries(Array.from({ length: 10 }, (_, k) => [`KEY_${i}_${k}`, { description: 'The key', required: k < 3 }])) })],
  ['2,000 empty declarations', 100, (i) => JSON.stringify({ keys: Object.fromEntries(Array.from({ length: 2000 }, (_, k) => [`K${i}_${k}`, {}])) })],
  ['500 keys with const and test', 100, (i) => JSON.stringify({ keys: Object.fromEntries(Array.from({ length: 500 }, (_, k) => [`K${i}_${k}`, k % 2 ? { const: `{{ $.configs.K${i}_${k - 1}.value }}-x` } : { test: ['$.value.length > 2', 'validator.isURL($.value)'], pattern: '^[a-z]+$' }])) })],
];
for (const [shape, n, make] of schemaShapes) {
  measure('schema', shape, n, make, (text) => {
    // The body the schema came in is gone (evicted): the prepared form keeps the declarations it points to.
    const before = prepareSchemaEstimate(text);
    return before;
  });
  configureSchemaCache({ entries: 0 });
  configureSchemaCache({ entries: 1_000_000 });
}
function prepareSchemaEstimate(text: string): number {
  const schema = JSON.parse(text) as { keys: Record<string, unknown> };
  const prepared = prepareSchema(schema);
  return estimateSchemaBytes(text.length, prepared.keys.length);
}

// --- Static halves (host registry) ----------------------------------------------------------------------------------
for (const [shape, n, make] of schemaShapes) {
  const registry = new StaticRegistry(unbounded);
  measure('static', shape, n, make, (text) => {
    const keys = JSON.parse(text).keys as Record<string, unknown>;
    const consts = Object.entries(keys).filter(([, d]) => (d as { const?: string }).const).map(([key, d]) => ({ key, template: (d as { const: string }).const }));
    const half = registry.intern(keys, consts, []);
    return estimateStaticBytes(half.text.length, half.names.length);
  });
  (globalThis as { keep?: unknown }).keep = registry;
}

// --- Kept answers ---------------------------------------------------------------------------------------------------
const answerShapes: Array<[string, number, number, number]> = [
  // consts, value length, configs in the job line
  ['1 const of 40 chars', 20_000, 1, 40],
  ['10 consts of 20 chars', 20_000, 10, 20],
  ['100 consts of 200 chars', 2000, 100, 200],
];
for (const [shape, n, consts, width] of answerShapes) {
  const kept = new Map<string, unknown>();
  measure('answer', shape, n, (i) => `client\u0000{"t":"j","id":${i},"d":[{"type":"json-file"},{"path":"dev"},[${Array.from({ length: consts }, (_, k) => `["v${k}","store"]`).join(',')}],0,0]`, (key, i) => {
    const own = (' ' + key).slice(1);
    const result = freezeDeep({ consts: Array.from({ length: consts }, (_, k) => ({ key: `KEY_${k}`, ok: true, value: `${i}`.padEnd(width, 'x') })), tests: [] });
    kept.set(own, result);
    let chars = 0;
    for (const c of result.consts) chars += c.key.length + c.value.length;
    return estimateAnswerBytes(own.length, result.consts.length, chars);
  });
}

const countNodes = (v: unknown): number => (v !== null && typeof v === 'object' ? 1 + Object.values(v).reduce((n: number, x) => n + countNodes(x), 0) : 1);

// --- Inside the isolate (measured in Node's V8, same code): compiled expressions and validators ------------------------
const exprShapes: Array<[string, number, (i: number) => string]> = [
  ['expression of 20 chars', 20_000, (i) => `$.value.length > ${i}`],
  ['expression of 200 chars', 10_000, (i) => `validator.isURL($.value) && $.value.startsWith("https://${'x'.repeat(150)}") && $.value.length < ${i}`],
  ['expression of 5,000 chars', 1000, (i) => `[${Array.from({ length: 900 }, (_, k) => k).join(',')}].includes(${i})`],
];
for (const [shape, n, make] of exprShapes) {
  const kept = new Map<string, (v: unknown) => unknown>();
  measure('expr', shape, n, make, (source) => {
    const own = (' ' + source).slice(1);
    const fn = new Function('$', `"use strict";\nreturn (\n${own}\n);`) as (v: unknown) => unknown;
    try {
      fn({ value: 'https://example.com' });
    } catch {
      /* validator is not defined here: compiled all the same */
    }
    kept.set(own, fn);
    return compiledBytes(own);
  });
}
const AjvClass = ((Ajv as unknown as { default?: unknown }).default ?? Ajv) as unknown as new (o: object) => { compile(s: object): (d: unknown) => unknown };
const formats = ((addFormats as unknown as { default?: unknown }).default ?? addFormats) as unknown as (a: unknown) => void;
const validatorShapes: Array<[string, number, (i: number) => string]> = [
  ['{type:string,minLength}', 2000, (i) => JSON.stringify({ type: 'string', minLength: i })],
  ['object of 5 props, format, pattern', 1000, (i) => JSON.stringify({ type: 'object', properties: { a: { type: 'string', format: 'email' }, b: { type: 'integer', minimum: i }, c: { type: 'string', pattern: `^p${i}` }, d: { type: 'array', items: { type: 'number' } }, e: { enum: ['x', 'y', i] } }, required: ['a'] })],
  ['100 properties', 100, (i) => JSON.stringify({ type: 'object', properties: Object.fromEntries(Array.from({ length: 100 }, (_, k) => [`p${k}`, { type: 'string', maxLength: k + i }])) })],
  ['enum of 2,000 strings', 100, (i) => JSON.stringify({ enum: Array.from({ length: 2000 }, (_, k) => `value-${i}-${k}`) })],
  ['description of 50,000 chars', 100, (i) => JSON.stringify({ type: 'string', description: 'd'.repeat(50_000), minLength: i })],
];
for (const [shape, n, make] of validatorShapes) {
  const kept = new Map<string, unknown>();
  measure('validator', shape, n, make, (text) => {
    const own = (' ' + text).slice(1);
    const ajv = new AjvClass({ allErrors: true, strict: false, validateFormats: true, logger: false, validateSchema: false });
    formats(ajv);
    const copy = JSON.parse(own) as object;
    const validate = ajv.compile(copy);
    validate('x');
    kept.set(own, validate);
    return validatorBytes(own.length, countNodes(copy));
  });
}

console.log('cache   shape                                   chars/entry   measured B   estimated B   est/measured');
for (const r of rows) {
  console.log(
    `${r.cache.padEnd(9)} ${r.shape.padEnd(38)} ${r.chars.toFixed(0).padStart(12)} ${r.measured.toFixed(0).padStart(12)} ${r.estimated.toFixed(0).padStart(13)} ${(r.estimated / r.measured).toFixed(2).padStart(12)}`,
  );
}
