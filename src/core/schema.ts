/**
 * ConfigSchema preparation and its cache.
 *
 * A schema is checked (schema-check.ts: the Cfgu shape, key names, v0 properties and the rules JSON Schema cannot
 * say) and turned into a PreparedSchema: everything evaluation needs, computed once, with the `const` keys in
 * dependency order (const-order.ts). Results are cached by the schema's JSON text, so the same schema sent again is
 * neither re-checked nor re-prepared. The text is an exact key because a schema holds only JSON values (finite
 * numbers, no `undefined`), checked before it is serialised; nesting is bounded there too, so no recursive step can
 * overflow the stack.
 */
import { BudgetedLru, cacheBudget, estimateSchemaBytes, type CacheBudget } from './cache-budget.js';
import { InputError, ErrorCodes, type InputIssue } from './errors.js';
import { isArrayIndex, truncate } from './names.js';
import { declaredTypeOf } from './coerce.js';
import { CFGU_PROPERTY_NAMES } from './cfgu.js';
import { analyseTemplate } from './template.js';
import { isDeepFrozen } from './frozen.js';
import { EnumRule, stringifyValue } from './enum-rule.js';
import { V0_REPLACEMENTS, checkOne, jsonShapeIssueSteps } from './schema-check.js';
import { STEP, runAtOnce, type Steps } from './slices.js';
import { orderConsts } from './const-order.js';
import type { Cfgu, ConfigSchema, JsonValue } from './types.js';

export { EnumRule, stringifyValue } from './enum-rule.js';
export { constAnalysisSteps } from './const-order.js';

/** Everything evaluation needs about one key, computed once per schema. */
export interface PreparedKey {
  key: string;
  /** Position of the key in `PreparedSchema.keys` (declaration order). */
  index: number;
  /** Normalised declaration (`{}` for null). */
  cfgu: Cfgu;
  labels: string[];
  declaredType: unknown;
  isConst: boolean;
  isLazy: boolean;
  hidden: boolean;
  required: boolean;
  /** JSON-stringified default (strings stay as they are), when `default` is set. */
  defaultText: string | undefined;
  enumValues: JsonValue[] | undefined;
  /** The `enum` rule, when `enum` is set. */
  enumRule: EnumRule | undefined;
  /** UTF-8 length of the `const` template (0 without `const`). */
  templateBytes: number;
  /** Expression parts of the `const` template (0 without `const`). */
  templateExpressions: number;
  pattern: string | undefined;
  jsonSchema: Record<string, unknown> | undefined;
  tests: string[];
}

export interface PreparedSchema {
  keys: PreparedKey[];
  byName: Map<string, PreparedKey>;
  /** Keys read from the store (neither const nor lazy). */
  storeKeys: string[];
  /** Const keys in dependency order (when there is no cycle). */
  constOrder: string[];
  /** Const keys caught in cycles, each with the cycle it belongs to (`A -> B -> A`). */
  constCycles: Map<string, string>;
  /** True when any key has a `const`, `test`, `pattern` or `schema` (work for the sandbox). */
  needsSandbox: boolean;
  /**
   * True when no key is an array index (names.ts, isArrayIndex): a record of these keys, set in schema order,
   * enumerates in schema order.
   */
  keysInOrder: boolean;
}

/** The prepared form of declarations already checked (checkOne), in steps: a checkpoint every STEP keys. */
function* prepareSteps(keys: Record<string, Cfgu | null>, names: readonly string[]): Steps<PreparedSchema> {
  const prepared: PreparedKey[] = [];
  const byName = new Map<string, PreparedKey>();
  let needsSandbox = false;
  const constNames = new Set(names.filter((key) => keys[key]?.const !== undefined));
  const deps = new Map<string, string[]>();
  for (const key of names) {
    if (prepared.length % STEP === STEP - 1) yield;
    const cfgu: Cfgu = keys[key] ?? {};
    const tests = cfgu.test === undefined ? [] : Array.isArray(cfgu.test) ? cfgu.test : [cfgu.test];
    const p: PreparedKey = {
      key,
      index: prepared.length,
      cfgu,
      labels: cfgu.label === undefined ? [] : Array.isArray(cfgu.label) ? cfgu.label : [cfgu.label],
      declaredType: declaredTypeOf(cfgu),
      isConst: cfgu.const !== undefined,
      isLazy: cfgu.lazy === true,
      hidden: cfgu.hidden === true,
      required: cfgu.required === true,
      defaultText: cfgu.default === undefined ? undefined : stringifyValue(cfgu.default),
      enumValues: cfgu.enum,
      enumRule: cfgu.enum === undefined ? undefined : new EnumRule(cfgu.enum),
      templateBytes: 0,
      templateExpressions: 0,
      pattern: cfgu.pattern,
      jsonSchema: cfgu.schema,
      tests,
    };
    if (cfgu.const !== undefined) {
      const analysis = analyseTemplate(cfgu.const, constNames);
      p.templateBytes = Buffer.byteLength(cfgu.const, 'utf8');
      p.templateExpressions = analysis.expressions;
      // A const naming itself is a cycle of one.
      deps.set(key, analysis.references);
    }
    if (p.isConst || tests.length || p.pattern !== undefined || p.jsonSchema !== undefined) needsSandbox = true;
    prepared.push(p);
    byName.set(key, p);
  }
  const { order, cycles } = orderConsts([...constNames], deps);
  return {
    keys: prepared,
    byName,
    storeKeys: prepared.filter((p) => !p.isConst && !p.isLazy).map((p) => p.key),
    constOrder: order,
    constCycles: cycles,
    needsSandbox,
    keysInOrder: !prepared.some((p) => isArrayIndex(p.key)),
  };
}

/**
 * The prepared-schema cache: prepared forms (and failures) by schema text, least recently used evicted first. It counts
 * against the process's cache memory ceiling (cache-budget.ts): each entry's memory is estimated when it is added, from
 * the text's length and the number of keys (a prepared schema takes many times its text: PreparedKey objects, maps,
 * enum rules, and the declarations it points to). At most `entries` entries as well.
 */
class SchemaCache extends BudgetedLru<PreparedSchema | InputError> {
  constructor(budget: CacheBudget, maxEntries: number) {
    super('schema', budget, maxEntries);
  }
  add(text: string, hit: PreparedSchema | InputError): void {
    // Larger than the budget allows one entry: prepared every time, not kept.
    this.keep(text, hit, estimateSchemaBytes(text.length, hit instanceof InputError ? hit.issues.length : hit.keys.length));
  }
}

let cache = new SchemaCache(cacheBudget, 500);
/** Prepared forms of deep-frozen schema objects (see frozen.ts); entries go with their objects. */
const byIdentity = new WeakMap<object, PreparedSchema | InputError>();

/**
 * Change the prepared-schema cache (tests, embedding): the budget it counts against and its most entries; the entries
 * are moved, least recently used first, and what is over the new bounds is evicted.
 */
export function configureSchemaCache(limits: { entries?: number; budget?: CacheBudget }): void {
  const old = cache;
  old.unregister();
  cache = new SchemaCache(limits.budget ?? old.budget, limits.entries ?? old.maxEntries!);
  for (const [text, hit] of [...old.lru.entries()].reverse()) cache.add(text, hit);
}

/** What the prepared-schema cache holds now: entries and their estimated bytes. */
export function schemaCacheStats(): { entries: number; bytes: number; limits: { entries: number; budget: CacheBudget } } {
  return { entries: cache.lru.size, bytes: cache.lru.calculatedSize, limits: { entries: cache.maxEntries!, budget: cache.budget } };
}

function failure(issues: InputIssue[]): InputError {
  return new InputError(
    ErrorCodes.INVALID_SCHEMA,
    issues.length === 1 ? `invalid schema: ${issues[0]!.message}` : `invalid schema: ${issues.length} problems`,
    issues,
  );
}

/**
 * Validate a ConfigSchema (`{ keys: {...} }`) and return its prepared form. Throws InputError (code
 * CFGU_INVALID_SCHEMA) listing every problem, each with a path under `pathPrefix`.
 * Results (good and bad) are cached by the schema's JSON text, bounded by count and by estimated memory (the process's
 * cache ceiling), least recently used evicted first. A cached failure holds only paths and messages derived from that exact text.
 */
export function prepareSchema(schema: unknown, pathPrefix = ''): PreparedSchema {
  return runAtOnce(prepareSchemaSteps(schema, pathPrefix));
}

/** prepareSchema in steps (slices.ts): the server prepares a large schema in slices of the event loop. */
export function* prepareSchemaSteps(schema: unknown, pathPrefix = ''): Steps<PreparedSchema> {
  // A deep-frozen schema cannot have changed since it was seen: look it up by identity, without serialising it.
  const immutable = isDeepFrozen(schema);
  const known = immutable ? byIdentity.get(schema as object) : undefined;
  if (known) return unwrap(known, pathPrefix);
  // Before the text is made: only a schema of JSON values has a text that identifies it.
  const shape = yield* jsonShapeIssueSteps(schema);
  if (shape) {
    const e = failure([shape]);
    if (immutable) byIdentity.set(schema as object, e);
    return unwrap(e, pathPrefix);
  }
  let text: string;
  try {
    text = JSON.stringify(schema) ?? '';
  } catch {
    throw new InputError(ErrorCodes.INVALID_SCHEMA, 'the schema is not JSON', [{ path: pathPrefix || '/', message: 'the schema is not JSON' }]);
  }
  let hit = cache.lru.get(text);
  if (!hit) {
    hit = yield* validateUncachedSteps(schema);
    cache.add(text, hit); // an entry over the largest size is not kept
  }
  if (immutable) byIdentity.set(schema as object, hit);
  return unwrap(hit, pathPrefix);
}

function unwrap(hit: PreparedSchema | InputError, pathPrefix: string): PreparedSchema {
  if (hit instanceof InputError) {
    if (!pathPrefix) throw hit;
    throw new InputError(hit.code as typeof ErrorCodes.INVALID_SCHEMA, hit.message, hit.issues.map((i) => ({ path: pathPrefix + i.path, message: i.message })));
  }
  return hit;
}

function* validateUncachedSteps(schema: unknown): Steps<PreparedSchema | InputError> {
  const fail = failure;
  if (!schema || typeof schema !== 'object' || Array.isArray(schema)) return fail([{ path: '', message: 'a schema must be an object with a `keys` object' }]);
  const s = schema as Record<string, unknown>;
  if (!('keys' in s)) {
    const looksV0 = Object.values(s).some((v) => v && typeof v === 'object' && Object.keys(v).some((p) => p in V0_REPLACEMENTS || (CFGU_PROPERTY_NAMES as string[]).includes(p)));
    return fail([
      {
        path: '',
        message: looksV0
          ? 'this is a Cfgu v0 schema: in v1 the declarations move under a top-level `keys` object'
          : 'a schema must have a `keys` object',
      },
    ]);
  }
  const extra = Object.keys(s).filter((k) => k !== 'keys' && k !== '$schema');
  const issues: InputIssue[] = extra.map((k) => ({ path: `/${k}`, message: `unknown schema property \`${truncate(k)}\`; a schema holds only \`keys\`` }));
  const keys = s.keys;
  if (!keys || typeof keys !== 'object' || Array.isArray(keys)) return fail([...issues, { path: '/keys', message: '`keys` must be an object' }]);
  const names = Object.keys(keys);
  if (names.length === 0) return fail([...issues, { path: '/keys', message: '`keys` must declare at least one key' }]);
  for (let i = 0; i < names.length; i++) {
    if (i % STEP === STEP - 1) yield;
    const key = names[i]!;
    checkOne(key, (keys as Record<string, unknown>)[key], issues);
  }
  if (issues.length) return fail(issues);
  return yield* prepareSteps(keys as ConfigSchema['keys'], names);
}

/** Validate without keeping the prepared form (CLI checks). Throws InputError. */
export function validateSchema(schema: unknown): void {
  prepareSchema(schema);
}
