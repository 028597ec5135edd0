/**
 * The type model of `cfgu generate`: a Shape describes a set of JSON values structurally. Every reader (the coercion,
 * a key's `schema`, `enum`, `test`) gives an upper bound of the values it lets through, never a narrower set; the
 * generator intersects them, and the three emitters (TypeScript, zod, JSON Schema) write the same Shape.
 */
import isEqual from 'lodash/isEqual.js';
import type { JsonValue } from '../types.js';

export interface Prop {
  name: string;
  shape: Shape;
  optional: boolean;
}

export type Shape =
  /** Any JSON value, `null` included. */
  | { kind: 'any' }
  /** No value at all. */
  | { kind: 'never' }
  | { kind: 'string' }
  | { kind: 'number'; integer: boolean }
  | { kind: 'boolean' }
  | { kind: 'null' }
  /** Exactly this value (deep equality for arrays and objects). */
  | { kind: 'literal'; value: JsonValue }
  | { kind: 'array'; items: Shape }
  /** An object with these properties; every other property must be of `rest` (`never`: none; `any`: anything). */
  | { kind: 'object'; props: Prop[]; rest: Shape }
  | { kind: 'union'; of: Shape[] };

export const ANY: Shape = { kind: 'any' };
export const NEVER: Shape = { kind: 'never' };
export const STRING: Shape = { kind: 'string' };
export const NUMBER: Shape = { kind: 'number', integer: false };
export const INTEGER: Shape = { kind: 'number', integer: true };
export const BOOLEAN: Shape = { kind: 'boolean' };
export const NULL: Shape = { kind: 'null' };
export const ANY_ARRAY: Shape = { kind: 'array', items: ANY };
export const ANY_OBJECT: Shape = { kind: 'object', props: [], rest: ANY };
export const literal = (value: JsonValue): Shape => ({ kind: 'literal', value });

/** Every JSON value that is not an object / not an array: what an object or array keyword of JSON Schema lets by. */
export const NOT_OBJECT: Shape = { kind: 'union', of: [STRING, NUMBER, BOOLEAN, NULL, ANY_ARRAY] };
export const NOT_ARRAY: Shape = { kind: 'union', of: [STRING, NUMBER, BOOLEAN, NULL, ANY_OBJECT] };

/** Deep-equality key of a JSON value (object properties sorted). */
export function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const o = value as Record<string, unknown>;
    return `{${Object.keys(o)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value) ?? 'undefined';
}

const isPlainObject = (v: unknown): v is Record<string, JsonValue> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** Whether `value` is one of the values `shape` describes. */
export function admits(shape: Shape, value: JsonValue): boolean {
  switch (shape.kind) {
    case 'any':
      return true;
    case 'never':
      return false;
    case 'string':
      return typeof value === 'string';
    case 'number':
      return typeof value === 'number' && (!shape.integer || Number.isInteger(value));
    case 'boolean':
      return typeof value === 'boolean';
    case 'null':
      return value === null;
    case 'literal':
      return isEqual(shape.value, value);
    case 'array':
      return Array.isArray(value) && value.every((v) => admits(shape.items, v));
    case 'object': {
      if (!isPlainObject(value)) return false;
      const named = new Set(shape.props.map((p) => p.name));
      for (const p of shape.props) {
        if (Object.hasOwn(value, p.name)) {
          if (!admits(p.shape, value[p.name]!)) return false;
        } else if (!p.optional) return false;
      }
      return Object.keys(value).every((k) => named.has(k) || admits(shape.rest, value[k]!));
    }
    case 'union':
      return shape.of.some((s) => admits(s, value));
  }
}

/** The union of shapes, flattened: nested unions inlined, `never` dropped, duplicates and covered literals removed. */
export function union(shapes: readonly Shape[]): Shape {
  const flat: Shape[] = [];
  const walk = (s: Shape): void => {
    if (s.kind === 'union') s.of.forEach(walk);
    else if (s.kind !== 'never') flat.push(s);
  };
  shapes.forEach(walk);
  if (flat.some((s) => s.kind === 'any')) return ANY;
  const out: Shape[] = [];
  const seen = new Set<string>();
  for (const s of flat) {
    // A literal that another member already admits adds nothing; an integer beside a number neither.
    if (s.kind === 'literal' && flat.some((o) => o.kind !== 'literal' && admits(o, s.value))) continue;
    if (s.kind === 'number' && s.integer && flat.some((o) => o.kind === 'number' && !o.integer)) continue;
    const key = s.kind === 'literal' ? `literal:${canonical(s.value)}` : canonical(s);
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(s);
  }
  if (out.length === 0) return NEVER;
  return out.length === 1 ? out[0]! : { kind: 'union', of: out };
}

/** The values both shapes describe. */
export function intersect(a: Shape, b: Shape): Shape {
  if (a.kind === 'never' || b.kind === 'never') return NEVER;
  if (a.kind === 'any') return b;
  if (b.kind === 'any') return a;
  // The later constraint's order wins: an `enum` keeps its items' order whatever the coercion's order of types.
  if (b.kind === 'union') return union(b.of.map((x) => intersect(a, x)));
  if (a.kind === 'union') return union(a.of.map((x) => intersect(x, b)));
  if (a.kind === 'literal') return admits(b, a.value) ? a : NEVER;
  if (b.kind === 'literal') return admits(a, b.value) ? b : NEVER;
  if (a.kind !== b.kind) return NEVER;
  switch (a.kind) {
    case 'number':
      return a.integer || (b as typeof a).integer ? INTEGER : NUMBER;
    case 'array':
      return { kind: 'array', items: intersect(a.items, (b as typeof a).items) };
    case 'object':
      return intersectObjects(a, b as typeof a);
    default:
      return a;
  }
}

type ObjectShape = Extract<Shape, { kind: 'object' }>;

function intersectObjects(a: ObjectShape, b: ObjectShape): Shape {
  const props: Prop[] = [];
  const names = [...new Set([...a.props.map((p) => p.name), ...b.props.map((p) => p.name)])];
  for (const name of names) {
    const pa = a.props.find((p) => p.name === name);
    const pb = b.props.find((p) => p.name === name);
    const shape = intersect(pa ? pa.shape : a.rest, pb ? pb.shape : b.rest);
    const optional = (pa?.optional ?? true) && (pb?.optional ?? true);
    if (shape.kind === 'never') {
      if (!optional) return NEVER;
      continue; // the property can never be there
    }
    props.push({ name, shape, optional });
  }
  return { kind: 'object', props, rest: intersect(a.rest, b.rest) };
}

/** A literal that is a string, number, boolean or null (the emitters write arrays and objects structurally). */
export function isScalarLiteral(s: Shape): s is { kind: 'literal'; value: string | number | boolean | null } {
  return s.kind === 'literal' && (s.value === null || typeof s.value !== 'object');
}
