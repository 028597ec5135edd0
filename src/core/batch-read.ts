/**
 * One read of a store for many evaluations (core/matrix.ts, core/impact.ts): every store key at every set of the
 * given sets' hierarchies, in one batch, then each evaluation's reads answered from it, so that evaluating a schema at
 * fifty sets reads the store once rather than fifty times (one round trip for a network store).
 */
import { parseSet } from './names.js';
import type { Config, ConfigQuery, ResolvedStore, StoreResolver } from './ports.js';

const pairOf = (set: string, key: string): string => `${set}\u0000${key}`;

/** Every set of the sets' hierarchies (each once) and the number of lookups a batch of `keys` at them makes. */
export function batchExtent(sets: readonly string[], keys: number): { union: Set<string>; lookups: number } {
  const union = new Set<string>();
  for (const set of sets) {
    const parsed = parseSet(set);
    if (!('problem' in parsed)) for (const s of parsed.hierarchy) union.add(s);
  }
  return { union, lookups: union.size * keys };
}

/** What one batch read found, by (set, key). */
export interface Batch {
  byPair: Map<string, Config>;
  fromBackup: boolean;
}

/** One read of every key at every set of `union`. */
export async function readBatch(store: ResolvedStore, union: ReadonlySet<string>, keys: readonly string[]): Promise<Batch> {
  const byPair = new Map<string, Config>();
  if (!union.size || !keys.length) return { byPair, fromBackup: false };
  const queries: ConfigQuery[] = [];
  for (const set of union) for (const key of keys) queries.push({ set, key });
  const answer = await store.read(queries);
  for (const c of answer.configs) byPair.set(pairOf(c.set, c.key), c);
  return { byPair, fromBackup: answer.fromBackup };
}

/** The store as each evaluation sees it: reads answered from the batch (a pair it does not hold has no value). */
export function batchStore(store: ResolvedStore, batch: Batch, refusal: string): ResolvedStore {
  return {
    name: store.name,
    type: store.type,
    async read(queries) {
      const configs: Config[] = [];
      for (const q of queries) {
        const c = batch.byPair.get(pairOf(q.set, q.key));
        if (c) configs.push(c);
      }
      return { configs, fromBackup: batch.fromBackup };
    },
    write: () => Promise.reject(new Error(refusal)),
  };
}

/** A resolver that hands out one store whatever the name. */
export const resolverOf = (store: ResolvedStore): StoreResolver => ({ resolve: () => store, names: () => [store.name] });
