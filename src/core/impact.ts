/**
 * The impact of a write: for every named schema that declares a key the write changes, and every set at or under the
 * written one that the store holds (bounded), the schema is evaluated as the store is and as it would be after the
 * write (a view of the store with the pending changes laid over it), and the two outcomes are compared. Pure over the
 * ports: it reads the store, writes nothing.
 *
 * The store is read once for all of it (batch-read.ts: every store key of those schemas at every set of the sets'
 * hierarchies, one round trip for a network store), and the pairs of schema and set are evaluated a few at a time.
 */
import { batchExtent, batchStore, readBatch, resolverOf } from './batch-read.js';
import { ValidationError, type ImpactEntry } from './errors.js';
import { evaluatePipeline, resolveLimits } from './eval.js';
import type { Config, ConfigQuery, ExpressionEvaluator, ResolvedStore, RunContext } from './ports.js';
import { prepareSchema } from './schema.js';
import { eachAtMost } from './slices.js';
import type { ConfigSchema, EvalResult } from './types.js';

export interface ImpactSchema {
  name: string;
  schema: ConfigSchema;
}

export interface ImpactInput {
  store: ResolvedStore;
  /** The written set (normal form). */
  set: string;
  /** The pending changes: key -> new value ("" removes it). */
  changes: ReadonlyArray<{ key: string; after: string }>;
  schemas: readonly ImpactSchema[];
  expressions?: ExpressionEvaluator;
  context?: RunContext;
  /** At most this many sets are looked at (the written one first, then those under it in path order). */
  maxSets?: number;
}

export interface ImpactReport {
  impact: ImpactEntry[];
  /** The store holds more sets under the written one than were looked at. */
  truncated: boolean;
}

export const DEFAULT_IMPACT_SETS = 50;

/** Pairs of schema and set evaluated at once (as the matrix's sets). */
const CONCURRENCY = 4;

/** A view of `store` whose reads answer as if `changes` were written at `set`. */
export function overlayStore(store: ResolvedStore, set: string, changes: ReadonlyArray<{ key: string; after: string }>): ResolvedStore {
  const pending = new Map(changes.map((c) => [c.key, c.after]));
  return {
    name: store.name,
    type: store.type,
    async read(queries: readonly ConfigQuery[]) {
      const { configs, fromBackup } = await store.read(queries);
      const kept: Config[] = configs.filter((c) => !(c.set === set && pending.has(c.key)));
      for (const q of queries) {
        const after = q.set === set ? pending.get(q.key) : undefined;
        if (after) kept.push({ set, key: q.key, value: after });
      }
      return { configs: kept, fromBackup };
    },
    write: () => Promise.reject(new Error('an impact view is read-only')),
  };
}

type Outcome = { result: EvalResult; failures: ImpactEntry['failures'] };

async function evaluate(schema: ConfigSchema, set: string, store: ResolvedStore, input: ImpactInput): Promise<Outcome> {
  try {
    const out = await evaluatePipeline(
      [{ store: store.name, set, schema }],
      { stores: resolverOf(store), ...(input.expressions ? { expressions: input.expressions } : {}) },
      input.context ? { context: input.context } : {},
    );
    return { result: out.result, failures: [] };
  } catch (e) {
    if (!(e instanceof ValidationError)) throw e;
    const failures = e.failures.map((f) => ({ key: f.key, rule: f.rule, message: f.message }));
    // The values of a failing evaluation, to say which changed: the same schema without its rules.
    let result: EvalResult = {};
    try {
      result = (await evaluatePipeline([{ store: store.name, set, schema: withoutRules(schema) }], { stores: resolverOf(store), ...(input.expressions ? { expressions: input.expressions } : {}) }, input.context ? { context: input.context } : {})).result;
    } catch {
      // Values that cannot be had even so (a failing const): every key counts as changed only if it has a value after.
    }
    return { result, failures };
  }
}

/** The rules a value must pass; without them an evaluation gives the values only. */
const RULES = ['required', 'pattern', 'enum', 'schema', 'test'] as const;

function withoutRules(schema: ConfigSchema): ConfigSchema {
  const keys: Record<string, unknown> = {};
  for (const [key, cfgu] of Object.entries(schema.keys)) {
    const copy: Record<string, unknown> = { ...(cfgu ?? {}) };
    for (const rule of RULES) delete copy[rule];
    keys[key] = copy;
  }
  return { ...schema, keys } as ConfigSchema;
}

function compare(schema: string, set: string, before: Outcome, after: Outcome, keys: readonly string[]): ImpactEntry {
  const changed = keys.filter((k) => (before.result[k]?.value ?? '') !== (after.result[k]?.value ?? ''));
  const failed = (o: Outcome) => o.failures.length > 0;
  let status: ImpactEntry['status'];
  if (!failed(before) && failed(after)) status = 'breaks';
  else if (failed(before) && !failed(after)) status = 'fixes';
  else if (changed.length || JSON.stringify(before.failures) !== JSON.stringify(after.failures)) status = 'changes';
  else status = 'unchanged';
  return { schema, set, status, changed, failures: after.failures };
}

/** What the write does to each named schema declaring a changed key, at each set at or under the written one. */
export async function impactOf(input: ImpactInput): Promise<ImpactReport> {
  const changedKeys = input.changes.map((c) => c.key);
  const affected = input.schemas.filter((s) => changedKeys.some((k) => prepareSchema(s.schema).byName.has(k)));
  if (!affected.length || !changedKeys.length) return { impact: [], truncated: false };
  const maxSets = input.maxSets ?? DEFAULT_IMPACT_SETS;
  const sets = [input.set];
  let truncated = false;
  if (input.store.revisions) {
    const listing = await input.store.revisions.list(input.set, { sets: maxSets + 1 });
    for (const s of listing.sets) if (s.set !== input.set) sets.push(s.set);
    truncated = listing.truncated || sets.length > maxSets;
    sets.length = Math.min(sets.length, maxSets);
  }
  // One read for every evaluation, unless it would pass the engine's lookups limit (then each reads for itself).
  const storeKeys = [...new Set(affected.flatMap((s) => prepareSchema(s.schema).storeKeys))];
  const { union, lookups } = batchExtent(sets, storeKeys.length);
  const before = lookups <= resolveLimits(undefined).lookups ? batchStore(input.store, await readBatch(input.store, union, storeKeys), 'an impact view is read-only') : input.store;
  const after = overlayStore(before, input.set, input.changes);
  const pairs = affected.flatMap((named) => sets.map((set) => ({ named, set })));
  const impact = new Array<ImpactEntry>(pairs.length);
  await eachAtMost(pairs, CONCURRENCY, async ({ named, set }, i) => {
    const [b, a] = await Promise.all([evaluate(named.schema, set, before, input), evaluate(named.schema, set, after, input)]);
    impact[i] = compare(named.name, set, b, a, prepareSchema(named.schema).keys.map((k) => k.key));
  });
  return { impact, truncated };
}
