import Ajv from 'ajv';
import addFormats from 'ajv-formats';
import { O, freeze, defineProperty, getOwnPropertyDescriptor, getPrototypeOf, ownKeys, JSONparse, JSONstringify, StringCtor, MapCtor, SetCtor, type SetType } from './intrinsics.js';
import { clip } from './messages.js';
import type { Compiled } from './compile.js';

// ---------------------------------------------------------------------------------------------------------------
// JSON Schema validation (Ajv, compiled inside the isolate).
//
// The caller's schema value is never given to Ajv: it is copied first (canonicalSchema), the copy is deep-frozen and
// compiled, and compiled validators are cached by the copy's JSON text, which identifies the copy exactly. So no
// getter, toJSON, proxy trap or prototype of the caller runs while Ajv compiles, and a cached validator depends on
// nothing but its key. Ajv's generated code is strict (no `caller` path from a getter in the validated data).
// ---------------------------------------------------------------------------------------------------------------
type CompiledSchema = ((data: unknown) => unknown) & { errors?: unknown; $async?: unknown };
type AjvLike = {
  compile(schema: object | boolean): CompiledSchema;
  validateSchema(schema: object | boolean): unknown;
  errors?: unknown;
  errorsText(errors: unknown, options?: { dataVar?: string }): string;
  scope: { _values: Record<string, { size: number }> };
  refs: Record<string, unknown>;
  schemas: Record<string, unknown>;
};
const AjvClass = ((Ajv as unknown as { default?: unknown }).default ?? Ajv) as unknown as new (options: object) => AjvLike;
const addFormatsFn = ((addFormats as unknown as { default?: unknown }).default ?? addFormats) as unknown as (ajv: AjvLike) => void;
const AJV_OPTIONS = {
  allErrors: true,
  strict: false,
  validateFormats: true,
  // Ajv logs the generated source of a failed compile; the isolate has no console and the text must go nowhere.
  logger: false,
  // Generated validators run as strict code.
  code: { process: (source: string): string => `"use strict";\n${source}` },
};
/** Checks schemas against the meta-schema only: its one compiled meta validator never changes. */
const metaAjv = new AjvClass(AJV_OPTIONS);
addFormatsFn(metaAjv);
/**
 * The `$schema` values metaAjv answers from the meta-schema it already holds. Any other value (a JSON pointer into the
 * meta-schema, `http://json-schema.org/draft-07/schema#/definitions/...`) would make it resolve, register and compile
 * a validator of its own for good: such a schema is checked by the Ajv instance of its compile instead, so metaAjv
 * holds the same thing from the first job to the last.
 */
const META_IDS = new SetCtor<unknown>([undefined, 'http://json-schema.org/draft-07/schema', 'http://json-schema.org/draft-07/schema#', 'http://json-schema.org/schema']);

const SCHEMA_MAX_DEPTH = 128;
const SCHEMA_MAX_NODES = 200_000;
const SCHEMA_MAX_TEXT = 2_000_000;
/**
 * Every validator is compiled by a new Ajv instance of its own, used once. Ajv names what it generates with counters
 * kept in its instance (`validate12`, `schema31`, `formats3`, `pattern7`), keeps the values it shares between
 * compiles (regexps, format functions, compiled meta-schema validators) and compiles a referenced meta-schema once:
 * in an instance shared by all jobs, the names an expression sees in `Error.stack` (a getter in the validated data is
 * called by the validator) and the code positions next to them would tell how many and which schemas other clients
 * compiled before, and whether this one was compiled before. With an instance per compile, the validator is a
 * function of its schema alone: the same names, code and positions whether it is compiled now or came from the
 * cache, whoever compiled it. The new instance is paid on a cache miss only (measured in the isolate: a miss of a
 * small schema with a format and a pattern took 3.6-4.2 ms instead of 2.9-3.3 ms; a hit is unchanged, ~0.027 ms); it
 * is garbage once its validator is made (the validator keeps only what its code uses).
 *
 * The compiled validators are cached in generations: a Map and its counts, replaced by an empty one after 500
 * compiles or when the validators' estimated memory (validatorBytes) would pass `generationBytes` (whatever comes
 * first), which the child sets from the isolate's memory limit (setValidatorCacheBytes). Memory is bounded by one
 * generation.
 */
const GENERATION_COMPILES = 500;
/** Until the child sets it: the bound of a 64 MB isolate. */
let generationBytes = 8 * 1024 * 1024;
/**
 * The heap a compiled validator holds: its generated code and closure, the frozen copy of the schema and its text
 * (the key). Calibrated in Node's V8 with the same Ajv and options (bench/cache-calibration.ts: distinct schemas
 * compiled and called once, heap growth per validator): 3.7 KB for `{type, minLength}`, 10.7 KB for 5 properties with
 * a format and a pattern, 147 KB for 100 properties (about 480 bytes per value of the schema), 2 bytes per character
 * of a long description. The estimate, 4,000 + 2 per character + 500 per value, is 1.1-1.5x those; 11-20x for an enum
 * of 2,000 strings (a leaf costs far less than a property).
 */
export const validatorBytes = (keyChars: number, nodes: number): number => 4000 + 2 * keyChars + 500 * nodes;
/** Bound the validator cache (the child calls it with bytes derived from the isolate's memory limit). */
export function setValidatorCacheBytes(bytes: number): void {
  generationBytes = bytes;
  if (generation.bytes > generationBytes) generation = newGeneration();
}
interface Generation {
  compiled: Map<string, CompiledSchema>;
  compiles: number;
  bytes: number;
}
export let generations = 0;
function newGeneration(): Generation {
  generations++;
  return { compiled: new MapCtor(), compiles: 0, bytes: 0 };
}
export let generation = newGeneration();
/** The instance of the last compile (tests read what it holds through the runtime's `stats`). */
export let lastAjv: AjvLike | undefined;
export { metaAjv };

function newAjv(): AjvLike {
  const ajv = new AjvClass({ ...AJV_OPTIONS, validateSchema: false });
  addFormatsFn(ajv);
  return ajv;
}

/** A schema as the sandbox owns it: a deep-frozen copy of plain JSON data and its exact JSON text. */
interface Canonical {
  readonly copy: object | boolean;
  readonly key: string;
  /** Values in the schema (objects, arrays and leaves). */
  readonly nodes: number;
}
const ASYNC_MESSAGE = 'JSONSchema.validate(schema, data): "$async" schemas are not supported (validation is synchronous)';
const isArray = Array.isArray;
const ObjectPrototype = O.prototype;
const ArrayPrototype = Array.prototype;
const isFinite = Number.isFinite;

class SchemaRefused extends TypeError {}

interface CopyState {
  nodes: number;
  open: SetType<object>;
  path: string[];
  async: boolean;
}

function refuse(state: CopyState, what: string): never {
  const at = state.path.length ? ` (at /${state.path.join('/')})` : '';
  throw new SchemaRefused(clip(`JSONSchema.validate(schema, data): the schema must be plain JSON data, found ${what}${at}`));
}

/**
 * Copies the caller's value reading only own enumerable string-keyed data properties through the captured
 * intrinsics: never a getter, toJSON or valueOf. A Proxy cannot be told apart, but each trap runs once per property
 * and the copy keeps what it answered.
 */
function copyValue(value: unknown, state: CopyState, depth: number): unknown {
  if (++state.nodes > SCHEMA_MAX_NODES) refuse(state, `more than ${SCHEMA_MAX_NODES} values`);
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value;
    case 'number':
      if (!isFinite(value)) refuse(state, `the non-finite number ${StringCtor(value)}`);
      return value === 0 ? 0 : value; // -0 and 0 compile alike; the copy keeps one of them
    case 'object':
      break;
    default:
      refuse(state, typeof value === 'undefined' ? 'undefined' : `a ${typeof value}`);
  }
  if (value === null) return null;
  if (depth > SCHEMA_MAX_DEPTH) refuse(state, `nesting deeper than ${SCHEMA_MAX_DEPTH}`);
  if (state.open.has(value)) refuse(state, 'a cycle');
  const array = isArray(value);
  const proto = getPrototypeOf(value);
  if (array ? proto !== ArrayPrototype : proto !== ObjectPrototype && proto !== null) refuse(state, 'an object that is not a plain object or array');
  state.open.add(value);
  let out: unknown[] | Record<string, unknown>;
  if (array) {
    const lengthDesc = getOwnPropertyDescriptor(value, 'length');
    const length = lengthDesc && 'value' in lengthDesc ? (lengthDesc.value as number) : 0;
    const items: unknown[] = [];
    for (let i = 0; i < length; i++) {
      const d = getOwnPropertyDescriptor(value, StringCtor(i));
      state.path.push(StringCtor(i));
      if (!d) refuse(state, 'a hole in an array');
      if (!('value' in d)) refuse(state, 'an accessor (getter or setter)');
      items.push(copyValue(d.value, state, depth + 1));
      state.path.pop();
    }
    out = items;
  } else {
    const record: Record<string, unknown> = {};
    for (const key of ownKeys(value)) {
      if (typeof key !== 'string') continue;
      const d = getOwnPropertyDescriptor(value, key);
      if (!d || !d.enumerable) continue;
      state.path.push(key);
      if (!('value' in d)) refuse(state, 'an accessor (getter or setter)');
      // JSON leaves out undefined members; so does the copy.
      if (d.value !== undefined) {
        if (key === '$async' && d.value === true) state.async = true;
        defineProperty(record, key, { value: copyValue(d.value, state, depth + 1), writable: true, enumerable: true, configurable: true });
      }
      state.path.pop();
    }
    out = record;
  }
  state.open.delete(value);
  return out;
}

function deepFreezeJson(value: unknown): void {
  if (value === null || typeof value !== 'object' || O.isFrozen(value)) return;
  freeze(value);
  for (const key of O.keys(value)) deepFreezeJson((value as Record<string, unknown>)[key]);
}

function canonicalSchema(schema: unknown): Canonical {
  if (typeof schema !== 'boolean' && (schema === null || typeof schema !== 'object')) {
    throw new TypeError('JSONSchema.validate(schema, data): the schema must be an object or a boolean');
  }
  const state: CopyState = { nodes: 0, open: new SetCtor(), path: [], async: false };
  const copy = copyValue(schema, state, 0) as object | boolean;
  if (state.async) throw new TypeError(ASYNC_MESSAGE);
  const key = JSONstringify(copy);
  if (key.length > SCHEMA_MAX_TEXT) throw new SchemaRefused(`JSONSchema.validate(schema, data): the schema is larger than ${SCHEMA_MAX_TEXT} characters of JSON`);
  return { copy, key, nodes: state.nodes };
}

/** The validator for a canonical schema: cached, or compiled from the frozen copy (and then cached). */
function validatorFor(c: Canonical): CompiledSchema {
  const hit = generation.compiled.get(c.key);
  if (hit) return hit;
  deepFreezeJson(c.copy);
  const ajv = newAjv();
  // Checked against the meta-schema (same message as Ajv's own): by the instance that holds only the meta-schema,
  // unless the schema names another `$schema`, which the new instance resolves and then forgets with itself.
  const $schema = typeof c.copy === 'object' ? (c.copy as { $schema?: unknown }).$schema : undefined;
  const checker = META_IDS.has($schema) ? metaAjv : ajv;
  if (!checker.validateSchema(c.copy)) {
    const text = checker.errorsText(checker.errors);
    checker.errors = null;
    throw new Error(clip(`schema is invalid: ${text}`));
  }
  const cost = validatorBytes(c.key.length, c.nodes);
  // A validator larger than a whole generation is compiled each time, never kept.
  const keep = cost <= generationBytes;
  if (keep && (generation.compiles >= GENERATION_COMPILES || generation.bytes + cost > generationBytes)) generation = newGeneration();
  const gen = generation;
  if (keep) {
    gen.compiles++;
    gen.bytes += cost;
  }
  lastAjv = ajv;
  const validate = ajv.compile(c.copy);
  if (validate.$async) throw new TypeError(ASYNC_MESSAGE);
  // `errors` becomes an accessor so that the function itself can be frozen (Ajv's strict code assigns it).
  let errors: unknown = null;
  const getErrors = (): unknown => errors;
  const setErrors = (next: unknown): void => {
    errors = next;
  };
  defineProperty(validate, 'errors', { get: freeze(getErrors), set: freeze(setErrors), enumerable: true, configurable: false });
  freeze(validate);
  if (keep) gen.compiled.set(c.key, validate);
  return validate;
}

function validateCanonical(c: Canonical, data: unknown): true {
  const validate = validatorFor(c);
  const result = validate(data);
  if (result === true) return true;
  const errors = validate.errors;
  validate.errors = null;
  if (result !== false) throw new TypeError(ASYNC_MESSAGE);
  throw new Error(metaAjv.errorsText(errors, { dataVar: 'data' }));
}

export function validateJsonSchema(schema: unknown, data: unknown): true {
  return validateCanonical(canonicalSchema(schema), data);
}
export const JSONSchema = { validate: validateJsonSchema };

/**
 * The host checks a `schema` with the expression `JSONSchema.validate(<JSON text>, $.value)`. When an expression is
 * exactly that form and the text is JSON without a `__proto__` key (where a JS literal and JSON.parse differ), the
 * literal evaluates to the same value at every call: its canonical copy is made once, when the expression is
 * compiled, instead of at every evaluation.
 */
const HOST_SCHEMA_CHECK = /^JSONSchema\.validate\(([\s\S]+), \$\.value\)$/;

export function schemaLiteralCheck(body: string): Compiled | undefined {
  const m = HOST_SCHEMA_CHECK.exec(body);
  if (!m || m[1]!.includes('__proto__')) return undefined;
  let canonical: Canonical;
  try {
    canonical = canonicalSchema(JSONparse(m[1]!));
  } catch {
    return undefined; // not JSON, or refused: the general path evaluates it and fails the same way
  }
  return ($: unknown) => validateCanonical(canonical, ($ as { value?: unknown }).value);
}
