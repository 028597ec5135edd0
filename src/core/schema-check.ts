/**
 * The check of one key's declaration and of a whole schema's JSON shape: one Ajv validator for the Cfgu shape,
 * compiled once at module load, with its errors turned into sentences, and the rules JSON Schema cannot say well (key
 * names, v0 properties, `default` inside `enum`, regular expressions that compile, `schema` being a valid JSON Schema)
 * checked in code. Nothing here runs an expression.
 */
import { Ajv, type ErrorObject } from 'ajv';
import type { InputIssue } from './errors.js';
import { keyProblem, truncate } from './names.js';
import { declaredTypeOf } from './coerce.js';
import { CFGU_PROPERTIES, CFGU_PROPERTY_NAMES } from './cfgu.js';
import { EnumRule, stringifyValue } from './enum-rule.js';
import { STEP, runAtOnce, type Steps } from './slices.js';
import type { JsonValue } from './types.js';

export const V0_REPLACEMENTS: Record<string, string> = {
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

/** The JSON shape of one declaration (this project's own schema: the tests check it against the meta-schema). */
export const cfguShape = {
  type: 'object',
  additionalProperties: false,
  properties: Object.fromEntries(CFGU_PROPERTY_NAMES.map((p) => [p, CFGU_PROPERTIES[p].rule])),
};

// `validateSchema: false`: the shape is this project's own, not a request's, and checking it against the meta-schema
// means compiling the meta-schema first, about 60 ms of CPU at every start of the server, of each worker and of
// every `cfgu` command (test/core/schema.test.ts checks the shape against the meta-schema instead).
const ajv = new Ajv({ allErrors: true, strict: false, validateSchema: false });
const checkCfgu = ajv.compile(cfguShape);
/** Validates user JSON Schemas against the meta-schema without compiling them (no code generation on the host). */
const metaAjv = new Ajv({ allErrors: true, strict: false, validateFormats: false });

/** How deeply a value inside a declaration may nest arrays and objects (the property's own value is level 1). */
export const MAX_DECLARATION_DEPTH = 64;

/**
 * How deeply a declaration's `schema` (a JSON Schema) may nest. The sandbox compiles it with Ajv inside an isolate,
 * whose stack is much smaller than a Node process's, and Ajv's compile recursion grows with the nesting: 61 nested
 * `items` compiled as the first job of a fresh sandbox child and 63 failed ("ajv implementation error"), later ones
 * deeper once the compiler's code was optimised. A limit of 64 would answer a declaration within it with 200 or 422 by
 * the sandbox's state; at 32 the same schema always compiles, with about twice the headroom.
 */
export const MAX_SCHEMA_DEPTH = 32;

/**
 * Why a schema cannot be keyed by its JSON text, or undefined: a value that is not JSON (`undefined`, a function, a
 * class instance), a number JSON cannot hold (the body parser turns `1e400` into Infinity, which JSON.stringify would
 * write as `null`), or nesting deeper than MAX_DECLARATION_DEPTH (MAX_SCHEMA_DEPTH in a `schema` declaration). Iterative, stops at the first problem.
 */
export function jsonShapeIssue(schema: unknown): InputIssue | undefined {
  return runAtOnce(jsonShapeIssueSteps(schema));
}

/** jsonShapeIssue in steps (slices.ts): a checkpoint every STEP objects walked. */
export function* jsonShapeIssueSteps(schema: unknown): Steps<InputIssue | undefined> {
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
  let walked = 0;
  while (stack.length) {
    if (++walked % STEP === 0) yield;
    const item = stack.pop()!;
    const { value, level, place, at, key, prop } = item;
    const limit = key !== undefined && prop === 'schema' ? MAX_SCHEMA_DEPTH : MAX_DECLARATION_DEPTH;
    if (level > limit) return issue(item, `is nested more than ${limit} levels deep`);
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

export function checkOne(key: string, raw: unknown, issues: InputIssue[]): void {
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
    } else {
      const at = asyncKeywordAt(cfgu.schema as object);
      if (at !== undefined) {
        issues.push({
          path: `/keys/${key}/schema${at}`,
          message: `\`schema\` of key "${key}" uses \`$async\` (at ${at || '(root)'}), which cfgu does not support: values are validated synchronously`,
        });
      }
    }
  }
}

/**
 * Where a JSON Schema declares `$async` (a JSON pointer; "" for the root), or undefined. Ajv turns such a schema into a
 * validator that answers a promise instead of true or false, so a value would never be refused by it: the declaration
 * is refused instead. Iterative; the schema's depth is already bounded by jsonShapeIssue.
 */
const NAME_MAPS = new Set(['properties', 'patternProperties', '$defs', 'definitions', 'dependentSchemas', 'dependencies']);

function asyncKeywordAt(schema: object): string | undefined {
  const pointer = (at: string, k: string | number) => `${at}/${String(k).replace(/~/g, '~0').replace(/\//g, '~1')}`;
  // `nameMap`: an object whose keys are names chosen by the author (`properties`, `$defs` ...), not keywords.
  const stack: Array<[unknown, string, boolean]> = [[schema, '', false]];
  while (stack.length) {
    const [value, at, nameMap] = stack.pop()!;
    if (value === null || typeof value !== 'object') continue;
    if (Array.isArray(value)) {
      for (let i = 0; i < value.length; i++) stack.push([value[i], pointer(at, i), false]);
      continue;
    }
    if (!nameMap && Object.hasOwn(value, '$async')) return at;
    for (const [k, v] of Object.entries(value)) stack.push([v, pointer(at, k), !nameMap && NAME_MAPS.has(k)]);
  }
  return undefined;
}
