/**
 * The `enum` rule and the stored text of a JSON value: shared by the declaration check (a `default` must pass the
 * key's own `enum`) and by evaluation, so the two cannot disagree.
 */
import isEqual from 'lodash/isEqual.js';
import { coerceValue } from './coerce.js';
import type { JsonValue } from './types.js';

/** Stringify a non-string JSON value the way the store keeps it. */
export function stringifyValue(value: unknown): string {
  if (typeof value === 'string') return value;
  if (value === undefined) return '';
  return JSON.stringify(value);
}

/**
 * The `enum` rule, one implementation for the evaluation and for the declaration check of `default` (which runs it on
 * the stored text the default becomes), so the two cannot disagree. A stored string is accepted when it equals the
 * stored form of an item (a string item itself, any other item's JSON text: `null` accepts the text `null`), or when
 * its coerced value deep-equals an item.
 */
export class EnumRule {
  readonly items: readonly JsonValue[];
  private readonly texts: Set<string>;
  constructor(items: readonly JsonValue[]) {
    this.items = items;
    this.texts = new Set(items.map(stringifyValue));
  }
  accepts(stored: string, declaredType: unknown): boolean {
    if (this.texts.has(stored)) return true;
    const value = coerceValue(stored, declaredType);
    if (typeof value === 'string') return false; // a string value equals an item only through its text, checked above
    return this.items.some((item) => isEqual(item, value));
  }
}
