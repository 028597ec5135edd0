/**
 * A `test` expression read statically, when it is one of a few exact forms about `$.value` (the exported value):
 *   JSONSchema.validate(<JSON>, $.value)        (or `jsonschema.`; the schema written as JSON)
 *   typeof $.value === 'number'                 (`string`, `number`, `boolean`, `object`; `==` too)
 *   Number.isInteger($.value), Number.isFinite($.value), Array.isArray($.value)
 *   z.<base>(...)<.refinement(...)>*.parse($.value), z.<base>(...)<...>.safeParse($.value).success
 * where a zod base is string, number, int, boolean, email, uuid, enum([...]) or literal(<JSON>), and a refinement
 * one that keeps the type (`.min`, `.max`, `.int`, `.regex`, `.refine` ...). Any other expression is not read: it
 * still runs, but says nothing to the generator. What is read is an upper bound of the values the test lets through.
 */
import type { JsonValue } from '../types.js';
import { readJsonSchema } from './read-schema.js';
import { ANY_ARRAY, BOOLEAN, INTEGER, NUMBER, STRING, literal, union, type Shape } from './shape.js';

const TYPEOF: Record<string, Shape> = {
  string: STRING,
  number: NUMBER,
  boolean: BOOLEAN,
  // `null` is never exported as a value (coerce.ts), so `object` is an array or an object.
  object: union([ANY_ARRAY, { kind: 'object', props: [], rest: { kind: 'any' } }]),
};

const VALUE = String.raw`\$\.value`;
const TYPEOF_FORMS = [
  new RegExp(String.raw`^typeof\s+${VALUE}\s*===?\s*(['"])(\w+)\1$`),
  new RegExp(String.raw`^(['"])(\w+)\1\s*===?\s*typeof\s+${VALUE}$`),
];
const CALLS: Array<[RegExp, Shape]> = [
  [new RegExp(String.raw`^Number\.isInteger\(\s*${VALUE}\s*\)$`), INTEGER],
  [new RegExp(String.raw`^Number\.isFinite\(\s*${VALUE}\s*\)$`), NUMBER],
  [new RegExp(String.raw`^Array\.isArray\(\s*${VALUE}\s*\)$`), ANY_ARRAY],
];
const JSON_SCHEMA_FORM = new RegExp(String.raw`^(?:JSONSchema|jsonschema)\.validate\(([\s\S]*),\s*${VALUE}\s*\)$`);
const ZOD_FORM = new RegExp(String.raw`^z\.([\s\S]+)\.(?:parse\(\s*${VALUE}\s*\)|safeParse\(\s*${VALUE}\s*\)\.success)$`);

/** The values a test lets through, when the expression is one the generator reads; undefined otherwise. */
export function readTest(source: string): Shape | undefined {
  const text = source.trim().replace(/;\s*$/, '').trim();
  for (const form of TYPEOF_FORMS) {
    const m = form.exec(text);
    if (m) return Object.hasOwn(TYPEOF, m[2]!) ? TYPEOF[m[2]!] : undefined;
  }
  for (const [form, shape] of CALLS) if (form.test(text)) return shape;
  const schema = JSON_SCHEMA_FORM.exec(text);
  if (schema) {
    const parsed = jsonArgument(schema[1]!);
    return parsed !== undefined && (typeof parsed === 'boolean' || (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)))
      ? readJsonSchema(parsed)
      : undefined;
  }
  const zod = ZOD_FORM.exec(text);
  return zod ? readZodChain(zod[1]!) : undefined;
}

/** An argument written as JSON, or with single-quoted strings free of quotes and backslashes; undefined otherwise. */
function jsonArgument(text: string): JsonValue | undefined {
  for (const candidate of [text, text.replace(/'([^'"\\]*)'/g, '"$1"')]) {
    try {
      return JSON.parse(candidate) as JsonValue;
    } catch {
      // try the next form
    }
  }
  return undefined;
}

/** Zod bases whose arguments do not change the type. */
const ZOD_BASES: Record<string, Shape> = { string: STRING, number: NUMBER, int: INTEGER, boolean: BOOLEAN, email: STRING, uuid: STRING };

/** Zod methods that narrow within the type they are called on (the value must still pass the base). */
const REFINEMENTS = new Set([
  'min', 'max', 'length', 'gt', 'gte', 'lt', 'lte', 'positive', 'negative', 'nonnegative', 'nonpositive', 'multipleOf',
  'int', 'finite', 'safe', 'regex', 'startsWith', 'endsWith', 'includes', 'email', 'uuid', 'nonempty', 'trim',
  'toLowerCase', 'toUpperCase', 'lowercase', 'uppercase', 'describe', 'refine', 'superRefine', 'check',
]);

function readZodChain(chain: string): Shape | undefined {
  const calls = splitCalls(chain);
  if (!calls?.length) return undefined;
  const [base, ...rest] = calls;
  let shape: Shape | undefined;
  if (base!.name === 'enum' || base!.name === 'literal') {
    const arg = jsonArgument(base!.args);
    if (base!.name === 'literal' && (arg === null || (arg !== undefined && typeof arg !== 'object'))) shape = literal(arg);
    if (base!.name === 'enum' && Array.isArray(arg) && arg.length && arg.every((a) => typeof a === 'string')) shape = union(arg.map(literal));
  } else if (Object.hasOwn(ZOD_BASES, base!.name)) shape = ZOD_BASES[base!.name];
  if (!shape) return undefined;
  for (const call of rest) {
    if (!REFINEMENTS.has(call.name)) return undefined;
    if (call.name === 'int' && shape.kind === 'number') shape = INTEGER;
  }
  return shape;
}

/**
 * `name(args).name(args)...` as a list of calls, or undefined when the text is not exactly that. Arguments are kept
 * as text; brackets nest and quoted strings are skipped while looking for the closing parenthesis.
 */
function splitCalls(text: string): Array<{ name: string; args: string }> | undefined {
  const calls: Array<{ name: string; args: string }> = [];
  let i = 0;
  for (;;) {
    const name = /^[A-Za-z_$][\w$]*/.exec(text.slice(i))?.[0];
    if (!name || text[i + name.length] !== '(') return undefined;
    const open = i + name.length;
    const close = closingParen(text, open);
    if (close === undefined) return undefined;
    calls.push({ name, args: text.slice(open + 1, close).trim() });
    i = close + 1;
    if (i === text.length) return calls;
    if (text[i] !== '.') return undefined;
    i++;
  }
}

function closingParen(text: string, open: number): number | undefined {
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    const c = text[i]!;
    if (c === '"' || c === "'" || c === '`') {
      for (i++; i < text.length && text[i] !== c; i++) if (text[i] === '\\') i++;
      if (i >= text.length) return undefined;
    } else if (c === '(' || c === '[' || c === '{') depth++;
    else if (c === ')' || c === ']' || c === '}') {
      depth--;
      if (depth === 0) return c === ')' ? i : undefined;
    }
  }
  return undefined;
}
