/**
 * The Cfgu v1 properties, written once. Each has its description (shown in the HTTP API's schema), `wire`: the basic
 * JSON types the request body schema checks (Fastify rejects those with its 400), and `rule`: the exact shape the
 * engine checks (schema.ts, with sentences of its own). The order is the order messages list them in.
 */
import type { Cfgu } from './types.js';

const nonEmpty = { type: 'string', minLength: 1 } as const;
const stringOrStrings = { anyOf: [{ type: 'string' }, { type: 'array', items: { type: 'string' } }] } as const;

export const CFGU_PROPERTIES = {
  description: { doc: 'Text describing the key.', wire: { type: 'string' }, rule: nonEmpty },
  label: {
    doc: 'Label or labels of the key (`$.labels`).',
    wire: stringOrStrings,
    rule: { anyOf: [nonEmpty, { type: 'array', minItems: 1, uniqueItems: true, items: nonEmpty }] },
  },
  hidden: { doc: 'Evaluated (and visible to expressions) but left out of the result.', wire: { type: 'boolean' }, rule: { type: 'boolean' } },
  lazy: { doc: "The value only ever comes from the command's `configs`, never from the store.", wire: { type: 'boolean' }, rule: { type: 'boolean' } },
  const: { doc: 'A template (`{{ expr }}`) computed from other values; never read from the store.', wire: { type: 'string' }, rule: nonEmpty },
  default: { doc: 'Any JSON value; used when no other source gave a value (`false`, `0`, `""` count).', wire: {}, rule: {} },
  required: { doc: 'Evaluation fails when the key ends empty.', wire: { type: 'boolean' }, rule: { type: 'boolean' } },
  pattern: { doc: 'Regular expression the stored (string) value must match.', wire: { type: 'string' }, rule: nonEmpty },
  // Unique items are checked in code (schema.ts, duplicateItems): Ajv's check is quadratic without item types, and a
  // 1 MiB `enum` kept the event loop busy for minutes.
  enum: { doc: 'Allowed values: any JSON values, scalars included.', wire: { type: 'array' }, rule: { type: 'array', minItems: 1 } },
  schema: {
    doc: 'A JSON Schema the coerced value must satisfy; `schema.type` also fixes the exported type.',
    wire: { type: 'object' },
    rule: { type: 'object' },
  },
  test: {
    doc: 'Boolean expression(s), e.g. `validator.isURL($.value)`; each must be truthy.',
    wire: stringOrStrings,
    rule: { anyOf: [nonEmpty, { type: 'array', minItems: 1, items: nonEmpty }] },
  },
} as const;

export const CFGU_PROPERTY_NAMES = Object.keys(CFGU_PROPERTIES) as Array<keyof typeof CFGU_PROPERTIES>;

/** Compile-time check that the `Cfgu` interface (types.ts) and the table name the same properties. */
export type CfguTableMatchesInterface = [keyof Cfgu] extends [keyof typeof CFGU_PROPERTIES]
  ? [keyof typeof CFGU_PROPERTIES] extends [keyof Cfgu]
    ? true
    : never
  : never;
const tableMatchesInterface: CfguTableMatchesInterface = true;
void tableMatchesInterface;
