/**
 * ConfigStore.list's shared parts: the arguments, the order (by code point), which sets lie under a prefix, and the
 * cut of an ordered run of sets at the listing's bounds (src/core/ports.ts, SetListing; docs/stores.md, "Listing
 * sets").
 */
import { DEFAULT_SET_LIST_LIMITS, type ListedSet, type SetListing, type SetListLimits, type SetListOptions } from '../core/ports.js';
import type { SetIndex } from './common.js';

/** A prefix in normal form (one leading and one trailing slash dropped, as set paths are) and the bounds, checked. */
export function listArguments(prefix: string, options: SetListOptions = {}): { prefix: string; limits: SetListLimits } {
  if (typeof prefix !== 'string') throw new TypeError('list: the prefix must be a string');
  let p = prefix;
  if (p.startsWith('/')) p = p.slice(1);
  if (p.endsWith('/')) p = p.slice(0, -1);
  const limits: SetListLimits = {
    sets: options.sets ?? DEFAULT_SET_LIST_LIMITS.sets,
    keys: options.keys ?? DEFAULT_SET_LIST_LIMITS.keys,
  };
  for (const [name, n] of Object.entries(limits)) {
    if (!Number.isSafeInteger(n) || n < 1) throw new TypeError(`list: the bound on ${name} must be a positive integer`);
  }
  return { prefix: p, limits };
}

/** A UTF-16 code unit moved so that code units compare as the code points they encode (surrogates above U+FFFF). */
const unit = (c: number): number => (c >= 0xe000 ? c - 0x800 : c >= 0xd800 ? c + 0x2000 : c);

/**
 * Compare two strings by code point, which is the byte order of their UTF-8 form: the order of PostgreSQL's "C"
 * collation, SQLite's BINARY, MariaDB's binary strings and etcd's keys. (JavaScript's `<` compares UTF-16 code units,
 * which puts characters above U+FFFF before U+E000..U+FFFF.)
 */
export function byCodePoint(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return unit(x) - unit(y);
  }
  return a.length - b.length;
}

/** Whether `set` is `prefix` or one of its descendants, by whole segments ("" is above every set). */
export function isUnder(prefix: string, set: string): boolean {
  if (prefix === '') return true;
  if (!set.startsWith(prefix)) return false;
  return set.length === prefix.length || set.charCodeAt(prefix.length) === 47; // '/'
}

/**
 * The code-point range holding the descendants of a non-empty prefix: every set starting with `prefix/` lies in
 * [`prefix/`, `prefix0`), as '0' follows '/'. (The prefix itself lies below it; so do sets such as `prefix-eu`.)
 */
export function descendantRange(prefix: string): { from: string; to: string } {
  return { from: `${prefix}/`, to: `${prefix}0` };
}

/** A text that LIKE ... ESCAPE '!' matches literally (`%`, `_` and `!` escaped). */
export const likeEscape = (text: string): string => text.replace(/[!%_]/g, '!$&');

/** A text that a Redis MATCH pattern matches literally (`*`, `?`, `[`, `]` and `\` escaped). */
export const globEscape = (text: string): string => text.replace(/[*?[\]\\]/g, '\\$&');

/**
 * The listing of `ordered` (sets by code point, each with its sorted keys): sets are taken whole, in order, until the
 * next one would go past `limits.sets` sets or `limits.keys` keys. `complete` is false when the store holds sets that
 * are not in `ordered` (all after its last one): the listing is then truncated whatever fits.
 */
export function fitListing(prefix: string, limits: SetListLimits, ordered: Iterable<ListedSet>, complete: boolean): SetListing {
  const sets: ListedSet[] = [];
  let keys = 0;
  let truncated = !complete;
  for (const s of ordered) {
    if (!s.keys.length) continue;
    if (sets.length === limits.sets || keys + s.keys.length > limits.keys) {
      truncated = true;
      break;
    }
    sets.push(s);
    keys += s.keys.length;
  }
  return { prefix, sets, truncated, limits: { ...limits } };
}

/**
 * The listing of (set, key) rows a query returned, ordered by set then key, at most `limits.keys + 1` of them. When
 * there are more than `limits.keys` rows, the last row's set may lack keys that the query cut off: it is dropped, and
 * the listing is truncated. Rows not under the prefix (a case-insensitive table's near matches) and repeated rows are
 * dropped; the sets and keys are sorted again by code point, which changes nothing when the server ordered that way.
 */
export function listingFromRows(
  prefix: string,
  limits: SetListLimits,
  rows: ReadonlyArray<{ set: string; key: string }>,
): SetListing {
  const more = rows.length > limits.keys;
  const bySet = new Map<string, Set<string>>();
  for (const r of rows) {
    const set = String(r.set);
    if (!isUnder(prefix, set)) continue;
    let keys = bySet.get(set);
    if (!keys) bySet.set(set, (keys = new Set()));
    keys.add(String(r.key));
  }
  if (more) bySet.delete(String(rows[rows.length - 1]!.set));
  const ordered = [...bySet.keys()].sort(byCodePoint).map((set) => ({ set, keys: [...bySet.get(set)!].sort(byCodePoint) }));
  return fitListing(prefix, limits, ordered, !more);
}

/**
 * The listing of an in-process index (in-memory, json-file): the set names are filtered and sorted (one pass over the
 * index's sets, no values read); the keys are read only for the sets that are listed (and the one after them).
 */
export function listingFromIndex(index: SetIndex, prefix: string, limits: SetListLimits): SetListing {
  const names = [...index.keys()].filter((s) => isUnder(prefix, s)).sort(byCodePoint);
  function* ordered(): Generator<ListedSet> {
    for (const set of names) {
      const keys: string[] = [];
      for (const [key, e] of index.get(set)!) if (e.config.value !== '') keys.push(key);
      if (keys.length) yield { set, keys: keys.sort(byCodePoint) };
    }
  }
  return fitListing(prefix, limits, ordered(), true);
}
