/** Shapes written as TypeScript types, and the doc comments of keys. */
import type { JsonValue } from '../types.js';
import { isScalarLiteral, type Prop, type Shape } from './shape.js';
import type { KeyType } from './key-type.js';

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/** A property name as TypeScript writes it: bare when it is an identifier, else a quoted string. */
export const propertyName = (name: string): string => (IDENTIFIER.test(name) ? name : JSON.stringify(name));

/** What an emitter met while writing: whether the `JsonValue` alias is needed. */
export interface EmitState {
  usesJson: boolean;
}

export const JSON_VALUE_ALIAS = [
  '/** Any JSON value: what an exported object or array may hold. */',
  'export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };',
];

/** A doc comment (lines without the comment's own marks), indented; none when there are no lines. */
export function docComment(lines: readonly string[], indent: string): string[] {
  if (!lines.length) return [];
  // `*/` would end the comment: a backslash between its characters keeps the text readable in an editor's hover.
  const body = lines.map((l) => `${indent} *${l === '' ? '' : ` ${l.replace(/\*\//g, '*\\/')}`}`);
  return [`${indent}/**`, ...body, `${indent} */`];
}

/** The doc lines of a key: its description, then `@default` with the exported form of its default. */
export function keyDocLines(t: KeyType): string[] {
  const lines = t.cfgu.description === undefined ? [] : t.cfgu.description.split(/\r\n|\r|\n/).map((l) => l.trimEnd());
  while (lines.length && lines[lines.length - 1] === '') lines.pop();
  if (t.exportedDefault !== undefined) {
    if (lines.length) lines.push('');
    lines.push(`@default ${JSON.stringify(t.exportedDefault)}`);
  }
  return lines;
}

/** A shape as a TypeScript type; nested objects are written over several lines, indented from `indent`. */
export function tsType(shape: Shape, indent: string, state: EmitState): string {
  switch (shape.kind) {
    case 'any':
      state.usesJson = true;
      return 'JsonValue';
    case 'never':
    case 'string':
    case 'boolean':
    case 'null':
      return shape.kind;
    case 'number':
      return 'number';
    case 'literal':
      return tsLiteral(shape.value, indent);
    case 'array': {
      const inner = tsType(shape.items, indent, state);
      return shape.items.kind === 'union' ? `Array<${inner}>` : `${inner}[]`;
    }
    case 'object':
      return tsObject(shape.props, shape.rest, indent, state);
    case 'union':
      return shape.of.map((s) => tsType(s, indent, state)).join(' | ');
  }
}

function tsLiteral(value: JsonValue, indent: string): string {
  if (isScalarLiteral({ kind: 'literal', value })) return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map((v) => tsLiteral(v, indent)).join(', ')}]`;
  const o = value as Record<string, JsonValue>;
  const names = Object.keys(o);
  if (!names.length) return 'Record<string, never>';
  const inner = `${indent}  `;
  return `{\n${names.map((n) => `${inner}${propertyName(n)}: ${tsLiteral(o[n]!, inner)};`).join('\n')}\n${indent}}`;
}

function tsObject(props: readonly Prop[], rest: Shape, indent: string, state: EmitState): string {
  if (!props.length) {
    if (rest.kind === 'never') return 'Record<string, never>';
    return `{ [key: string]: ${tsType(rest, indent, state)} }`;
  }
  // Other properties (`rest`) are not written: an object type of TypeScript admits them already where values are
  // read, and an index signature would have to admit every listed property's type too.
  const inner = `${indent}  `;
  const lines = props.map((p) => `${inner}${propertyName(p.name)}${p.optional ? '?' : ''}: ${tsType(p.shape, inner, state)};`);
  return `{\n${lines.join('\n')}\n${indent}}`;
}

/** `export interface Name { ... }` for the keys, each with its doc comment. */
export function tsInterface(name: string, keys: readonly KeyType[], doc: string[], state: EmitState): string[] {
  const out = [...docComment(doc, ''), `export interface ${name} {`];
  for (const k of keys) {
    out.push(...docComment(keyDocLines(k), '  '));
    out.push(`  ${propertyName(k.key)}: ${tsType(k.shape, '  ', state)};`);
  }
  out.push('}');
  return out;
}
