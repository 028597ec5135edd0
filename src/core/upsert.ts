/**
 * Validated writes into one set of a store (`cfgu upsert`): every failure collected, only changed values written.
 */
import { ErrorCodes, InputError, RevisionConflictError, ValidationError, type EvalFailure } from './errors.js';
import { parseSet, keyProblem, setOwn, truncate } from './names.js';
import { prepareSchema, stringifyValue } from './schema.js';
import { runInSlices } from './slices.js';
import type { Config, ConfigQuery, ExpressionEvaluator, ResolvedStore, RevisionedStore, WriteOptions } from './ports.js';
import { resolveLimits, type CheckedCommand } from './eval.js';
import { computeAndValidate, sortFailures } from './eval-checks.js';
import { evaluateValues } from './eval-values.js';

export interface UpsertInput {
  store: ResolvedStore;
  /** Set path; the root when absent. */
  set?: string;
  schema: unknown;
  /** Key -> new value; `""`, `null` and `undefined` delete the stored value. Non-strings are JSON-stringified. */
  values: Record<string, unknown>;
  expressions?: ExpressionEvaluator;
  /**
   * The store behind `store` when it keeps revisions (ConfigStore under the ResolvedStore): the write then goes through
   * its `write()` with `writeOptions`, so that it is recorded in the set's history and checked against
   * `writeOptions.expectedRevision`. Without it the values are written with `store.write` (no history).
   */
  revisioned?: RevisionedStore;
  writeOptions?: WriteOptions;
  /** Validate and compute the changes, write nothing (a preview). */
  dryRun?: boolean;
}

export interface UpsertResult {
  changes: UpsertChange[];
  /**
   * With `revisioned`: the set's revision after the write, or its current one when nothing was written (a dry run,
   * no change). Absent without `revisioned`.
   */
  revision?: number;
}

export interface UpsertChange {
  key: string;
  before: string;
  after: string;
}

/**
 * Validate and write values into a store at one set. Every failure is collected (rules `override` for an
 * undeclared key, `const`/`lazy` for keys that are never stored, then the value constraints). Only changed values are
 * written; an empty value deletes. Returns what changed.
 */
export async function upsert(input: UpsertInput): Promise<UpsertResult> {
  const schema = prepareSchema(input.schema, '/schema');
  const set = parseSet(input.set ?? '');
  if ('problem' in set) throw new InputError(ErrorCodes.INVALID_SET, set.problem, [{ path: '/set', message: set.problem }]);
  const failures: EvalFailure[] = [];
  const assigned: Record<string, string> = {};
  for (const key of Object.keys(input.values)) {
    const p = schema.byName.get(key);
    const raw = input.values[key];
    const text = raw === null || raw === undefined ? '' : stringifyValue(raw);
    if (!p) {
      const problem = keyProblem(key);
      failures.push({ command: 0, key, rule: 'undeclared', message: problem ?? `key "${truncate(key)}" is not declared by the schema` });
    } else if (p.isConst) {
      failures.push({ command: 0, key, rule: 'const', message: `key "${key}" is computed by \`const\` and cannot be stored` });
    } else if (p.isLazy) {
      failures.push({ command: 0, key, rule: 'lazy', message: `key "${key}" is \`lazy\`: its value only comes from overrides and is never stored` });
    } else setOwn(assigned, key, text);
  }
  const keys = Object.keys(assigned);
  // Current values at exactly this set (to write only what changed), and in the hierarchy (context for tests).
  const hierarchyQueries: ConfigQuery[] = [];
  for (const s of set.hierarchy) for (const key of schema.storeKeys) hierarchyQueries.push({ set: s, key });
  const { configs: stored } = hierarchyQueries.length ? await input.store.read(hierarchyQueries) : { configs: [] as Config[] };
  const before = new Map<string, string>();
  for (const c of stored) if (c.set === set.path) before.set(c.key, c.value);

  const command: CheckedCommand = {
    index: 0,
    schema,
    set,
    store: input.store,
    overrides: Object.fromEntries(keys.filter((k) => assigned[k] !== '').map((k) => [k, assigned[k]])),
  };
  const { result } = await runInSlices(evaluateValues(command, stored, undefined, failures));
  // A deleted key is empty at this set whatever the ancestors hold.
  for (const k of keys) if (assigned[k] === '') setOwn(result, k, { ...result[k]!, value: '', origin: 'empty' });
  await computeAndValidate(
    command,
    { result, byIndex: schema.keys.map((p) => result[p.key]!) },
    { expressions: input.expressions },
    failures,
    { only: new Set(keys.filter((k) => assigned[k] !== '')), required: false },
    { limits: resolveLimits(undefined), sizes: new WeakMap(), exceeded: false, tainted: new WeakSet() },
  );
  sortFailures(failures, 0, schema);
  if (failures.length) throw new ValidationError(failures);

  const changes: UpsertChange[] = [];
  for (const key of keys) {
    const was = before.get(key) ?? '';
    if (was !== assigned[key]) changes.push({ key, before: was, after: assigned[key]! });
  }
  const revisioned = input.revisioned;
  if (!revisioned) {
    if (changes.length && !input.dryRun) await input.store.write(changes.map((c) => ({ set: set.path, key: c.key, value: c.after })));
    return { changes };
  }
  if (!changes.length || input.dryRun) {
    const { revision } = await revisioned.revision(set.path);
    const expected = input.writeOptions?.expectedRevision;
    // A stale expectation is refused also when nothing would be written (the caller's view is out of date).
    if (expected !== undefined && expected !== revision) throw new RevisionConflictError(input.store.name, set.path, expected, revision);
    return { changes, revision };
  }
  try {
    const written = await revisioned.write(set.path, changes.map((c) => ({ key: c.key, value: c.after === '' ? null : c.after })), input.writeOptions);
    return { changes, revision: written.revision };
  } catch (e) {
    // The store names itself by its kind's label; the caller knows it by its declared name.
    if (e instanceof RevisionConflictError && e.store !== input.store.name) throw new RevisionConflictError(input.store.name, e.set, e.expected, e.current);
    throw e;
  }
}
