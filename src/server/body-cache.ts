/**
 * Parsed request bodies by their exact text. Clients of a configuration proxy send the same pipeline again and again;
 * parsing a large body (a 1,000-key schema is ~40 KB) is one of the biggest costs of a request. The text -> value
 * mapping never goes stale, so the only rule needed is a bound: total text size (default 4 MiB), least recently used
 * evicted first. Cached values are deep-frozen (core/frozen.ts), so no request can change what another one sees, and
 * the engine may cache what it derives from them by identity.
 */
import { LRUCache } from 'lru-cache';
import { freezeDeep } from '../core/frozen.js';

/** The levels of a body recorded as deep-frozen (core/frozen.ts). */
export const BODY_RECORD_DEPTH = 4;

export class BodyCache {
  private readonly entries: LRUCache<string, object>;
  /** Lookups that found a parsed body, and lookups that did not (GET /metrics reports both). */
  hits = 0;
  misses = 0;

  constructor(
    maxBytes = 4 * 1024 * 1024,
    /** Bodies smaller than this are cheap to parse and not worth a slot. */
    private readonly minBytes = 256,
  ) {
    // One body may take at most a quarter of the cache, so a few huge ones cannot flush it.
    this.entries = new LRUCache({ maxSize: maxBytes, maxEntrySize: Math.floor(maxBytes / 4), sizeCalculation: (_v, text) => text.length });
  }

  get(text: string): unknown {
    const found = this.entries.get(text);
    if (found === undefined) this.misses++;
    else this.hits++;
    return found;
  }

  /** Freeze and keep a freshly parsed body; returns the (frozen) value. */
  add(text: string, value: unknown): unknown {
    if (value === null || typeof value !== 'object') return value;
    // Recorded down to the declarations (pipeline 0, command 1, schema 2, keys 3, declaration 4): what the engine
    // and the body check cache by identity. Values nested deeper are frozen without a record each.
    freezeDeep(value, BODY_RECORD_DEPTH);
    if (text.length >= this.minBytes) this.entries.set(text, value);
    return value;
  }

  get size(): number {
    return this.entries.size;
  }
}
