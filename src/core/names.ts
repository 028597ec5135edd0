/** ConfigKey and ConfigSet path rules (docs/engine.md). */
import camelCase from 'lodash/camelCase.js';

export const KEY_PATTERN = /^[A-Za-z0-9_-]+$/;

const RESERVED = new Set(
  ['_', '-', '$', 'this', 'Cfgu', 'ConfigStore', 'ConfigSet', 'ConfigKey', 'Key', 'ConfigValue', 'Value', 'ConfigSchema', 'Configu'].map(
    normaliseName,
  ),
);

/** Camel-cased then lower-cased: `Config_Set`, `config-set` and `configset` are one name. */
export function normaliseName(name: string): string {
  return camelCase(name).toLowerCase();
}

/** Why `key` is not a valid ConfigKey, or undefined when it is. */
export function keyProblem(key: string): string | undefined {
  if (typeof key !== 'string' || key.length === 0) return 'a key must be a non-empty string';
  if (!KEY_PATTERN.test(key)) return `key "${truncate(key)}" must match ^[A-Za-z0-9_-]+$`;
  if (RESERVED.has(normaliseName(key))) return `key "${key}" is a reserved word`;
  return undefined;
}

export interface ParsedSet {
  /** Normal form: "" for the root, else `a/b/c`. */
  path: string;
  /** Root first, then every ancestor, ending with the set itself: `prod/eu` -> ["", "prod", "prod/eu"]. */
  hierarchy: string[];
}

/** Parse a set path; returns a problem message instead of throwing. */
export function parseSet(input: string): ParsedSet | { problem: string } {
  if (typeof input !== 'string') return { problem: 'a set path must be a string' };
  let path = input.trim();
  if (path.startsWith('/')) path = path.slice(1);
  if (path.endsWith('/')) path = path.slice(0, -1);
  if (path === '') return { path: '', hierarchy: [''] };
  const segments = path.split('/');
  const hierarchy = [''];
  for (let i = 0; i < segments.length; i++) {
    const segment = segments[i]!;
    if (segment === '') return { problem: `set path "${truncate(input)}" has an empty segment` };
    const problem = keyProblem(segment);
    if (problem) return { problem: `set path "${truncate(input)}" has an invalid segment: ${problem}` };
    hierarchy.push(i === 0 ? segment : `${hierarchy[i]}/${segment}`);
  }
  return { path, hierarchy };
}

export function truncate(text: string, max = 64): string {
  return text.length > max ? `${text.slice(0, max)}…` : text;
}

/**
 * Set a property named by a user as an own, enumerable property. `__proto__` matches the ConfigKey pattern; plain
 * assignment would set the object's prototype instead and the key would vanish.
 */
export function setOwn<T>(target: Record<string, T>, key: string, value: T): void {
  if (key === '__proto__') Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  else target[key] = value;
}

/**
 * Whether a property name is an array index (a canonical decimal integer below 2^32 - 1). JavaScript enumerates such
 * names first, in numeric order, and every other name in insertion order; a record without one enumerates in the order
 * its keys were set.
 */
export function isArrayIndex(key: string): boolean {
  const n = key.length;
  if (n === 0 || n > 10) return false;
  const first = key.charCodeAt(0);
  if (first < 48 || first > 57 || (first === 48 && n > 1)) return false;
  for (let i = 1; i < n; i++) {
    const c = key.charCodeAt(i);
    if (c < 48 || c > 57) return false;
  }
  return Number(key) < 4294967295;
}

/**
 * An empty record for keys named by users (a schema's keys, an evaluation's results, an export). For more than 64
 * keys it is an object without a prototype, which V8 keeps as a hash table from the start: a literal `{}` begins in
 * fast mode, where each new key name makes a new hidden class, and is turned into a hash table anyway after about a
 * hundred keys; and every store to an object that has a prototype first looks the name up along the prototype chain.
 * Measured with `npx tsx bench/core.bench.ts` (1,000 keys), alternating runs: median 1.71-2.36 ms with literals,
 * 0.72-1.18 ms with such records, 0.92-1.22 ms with hash-table records that keep `Object.prototype`. Records of up to
 * 64 keys stay literals (fast mode is the quicker one for a few keys). Code that reads these records uses
 * `Object.keys` and `Object.prototype.hasOwnProperty.call`, never an inherited method; JSON.stringify treats both forms
 * alike.
 */
export function newRecord<T>(size: number): Record<string, T> {
  return size > 64 ? (Object.create(null) as Record<string, T>) : {};
}
