/** Shapes written as zod 4 schemas (the validator of `cfgu generate --format zod`). */
import type { JsonValue } from '../types.js';
import { isScalarLiteral, type Prop, type Shape } from './shape.js';
import type { KeyType } from './key-type.js';

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/**
 * A property name in an object literal. `__proto__` written bare or quoted would set the literal's prototype instead
 * of naming a property: it is written as a computed name.
 */
const literalKey = (name: string): string => (name === '__proto__' ? '["__proto__"]' : IDENTIFIER.test(name) ? name : JSON.stringify(name));

/** A shape as a zod expression; objects are written over several lines, indented from `indent`. */
export function zodSchema(shape: Shape, indent: string): string {
  switch (shape.kind) {
    case 'any':
      return 'z.json()';
    case 'never':
      return 'z.never()';
    case 'string':
      return 'z.string()';
    case 'number':
      // Not `.int()`: zod's integers are the safe ones, and an exported integer may be larger (coerce.ts).
      return shape.integer ? 'z.number().refine(Number.isInteger)' : 'z.number()';
    case 'boolean':
      return 'z.boolean()';
    case 'null':
      return 'z.null()';
    case 'literal':
      return zodLiteral(shape.value, indent);
    case 'array':
      return `z.array(${zodSchema(shape.items, indent)})`;
    case 'object':
      return zodObject(shape.props, shape.rest, indent);
    case 'union': {
      // The scalar literals as one `z.literal([...])`, where the first of them stands; the other members in order.
      const scalars = shape.of.filter(isScalarLiteral).map((s) => JSON.stringify(s.value));
      const literals = scalars.length === 1 ? `z.literal(${scalars[0]})` : `z.literal([${scalars.join(', ')}])`;
      const members: string[] = [];
      for (const s of shape.of) {
        if (!isScalarLiteral(s)) members.push(zodSchema(s, indent));
        else if (!members.includes(literals)) members.push(literals);
      }
      return members.length === 1 ? members[0]! : `z.union([${members.join(', ')}])`;
    }
  }
}

function zodLiteral(value: JsonValue, indent: string): string {
  if (value === null) return 'z.null()';
  if (typeof value !== 'object') return `z.literal(${JSON.stringify(value)})`;
  if (Array.isArray(value)) return `z.tuple([${value.map((v) => zodLiteral(v, indent)).join(', ')}])`;
  const names = Object.keys(value);
  if (!names.length) return 'z.strictObject({})';
  const inner = `${indent}  `;
  return `z.strictObject({\n${names.map((n) => `${inner}${literalKey(n)}: ${zodLiteral(value[n]!, inner)},`).join('\n')}\n${indent}})`;
}

function zodObject(props: readonly Prop[], rest: Shape, indent: string): string {
  // Without properties, a record: `z.looseObject({})` would type the values as unknown, not as JSON values.
  if (!props.length && rest.kind !== 'never') return `z.record(z.string(), ${zodSchema(rest, indent)})`;
  const inner = `${indent}  `;
  const fields = props.map((p) => `${inner}${literalKey(p.name)}: ${zodSchema(p.shape, inner)}${p.optional ? '.optional()' : ''},`);
  const body = fields.length ? `{\n${fields.join('\n')}\n${indent}}` : '{}';
  if (rest.kind === 'never') return `z.strictObject(${body})`;
  if (rest.kind === 'any') return `z.looseObject(${body})`;
  return `z.object(${body}).catchall(${zodSchema(rest, indent)})`;
}

/**
 * The validator of the export: `z.object` of the keys (other keys, such as those an earlier command of a pipeline
 * exported, are accepted and left out of the parsed value), typed as the interface so that tsc checks the two agree.
 */
export function zodValidator(constName: string, typeName: string, keys: readonly KeyType[]): string[] {
  const fields = keys.map((k) => `  ${literalKey(k.key)}: ${zodSchema(k.shape, '  ')},`);
  return [
    `/** Validates an export and returns it typed as ${typeName}; keys the schema does not declare are left out. */`,
    `export const ${constName}: z.ZodType<${typeName}> = z.object({`,
    ...fields,
    '});',
  ];
}
