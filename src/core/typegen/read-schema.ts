/**
 * A JSON Schema (a key's `schema`, or one a `test` hands to `JSONSchema.validate`) read as a Shape: an upper bound of
 * the values it accepts. Read: `type`, `enum`, `const`, `properties`, `required`, `additionalProperties`, `items` (one
 * schema for every item), `anyOf`, `oneOf`, `allOf`, boolean schemas. Every other keyword only narrows values within
 * the shape read (`minLength`, `pattern`, `format`, `minimum` ...) or is not read (`not`, `if`, `$ref` and the
 * schema's own siblings of `$ref`, `patternProperties`, tuples): the shape is then wider than the schema, never
 * narrower. Nesting beyond MAX_READ_DEPTH levels reads as any JSON value.
 */
import type { JsonValue } from '../types.js';
import {
  ANY,
  ANY_ARRAY,
  ANY_OBJECT,
  BOOLEAN,
  INTEGER,
  NEVER,
  NOT_ARRAY,
  NOT_OBJECT,
  NULL,
  NUMBER,
  STRING,
  intersect,
  literal,
  union,
  type Prop,
  type Shape,
} from './shape.js';

/** How many levels of a JSON Schema are read (deeper levels are any JSON value). */
export const MAX_READ_DEPTH = 16;

const TYPE_SHAPES: Record<string, Shape> = {
  string: STRING,
  number: NUMBER,
  integer: INTEGER,
  boolean: BOOLEAN,
  null: NULL,
  array: ANY_ARRAY,
  object: ANY_OBJECT,
};

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** The values a JSON Schema may accept (an upper bound). */
export function readJsonSchema(schema: unknown, depth = 1): Shape {
  if (schema === false) return NEVER;
  if (!isObject(schema) || depth > MAX_READ_DEPTH) return ANY;
  // With `$ref`, draft-07 ignores the siblings and later drafts apply them: the level is read as any value.
  if (Object.hasOwn(schema, '$ref') || Object.hasOwn(schema, '$dynamicRef') || Object.hasOwn(schema, '$recursiveRef')) return ANY;
  const parts: Shape[] = [];
  const { type } = schema;
  if (typeof type === 'string' || Array.isArray(type)) {
    const names = typeof type === 'string' ? [type] : type;
    parts.push(union(names.map((n) => (typeof n === 'string' ? (TYPE_SHAPES[n] ?? ANY) : ANY))));
  }
  if (Array.isArray(schema.enum)) parts.push(union((schema.enum as JsonValue[]).map(literal)));
  if (Object.hasOwn(schema, 'const')) parts.push(literal(schema.const as JsonValue));
  const objectPart = readObjectKeywords(schema, depth);
  if (objectPart) parts.push(union([objectPart, NOT_OBJECT]));
  const { items } = schema;
  if (isObject(items) || typeof items === 'boolean') parts.push(union([{ kind: 'array', items: readJsonSchema(items, depth + 1) }, NOT_ARRAY]));
  for (const word of ['anyOf', 'oneOf'] as const) {
    const branches = schema[word];
    if (Array.isArray(branches) && branches.length) parts.push(union(branches.map((b) => readJsonSchema(b, depth + 1))));
  }
  if (Array.isArray(schema.allOf)) for (const b of schema.allOf) parts.push(readJsonSchema(b, depth + 1));
  return parts.reduce(intersect, ANY);
}

/** `properties`, `required` and `additionalProperties` as an object shape, or undefined when none is there. */
function readObjectKeywords(schema: Record<string, unknown>, depth: number): Shape | undefined {
  const properties = isObject(schema.properties) ? schema.properties : undefined;
  const required = Array.isArray(schema.required) ? schema.required.filter((r): r is string => typeof r === 'string') : [];
  const additional = schema.additionalProperties;
  if (!properties && !required.length && additional === undefined) return undefined;
  const props: Prop[] = [];
  for (const name of Object.keys(properties ?? {})) {
    props.push({ name, shape: readJsonSchema(properties![name], depth + 1), optional: !required.includes(name) });
  }
  for (const name of required) if (!props.some((p) => p.name === name)) props.push({ name, shape: ANY, optional: false });
  // `patternProperties` decides for the names it matches before `additionalProperties` does: not read, so any value.
  const patterned = Object.hasOwn(schema, 'patternProperties');
  const rest = patterned || additional === undefined || additional === true ? ANY : readJsonSchema(additional, depth + 1);
  return { kind: 'object', props, rest };
}
