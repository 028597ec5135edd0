/**
 * Coercion of stored strings to exported values. Pure and import-free: the sandbox bundle uses the same function for
 * `$.value`, so the host and the sandbox can never disagree.
 *
 * Rules (the export of POST /export and `cfgu export`):
 * - the string is parsed as JSON; a number, boolean, object or array is used; anything else (plain text, invalid
 *   JSON, `null`, a JSON string such as `"\"q\""`) stays the original string;
 * - a number is used only when its JSON text is the canonical form of a double that survives the round trip
 *   (`"1.0"` -> 1 is allowed, `"12345678901234567890"` and `"1e400"` stay strings);
 * - when the key declares `schema.type`, that type wins: a string type keeps the string; a number/integer/boolean/
 *   object/array type uses the parsed value only when it has that type;
 * - an object or array nested more than MAX_VALUE_DEPTH levels stays the original string (serialising or comparing
 *   it would overflow the stack).
 */

export type JsonValue = string | number | boolean | null | JsonValue[] | { [k: string]: JsonValue };

/** Deepest nesting of arrays and objects a coerced value may have (`[]` is 1 level, `[[]]` 2). */
export const MAX_VALUE_DEPTH = 64;

/** True when `value` nests arrays and objects deeper than `max`. Iterative, stops as soon as it knows. */
function deeperThan(value: unknown, max: number): boolean {
  const stack: Array<[unknown, number]> = [[value, 1]];
  while (stack.length) {
    const [v, depth] = stack.pop()!;
    if (depth > max) return true;
    const children = Array.isArray(v) ? v : Object.values(v as Record<string, unknown>);
    for (const c of children) if (c !== null && typeof c === 'object') stack.push([c, depth + 1]);
  }
  return false;
}

const NUMBER_TEXT = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?$/;

function numberSurvives(text: string, n: number): boolean {
  if (!Number.isFinite(n)) return false;
  if (String(n) === text) return true; // the common case: already canonical
  // Exact decimal comparison: strip the canonical renderings and compare digits and exponent.
  return sameDecimal(text, String(n));
}

/** Compare two decimal numerals by value as written (no floating point), e.g. "1.0" == "1", "1e2" == "100". */
function sameDecimal(a: string, b: string): boolean {
  const na = normaliseDecimal(a);
  const nb = normaliseDecimal(b);
  return na.sign === nb.sign && na.digits === nb.digits && na.exp === nb.exp;
}

function normaliseDecimal(text: string): { sign: string; digits: string; exp: number } {
  let s = text.trim();
  let sign = '';
  if (s[0] === '-') {
    sign = '-';
    s = s.slice(1);
  }
  let exp = 0;
  const e = s.search(/[eE]/);
  if (e !== -1) {
    exp = Number(s.slice(e + 1));
    s = s.slice(0, e);
  }
  const dot = s.indexOf('.');
  let digits = s;
  if (dot !== -1) {
    digits = s.slice(0, dot) + s.slice(dot + 1);
    exp -= s.length - dot - 1;
  }
  digits = digits.replace(/^0+/, '');
  if (digits === '') return { sign: '', digits: '0', exp: 0 };
  const trailing = digits.length - digits.replace(/0+$/, '').length;
  digits = digits.slice(0, digits.length - trailing);
  exp += trailing;
  return { sign, digits, exp };
}

/** The JSON type name of a value, as JSON Schema names it (`integer` is reported as `number`). */
function jsonType(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  return typeof v;
}

/**
 * Coerce a stored string. `declaredType` is the Cfgu's `schema.type` (a string or an array of type names), if any.
 */
export function coerceValue(stored: string, declaredType?: unknown): JsonValue {
  if (stored === '') return stored;
  const types = typeof declaredType === 'string' ? [declaredType] : Array.isArray(declaredType) ? declaredType : undefined;
  if (types && types.includes('string') && !types.some((t) => t !== 'string' && t !== 'null')) return stored;

  const int = plainInteger(stored);
  if (int !== undefined) return typesAllow(types, 'number', int) ? int : stored;

  const first = stored.charCodeAt(0);
  let parsed: unknown;
  // Fast exits for the common plain-text case: JSON values start with one of - 0-9 t f n [ { or whitespace.
  const maybeJson =
    first === 45 /* - */ ||
    (first >= 48 && first <= 57) ||
    first === 116 /* t */ ||
    first === 102 /* f */ ||
    first === 91 /* [ */ ||
    first === 123 /* { */ ||
    first === 32 ||
    first === 9 ||
    first === 10 ||
    first === 13;
  if (!maybeJson) return stored;
  try {
    parsed = JSON.parse(stored);
  } catch {
    return stored;
  }
  const kind = jsonType(parsed);
  if (kind === 'number') {
    // Scalars must be written exactly (no padding); the number must survive the round trip.
    if (!NUMBER_TEXT.test(stored) || !numberSurvives(stored, parsed as number)) return stored;
  } else if (kind === 'boolean') {
    if (stored !== 'true' && stored !== 'false') return stored;
  } else if (kind !== 'object' && kind !== 'array') {
    return stored;
  } else if (stored.length > 2 * MAX_VALUE_DEPTH && deeperThan(parsed, MAX_VALUE_DEPTH)) {
    // A value that deep needs at least two characters a level: shorter texts skip the walk.
    return stored;
  }
  return typesAllow(types, kind, parsed) ? (parsed as JsonValue) : stored;
}

/** Whether a value of JSON type `kind` fits the declared types (any, when none are declared). */
function typesAllow(types: readonly unknown[] | undefined, kind: string, parsed: unknown): boolean {
  return !types || types.some((t) => (t === 'integer' ? kind === 'number' && Number.isInteger(parsed) : t === kind));
}

/**
 * The common case of a stored number, read without JSON.parse: an optional minus and at most 15 digits, without a
 * leading zero (such a number is exact in a double and `String` writes it back unchanged). Anything else (`-0`, `01`,
 * fractions, exponents, longer numerals) returns undefined and takes the general path.
 */
function plainInteger(s: string): number | undefined {
  const n = s.length;
  if (n > 15) return undefined;
  let i = s.charCodeAt(0) === 45 ? 1 : 0;
  if (i === n) return undefined;
  if (s.charCodeAt(i) === 48) return n === 1 ? 0 : undefined;
  for (; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c < 48 || c > 57) return undefined;
  }
  return Number(s);
}

/**
 * Whether `coerceValue(s)` without a declared type is the number whose JSON text is `s` itself: the text passes
 * plainInteger, which accepts only numerals that `String` writes back unchanged.
 */
export const isPlainInteger = (s: string): boolean => plainInteger(s) !== undefined;

/** The declared `schema.type` of a Cfgu-like object, if any. */
export function declaredTypeOf(cfgu: unknown): unknown {
  if (cfgu && typeof cfgu === 'object') {
    const schema = (cfgu as { schema?: unknown }).schema;
    if (schema && typeof schema === 'object') return (schema as { type?: unknown }).type;
  }
  return undefined;
}
