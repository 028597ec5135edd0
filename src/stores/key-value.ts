/**
 * The key-value layout of `redis` and `etcd` (as the Cfgu v1 key-value stores write it):
 *
 *   - a config of the root set ("") is stored under its key name, with the raw value;
 *   - a config of set `S` is a property of a JSON object stored under the key `S`: `S -> {"KEY": "value", ...}`.
 *
 * A root key and a set can therefore share a storage key (`prod` the root config and `prod` the set): the layout
 * cannot hold both; a write of one replaces the other. Reading a set from a value that is not a JSON object finds
 * nothing; reading a root config returns the raw value whatever it is.
 */
import { setOwn } from '../core/names.js';
import { pairKey } from './common.js';
import { byCodePoint, fitListing, isUnder } from './listing.js';
import type { Config, ConfigQuery, ListedSet, SetListing, SetListLimits } from '../core/ports.js';

/** The storage key holding a (set, key). */
export const storageKeyOf = (q: ConfigQuery): string => (q.set === '' ? q.key : q.set);

/** The distinct storage keys a batch needs (first-seen order). */
export function storageKeys(queries: readonly ConfigQuery[]): string[] {
  return [...new Set(queries.map(storageKeyOf))];
}

function parseObject(raw: string | undefined): Record<string, unknown> | undefined {
  if (raw === undefined || raw === '') return undefined;
  const first = raw.trimStart()[0];
  if (first !== '{') return undefined;
  try {
    const v = JSON.parse(raw) as unknown;
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

function asValue(v: unknown): string | undefined {
  if (typeof v === 'string') return v === '' ? undefined : v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  return undefined;
}

/**
 * Reserved storage keys: cfgu keeps revisions and history under names that begin with `cfgu:` (history.ts). A key name
 * or set path matches ^[A-Za-z0-9_-]+ (and `/` between segments in a set path), so no (set, key) cfgu reads or writes
 * is ever stored under such a name, and list() skips them.
 */
export const RESERVED_PREFIX = 'cfgu:';

export const isReserved = (storageKey: string): boolean => storageKey.startsWith(RESERVED_PREFIX);

/** A set's key -> value from the raw value of its storage key (what get() would answer for each of its keys). */
export function setValuesOf(raw: string | undefined | null): Map<string, string> {
  const out = new Map<string, string>();
  const obj = parseObject(raw ?? undefined);
  if (!obj) return out;
  for (const key of Object.keys(obj)) {
    const v = asValue(obj[key]);
    if (v !== undefined) out.set(key, v);
  }
  return out;
}

/** Answer queries from the raw values of their storage keys (`undefined` = absent). */
export function decodeKeyValue(queries: readonly ConfigQuery[], raw: ReadonlyMap<string, string | undefined>): Config[] {
  const out: Config[] = [];
  const seen = new Set<string>();
  const objects = new Map<string, Record<string, unknown> | undefined>();
  for (const q of queries) {
    const id = pairKey(q.set, q.key);
    if (seen.has(id)) continue;
    seen.add(id);
    const sk = storageKeyOf(q);
    const value = raw.get(sk);
    if (value === undefined) continue;
    if (q.set === '') {
      if (value !== '') out.push({ set: '', key: q.key, value });
      continue;
    }
    let obj = objects.get(sk);
    if (!objects.has(sk)) {
      obj = parseObject(value);
      objects.set(sk, obj);
    }
    if (!obj || !Object.prototype.hasOwnProperty.call(obj, q.key)) continue;
    const v = asValue(obj[q.key]);
    if (v !== undefined) out.push({ set: q.set, key: q.key, value: v });
  }
  return out;
}

/**
 * Apply a batch of writes to the current raw values of the storage keys involved. Returns the new raw value of each
 * storage key that changes (`null` = delete the storage key). Writes apply in order, so the last write of a
 * (set, key) wins.
 */
export function applyKeyValueWrites(
  configs: readonly Config[],
  current: ReadonlyMap<string, string | undefined>,
): Map<string, string | null> {
  const state = new Map<string, { raw?: string | null; obj?: Record<string, unknown> }>();
  const get = (sk: string) => {
    let s = state.get(sk);
    if (!s) {
      s = { raw: current.get(sk) };
      state.set(sk, s);
    }
    return s;
  };
  for (const c of configs) {
    const sk = storageKeyOf(c);
    const s = get(sk);
    if (c.set === '') {
      s.obj = undefined;
      s.raw = c.value === '' ? null : c.value;
      continue;
    }
    if (!s.obj) s.obj = parseObject(s.raw ?? undefined) ?? {};
    if (c.value === '') delete s.obj[c.key];
    else setOwn(s.obj, c.key, c.value); // a key named `__proto__` is an own property, not the object's prototype
    s.raw = Object.keys(s.obj).length ? JSON.stringify(s.obj) : null;
  }
  const changes = new Map<string, string | null>();
  for (const [sk, s] of state) {
    const before = current.get(sk);
    const after = s.raw ?? null;
    if ((before ?? null) !== after) changes.set(sk, after);
  }
  return changes;
}

/** At most this many storage keys are remembered by ReadKeys (the oldest dropped first). */
export const MAX_READ_KEYS = 100_000;

/**
 * The storage keys reads of one store object have asked for, with the sets read from each, and those a read in flight
 * is asking for. A change feed reports a key only when it is here: a key no read asked for cannot have changed an
 * answer the store gave.
 */
export class ReadKeys {
  private readonly known = new Map<string, Set<string>>();
  private readonly inFlight = new Map<string, number>();

  /** Run a read of `queries`: the keys count as asked for from before it is sent (an event may beat the answer). */
  async around<T>(queries: readonly ConfigQuery[], read: () => Promise<T>): Promise<T> {
    const keys = storageKeys(queries);
    for (const k of keys) this.inFlight.set(k, (this.inFlight.get(k) ?? 0) + 1);
    try {
      return await read();
    } finally {
      for (const k of keys) {
        const n = (this.inFlight.get(k) ?? 1) - 1;
        if (n > 0) this.inFlight.set(k, n);
        else this.inFlight.delete(k);
      }
      this.follow(queries);
    }
  }

  /**
   * Follow these storage keys from now on, each with the set it is asked for: a read once it completes, and a write of
   * this store object before it is sent (its own change is then reported with exactly the sets it wrote).
   */
  follow(queries: readonly ConfigQuery[]): void {
    for (const q of queries) {
      const key = storageKeyOf(q);
      let sets = this.known.get(key);
      if (!sets) {
        if (this.known.size >= MAX_READ_KEYS) this.known.delete(this.known.keys().next().value!);
        this.known.set(key, (sets = new Set()));
      }
      sets.add(q.set);
    }
  }

  /** Read, or being read. */
  has(key: string): boolean {
    return this.known.has(key) || this.inFlight.has(key);
  }

  /** The sets a key was read for (both readings of the layout when it was only being read). */
  setsOf(key: string): string[] {
    const sets = this.known.get(key);
    return sets ? [...sets] : [key, ''];
  }

  /** Keys whose reads have completed. */
  keys(): string[] {
    return [...this.known.keys()];
  }

  completed(key: string): boolean {
    return this.known.has(key);
  }
}

/** The key names a storage key's raw value holds as a set: a JSON object's properties with a readable value. */
function setKeysOf(raw: string): string[] | undefined {
  const obj = parseObject(raw);
  if (!obj) return undefined;
  const keys = Object.keys(obj).filter((k) => asValue(obj[k]) !== undefined);
  return keys.length ? keys : undefined;
}

/**
 * ConfigStore.list over the key-value layout, fed storage keys and raw values in any order (a Redis SCAN) or in key
 * order (an etcd range). How a storage key reads:
 *   - a JSON object with at least one readable property is the set of that name, with those keys;
 *   - any other non-empty value is a config of the root set (listed under the prefix "" only).
 * So a root config whose value is itself such a JSON object is listed as a set: the layout cannot tell them apart
 * (get() answers both readings of such a key).
 *
 * Memory is bounded: the root set's keys up to `limits.keys + 1` (`full` past that: the root set, listed first, can no
 * longer fit, so nothing more can be listed), and the first `limits.sets + 1` sets by name with their keys (the others
 * are dropped as they come, and make the listing truncated).
 */
export class KeyValueLister {
  private readonly root = new Set<string>();
  private readonly sets = new Map<string, string[]>();
  private dropped = false;

  constructor(
    private readonly prefix: string,
    private readonly limits: SetListLimits,
  ) {}

  /** Past the bound on keys with the root set alone: the answer is an empty, truncated listing whatever follows. */
  get full(): boolean {
    return this.root.size > this.limits.keys;
  }

  /**
   * For input in key order with a non-empty prefix: the first `limits.sets + 1` sets are in, or the sets in take more
   * than `limits.keys` keys; what follows cannot be listed.
   */
  get enough(): boolean {
    if (this.prefix === '') return this.full;
    if (this.sets.size > this.limits.sets) return true;
    let keys = 0;
    for (const k of this.sets.values()) keys += k.length;
    return keys > this.limits.keys;
  }

  add(storageKey: string, raw: string | null | undefined): void {
    if (raw === null || raw === undefined || raw === '' || isReserved(storageKey)) return;
    const keys = setKeysOf(raw);
    if (keys) {
      if (storageKey === '' || !isUnder(this.prefix, storageKey)) return;
      this.sets.set(storageKey, keys);
      if (this.sets.size > 2 * (this.limits.sets + 1)) this.trim();
    } else if (this.prefix === '' && !this.full) {
      this.root.add(storageKey);
    }
  }

  /** Keep the first `limits.sets + 1` sets by name. */
  private trim(): void {
    const keep = this.limits.sets + 1;
    if (this.sets.size <= keep) return;
    for (const name of [...this.sets.keys()].sort(byCodePoint).slice(keep)) this.sets.delete(name);
    this.dropped = true;
  }

  /** The listing; `complete` is false when the reader stopped before the end of what lies under the prefix. */
  result(complete: boolean): SetListing {
    this.trim();
    const ordered: ListedSet[] = [];
    if (this.root.size) ordered.push({ set: '', keys: [...this.root].sort(byCodePoint) });
    for (const set of [...this.sets.keys()].sort(byCodePoint)) ordered.push({ set, keys: this.sets.get(set)!.sort(byCodePoint) });
    return fitListing(this.prefix, this.limits, ordered, complete && !this.dropped && !this.full);
  }
}
