/**
 * ConfigSchema validation and preparation.
 *
 * The shape of every Cfgu is checked by one Ajv validator compiled once at module load; its errors are translated into
 * sentences. Rules JSON Schema cannot say well (key names, v0 properties, `default` inside `enum`, regular
 * expressions that compile, `schema` being a valid JSON Schema) are checked in code. A validated schema is turned into
 * a PreparedSchema (everything evaluation needs, computed once) and cached by its JSON text, so the same schema sent
 * again is neither re-validated nor re-prepared. The text is an exact key because a schema holds only JSON values
 * (finite numbers, no `undefined`), checked before it is serialised; nesting is bounded there too, so no recursive
 * step below can overflow the stack.
 */
import { Ajv, type ErrorObject } from 'ajv';
import { LRUCache } from 'lru-cache';
import isEqual from 'lodash/isEqual.js';
import { InputError, ErrorCodes, type InputIssue } from './errors.js';
import { keyProblem, truncate } from './names.js';
import { coerceValue, declaredTypeOf } from './coerce.js';
import { CFGU_PROPERTIES, CFGU_PROPERTY_NAMES } from './cfgu.js';
import { analyseTemplate, analysisWork } from './template.js';
import { isDeepFrozen } from './frozen.js';
import type { Cfgu, ConfigSchema, JsonValue } from './types.js';

const V0_REPLACEMENTS: Record<string, string> = {
  type: 'was removed in Cfgu v1: write a `test` expression instead (e.g. a validator.js check on `$.storedValue`)',
  options: 'was renamed `enum` in Cfgu v1',
  labels: 'was renamed `label` in Cfgu v1',
  template: 'was removed in Cfgu v1: use `const` instead',
  depends: 'was removed in Cfgu v1: write a `test` that reads `$.configs.<KEY>.value` instead',
};

/** v0 `type` values and the v1 declaration that checks the same (keys are lower-case). */
const V0_TYPES: Record<string, string> = {
  string: 'was removed in Cfgu v1: every stored value is a string, so it needs no replacement (write a `test` expression for a stricter check)',
  number: 'was removed in Cfgu v1: write a `test` expression instead (e.g. "typeof $.value === \'number\'")',
  boolean: 'was removed in Cfgu v1: write a `test` expression instead (e.g. "typeof $.value === \'boolean\'")',
  regex: 'was removed in Cfgu v1: write a `pattern` instead',
  jsonschema: 'was removed in Cfgu v1: write a `schema` instead',
  url: 'was removed in Cfgu v1: write a `test` expression instead (e.g. "validator.isURL($.storedValue)")',
  email: 'was removed in Cfgu v1: write a `test` expression instead (e.g. "validator.isEmail($.storedValue)")',
  uuid: 'was removed in Cfgu v1: write a `test` expression instead (e.g. "validator.isUUID($.storedValue)")',
  domain: 'was removed in Cfgu v1: write a `test` expression instead (e.g. "validator.isFQDN($.storedValue)")',
  ipv4: 'was removed in Cfgu v1: write a `test` expression instead (e.g. "validator.isIP($.storedValue, 4)")',
  ipv6: 'was removed in Cfgu v1: write a `test` expression instead (e.g. "validator.isIP($.storedValue, 6)")',
  semver: 'was removed in Cfgu v1: write a `test` expression instead (e.g. "validator.isSemVer($.storedValue)")',
};

const EXCLUSIVE_PAIRS: Array<[string, string]> = [
  ['lazy', 'const'],
  ['lazy', 'default'],
  ['const', 'default'],
  ['const', 'required'],
  ['default', 'required'],
];

const cfguShape = {
  type: 'object',
  additionalProperties: false,
  properties: Object.fromEntries(CFGU_PROPERTY_NAMES.map((p) => [p, CFGU_PROPERTIES[p].rule])),
};

const ajv = new Ajv({ allErrors: true, strict: false, validateSchema: true });
const checkCfgu = ajv.compile(cfguShape);
/** Validates user JSON Schemas against the meta-schema without compiling them (no code generation on the host). */
const metaAjv = new Ajv({ allErrors: true, strict: false, validateFormats: false });

/** Everything evaluation needs about one key, computed once per schema. */
export interface PreparedKey {
  key: string;
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
}

/** Stringify a non-string JSON value the way the store keeps it. */
export function stringifyValue(value: unknown): string {
  if (typeof value === 'string') return value;
  if (value === undefined) return '';
  return JSON.stringify(value);
}

/**
 * The `enum` rule, one implementation for the evaluation and for the declaration check of `default` (which runs it on
 * the stored text the default becomes), so the two cannot disagree. A stored string is accepted when it equals the
 * stored form of an item (a string item itself, any other item's JSON text: `null` accepts the text `null`), or when
 * its coerced value deep-equals an item.
 */
export class EnumRule {
  readonly items: readonly JsonValue[];
  private readonly texts: Set<string>;
  constructor(items: readonly JsonValue[]) {
    this.items = items;
    this.texts = new Set(items.map(stringifyValue));
  }
  accepts(stored: string, declaredType: unknown): boolean {
    if (this.texts.has(stored)) return true;
    const value = coerceValue(stored, declaredType);
    if (typeof value === 'string') return false; // a string value equals an item only through its text, checked above
    return this.items.some((item) => isEqual(item, value));
  }
}

/** How deeply a value inside a declaration may nest arrays and objects (the property's own value is level 1). */
export const MAX_DECLARATION_DEPTH = 64;

/**
 * Why a schema cannot be keyed by its JSON text, or undefined: a value that is not JSON (`undefined`, a function, a
 * class instance), a number JSON cannot hold (the body parser turns `1e400` into Infinity, which JSON.stringify would
 * write as `null`), or nesting deeper than MAX_DECLARATION_DEPTH. Iterative, stops at the first problem.
 */
function jsonShapeIssue(schema: unknown): InputIssue | undefined {
  interface Item {
    value: object;
    /** Nesting level inside the declaration property (or top-level property) that holds it; 0 above those. */
    level: number;
    /** 0: the schema; 1: `keys`; 2: a declaration; 3: inside a declaration property or another top-level property. */
    place: number;
    /** Where a problem is reported: the place of the nearest object above that is not inside a value. */
    at: number;
    /** The declaration's key and the property (messages are built only for a problem: this runs on every request). */
    key: string | undefined;
    prop: string | undefined;
  }
  const where = (place: number, key: string | undefined, prop: string | undefined): [string, string] => {
    if (place === 1) return ['/keys', '`keys`'];
    if (place === 2) return [`/keys/${key}`, `the declaration of key "${truncate(key!)}"`];
    if (place === 3 && key !== undefined) return [`/keys/${key}/${prop}`, `\`${truncate(prop!)}\` of key "${truncate(key)}"`];
    return [prop === undefined ? '' : `/${prop}`, 'the schema'];
  };
  const issue = (item: Item, problem: string): InputIssue => {
    const [path, what] = where(item.at, item.key, item.prop);
    return { path, message: `${what} ${problem}` };
  };
  const top = nonJson(schema);
  if (top) return { path: '', message: `the schema ${top}` };
  if (schema === null || typeof schema !== 'object') return undefined;
  const stack: Item[] = [{ value: schema, level: 0, place: 0, at: 0, key: undefined, prop: undefined }];
  while (stack.length) {
    const item = stack.pop()!;
    const { value, level, place, at, key, prop } = item;
    if (level > MAX_DECLARATION_DEPTH) return issue(item, `is nested more than ${MAX_DECLARATION_DEPTH} levels deep`);
    const isArray = Array.isArray(value);
    const names = isArray ? undefined : Object.keys(value);
    const count = isArray ? (value as unknown[]).length : names!.length;
    // Children pushed last first, so problems are found in document order.
    for (let i = count - 1; i >= 0; i--) {
      const child = isArray ? (value as unknown[])[i] : (value as Record<string, unknown>)[names![i]!];
      const problem = nonJson(child);
      if (!problem && (child === null || typeof child !== 'object')) continue;
      const name = isArray ? String(i) : names![i]!;
      let next: Item;
      const v = child as object;
      if (isArray || place === 3) next = { value: v, level: level + 1, place: 3, at, key, prop };
      else if (place === 0 && name === 'keys') next = { value: v, level: 0, place: 1, at: 1, key: undefined, prop: undefined };
      else if (place === 0) next = { value: v, level: 1, place: 3, at: 3, key: undefined, prop: name };
      else if (place === 1) next = { value: v, level: 0, place: 2, at: 2, key: name, prop: undefined };
      else next = { value: v, level: 1, place: 3, at: 3, key, prop: name };
      if (problem) return issue(next, problem);
      stack.push(next);
    }
  }
  return undefined;
}

function nonJson(value: unknown): string | undefined {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return undefined;
    case 'number':
      return Number.isFinite(value) ? undefined : 'holds a number that is not finite (such as 1e400); cfgu refuses them';
    case 'object': {
      if (value === null || Array.isArray(value)) return undefined;
      const proto = Object.getPrototypeOf(value);
      return proto === Object.prototype || proto === null ? undefined : 'holds a value that is not JSON';
    }
    default:
      return 'holds a value that is not JSON';
  }
}

function describeAjvError(key: string, e: ErrorObject): InputIssue {
  const prop = e.instancePath.split('/')[1] ?? '';
  const base = `/keys/${key}${e.instancePath}`;
  const where = prop ? `\`${prop}\` of key "${key}"` : `the declaration of key "${key}"`;
  switch (e.keyword) {
    case 'additionalProperties': {
      const extra = (e.params as { additionalProperty: string }).additionalProperty;
      return {
        path: `${base}/${extra}`,
        message: `key "${key}" has an unknown property \`${truncate(extra)}\`; allowed: ${CFGU_PROPERTY_NAMES.join(', ')}`,
      };
    }
    case 'type':
      return e.instancePath === ''
        ? { path: base, message: `the declaration of key "${key}" must be an object or null` }
        : { path: base, message: `${where} must be ${article((e.params as { type: string }).type)}` };
    case 'minLength':
      return { path: base, message: `${where} must not be empty` };
    case 'minItems':
      return { path: base, message: `${where} must not be an empty list` };
    default:
      return { path: base, message: `${where} ${e.message ?? 'is invalid'}` };
  }
}

function article(type: string): string {
  const names: Record<string, string> = {
    string: 'a string',
    boolean: 'a boolean (true or false)',
    array: 'a list',
    object: 'an object',
    number: 'a number',
  };
  return names[type] ?? type;
}

/** Errors from the `anyOf` of `label`/`test`: collapse Ajv's branch errors into one sentence. */
function collapse(key: string, errors: ErrorObject[]): InputIssue[] {
  const out: InputIssue[] = [];
  const anyOfProps = new Set<string>();
  for (const e of errors) {
    const prop = e.instancePath.split('/')[1] ?? '';
    if (e.keyword === 'anyOf') anyOfProps.add(prop);
  }
  for (const e of errors) {
    const prop = e.instancePath.split('/')[1] ?? '';
    if (anyOfProps.has(prop)) continue;
    out.push(describeAjvError(key, e));
  }
  for (const prop of anyOfProps) {
    const what = prop === 'label' ? 'a non-empty string or a non-empty list of unique non-empty strings' : 'a non-empty expression string or a non-empty list of them';
    out.push({ path: `/keys/${key}/${prop}`, message: `\`${prop}\` of key "${key}" must be ${what}` });
  }
  return out;
}

/** Deep-equality key of a JSON value: object properties sorted, so `{a,b}` and `{b,a}` are one value. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const o = value as Record<string, unknown>;
    return `{${Object.keys(o).sort().map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'undefined';
}

/** The pair Ajv's `uniqueItems` reports (the last item equal to an earlier one, and that earlier one), in linear time. */
function duplicateItems(items: readonly unknown[]): [number, number] | undefined {
  const last = new Map<string, number>();
  let pair: [number, number] | undefined;
  items.forEach((item, i) => {
    const k = canonical(item);
    const j = last.get(k);
    if (j !== undefined) pair = [j, i];
    last.set(k, i);
  });
  return pair;
}

function checkOne(key: string, raw: unknown, issues: InputIssue[]): void {
  const problem = keyProblem(key);
  if (problem) issues.push({ path: `/keys/${key}`, message: problem });
  if (raw === null) return;
  if (typeof raw !== 'object' || Array.isArray(raw)) {
    issues.push({ path: `/keys/${key}`, message: `the declaration of key "${key}" must be an object or null` });
    return;
  }
  const cfgu = raw as Record<string, unknown>;
  const v0 = Object.keys(cfgu).filter((p) => p in V0_REPLACEMENTS);
  for (const p of v0) {
    const type = typeof cfgu.type === 'string' ? cfgu.type.toLowerCase() : '';
    const hint = p === 'type' && Object.hasOwn(V0_TYPES, type) ? V0_TYPES[type] : V0_REPLACEMENTS[p];
    issues.push({ path: `/keys/${key}/${p}`, message: `\`${p}\` of key "${key}" ${hint}` });
  }
  if (!checkCfgu(cfgu)) {
    const errors = (checkCfgu.errors ?? []).filter(
      (e) => !(e.keyword === 'additionalProperties' && (e.params as { additionalProperty: string }).additionalProperty in V0_REPLACEMENTS),
    );
    issues.push(...collapse(key, errors));
  }
  // Flags (`lazy`, `required`) combine only when true: `required: false` beside `default` says nothing.
  const uses = (p: string) => (p === 'lazy' || p === 'required' ? cfgu[p] === true : cfgu[p] !== undefined);
  for (const [a, b] of EXCLUSIVE_PAIRS) {
    if (uses(a) && uses(b)) {
      issues.push({ path: `/keys/${key}`, message: `key "${key}" cannot have both \`${a}\` and \`${b}\`` });
    }
  }
  const duplicate = Array.isArray(cfgu.enum) ? duplicateItems(cfgu.enum) : undefined;
  if (duplicate) {
    issues.push({ path: `/keys/${key}/enum`, message: `\`enum\` of key "${key}" must not contain duplicates (items ${duplicate[0]} and ${duplicate[1]} are equal)` });
  }
  // The default must pass the evaluation's own `enum` rule, applied to the text the default is stored as.
  if (Array.isArray(cfgu.enum) && cfgu.default !== undefined && !new EnumRule(cfgu.enum as JsonValue[]).accepts(stringifyValue(cfgu.default), declaredTypeOf(cfgu))) {
    issues.push({ path: `/keys/${key}/default`, message: `the \`default\` of key "${key}" must be one of its \`enum\` items` });
  }
  if (typeof cfgu.pattern === 'string') {
    try {
      // Construction only compiles the expression; it never runs it on the host.
      new RegExp(cfgu.pattern);
    } catch {
      issues.push({ path: `/keys/${key}/pattern`, message: `\`pattern\` of key "${key}" is not a valid regular expression` });
    }
  }
  if (cfgu.schema && typeof cfgu.schema === 'object' && !Array.isArray(cfgu.schema)) {
    let valid = false;
    let why: ErrorObject | undefined;
    try {
      valid = metaAjv.validateSchema(cfgu.schema as object) as boolean;
      // Read now: `errors` belongs to the shared validator and still holds an earlier call's errors after a throw.
      why = valid ? undefined : metaAjv.errors?.[0];
    } catch {
      // Ajv throws (instead of answering) only for a `$schema` it does not know.
      valid = false;
      why = { instancePath: '/$schema', message: 'is not a meta-schema cfgu can check against' } as ErrorObject;
    }
    if (!valid) {
      const detail = why ? `: ${why.instancePath || '(root)'} ${why.message}` : '';
      issues.push({ path: `/keys/${key}/schema`, message: `\`schema\` of key "${key}" is not a valid JSON Schema${detail}` });
    }
  }
}

function prepare(keys: Record<string, Cfgu | null>): PreparedSchema {
  const prepared: PreparedKey[] = [];
  const byName = new Map<string, PreparedKey>();
  let needsSandbox = false;
  const constNames = new Set(Object.keys(keys).filter((key) => keys[key]?.const !== undefined));
  const deps = new Map<string, string[]>();
  for (const key of Object.keys(keys)) {
    const cfgu: Cfgu = keys[key] ?? {};
    const tests = cfgu.test === undefined ? [] : Array.isArray(cfgu.test) ? cfgu.test : [cfgu.test];
    const p: PreparedKey = {
      key,
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
  };
}

let graphSteps = 0;

/**
 * Steps taken so far by the `const` analysis (template characters visited, names looked up, dependency edges and
 * cycle searches walked). A deterministic measure of work, for tests that check the analysis is linear.
 */
export function constAnalysisSteps(): number {
  return analysisWork.steps + graphSteps;
}

/**
 * Order const keys so that each comes after the const keys its template names, and find the cycles: Tarjan's
 * strongly connected components, iterative (a chain of 100,000 consts must not overflow the stack), linear in keys +
 * references. Components come out dependencies first. Every key of a component with more than one key, or naming
 * itself, is in a cycle; all of them report one cycle of their component (the shortest through its first key).
 */
function orderConsts(names: string[], deps: Map<string, string[]>): { order: string[]; cycles: Map<string, string> } {
  const order: string[] = [];
  const cycles = new Map<string, string>();
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  let counter = 0;
  const enter = (key: string) => {
    index.set(key, counter);
    low.set(key, counter);
    counter++;
    stack.push(key);
    onStack.add(key);
  };
  for (const root of names) {
    if (index.has(root)) continue;
    enter(root);
    const work: Array<{ key: string; next: number }> = [{ key: root, next: 0 }];
    while (work.length) {
      const frame = work[work.length - 1]!;
      const out = deps.get(frame.key) ?? [];
      if (frame.next < out.length) {
        const d = out[frame.next++]!;
        graphSteps++;
        if (!index.has(d)) {
          enter(d);
          work.push({ key: d, next: 0 });
        } else if (onStack.has(d)) {
          low.set(frame.key, Math.min(low.get(frame.key)!, index.get(d)!));
        }
        continue;
      }
      work.pop();
      const parent = work[work.length - 1];
      if (parent) low.set(parent.key, Math.min(low.get(parent.key)!, low.get(frame.key)!));
      if (low.get(frame.key) !== index.get(frame.key)) continue;
      const members = new Set<string>();
      let m: string;
      do {
        m = stack.pop()!;
        onStack.delete(m);
        members.add(m);
      } while (m !== frame.key);
      if (members.size === 1 && !out.includes(frame.key)) {
        order.push(frame.key);
        continue;
      }
      const text = describeCycle(shortestCycle(frame.key, members, deps));
      // In the order they were reached (the stack gave them last first).
      for (const member of [...members].reverse()) cycles.set(member, text);
    }
  }
  return { order, cycles };
}

/** The shortest cycle through `start` inside its component (breadth-first), as the keys in order, `start` first. */
function shortestCycle(start: string, members: Set<string>, deps: Map<string, string[]>): string[] {
  const parent = new Map<string, string>();
  const queue = [start];
  for (let head = 0; head < queue.length; head++) {
    const key = queue[head]!;
    for (const d of deps.get(key) ?? []) {
      graphSteps++;
      if (d === start) {
        const path = [key];
        for (let k = key; k !== start; ) path.push((k = parent.get(k)!));
        return path.reverse();
      }
      if (members.has(d) && !parent.has(d)) {
        parent.set(d, key);
        queue.push(d);
      }
    }
  }
  return [start]; // unreachable for a component
}

const CYCLE_SHOWN = 8;

/** `A -> B -> A`; a long cycle is shortened (every key of it repeats the text in its failure). */
function describeCycle(cycle: string[]): string {
  const shown = cycle.length > CYCLE_SHOWN + 1 ? [...cycle.slice(0, CYCLE_SHOWN), `… (${cycle.length - CYCLE_SHOWN} more)`] : cycle;
  return [...shown.map((k) => truncate(k)), truncate(cycle[0]!)].join(' -> ');
}

/** Bounds of the prepared-schema cache: entries, and characters of schema JSON text (a prepared schema takes memory
 * in proportion to its text, so the count alone let a few hundred large schemas take gigabytes). */
const cacheLimits = { entries: 500, chars: 16 * 1024 * 1024 };
let cache = newCache();
/** Prepared forms of deep-frozen schema objects (see frozen.ts); entries go with their objects. */
const byIdentity = new WeakMap<object, PreparedSchema | InputError>();

function newCache(): LRUCache<string, PreparedSchema | InputError> {
  // `|| 1`: lru-cache wants a positive size; only the empty text has none.
  return new LRUCache({ max: cacheLimits.entries, maxSize: cacheLimits.chars, sizeCalculation: (_v, text) => text.length || 1 });
}

/** Change the bounds of the prepared-schema cache (tests, embedding); entries over the new bounds are evicted. */
export function configureSchemaCache(limits: { entries?: number; chars?: number }): void {
  if (limits.entries !== undefined) cacheLimits.entries = limits.entries;
  if (limits.chars !== undefined) cacheLimits.chars = limits.chars;
  // lru-cache's bounds are fixed at construction: move the entries, least recently used first, to a new cache.
  const old = cache;
  cache = newCache();
  for (const [text, hit] of [...old.entries()].reverse()) cache.set(text, hit);
}

/** What the prepared-schema cache holds now. */
export function schemaCacheStats(): { entries: number; chars: number; limits: { entries: number; chars: number } } {
  return { entries: cache.size, chars: cache.calculatedSize, limits: { ...cacheLimits } };
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
 * Results (good and bad) are cached by the schema's JSON text, bounded by count and size, least recently used evicted
 * first. A cached failure holds only paths and messages derived from that exact text.
 */
export function prepareSchema(schema: unknown, pathPrefix = ''): PreparedSchema {
  // A deep-frozen schema cannot have changed since it was seen: look it up by identity, without serialising it.
  const immutable = isDeepFrozen(schema);
  const known = immutable ? byIdentity.get(schema as object) : undefined;
  if (known) return unwrap(known, pathPrefix);
  // Before the text is made: only a schema of JSON values has a text that identifies it.
  const shape = jsonShapeIssue(schema);
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
  let hit = cache.get(text);
  if (!hit) {
    hit = validateUncached(schema);
    cache.set(text, hit); // a text over the size bound is not kept
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

function validateUncached(schema: unknown): PreparedSchema | InputError {
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
  for (const key of names) checkOne(key, (keys as Record<string, unknown>)[key], issues);
  if (issues.length) return fail(issues);
  return prepare(keys as ConfigSchema['keys']);
}

/** Validate without keeping the prepared form (CLI checks). Throws InputError. */
export function validateSchema(schema: unknown): void {
  prepareSchema(schema);
}
