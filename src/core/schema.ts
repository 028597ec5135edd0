/**
 * ConfigSchema validation and preparation.
 *
 * The shape of every Cfgu is checked by one Ajv validator compiled once at module load; its errors are translated into
 * sentences. Rules JSON Schema cannot say well (key names, v0 properties, `default` inside `enum`, regular
 * expressions that compile, `schema` being a valid JSON Schema) are checked in code. A validated schema is turned into
 * a PreparedSchema (everything evaluation needs, computed once) and cached by its JSON text, so the same schema sent
 * again is neither re-validated nor re-prepared.
 */
import { Ajv, type ErrorObject } from 'ajv';
import isEqual from 'lodash/isEqual.js';
import { InputError, ErrorCodes, type InputIssue } from './errors.js';
import { keyProblem, truncate } from './names.js';
import { declaredTypeOf } from './coerce.js';
import { templateReferences } from '../expressions/template.js';
import { isDeepFrozen } from './frozen.js';
import type { Cfgu, ConfigSchema, JsonValue } from './types.js';

const V0_REPLACEMENTS: Record<string, string> = {
  type: 'was removed in Cfgu v1: write a `test` expression instead (e.g. "validator.isURL($.storedValue)")',
  options: 'was renamed `enum` in Cfgu v1',
  labels: 'was renamed `label` in Cfgu v1',
  template: 'was removed in Cfgu v1: use `const` instead',
  depends: 'was removed in Cfgu v1: write a `test` that reads `$.configs.<KEY>.value` instead',
};

const CFGU_PROPERTIES = ['description', 'label', 'hidden', 'lazy', 'const', 'default', 'required', 'pattern', 'enum', 'schema', 'test'];

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
  properties: {
    description: { type: 'string', minLength: 1 },
    label: {
      anyOf: [
        { type: 'string', minLength: 1 },
        { type: 'array', minItems: 1, uniqueItems: true, items: { type: 'string', minLength: 1 } },
      ],
    },
    hidden: { type: 'boolean' },
    lazy: { type: 'boolean' },
    const: { type: 'string', minLength: 1 },
    default: {},
    required: { type: 'boolean' },
    pattern: { type: 'string', minLength: 1 },
    // Unique items are checked in code (duplicateItems): Ajv's check is quadratic without item types, and a 1 MiB
    // `enum` kept the event loop busy for minutes.
    enum: { type: 'array', minItems: 1 },
    schema: { type: 'object' },
    test: {
      anyOf: [
        { type: 'string', minLength: 1 },
        { type: 'array', minItems: 1, items: { type: 'string', minLength: 1 } },
      ],
    },
  },
} as const;

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

function describeAjvError(key: string, e: ErrorObject): InputIssue {
  const prop = e.instancePath.split('/')[1] ?? '';
  const base = `/keys/${key}${e.instancePath}`;
  const where = prop ? `\`${prop}\` of key "${key}"` : `the declaration of key "${key}"`;
  switch (e.keyword) {
    case 'additionalProperties': {
      const extra = (e.params as { additionalProperty: string }).additionalProperty;
      return {
        path: `${base}/${extra}`,
        message: `key "${key}" has an unknown property \`${truncate(extra)}\`; allowed: ${CFGU_PROPERTIES.join(', ')}`,
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
    case 'uniqueItems':
      return { path: base, message: `${where} must not contain duplicates (items ${describePair(e)})` };
    default:
      return { path: base, message: `${where} ${e.message ?? 'is invalid'}` };
  }
}

function describePair(e: ErrorObject): string {
  const p = e.params as { i?: number; j?: number };
  return `${p.j} and ${p.i} are equal`;
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
  for (const p of v0) issues.push({ path: `/keys/${key}/${p}`, message: `\`${p}\` of key "${key}" ${V0_REPLACEMENTS[p]}` });
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
  if (Array.isArray(cfgu.enum) && cfgu.default !== undefined && !cfgu.enum.some((item) => isEqual(item, cfgu.default))) {
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
    try {
      valid = metaAjv.validateSchema(cfgu.schema as object) as boolean;
    } catch {
      valid = false;
    }
    if (!valid) {
      const why = metaAjv.errors?.[0];
      const detail = why ? `: ${why.instancePath || '(root)'} ${why.message}` : '';
      issues.push({ path: `/keys/${key}/schema`, message: `\`schema\` of key "${key}" is not a valid JSON Schema${detail}` });
    }
  }
}

function prepare(keys: Record<string, Cfgu | null>): PreparedSchema {
  const prepared: PreparedKey[] = [];
  const byName = new Map<string, PreparedKey>();
  let needsSandbox = false;
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
      pattern: cfgu.pattern,
      jsonSchema: cfgu.schema,
      tests,
    };
    if (p.isConst || tests.length || p.pattern !== undefined || p.jsonSchema !== undefined) needsSandbox = true;
    prepared.push(p);
    byName.set(key, p);
  }
  const { order, cycles } = orderConsts(prepared);
  return {
    keys: prepared,
    byName,
    storeKeys: prepared.filter((p) => !p.isConst && !p.isLazy).map((p) => p.key),
    constOrder: order,
    constCycles: cycles,
    needsSandbox,
  };
}

/** Depth-first topological order of const keys by the const keys their templates name; cycles are reported. */
function orderConsts(keys: PreparedKey[]): { order: string[]; cycles: Map<string, string> } {
  const consts = keys.filter((k) => k.isConst);
  const names = consts.map((k) => k.key);
  const deps = new Map<string, string[]>();
  // A const naming itself is a cycle of one.
  for (const k of consts) deps.set(k.key, templateReferences(k.cfgu.const!, names));
  const order: string[] = [];
  const cycles = new Map<string, string>();
  const state = new Map<string, 'visiting' | 'done'>();
  const stack: string[] = [];
  const visit = (key: string): void => {
    const s = state.get(key);
    if (s === 'done') return;
    if (s === 'visiting') {
      const cycle = [...stack.slice(stack.indexOf(key)), key];
      const text = cycle.join(' -> ');
      for (const member of cycle) if (!cycles.has(member)) cycles.set(member, text);
      return;
    }
    state.set(key, 'visiting');
    stack.push(key);
    for (const d of deps.get(key) ?? []) visit(d);
    stack.pop();
    state.set(key, 'done');
    order.push(key);
  };
  for (const k of names) visit(k);
  return { order: order.filter((k) => !cycles.has(k)), cycles };
}

const CACHE_LIMIT = 500;
const cache = new Map<string, PreparedSchema | InputError>();
/** Prepared forms of deep-frozen schema objects (see frozen.ts); entries go with their objects. */
const byIdentity = new WeakMap<object, PreparedSchema | InputError>();

/**
 * Validate a ConfigSchema (`{ keys: {...} }`) and return its prepared form. Throws InputError (code
 * CFGU_INVALID_SCHEMA) listing every problem, each with a path under `pathPrefix`.
 * Results (good and bad) are cached by the schema's JSON text, bounded, least recently used evicted first.
 */
export function prepareSchema(schema: unknown, pathPrefix = ''): PreparedSchema {
  // A deep-frozen schema cannot have changed since it was seen: look it up by identity, without serialising it.
  const immutable = isDeepFrozen(schema);
  const known = immutable ? byIdentity.get(schema as object) : undefined;
  if (known) return unwrap(known, pathPrefix);
  let text: string;
  try {
    text = JSON.stringify(schema) ?? '';
  } catch {
    throw new InputError(ErrorCodes.INVALID_SCHEMA, 'the schema is not JSON', [{ path: pathPrefix || '/', message: 'the schema is not JSON' }]);
  }
  let hit = cache.get(text);
  if (hit) {
    cache.delete(text);
    cache.set(text, hit);
  } else {
    hit = validateUncached(schema);
    cache.set(text, hit);
    if (cache.size > CACHE_LIMIT) cache.delete(cache.keys().next().value!);
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
  const fail = (issues: InputIssue[]) =>
    new InputError(
      ErrorCodes.INVALID_SCHEMA,
      issues.length === 1 ? `invalid schema: ${issues[0]!.message}` : `invalid schema: ${issues.length} problems`,
      issues,
    );
  if (!schema || typeof schema !== 'object' || Array.isArray(schema)) return fail([{ path: '', message: 'a schema must be an object with a `keys` object' }]);
  const s = schema as Record<string, unknown>;
  if (!('keys' in s)) {
    const looksV0 = Object.values(s).some((v) => v && typeof v === 'object' && Object.keys(v).some((p) => p in V0_REPLACEMENTS || CFGU_PROPERTIES.includes(p)));
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
