/** Shapes written as JSON Schema (draft 2020-12), and the document of `cfgu generate --format json-schema`. */
import { setOwn } from '../names.js';
import type { JsonValue } from '../types.js';
import type { KeyType } from './key-type.js';
import type { Shape } from './shape.js';

type Schema = { [k: string]: JsonValue };

export const JSON_SCHEMA_DIALECT = 'https://json-schema.org/draft/2020-12/schema';

/** A shape as a JSON Schema. */
export function jsonSchemaOf(shape: Shape): Schema {
  switch (shape.kind) {
    case 'any':
      return {};
    case 'never':
      return { not: {} };
    case 'string':
    case 'boolean':
    case 'null':
      return { type: shape.kind };
    case 'number':
      return { type: shape.integer ? 'integer' : 'number' };
    case 'literal':
      return { const: shape.value };
    case 'array':
      return shape.items.kind === 'any' ? { type: 'array' } : { type: 'array', items: jsonSchemaOf(shape.items) };
    case 'object': {
      const out: Schema = { type: 'object' };
      if (shape.props.length) {
        const properties: Schema = {};
        for (const p of shape.props) setOwn(properties, p.name, jsonSchemaOf(p.shape));
        out.properties = properties;
        const required = shape.props.filter((p) => !p.optional).map((p) => p.name);
        if (required.length) out.required = required;
      }
      if (shape.rest.kind === 'never') out.additionalProperties = false;
      else if (shape.rest.kind !== 'any') out.additionalProperties = jsonSchemaOf(shape.rest);
      return out;
    }
    case 'union':
      if (shape.of.every((s) => s.kind === 'literal')) return { enum: shape.of.map((s) => (s as { value: JsonValue }).value) };
      return { anyOf: shape.of.map(jsonSchemaOf) };
  }
}

/**
 * The JSON Schema of an export: an object with every key required (keys not declared, such as those an earlier
 * command of a pipeline exported, are allowed), each with its description and the exported form of its default.
 */
export function jsonSchemaDocument(title: string, description: string, keys: readonly KeyType[]): Schema {
  const properties: Schema = {};
  for (const k of keys) {
    const schema: Schema = {};
    if (k.cfgu.description !== undefined) schema.description = k.cfgu.description;
    if (k.exportedDefault !== undefined) schema.default = k.exportedDefault;
    setOwn(properties, k.key, { ...schema, ...jsonSchemaOf(k.shape) });
  }
  return { $schema: JSON_SCHEMA_DIALECT, title, description, type: 'object', properties, required: keys.map((k) => k.key) };
}
