/**
 * One memory ceiling for every cache a server process keeps (issue 31). Each cache estimates the bytes of each entry
 * when it inserts it (never on a hit) and registers with the process's budget; after an insertion the budget adds up
 * what the caches hold and, while the total is over the ceiling, has the cache that is most over its share evict its
 * least recently used entry.
 *
 * Shares. One shared accounting, not fixed partitions: a cache may use the whole ceiling while the others are empty
 * (a server that never sees an expression leaves the sandbox caches' part to the body and schema caches). Each cache
 * has a weight (CACHE_SHARES); when the total is over the ceiling, the victim is the cache with the largest
 * bytes / weight, so under pressure from every side each cache converges to its weight's part of the ceiling, and a
 * cache below its part is never emptied for another one. One entry may take at most an eighth of the ceiling
 * (`maxEntryBytes`): a few huge entries cannot flush a cache.
 *
 * Estimates (bytes of V8 heap an entry holds, all it keeps alive included), calibrated with
 * bench/cache-calibration.ts (`node --expose-gc --import tsx bench/cache-calibration.ts`, Node 20 on x86-64: the heap
 * growth over many distinct entries of one shape, after full collections, divided by their number; the figures and
 * the shapes are in bench/RESULTS.md, "Memory ceiling (issue 31)"). Each estimate is an affine function of counts the
 * cache already has when it inserts: the text's length, and for a parsed body the objects and slots its freezing walk
 * visits (frozen.ts freezeCounting). The factors are set at or above the worst shape measured, so the ceiling holds for
 * every shape measured; for common shapes they overestimate by 1.1-2x (see the table).
 *
 * The watch hub's answers (src/server/watch.ts) may register here too (`cacheBudget.register`), with the name `watch`:
 * an answer a stream still needs is not evictable (its evictOne returns false), and the budget evicts elsewhere.
 */
import { getHeapStatistics } from 'node:v8';
import { LRUCache } from 'lru-cache';

/** One cache, as the budget sees it. */
export interface CacheMember {
  /** The metrics label: body, schema, static, answers, watch. */
  readonly name: string;
  /** Estimated bytes held now (a number the cache keeps up to date, read at every settle and scrape). */
  bytes(): number;
  /** Entries held now. */
  entries(): number;
  /**
   * Drop the least recently used entry; false when there is none it may drop (the budget then evicts from the other
   * caches).
   */
  evictOne(): boolean;
}

/** Relative weights of the caches (see the file's comment). A name not listed weighs 1. */
export const CACHE_SHARES: Readonly<Record<string, number>> = Object.freeze({ body: 4, schema: 3, static: 1, answers: 1, watch: 1 });

const MiB = 1024 * 1024;

/**
 * The default ceiling: a quarter of the V8 heap limit (`--max-old-space-size`, or what V8 chose from the machine's
 * memory), and at most 128 MiB. A quarter, because the caches are an accelerator: the rest of the heap holds the
 * requests in flight (each body up to limits.bodyBytes as text, then parsed, then the answer being built, times the
 * requests served at once), the server's own structures, and the room V8's collector needs to work without running
 * back to back (a heap whose live data nears its limit spends its time collecting, then dies). At most 128 MiB,
 * because the caches' benefit stops growing long before: a proxy's clients send the same few pipelines again and
 * again; on a machine where V8 allows 4 GiB of heap, a quarter would let one process hold a gigabyte of bodies that
 * came once (the fuzzer's mix grew a process past 1.2 GB). An operator who wants more sets it.
 */
/**
 * The default's cap. 128, not more: with 256 MiB of caches full, 200 distinct 650 KB schemas made a server's resident
 * memory swing between 340 and 800 MB (V8 lets garbage grow to about three times the live data before a full
 * collection), which a 512 MiB container limit would not survive; halving the live caches halves that swing.
 */
export const DEFAULT_CAP_MB = 128;

export function defaultCacheMemoryMb(heapSizeLimit = getHeapStatistics().heap_size_limit): number {
  return Math.max(1, Math.min(DEFAULT_CAP_MB, Math.floor(heapSizeLimit / 4 / MiB)));
}

export class CacheBudget {
  private ceiling: number;
  private readonly members = new Set<WeakRef<CacheMember>>();
  /** Entries evicted to stay under the ceiling, by cache (diagnostics, tests). */
  readonly evictions = new Map<string, number>();

  constructor(limitBytes: number) {
    this.ceiling = limitBytes;
  }

  /** The ceiling, in bytes. */
  get limitBytes(): number {
    return this.ceiling;
  }

  /** The largest entry a cache keeps: an eighth of the ceiling. */
  get maxEntryBytes(): number {
    return Math.floor(this.ceiling / 8);
  }

  /** Set the ceiling (server start-up, tests); evicts at once what is over it. */
  configure(limitBytes: number): void {
    this.ceiling = Math.max(0, Math.floor(limitBytes));
    this.settle();
  }

  /**
   * Count a cache against the ceiling; returns the function that stops counting it. A member is held weakly: a cache
   * dropped without unregistering (a server or pool a test forgot) stops counting when it is collected.
   */
  register(member: CacheMember): () => void {
    const ref = new WeakRef(member);
    this.members.add(ref);
    return () => {
      this.members.delete(ref);
    };
  }

  private live(): CacheMember[] {
    const out: CacheMember[] = [];
    for (const ref of this.members) {
      const m = ref.deref();
      if (m) out.push(m);
      else this.members.delete(ref);
    }
    return out;
  }

  /** Total estimated bytes of every cache counted. */
  totalBytes(): number {
    let total = 0;
    for (const m of this.live()) total += m.bytes();
    return total;
  }

  /** Call after an insertion: evicts least recently used entries, from the cache most over its share, until the total fits. */
  settle(): void {
    const members = this.live();
    let total = 0;
    for (const m of members) total += m.bytes();
    /** Members that could not evict (entries in use, such as a watched pipeline's answer): asked no more this time. */
    const stuck = new Set<CacheMember>();
    while (total > this.ceiling) {
      let victim: CacheMember | undefined;
      let worst = -1;
      for (const m of members) {
        if (m.entries() === 0 || stuck.has(m)) continue;
        const load = m.bytes() / (CACHE_SHARES[m.name] ?? 1);
        if (load > worst) {
          worst = load;
          victim = m;
        }
      }
      if (!victim) return;
      const before = victim.bytes();
      if (!victim.evictOne()) {
        stuck.add(victim);
        continue;
      }
      this.evictions.set(victim.name, (this.evictions.get(victim.name) ?? 0) + 1);
      total -= before - victim.bytes();
    }
  }

  /** Estimated bytes and entries per cache name (members of the same name added up), for /metrics. */
  stats(): Map<string, { bytes: number; entries: number }> {
    const out = new Map<string, { bytes: number; entries: number }>();
    for (const name of Object.keys(CACHE_SHARES)) out.set(name, { bytes: 0, entries: 0 });
    for (const m of this.live()) {
      const s = out.get(m.name) ?? { bytes: 0, entries: 0 };
      s.bytes += m.bytes();
      s.entries += m.entries();
      out.set(m.name, s);
    }
    return out;
  }
}

/** The process's budget: every cache of this process counts against it. */
export const cacheBudget = new CacheBudget(defaultCacheMemoryMb() * MiB);

/**
 * A least-recently-used map whose entries count against a budget, each with the size estimated when it is kept: the
 * common part of the caches that register with one (bodies, prepared schemas, kept answers). Registered when made.
 */
export class BudgetedLru<V extends {}> implements CacheMember {
  readonly lru: LRUCache<string, V>;
  /** Stops counting this cache against its budget. */
  readonly unregister: () => void;

  constructor(
    readonly name: string,
    readonly budget: CacheBudget = cacheBudget,
    /** At most this many entries as well (undefined: bytes only). */
    readonly maxEntries?: number,
  ) {
    this.lru = new LRUCache<string, V>({ ...(maxEntries ? { max: maxEntries } : {}), maxSize: Number.MAX_SAFE_INTEGER });
    this.unregister = budget.register(this);
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

  /**
   * Keep `value` as `size` estimated bytes, then evict what the budget is over. An entry larger than the budget's
   * largest (an eighth of the ceiling) is not kept, so a few huge ones cannot flush the caches; false then.
   */
  keep(key: string, value: V, size: number): boolean {
    if (size > this.budget.maxEntryBytes) return false;
    this.lru.set(key, value, { size });
    this.budget.settle();
    return true;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Estimates (calibrated: see the file's comment and bench/RESULTS.md).
// ---------------------------------------------------------------------------------------------------------------

/** Counts of a frozen value's walk (frozen.ts freezeCounting). */
export interface ValueCounts {
  /** Objects and arrays. */
  objects: number;
  /** Their own properties and elements. */
  slots: number;
  /** Objects at the depth of a body's declarations (pipeline, command, schema, keys, declaration). */
  atRecordDepth: number;
}

/** Fixed cost of an LRU entry (lru-cache's slots, the key's map entry, the entry's own object). */
const ENTRY_BYTES = 200;

/**
 * A parsed request body kept by its text. Measured without what the engine derives (bench/cache-calibration.ts): the
 * text (1 byte a character, 2 when a character is above U+00FF), its strings again in the value, 43 bytes per empty
 * array and 89 per empty object (frozen, recorded as frozen), 8 per element or property. Derived from its frozen
 * objects by identity, and alive as long as the body is, whatever the other caches evict: the prepared schema of its
 * declarations (about 450 bytes per declaration beyond the declaration itself), the declarations' JSON text and the
 * static half's text (about the text's length each). So: 2 x text bytes + 96 per object + 10 per slot, and 600 per
 * object at the declarations' depth + 2 per character for the derived part (counted whether or not the body is ever
 * evaluated, and again by the schema and static caches that hold the same objects: an overestimate, never under).
 */
export const BODY_FACTORS = { perTextByte: 2, perObject: 96, perSlot: 10, perDeclaration: 600, derivedPerChar: 2 };
export function estimateBodyBytes(chars: number, twoByte: boolean, counts: ValueCounts): number {
  const f = BODY_FACTORS;
  return ENTRY_BYTES + f.perTextByte * chars * (twoByte ? 2 : 1) + f.perObject * counts.objects + f.perSlot * counts.slots + f.perDeclaration * counts.atRecordDepth + f.derivedPerChar * chars;
}

/**
 * A prepared schema kept by its JSON text: the text, the declarations it points to (kept alive when the body they
 * came in is gone), and per key its PreparedKey, map entry, label and test arrays, enum rule.
 */
export const SCHEMA_FACTORS = { perChar: 4, perKey: 600 };
export function estimateSchemaBytes(chars: number, keys: number): number {
  return ENTRY_BYTES + SCHEMA_FACTORS.perChar * chars + SCHEMA_FACTORS.perKey * keys;
}

/** A static half on the host: its text (one-byte, or two-byte when it holds a character above U+00FF) and its names. */
export const STATIC_FACTORS = { perChar: 2, perName: 16 };
export function estimateStaticBytes(chars: number, names: number): number {
  return ENTRY_BYTES + STATIC_FACTORS.perChar * chars + STATIC_FACTORS.perName * names;
}

/** A kept answer: its key (client and job text) and its result (an object per const, the values' text). */
export const ANSWER_FACTORS = { perKeyChar: 2, perConst: 150, perValueChar: 2 };
export function estimateAnswerBytes(keyChars: number, consts: number, valueChars: number): number {
  return ENTRY_BYTES + ANSWER_FACTORS.perKeyChar * keyChars + ANSWER_FACTORS.perConst * consts + ANSWER_FACTORS.perValueChar * valueChars;
}
