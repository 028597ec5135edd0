/**
 * The runtime that lives INSIDE the isolate (bundled with the libraries by scripts/build-sandbox.mjs into
 * dist/sandbox/libraries.js). It installs the expression globals, seals the realm (deep freeze, no timers, no shared
 * memory, no WebAssembly), and evaluates requests: one JSON line in, one JSON line out.
 *
 * Nothing here can reach the host: the isolate has no host objects at all. What this file guards is the other half
 * of the contract: no state survives from one job to the next, and no expression can disturb the runtime itself.
 */
import { sealPrelude } from './sandbox-prelude.js';
import _ from 'lodash';
import validator from 'validator';
import * as zod from 'zod';
// @ts-expect-error chai 6 ships no type declarations (and @types/chai is not installed)
import * as chai from 'chai';
import Ajv from 'ajv';
import addFormats from 'ajv-formats';
import { parseTemplate, stringifyTemplateValue } from './template.js';
import { coerceValue, declaredTypeOf } from '../core/coerce.js';
import { IMPORT_MESSAGE, failureResponse, labelsOf, type SandboxRequest, type SandboxResponse, type WireJob } from './protocol.js';
import type { ConfigView, ConstOutcome, ExpressionFailureKind, TestOutcome } from './types.js';

// Intrinsics captured before any expression runs (and frozen by seal() anyway).
const O = Object;
const { freeze, defineProperty, getOwnPropertyDescriptor, getPrototypeOf } = Object;
const ownKeys = Reflect.ownKeys;
const apply = Reflect.apply;
const JSONparse = JSON.parse;
const JSONstringify = JSON.stringify;
const StringCtor = String;
const MapCtor = Map;
type SetType<T> = Set<T>;
const SetCtor = Set;
const WeakMapCtor = WeakMap;
const WeakSetCtor = WeakSet;

const MAX_MESSAGE = 500;
const CACHE_LIMIT = 2000;

// ---------------------------------------------------------------------------------------------------------------
// JSON Schema validation (Ajv, compiled inside the isolate). The Ajv instance is private to this closure; every
// validate() call removes what it compiled, so nothing registered by one job (for example a schema `$id`) is seen by
// the next.
// ---------------------------------------------------------------------------------------------------------------
type AjvLike = {
  compile(schema: object | boolean): ((data: unknown) => boolean) & { errors?: unknown };
  errorsText(errors: unknown, options?: { dataVar?: string }): string;
  removeSchema(): unknown;
};
const AjvClass = ((Ajv as unknown as { default?: unknown }).default ?? Ajv) as unknown as new (options: object) => AjvLike;
const addFormatsFn = ((addFormats as unknown as { default?: unknown }).default ?? addFormats) as unknown as (ajv: AjvLike) => void;
const ajv = new AjvClass({ allErrors: true, strict: false, validateFormats: true });
addFormatsFn(ajv);

type CompiledSchema = ((data: unknown) => boolean) & { errors?: unknown };
/**
 * Compiled validators by the schema's JSON text (bounded, least recently used evicted first). A compiled validator
 * depends only on that text and is never reachable from expressions, so reusing it across jobs carries no state.
 * Schemas with `$id` (which Ajv registers by id) or `$async` are compiled every time and removed again.
 */
const compiledSchemas = new MapCtor<string, CompiledSchema>();
const SCHEMA_CACHE_LIMIT = 500;

function compileJsonSchema(schema: object | boolean): CompiledSchema {
  let text: string | undefined;
  try {
    text = JSON.stringify(schema);
  } catch {
    text = undefined;
  }
  const cacheable = text !== undefined && !text.includes('"$id"') && !text.includes('"$async"');
  if (cacheable) {
    const hit = compiledSchemas.get(text!);
    if (hit) {
      compiledSchemas.delete(text!);
      compiledSchemas.set(text!, hit);
      return hit;
    }
  }
  try {
    const validate = ajv.compile(schema);
    if (cacheable) {
      compiledSchemas.set(text!, validate);
      if (compiledSchemas.size > SCHEMA_CACHE_LIMIT) compiledSchemas.delete(compiledSchemas.keys().next().value!);
    }
    return validate;
  } finally {
    ajv.removeSchema();
  }
}

function validateJsonSchema(schema: unknown, data: unknown): true {
  if (typeof schema !== 'boolean' && (schema === null || typeof schema !== 'object')) {
    throw new TypeError('JSONSchema.validate(schema, data): the schema must be an object or a boolean');
  }
  const validate = compileJsonSchema(schema as object | boolean);
  if (validate(data)) return true;
  throw new Error(ajv.errorsText(validate.errors, { dataVar: 'data' }));
}
const JSONSchema = { validate: validateJsonSchema };

// ---------------------------------------------------------------------------------------------------------------
// Expression compilation (cached per source, bounded LRU).
// ---------------------------------------------------------------------------------------------------------------
type Compiled = (this: void, $: unknown) => unknown;
const cache = new MapCtor<string, Compiled>();
const trustedCache = new MapCtor<string, Compiled>();

function compile(source: string, store: Map<string, Compiled>, make: (body: string) => Compiled): Compiled {
  let fn = store.get(source);
  if (fn) {
    store.delete(source);
    store.set(source, fn);
    return fn;
  }
  // A trailing `;` is common in hand-written expressions; the expression itself stays one expression.
  const body = source.replace(/[\s;]+$/, '');
  fn = make(body === '' ? 'undefined' : body);
  store.set(source, fn);
  if (store.size > CACHE_LIMIT) store.delete(store.keys().next().value as string);
  return fn;
}

const makeUntrusted = (body: string): Compiled =>
  // The body is parsed on its own by the Function constructor: it cannot close the function or reach this scope.
  new Function('$', `"use strict";\nreturn (\n${body}\n);`) as Compiled;

const makeTrusted = (body: string): Compiled =>
  // Trusted (.configu): bare identifiers resolve to the given variables through `with`.
  new Function('$', `with ($) {\nreturn (\n${body}\n);\n}`) as Compiled;

const FUNCTION_SOURCE = /'?function\s*([\w$]*)\s*\([^)]*\)\s*\{[\s\S]*\}'?/;

function clip(text: string): string {
  // V8 quotes a whole function's source in some messages ("... of function 'function lodash(value) {...}'").
  if (text.length > 120 && FUNCTION_SOURCE.test(text)) text = text.replace(FUNCTION_SOURCE, (_m, name: string) => `${name || "anonymous"}()`);
  return text.length > MAX_MESSAGE ? `${text.slice(0, MAX_MESSAGE - 3)}...` : text;
}

/** A readable message for whatever an expression threw. Never a stack. */
function messageOf(error: unknown): string {
  try {
    if (error instanceof zod.ZodError) return clip(zod.prettifyError(error));
    if (error !== null && (typeof error === 'object' || typeof error === 'function')) {
      const m = (error as { message?: unknown }).message;
      if (typeof m === 'string' && m !== '') return clip(m);
      const name = (error as { name?: unknown }).name;
      if (typeof name === 'string' && name !== '') return clip(name);
    }
    const text = StringCtor(error);
    return clip(text === '' ? 'the expression threw an empty value' : text);
  } catch {
    return 'the expression threw a value that cannot be read';
  }
}

function isThenable(value: unknown): boolean {
  return (
    value !== null &&
    (typeof value === 'object' || typeof value === 'function') &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}

class Failure {
  constructor(
    readonly kind: ExpressionFailureKind,
    readonly message: string,
  ) {}
}

function evaluate(fn: Compiled, $: unknown): unknown {
  let value: unknown;
  try {
    value = apply(fn, undefined, [$]);
    if (isThenable(value)) return new Failure('error', 'an expression must be synchronous (it returned a promise)');
  } catch (error) {
    return new Failure('error', messageOf(error));
  }
  return value;
}

const DYNAMIC_IMPORT = /\bimport\s*\(/;

function compileOrFail(source: string, trusted = false): Compiled | Failure {
  if (DYNAMIC_IMPORT.test(source)) return new Failure('error', IMPORT_MESSAGE);
  try {
    return trusted ? compile(source, trustedCache, makeTrusted) : compile(source, cache, makeUntrusted);
  } catch (error) {
    return new Failure('error', messageOf(error));
  }
}

function render(template: string, $: unknown, trusted = false): string | Failure {
  const parts = parseTemplate(template);
  let out = '';
  for (const part of parts) {
    if (part.kind === 'text') {
      out += part.text;
      continue;
    }
    const fn = compileOrFail(part.source, trusted);
    if (fn instanceof Failure) return fn;
    const value = evaluate(fn, $);
    if (value instanceof Failure) return value;
    try {
      out += stringifyTemplateValue(value);
    } catch (error) {
      return new Failure('error', messageOf(error));
    }
  }
  return out;
}

function shortSource(source: string): string {
  const s = source.length > 200 ? `${source.slice(0, 197)}...` : source;
  return s;
}

function testExpression(source: string, $: unknown): true | Failure {
  const fn = compileOrFail(source);
  if (fn instanceof Failure) return fn;
  const value = evaluate(fn, $);
  if (value instanceof Failure) return value;
  return value ? true : new Failure('falsy', `test "${shortSource(source)}" evaluated to false`);
}

// ---------------------------------------------------------------------------------------------------------------
// Jobs
// ---------------------------------------------------------------------------------------------------------------
const EMPTY_VIEW = (key: string): ConfigView => ({ key, storedValue: '', value: '', origin: 'empty', cfgu: {}, labels: [] });

function contextFor(key: string, configs: Record<string, ConfigView>, input: unknown): unknown {
  const view = O.prototype.hasOwnProperty.call(configs, key) ? configs[key]! : EMPTY_VIEW(key);
  return {
    key,
    value: view.value,
    storedValue: view.storedValue,
    origin: view.origin,
    cfgu: view.cfgu,
    labels: view.labels,
    configs,
    input,
  };
}

/** Progress of the request in flight, read by partial() after a time limit interrupted it. */
let progress:
  | { request: SandboxRequest; consts: ConstOutcome[]; tests: TestOutcome[]; testsDone: number; response: string | undefined }
  | undefined;

function runJob(job: WireJob): SandboxResponse {
  // Decode the wire form (protocol.ts): value and labels are derived here exactly as the host derives them.
  const declared = job.input.schema.keys as Record<string, Record<string, unknown>>;
  const configs: Record<string, ConfigView> = O.create(null);
  for (const key of O.keys(job.configs ?? {})) {
    const [storedValue, origin, sent] = job.configs[key]!;
    const cfgu = sent ?? (O.prototype.hasOwnProperty.call(declared, key) ? declared[key]! : {});
    configs[key] = { key, storedValue, value: coerceValue(storedValue, declaredTypeOf(cfgu)), origin, cfgu, labels: labelsOf(cfgu) };
  }
  const p = progress!;
  for (const c of job.consts) {
    const rendered = render(c.template, contextFor(c.key, configs, job.input));
    if (rendered instanceof Failure) {
      p.consts.push({ key: c.key, ok: false, kind: rendered.kind, message: rendered.message });
      continue;
    }
    const prior = configs[c.key];
    const cfgu = prior?.cfgu ?? {};
    configs[c.key] = {
      key: c.key,
      storedValue: rendered,
      value: coerceValue(rendered, declaredTypeOf(cfgu)),
      origin: 'const',
      cfgu,
      labels: prior?.labels ?? [],
    };
    p.consts.push({ key: c.key, ok: true, value: rendered });
  }
  for (const t of job.tests) {
    const $ = contextFor(t.key, configs, job.input);
    for (let index = 0; index < t.expressions.length; index++) {
      const r = testExpression(t.expressions[index]!, $);
      if (r instanceof Failure) p.tests.push({ key: t.key, index, ok: false, kind: r.kind, message: r.message });
      p.testsDone++;
    }
  }
  return { t: 'job', result: { consts: p.consts, tests: p.tests } };
}

function dispatch(request: SandboxRequest): SandboxResponse {
  switch (request.t) {
    case 'job':
      return runJob(request.job);
    case 'template': {
      const r = render(request.template, request.context);
      return r instanceof Failure ? { t: 'value', ok: false, kind: r.kind, message: r.message } : { t: 'value', ok: true, value: r };
    }
    case 'bool': {
      const r = testExpression(request.expression, request.context);
      if (r === true) return { t: 'value', ok: true, value: true };
      if (r.kind === 'falsy') return { t: 'value', ok: true, value: false };
      return { t: 'value', ok: false, kind: r.kind, message: r.message };
    }
    case 'trusted': {
      const vars: Record<string, string> = O.create(null);
      for (const k of O.keys(request.variables ?? {})) vars[k] = StringCtor(request.variables[k]);
      // Unknown bare identifiers read as "", but the globals (JSON, Math, _ ...) stay visible.
      const scope = new Proxy(vars, {
        has: (target, name) => typeof name === 'string' && (name in target || !(name in globalThis)),
        get: (target, name) => (typeof name === 'string' ? (name in target ? target[name] : '') : undefined),
      });
      const r = render(request.template, scope, true);
      return r instanceof Failure ? { t: 'value', ok: false, kind: r.kind, message: r.message } : { t: 'value', ok: true, value: r };
    }
    default:
      return { t: 'value', ok: false, kind: 'error', message: 'unknown sandbox request' };
  }
}

/** Evaluate one request line; returns the response line. */
function handle(line: string): string {
  beginJob();
  let request: SandboxRequest;
  try {
    request = JSONparse(line) as SandboxRequest;
  } catch {
    return JSONstringify({ t: 'value', ok: false, kind: 'error', message: 'malformed sandbox request' });
  }
  progress = { request, consts: [], tests: [], testsDone: 0, response: undefined };
  const text = JSONstringify(dispatch(request));
  // Kept until the next request: if a late promise job (run by the isolate after this returns) throws or overruns,
  // partial() still answers with the completed result.
  progress.response = text;
  return text;
}

/** After a limit interrupted handle(): what completed, and `kind` for everything else. */
function partial(kind: ExpressionFailureKind, message: string): string {
  const p = progress;
  progress = undefined;
  if (!p) return JSONstringify({ t: 'value', ok: false, kind, message });
  if (p.response !== undefined) return p.response;
  return JSONstringify(failureResponse(p.request, kind, message, { consts: p.consts, tests: p.tests, testsDone: p.testsDone }));
}

// ---------------------------------------------------------------------------------------------------------------
// Sealing
// ---------------------------------------------------------------------------------------------------------------

/** Containers whose contents are internal slots (freezing does not protect them): replaced by per-job copies. */
type Cell = { epoch: number; value: unknown; original: unknown };
let epoch = 0;
const resettableRegExps: RegExp[] = [];

function cloneSlotObject(original: unknown): unknown {
  if (original instanceof MapCtor) return new MapCtor(original as Map<unknown, unknown>);
  if (original instanceof SetCtor) return new SetCtor(original as Set<unknown>);
  if (original instanceof WeakMapCtor) return new WeakMapCtor();
  if (original instanceof WeakSetCtor) return new WeakSetCtor();
  if (original instanceof Date) return new Date((original as Date).getTime());
  if (original instanceof ArrayBuffer) return (original as ArrayBuffer).slice(0);
  if (ArrayBuffer.isView(original)) {
    const v = original as unknown as { constructor: new (x: unknown) => unknown };
    return new v.constructor(original);
  }
  return original;
}

function hasMutableSlots(value: unknown): boolean {
  return (
    value instanceof MapCtor ||
    value instanceof SetCtor ||
    value instanceof WeakMapCtor ||
    value instanceof WeakSetCtor ||
    value instanceof Date ||
    value instanceof ArrayBuffer ||
    ArrayBuffer.isView(value)
  );
}

/**
 * The legacy RegExp statics (`RegExp.input`, `$_`, `lastMatch`, `$1`..`$9`, `leftContext`, ...) are realm-wide state
 * that freezing does not protect: they hold the subject of the last successful match, which may be another request's
 * value (a `pattern` check, `validator.*`) or the trusted `.configu` render. A match of the empty string clears them.
 */
const CLEAR_MATCH = /(?:)/;
const regExpExec = RegExp.prototype.exec;

function beginJob(): void {
  epoch++;
  for (const re of resettableRegExps) re.lastIndex = 0;
  apply(regExpExec, CLEAR_MATCH, ['']);
}

/** Names that code commonly assigns on instances; on frozen prototypes they become accessors (the override mistake). */
const OVERRIDABLE = new SetCtor<PropertyKey>([
  'constructor',
  'toString',
  'toLocaleString',
  'valueOf',
  'toJSON',
  'name',
  'message',
  'hasOwnProperty',
  'isPrototypeOf',
  'propertyIsEnumerable',
  'then',
  'catch',
  'finally',
  'stack',
  'cause',
  'code',
]);

function makeOverridable(proto: object, key: PropertyKey): void {
  const desc = getOwnPropertyDescriptor(proto, key);
  if (!desc || !('value' in desc) || !desc.configurable) return;
  const value = desc.value;
  defineProperty(proto, key, {
    configurable: false,
    enumerable: desc.enumerable,
    get() {
      return value;
    },
    set(this: unknown, next: unknown) {
      if (this === proto || this === null || (typeof this !== 'object' && typeof this !== 'function')) {
        throw new TypeError(`Cannot assign to read only property '${StringCtor(key)}'`);
      }
      defineProperty(this, key, { value: next, writable: true, enumerable: true, configurable: true });
    },
  });
}

/** Report of sealing, for tests and diagnostics. */
const sealReport = { frozen: 0, cells: 0, regexps: 0, unfixable: [] as string[], ms: {} as Record<string, number> };

function deepFreeze(roots: unknown[]): void {
  const seen = new SetCtor<object>();
  const order: object[] = [];
  const stack: unknown[] = roots.slice();
  const visit = (v: unknown): void => {
    if (v !== null && (typeof v === 'object' || typeof v === 'function') && !seen.has(v as object)) stack.push(v);
  };
  while (stack.length) {
    const obj = stack.pop() as object;
    if (seen.has(obj)) continue;
    seen.add(obj);
    order.push(obj);
    visit(getPrototypeOf(obj));
    for (const key of ownKeys(obj)) {
      const desc = getOwnPropertyDescriptor(obj, key);
      if (!desc) continue;
      if ('value' in desc) {
        const value = desc.value;
        if (hasMutableSlots(value)) {
          if (desc.configurable) {
            const cell: Cell = { epoch: -1, value: undefined, original: value };
            defineProperty(obj, key, {
              configurable: false,
              enumerable: desc.enumerable,
              get() {
                if (cell.epoch !== epoch) {
                  cell.epoch = epoch;
                  cell.value = cloneSlotObject(cell.original);
                }
                return cell.value;
              },
            });
            sealReport.cells++;
          } else {
            sealReport.unfixable.push(StringCtor(key));
          }
          continue;
        }
        visit(value);
      } else {
        visit(desc.get);
        visit(desc.set);
        // Values behind module-namespace getters (enumerable, non-configurable, read-only: esbuild's exports) are part
        // of the reachable realm too. Other getters are not called: lazy getters would rewrite themselves.
        if (desc.get && desc.enumerable && !desc.configurable && !desc.set) {
          try {
            visit(apply(desc.get, obj, []));
          } catch {
            /* a getter that needs another receiver */
          }
        }
      }
    }
  }
  for (const obj of order) {
    if (obj instanceof RegExp) {
      // lastIndex must stay writable (String.prototype.replace writes it): no new properties, reset before each job.
      for (const key of ownKeys(obj)) {
        if (key === 'lastIndex') continue;
        const d = getOwnPropertyDescriptor(obj, key);
        if (d && d.configurable) defineProperty(obj, key, { configurable: false, ...('value' in d ? { writable: false } : {}) });
      }
      O.preventExtensions(obj);
      resettableRegExps.push(obj);
      sealReport.regexps++;
      continue;
    }
    if (typeof obj === 'object' || typeof obj === 'function') {
      // Prototype objects: keep commonly overridden names assignable on instances.
      const ctor = getOwnPropertyDescriptor(obj, 'constructor');
      if (ctor && 'value' in ctor && typeof ctor.value === 'function' && (ctor.value as { prototype?: unknown }).prototype === obj) {
        for (const key of ownKeys(obj)) if (OVERRIDABLE.has(key)) makeOverridable(obj, key);
      }
    }
  }
  for (const obj of order) {
    if (obj instanceof RegExp) continue;
    try {
      freeze(obj);
      sealReport.frozen++;
    } catch {
      sealReport.unfixable.push(O.prototype.toString.call(obj));
    }
  }
}

/**
 * Zod 4 installs members on its prototypes lazily, at the first construction / first read of each schema type. Every
 * factory and every method is exercised once here, before the freeze, so nothing is left to install afterwards. The
 * `_zod` internals prototypes reached this way are returned so that they are frozen too.
 */
function warmZod(): object[] {
  const protos: object[] = [];
  const seenProtos = new SetCtor<object>();
  const noop = (x: unknown): unknown => x;
  const argList: unknown[][] = [
    [],
    ['a'],
    [1],
    [['a', 'b']],
    [zod.string()],
    [{ a: zod.string() }],
    [[zod.string(), zod.number()]],
    [zod.string(), zod.number()],
    ['k', [zod.object({ k: zod.literal('a') }), zod.object({ k: zod.literal('b') })]],
    [noop],
    [/a/],
    [{ message: 'm' }],
  ];
  const argSets = (): unknown[][] => argList;
  const skip = new SetCtor(['promise', 'config', 'setErrorMap', 'getErrorMap', 'registry', 'globalRegistry', 'meta', 'register']);
  const inputs: unknown[] = [undefined, 'a', 1, {}, ['a']];
  const isSchema = (v: unknown): v is { _zod: object; safeParse(x: unknown): unknown } =>
    v !== null && typeof v === 'object' && typeof (v as { _zod?: unknown })._zod === 'object';
  const touch = (inst: object): void => {
    for (let p: object | null = inst; p && p !== O.prototype; p = getPrototypeOf(p)) {
      for (const key of ownKeys(p)) {
        try {
          void (inst as Record<PropertyKey, unknown>)[key];
        } catch {
          /* ignore */
        }
      }
    }
  };
  const exercise = (inst: object): void => {
    if (!isSchema(inst)) return;
    touch(inst);
    touch(inst._zod);
    for (const x of inputs) {
      try {
        inst.safeParse(x);
      } catch {
        /* ignore */
      }
    }
    for (let p: object | null = getPrototypeOf(inst._zod); p && p !== O.prototype; p = getPrototypeOf(p)) {
      if (!seenProtos.has(p)) {
        seenProtos.add(p);
        protos.push(p);
      }
    }
  };
  // One representative per (schema prototype, internals prototype): that is the granularity of the lazy installs.
  const kinds = new MapCtor<object, SetType<object>>();
  const fresh: object[] = [];
  const keep = (r: unknown): void => {
    if (!isSchema(r)) return;
    const a = getPrototypeOf(r) as object;
    const b = getPrototypeOf(r._zod) as object;
    let set = kinds.get(a);
    if (!set) kinds.set(a, (set = new SetCtor()));
    if (set.has(b)) return;
    set.add(b);
    fresh.push(r);
  };
  const collect = (ns: Record<string, unknown>, depth: number): void => {
    for (const name of O.keys(ns)) {
      if (skip.has(name) || /Async$|^spa$/.test(name)) continue;
      const f = ns[name];
      if (typeof f === 'function' && /^[a-z]/.test(name)) {
        for (const args of argSets()) {
          try {
            keep(apply(f as (...a: unknown[]) => unknown, ns, args));
          } catch {
            /* wrong arguments for this factory */
          }
        }
      } else if (depth < 1 && f && typeof f === 'object' && !isSchema(f) && (name === 'iso' || name === 'coerce')) {
        collect(f as Record<string, unknown>, depth + 1);
      }
    }
  };
  collect(zod as unknown as Record<string, unknown>, 0);
  // Methods of every schema type, until no new type appears (bounded).
  for (let round = 0; round < 3 && fresh.length; round++) {
    const batch = fresh.splice(0);
    for (const inst of batch) {
      exercise(inst);
      const names = new SetCtor<string>();
      for (let p: object | null = getPrototypeOf(inst); p && p !== O.prototype; p = getPrototypeOf(p)) {
        for (const key of ownKeys(p)) if (typeof key === 'string' && !key.startsWith('_') && key !== 'constructor') names.add(key);
      }
      for (const name of names) {
        if (skip.has(name) || name === 'describe' || /Async$|^spa$/.test(name)) continue;
        let m: unknown;
        try {
          m = (inst as Record<string, unknown>)[name];
        } catch {
          continue;
        }
        if (typeof m !== 'function') continue;
        for (const args of argSets()) {
          try {
            keep(apply(m as (...a: unknown[]) => unknown, inst, args));
          } catch {
            /* ignore */
          }
        }
      }
    }
  }
  for (const inst of fresh) exercise(inst);
  return protos;
}

function warmUp(): void {
  // Exercise lazy caches so they are created before the realm is frozen.
  const schema = zod.object({ a: zod.string().min(1), b: zod.number().int().optional(), c: zod.array(zod.enum(['x', 'y'])) });
  schema.safeParse({ a: 'x', c: ['x'] });
  schema.safeParse({ a: 1 });
  zod.string().email().safeParse('a@b.co');
  try {
    zod.number().parse('x');
  } catch (e) {
    messageOf(e);
  }
  validateJsonSchema({ type: 'object', properties: { a: { type: 'string', format: 'email' } } }, { a: 'a@b.co' });
  try {
    validateJsonSchema({ type: 'number' }, 'x');
  } catch {
    /* expected */
  }
  chai.expect('x').to.be.a('string');
  chai.assert.isString('x');
  try {
    chai.expect(1).to.equal(2);
  } catch {
    /* expected */
  }
  _.get({ a: [{ b: 1 }] }, 'a[0].b');
  _.template('<%= a %>')({ a: 1 });
  validator.isEmail('a@b.co');
  'x'.match(/x/);
}

let sealed = false;

function seal(): string {
  if (sealed) return JSONstringify(sealReport);
  sealed = true;
  const g = globalThis as Record<string, unknown>;
  const should = chai.should();
  const t0 = Date.now();
  warmUp();
  const t1 = Date.now();
  const zodInternals = warmZod();
  const t2 = Date.now();
  // Remove what an expression must never have: shared memory, WebAssembly, deferred callbacks.
  for (const name of ['SharedArrayBuffer', 'Atomics', 'WebAssembly', 'FinalizationRegistry', 'WeakRef', '__cfguRuntime']) {
    delete g[name];
  }
  const globals: Record<string, unknown> = {
    _,
    validator,
    JSONSchema,
    jsonschema: JSONSchema,
    z: zod,
    assert: chai.assert,
    expect: chai.expect,
    should,
  };
  for (const [name, value] of O.entries(globals)) {
    defineProperty(g, name, { value, writable: false, enumerable: false, configurable: false });
  }
  sealPrelude();
  // chai's namespace (config, util) is frozen too, although only assert/expect/should are exposed.
  deepFreeze([globalThis, runtime, chai, zod, ...zodInternals]);
  sealReport.ms = { warmUp: t1 - t0, warmZod: t2 - t1, freeze: Date.now() - t2 };
  return JSONstringify(sealReport);
}

const runtime = { seal, handle, partial };
(globalThis as Record<string, unknown>).__cfguRuntime = runtime;
