import { parseTemplate, stringifyTemplateValue } from '../../core/template.js';
import { IMPORT_MESSAGE } from '../wire/protocol.js';
import type { ExpressionFailureKind } from '../../core/ports.js';
import { apply, MapCtor } from './intrinsics.js';
import { messageOf } from './messages.js';
import { schemaLiteralCheck } from './json-schema.js';
import { callsImport } from './import-scan.js';

// ---------------------------------------------------------------------------------------------------------------
// Expression compilation (cached per source, bounded LRU).
// ---------------------------------------------------------------------------------------------------------------
export type Compiled = (this: void, $: unknown) => unknown;

/**
 * The heap one cached expression takes in the isolate: the source text (the key), the function and, once it ran, its
 * bytecode. Calibrated in Node's V8 (bench/cache-calibration.ts: `new Function` of distinct sources, each called once,
 * heap growth per function): 0.84 KB for 20 characters, 1.3 KB for 230, 15 KB for 3,500; the estimate, 1,000 + 5 per
 * character, is 1.2-1.6x those. A literal schema check's parsed copy is counted by the validator cache.
 */
export const compiledBytes = (source: string): number => 1000 + 5 * source.length;

/** Least recently used first out, bounded by entries and by the estimated bytes of what it holds (compiledBytes). */
class SourceCache {
  readonly map = new MapCtor<string, Compiled>();
  bytes = 0;
  constructor(
    private readonly maxEntries: number,
    public maxBytes: number,
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
    const cost = compiledBytes(source);
    if (cost > this.maxBytes / 4) return;
    this.map.set(source, fn);
    this.bytes += cost;
    this.trim();
  }
  trim(): void {
    while (this.map.size > this.maxEntries || this.bytes > this.maxBytes) {
      const oldest = this.map.keys().next().value as string;
      this.map.delete(oldest);
      this.bytes -= compiledBytes(oldest);
    }
  }
}

const CACHE_LIMIT = 2000;
/** Until the child sets them from its memory limit (setCompileCacheBytes): the bounds of a 64 MB isolate. */
export const cache = new SourceCache(CACHE_LIMIT, 8 * 1024 * 1024);
const trustedCache = new SourceCache(CACHE_LIMIT, 4 * 1024 * 1024);

/** Bound the expression caches (the child calls it with bytes derived from the isolate's memory limit). */
export function setCompileCacheBytes(untrusted: number, trusted: number): void {
  cache.maxBytes = untrusted;
  cache.trim();
  trustedCache.maxBytes = trusted;
  trustedCache.trim();
}

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
