/**
 * Write rights: which keys of which set of which store a principal may write (a grant with `write: true` covering
 * them; scopes.ts), whether it may break schemas (`breaking: true`), and which values it may see in a write's answer
 * or a set's history. Full access (preshared keys, no authentication) may do and see everything.
 */
import { WriteForbiddenError } from '../../core/index.js';
import { setSubject, type CompiledGrant, type Principal } from './scopes.js';

/** The grant covers this key (its `keys` name it, or its labels give it one; every key when it lists neither). */
const coversKey = (g: CompiledGrant, key: string): boolean => !g.keys || g.labelKeys?.has(key) === true || g.keys.some((k) => k.test(key));

/** The principal's grants that cover a store and a set (all of them when it has full access: undefined). */
function grantsFor(principal: Principal, store: string, set: string): readonly CompiledGrant[] | undefined {
  if (principal.grants === 'all') return undefined;
  const subject = setSubject(set);
  if (subject === undefined) return [];
  return principal.grants.filter((g) => (g.anyStore || g.stores.has(store)) && g.sets.some((r) => r.test(subject)));
}

/** The refusal of a write of `keys` (sorted, each once) when some are not writable; undefined when all are. */
export function writeRefusal(principal: Principal, store: string, set: string, keys: readonly string[]): WriteForbiddenError | undefined {
  const grants = grantsFor(principal, store, set);
  if (!grants) return undefined;
  const writers = grants.filter((g) => g.write);
  const refused = keys.filter((k) => !writers.some((g) => coversKey(g, k)));
  return refused.length ? new WriteForbiddenError(store, set, 'write', [...new Set(refused)].sort()) : undefined;
}

/** Whether the principal may make a breaking write to a set. */
export function mayBreak(principal: Principal, store: string, set: string): boolean {
  const grants = grantsFor(principal, store, set);
  return !grants || grants.some((g) => g.write && g.breaking);
}

/** Which keys' values of a set the principal may read (any grant covering the store, the set and the key). */
export function readableKeys(principal: Principal, store: string, set: string): (key: string) => boolean {
  const grants = grantsFor(principal, store, set);
  if (!grants) return () => true;
  return (key) => grants.some((g) => coversKey(g, key));
}

/** Whether the principal may read anything of a set (its history). */
export function mayReadSet(principal: Principal, store: string, set: string): boolean {
  const grants = grantsFor(principal, store, set);
  return !grants || grants.length > 0;
}

/** Whether some grant of the principal may write somewhere in a store (full access: yes); GET /stores says so. */
export function mayWriteStore(principal: Principal, store: string): boolean {
  return principal.grants === 'all' || principal.grants.some((g) => g.write && (g.anyStore || g.stores.has(store)));
}
