/**
 * Parsed request bodies by their exact text. Clients of a configuration proxy send the same pipeline again and again;
 * parsing a large body (a 1,000-key schema is ~40 KB) is one of the biggest costs of a request. The text -> value
 * mapping never goes stale, so the only rule needed is a bound: the cache counts against the process's cache memory
 * ceiling (core/cache-budget.ts, `limits.cacheMemoryMb`), least recently used evicted first. Each entry's memory is
 * estimated once, when it is added, from the text's length and the objects and slots its freezing walk counted
 * (never on a hit). Cached values are deep-frozen (core/frozen.ts), so no request can change what another one sees,
 * and the engine may cache what it derives from them by identity.
 */
import { LRUCache } from 'lru-cache';
import { cacheBudget, estimateBodyBytes, type CacheBudget, type CacheMember } from '../core/cache-budget.js';
import { freezeCounting } from '../core/frozen.js';

/** The levels of a body recorded as deep-frozen (core/frozen.ts). */
export const BODY_RECORD_DEPTH = 4;

export class BodyCache implements CacheMember {
  readonly name = 'body';
  private readonly lru = new LRUCache<string, object>({ maxSize: Number.MAX_SAFE_INTEGER });
  /** Lookups that found a parsed body, and lookups that did not (GET /metrics reports both). */
  hits = 0;
  misses = 0;
  /** Stops counting this cache against the budget (the server calls it when it closes). */
  readonly unregister: () => void;

  constructor(
    private readonly budget: CacheBudget = cacheBudget,
    /** Bodies smaller than this are cheap to parse and not worth a slot. */
    private readonly minBytes = 256,
  ) {
    this.unregister = budget.register(this);
  }

  get(text: string): unknown {
    const found = this.lru.get(text);
    if (found === undefined) this.misses++;
    else this.hits++;
    return found;
  }

  /** Freeze and keep a freshly parsed body; returns the (frozen) value. */
  add(text: string, value: unknown): unknown {
    if (value === null || typeof value !== 'object') return value;
    // Recorded down to the declarations (pipeline 0, command 1, schema 2, keys 3, declaration 4): what the engine
    // and the body check cache by identity. Values nested deeper are frozen without a record each.
    const counts = freezeCounting(value, BODY_RECORD_DEPTH);
    if (text.length >= this.minBytes) {
      // Two bytes a character when the text holds one beyond ASCII (V8 keeps it two-byte above U+00FF: counted as such).
      const size = estimateBodyBytes(text.length, Buffer.byteLength(text) !== text.length, counts);
      // One body may take at most an eighth of the ceiling, so a few huge ones cannot flush the caches.
      if (size <= this.budget.maxEntryBytes) {
        this.lru.set(text, value, { size });
        this.budget.settle();
      }
    }
    return value;
  }

  get size(): number {
    return this.lru.size;
  }

  bytes(): number {
    return this.lru.calculatedSize;
  }

  entries(): number {
    return this.lru.size;
  }

  evictOne(): boolean {
    return this.lru.pop() !== undefined;
  }
}
