/**
 * The type of one key's exported value, from what its declaration says, by the engine's own rules (docs/engine.md):
 * - the export holds every key that is not `hidden`, always: a key without a value is exported as `""`;
 * - a value is coerced (coerce.ts): without `schema.type` it is a string, number, boolean, array or object (never
 *   null); with `schema.type` only the types it names (never null: `null` is exported as the string "null", which a
 *   schema naming `null` refuses);
 * - `schema`, `enum` and the `test` expressions the generator reads (read-test.ts) narrow it, each an upper bound;
 *   `enum` items are typed by what they are exported as (the item `1` of a key whose `schema.type` is `string` is the
 *   string "1", the item `null` the string "null");
 * - `""` is added unless the key is `required`, has a `default` or is a `const`: then `""` is exported only when its
 *   checks let it through (an override of `""`, a `default` of `""`, a `const` that renders nothing), and the shape
 *   already says whether they do. A `default` the shape refuses is refused (the engine would refuse it on use).
 * `pattern` and the tests that are not read narrow the values further; the type does not say so.
 */
import { coerceValue, declaredTypeOf } from '../coerce.js';
import { stringifyValue } from '../enum-rule.js';
import type { Cfgu, JsonValue } from '../types.js';
import { readJsonSchema } from './read-schema.js';
import { readTest } from './read-test.js';
import { ANY_ARRAY, ANY_OBJECT, BOOLEAN, INTEGER, NEVER, NUMBER, STRING, admits, intersect, literal, union, type Shape } from './shape.js';

/** What the export may hold for a key that is not hidden. */
export interface KeyType {
  key: string;
  /** The exported values, `""` included when the key may be without a value. */
  shape: Shape;
  cfgu: Cfgu;
  /** The exported form of `default`, when the key has one. */
  exportedDefault: JsonValue | undefined;
}

/** Why a key cannot be typed: `message` names the key and the properties that disagree. */
export interface KeyProblem {
  key: string;
  message: string;
}

/** The values coercion gives without a declared type: anything JSON but null. */
export const UNTYPED: Shape = union([STRING, NUMBER, BOOLEAN, ANY_ARRAY, ANY_OBJECT]);

const COERCED: Record<string, Shape> = {
  string: STRING,
  number: NUMBER,
  integer: INTEGER,
  boolean: BOOLEAN,
  array: ANY_ARRAY,
  object: ANY_OBJECT,
  // A stored value is never coerced to null.
  null: NEVER,
};

/** The values coercion can give for a declared `schema.type` (undefined: none declared). */
function coercedShape(declared: unknown): Shape {
  if (declared === undefined) return UNTYPED;
  const names = typeof declared === 'string' ? [declared] : Array.isArray(declared) ? declared : [];
  return union(names.map((n) => (typeof n === 'string' && Object.hasOwn(COERCED, n) ? COERCED[n]! : NEVER)));
}

interface Constraint {
  what: string;
  shape: Shape;
}

const quoteTest = (t: string) => (t.length > 60 ? `${JSON.stringify(t.slice(0, 60))}…` : JSON.stringify(t));

/** The type of a key that is not hidden, or why it cannot have one. */
export function keyType(key: string, declaration: Cfgu | null): KeyType | KeyProblem {
  const cfgu = declaration ?? {};
  const declared = declaredTypeOf(cfgu);
  const constraints: Constraint[] = [{ what: declared === undefined ? 'coercion' : '`schema.type`', shape: coercedShape(declared) }];
  if (cfgu.schema !== undefined) constraints.push({ what: '`schema`', shape: readJsonSchema(cfgu.schema) });
  const tests = cfgu.test === undefined ? [] : Array.isArray(cfgu.test) ? cfgu.test : [cfgu.test];
  for (const t of tests) {
    const shape = readTest(t);
    if (shape) constraints.push({ what: `the test ${quoteTest(t)}`, shape });
  }
  const enumValues = cfgu.enum?.map((item) => coerceValue(stringifyValue(item), declared));
  if (enumValues) {
    for (let i = 0; i < enumValues.length; i++) {
      const refusedBy = constraints.find((c) => !admits(c.shape, enumValues[i]!));
      if (refusedBy) {
        return {
          key,
          message: `key "${key}": \`enum\` item ${i} (${JSON.stringify(cfgu.enum![i])}) can never be exported: its exported value ${JSON.stringify(enumValues[i])} is refused by ${refusedBy.what}`,
        };
      }
    }
    constraints.push({ what: '`enum`', shape: union(enumValues.map(literal)) });
  }
  let shape: Shape = constraints[0]!.shape;
  if (shape.kind === 'never') {
    return { key, message: `key "${key}" cannot be typed: \`schema.type\` names no type a stored value is exported as (a value is never exported as null)` };
  }
  for (let i = 1; i < constraints.length; i++) {
    shape = intersect(shape, constraints[i]!.shape);
    if (shape.kind === 'never') {
      const before = constraints.slice(0, i).map((c) => c.what);
      return { key, message: `key "${key}" cannot be typed: no value passes ${before.join(', ')} and ${constraints[i]!.what} together` };
    }
  }
  const defaultText = cfgu.default === undefined ? undefined : stringifyValue(cfgu.default);
  const exportedDefault = defaultText === undefined ? undefined : coerceValue(defaultText, declared);
  if (exportedDefault !== undefined && !admits(shape, exportedDefault)) {
    const refusedBy = constraints.find((c) => !admits(c.shape, exportedDefault))?.what ?? 'its declaration';
    return { key, message: `key "${key}": its \`default\` can never be exported: its exported value ${JSON.stringify(exportedDefault)} is refused by ${refusedBy}` };
  }
  const mayBeEmpty = cfgu.const === undefined && cfgu.required !== true && defaultText === undefined;
  return { key, shape: mayBeEmpty ? union([shape, literal('')]) : shape, cfgu, exportedDefault };
}
