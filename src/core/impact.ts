/**
 * The impact of a write before it is made: for each named schema that declares a changed key, and each set at or under
 * the written one that the store holds, the schema is evaluated against the store as it is and as it would be after
 * the write (the pending changes laid over the written set), and the two outcomes compared. Pure over the ports.
 */
import { ValidationError } from './errors.js';
import { evaluatePipeline } from './eval.js';
import { parseSet } from './names.js';
import type { Config, ConfigQuery, ExpressionEvaluator, ResolvedStore, SetListOptions, StoreResolver } from './ports.js';
import type { ConfigSchema, EvalResult } from './types.js';

/** How a write changes one (schema, set): nothing, values, from passing to failing, or from failing to passing. */
export type ImpactStatus = 'unchanged' | 'changes' | 'breaks' | 'fixes';

export interface ImpactFailure {
  key: string;
  rule: string;
  message: string;
}

export interface ImpactEntry {
  schema: string;
  set: string;
  status: ImpactStatus;
  /** The keys of the schema whose evaluated value differs after the write. */
  changed: string[];
  /** The failures after the write (before it, for `fixes`: none after). Messages as the engine redacts them. */
  failures: ImpactFailure[];
}

export interface ImpactInput {
  /** The written store (reads go through it; its `list` gives the sets under the written one). */
  store: ResolvedStore;
  list(prefix: string, options?: SetListOptions): Promise<{ sets: Array<{ set: string }>; truncated: boolean }>;
  /** The written set (any form parseSet takes). */
  set: string;
  /** Pending values at the written set; "" deletes. */
  changes: ReadonlyArray<{ key: string; after: string }>;
  /** Named schemas (name -> schema); only those declaring a changed key are evaluated. */
  schemas: ReadonlyArray<{ name: string; schema: ConfigSchema }>;
  expressions?: ExpressionEvaluator;
  /** At most this many sets are evaluated (default 100). */
  maxSets?: number;
}

export interface Impact {
  impact: ImpactEntry[];
  /** True when the store holds more sets under the written one than were evaluated. */
  truncated: boolean;
}

/** The store seen with the pending changes applied to one set. */
function overlay(store: ResolvedStore, set: string, changes: ImpactInput['changes']): ResolvedStore {
  const pending = new Map(changes.map((c) => [c.key, c.after]));
  return {
    name: store.name,
    type: store.type,
    async read(queries: readonly ConfigQuery[]) {
      const answer = await store.read(queries);
      const configs: Config[] = answer.configs.filter((c) => c.set !== set || !pending.has(c.key));
      for (const q of queries) {
        const value = q.set === set ? pending.get(q.key) : undefined;
        if (value) configs.push({ set, key: q.key, value });
      }
      return { configs, fromBackup: answer.fromBackup };
    },
    write: () => Promise.reject(new Error('the impact of a write is evaluated read-only')),
  };
}

const resolverOf = (store: ResolvedStore): StoreResolver => ({ resolve: () => store, names: () => [store.name] });

type Outcome = { ok: true; result: EvalResult } | { ok: false; failures: ImpactFailure[] };

async function evaluate(store: ResolvedStore, set: string, schema: ConfigSchema, expressions: ExpressionEvaluator | undefined): Promise<Outcome> {
  try {
    const { result } = await evaluatePipeline([{ store: store.name, set, schema }], { stores: resolverOf(store), expressions });
    return { ok: true, result };
  } catch (e) {
    if (!(e instanceof ValidationError)) throw e;
    return { ok: false, failures: e.failures.map((f) => ({ key: f.key, rule: f.rule, message: f.message })) };
  }
}

const sameFailures = (a: ImpactFailure[], b: ImpactFailure[]) => JSON.stringify(a) === JSON.stringify(b);

/** Compare one (schema, set) before and after. */
function judge(schema: ConfigSchema, before: Outcome, after: Outcome): Pick<ImpactEntry, 'status' | 'changed' | 'failures'> {
  if (before.ok && after.ok) {
    const changed = Object.keys(schema.keys).filter((k) => before.result[k]?.value !== after.result[k]?.value);
    return { status: changed.length ? 'changes' : 'unchanged', changed, failures: [] };
  }
  if (before.ok && !after.ok) return { status: 'breaks', changed: [], failures: after.failures };
  if (!before.ok && after.ok) return { status: 'fixes', changed: [], failures: before.failures };
  const b = before as { failures: ImpactFailure[] };
  const a = after as { failures: ImpactFailure[] };
  return { status: sameFailures(b.failures, a.failures) ? 'unchanged' : 'changes', changed: [], failures: a.failures };
}

/**
 * The impact of writing `changes` at `set`: one entry per (named schema declaring a changed key, set at or under the
 * written one), ordered by schema name then set path. The written set is always evaluated (it may hold nothing yet).
 */
export async function impactOf(input: ImpactInput): Promise<Impact> {
  const parsed = parseSet(input.set);
  const written = 'path' in parsed ? parsed.path : input.set;
  const changedKeys = new Set(input.changes.map((c) => c.key));
  const schemas = input.schemas
    .filter((s) => Object.keys(s.schema.keys).some((k) => changedKeys.has(k)))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  if (!schemas.length) return { impact: [], truncated: false };
  const maxSets = input.maxSets ?? 100;
  const listing = await input.list(written, { sets: maxSets });
  const sets = [...new Set([written, ...listing.sets.map((s) => s.set)])].sort();
  const truncated = listing.truncated || sets.length > maxSets;
  const after = overlay(input.store, written, input.changes);
  const impact: ImpactEntry[] = [];
  for (const { name, schema } of schemas) {
    for (const set of sets.slice(0, maxSets)) {
      const was = await evaluate(input.store, set, schema, input.expressions);
      const will = await evaluate(after, set, schema, input.expressions);
      impact.push({ schema: name, set, ...judge(schema, was, will) });
    }
  }
  return { impact, truncated };
}
