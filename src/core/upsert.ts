/**
 * Validated writes into one set of a store (`cfgu upsert`): every failure collected, only changed values written.
 */
import { ErrorCodes, InputError, ReadOnlyStoreError, RevisionConflictError, ValidationError, type EvalFailure } from './errors.js';
import { parseSet, keyProblem, setOwn, truncate } from './names.js';
import { prepareSchema, stringifyValue } from './schema.js';
import { runInSlices } from './slices.js';
import type { Config, ConfigQuery, ExpressionEvaluator, ResolvedStore } from './ports.js';
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
  /** Refuse the write (RevisionConflictError) unless the set is at this revision (a store that keeps revisions). */
  expectedRevision?: number;
  /** Recorded with the revision: who writes, the request's id, why. */
  subject?: string;
  requestId?: string;
  message?: string;
  /** Validate and compute the changes, write nothing (the revision is still checked against `expectedRevision`). */
  dryRun?: boolean;
  /**
   * Called with the changes once they are validated, before anything is written (the server's impact check); a throw
   * refuses the write.
   */
  beforeWrite?: (changes: readonly UpsertChange[], set: string) => Promise<void>;
}

export interface UpsertResult {
  changes: UpsertChange[];
  /** The set path written, in normal form. */
  set: string;
  /**
   * The set's revision after the write (the current one on a dry run or when nothing changed); undefined for a store
   * that keeps no revisions.
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
  if (input.store.readOnly) throw new ReadOnlyStoreError(input.store.name);
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
  if (input.beforeWrite) await input.beforeWrite(changes, set.path);
  return { changes, set: set.path, ...(await commit(input, set.path, changes)) };
}

/** Write the changes (unless a dry run): through the store's revisions when it keeps them, checking the revision. */
async function commit(input: UpsertInput, set: string, changes: readonly UpsertChange[]): Promise<{ revision?: number }> {
  const revisions = input.store.revisions;
  if (!revisions) {
    if (changes.length && !input.dryRun) await input.store.write(changes.map((c) => ({ set, key: c.key, value: c.after })));
    return {};
  }
  if (input.dryRun || !changes.length) {
    const { revision } = await revisions.revision(set);
    if (input.expectedRevision !== undefined && input.expectedRevision !== revision) {
      throw new RevisionConflictError(input.store.name, set, input.expectedRevision, revision);
    }
    return { revision };
  }
  try {
    const written = await revisions.write(
      set,
      changes.map((c) => ({ key: c.key, value: c.after === '' ? null : c.after })),
      {
        ...(input.expectedRevision !== undefined ? { expectedRevision: input.expectedRevision } : {}),
        ...(input.subject !== undefined ? { subject: input.subject } : {}),
        ...(input.requestId !== undefined ? { requestId: input.requestId } : {}),
        ...(input.message !== undefined ? { message: input.message } : {}),
      },
    );
    return { revision: written.revision };
  } catch (e) {
    // The store names itself by its kind's label; the caller knows it by its declared name.
    if (e instanceof RevisionConflictError && e.store !== input.store.name) throw new RevisionConflictError(input.store.name, e.set, e.expected, e.current);
    throw e;
  }
}
