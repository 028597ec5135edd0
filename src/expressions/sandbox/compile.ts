import { parseTemplate, stringifyTemplateValue } from '../../core/template.js';
import { IMPORT_MESSAGE } from '../protocol.js';
import type { ExpressionFailureKind } from '../types.js';
import { apply, MapCtor } from './intrinsics.js';
import { messageOf } from './messages.js';
import { schemaLiteralCheck } from './json-schema.js';
import { callsImport } from './import-scan.js';

// ---------------------------------------------------------------------------------------------------------------
// Expression compilation (cached per source, bounded LRU).
// ---------------------------------------------------------------------------------------------------------------
export type Compiled = (this: void, $: unknown) => unknown;

/** Least recently used first out, bounded by entries and by the summed length of the sources (the keys). */
class SourceCache {
  readonly map = new MapCtor<string, Compiled>();
  bytes = 0;
  constructor(
    private readonly maxEntries: number,
    private readonly maxBytes: number,
  ) {}
  get size(): number {
    return this.map.size;
  }
  get(source: string): Compiled | undefined {
    const fn = this.map.get(source);
    if (fn) {
      this.map.delete(source);
      this.map.set(source, fn);
    }
    return fn;
  }
  set(source: string, fn: Compiled): void {
    // A literal schema check also holds its parsed copy: about as large again as its source.
    const cost = source.length * 2;
    if (cost > this.maxBytes) return;
    this.map.set(source, fn);
    this.bytes += cost;
    while (this.map.size > this.maxEntries || this.bytes > this.maxBytes) {
      const oldest = this.map.keys().next().value as string;
      this.map.delete(oldest);
      this.bytes -= oldest.length * 2;
    }
  }
}

const CACHE_LIMIT = 2000;
const CACHE_BYTES = 8_000_000;
export const cache = new SourceCache(CACHE_LIMIT, CACHE_BYTES);
const trustedCache = new SourceCache(CACHE_LIMIT, CACHE_BYTES);

function compile(source: string, store: SourceCache, make: (body: string) => Compiled): Compiled {
  let fn = store.get(source);
  if (fn) return fn;
  // A trailing `;` is common in hand-written expressions; the expression itself stays one expression.
  const body = source.replace(/[\s;]+$/, '');
  fn = make(body === '' ? 'undefined' : body);
  store.set(source, fn);
  return fn;
}

const makeUntrusted = (body: string): Compiled =>
  schemaLiteralCheck(body) ??
  // The body is parsed on its own by the Function constructor: it cannot close the function or reach this scope.
  (new Function('$', `"use strict";\nreturn (\n${body}\n);`) as Compiled);

const makeTrusted = (body: string): Compiled =>
  // Trusted (.configu): bare identifiers resolve to the given variables through `with`.
  new Function('$', `with ($) {\nreturn (\n${body}\n);\n}`) as Compiled;

function isThenable(value: unknown): boolean {
  return (
    value !== null &&
    (typeof value === 'object' || typeof value === 'function') &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}

export class Failure {
  constructor(
    readonly kind: ExpressionFailureKind,
    readonly message: string,
  ) {}
}

export function evaluate(fn: Compiled, $: unknown): unknown {
  let value: unknown;
  try {
    value = apply(fn, undefined, [$]);
    if (isThenable(value)) return new Failure('error', 'an expression must be synchronous (it returned a promise)');
  } catch (error) {
    return new Failure('error', messageOf(error));
  }
  return value;
}

function compileOrFail(source: string, trusted = false): Compiled | Failure {
  const hit = (trusted ? trustedCache : cache).get(source);
  if (hit) return hit;
  if (callsImport(source)) return new Failure('error', IMPORT_MESSAGE);
  try {
    return trusted ? compile(source, trustedCache, makeTrusted) : compile(source, cache, makeUntrusted);
  } catch (error) {
    return new Failure('error', messageOf(error));
  }
}

export function render(template: string, $: unknown, trusted = false): string | Failure {
  const parts = parseTemplate(template);
  let out = '';
  for (const part of parts) {
    if (part.kind === 'text') {
      out += part.text;
      continue;
    }
    const fn = compileOrFail(part.source, trusted);
    if (fn instanceof Failure) return fn;
    const value = evaluate(fn, $);
    if (value instanceof Failure) return value;
    try {
      out += stringifyTemplateValue(value);
    } catch (error) {
      return new Failure('error', messageOf(error));
    }
  }
  return out;
}

function shortSource(source: string): string {
  const s = source.length > 200 ? `${source.slice(0, 197)}...` : source;
  return s;
}

export function testExpression(source: string, $: unknown): true | Failure {
  const fn = compileOrFail(source);
  if (fn instanceof Failure) return fn;
  const value = evaluate(fn, $);
  if (value instanceof Failure) return value;
  return value ? true : new Failure('falsy', `test "${shortSource(source)}" evaluated to false`);
}
