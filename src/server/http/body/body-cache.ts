/**
 * Parsed request bodies by their exact text. Clients of a configuration proxy send the same pipeline again and again;
 * parsing a large body (a 1,000-key schema is ~40 KB) is one of the biggest costs of a request. The text -> value
 * mapping never goes stale, so the only rule needed is a bound: the cache counts against the process's cache memory
 * ceiling (core/cache-budget.ts, `limits.cacheMemoryMb`), least recently used evicted first. Each entry's memory is
 * estimated once, when it is added, from the text's length and the objects and slots its freezing walk counted
 * (never on a hit). Cached values are deep-frozen (core/frozen.ts), so no request can change what another one sees,
 * and the engine may cache what it derives from them by identity.
 */
import { BudgetedLru, cacheBudget, estimateBodyBytes, type CacheBudget } from '../../../core/cache-budget.js';
import { freezeCountingSteps, type FreezeCounts } from '../../../core/frozen.js';
import { runAtOnce, runInSlices } from '../../../core/slices.js';

/** The levels of a body recorded as deep-frozen (core/frozen.ts). */
export const BODY_RECORD_DEPTH = 4;

export class BodyCache extends BudgetedLru<object> {
  /** Lookups that found a parsed body, and lookups that did not (GET /metrics reports both). */
  hits = 0;
  misses = 0;

  constructor(
    budget: CacheBudget = cacheBudget,
    /** Bodies smaller than this are cheap to parse and not worth a slot (a pipeline naming a server schema is ~50 bytes: kept). */
    private readonly minBytes = 16,
  ) {
    super('body', budget);
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
    return this.keepFrozen(text, value, runAtOnce(freezeCountingSteps(value, BODY_RECORD_DEPTH)));
  }

  /** `add` for a large body: frozen in slices of the event loop (core/slices.ts). */
  async addInSlices(text: string, value: unknown): Promise<unknown> {
    if (value === null || typeof value !== 'object') return value;
    return this.keepFrozen(text, value, await runInSlices(freezeCountingSteps(value, BODY_RECORD_DEPTH)));
  }

  private keepFrozen(text: string, value: object, counts: FreezeCounts): unknown {
    if (text.length >= this.minBytes) {
      // Two bytes a character when the text holds one beyond ASCII (V8 keeps it two-byte above U+00FF: counted as such).
      this.keep(text, value, estimateBodyBytes(text.length, Buffer.byteLength(text) !== text.length, counts));
    }
    return value;
  }

  get size(): number {
    return this.lru.size;
  }
}
