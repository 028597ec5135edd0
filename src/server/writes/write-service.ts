/**
 * Validated writes over HTTP (POST /upsert, POST /rollback): the checks in the order a write meets them, then the
 * engine's `upsert` (core/upsert.ts), which validates exactly as `cfgu upsert` does and writes through the store's
 * revisions. In order:
 *   the store (unknown: 400), the set (invalid: 400), the schema (an unknown name: 400), the number of keys (413),
 *   a read-only store (403 read-only-store), the write right for every key (403, naming the keys),
 *   validation (400 undeclared / const / lazy key is a 422 failure as for `cfgu upsert`; 422 every failure),
 *   the impact on the server's named schemas (422 write-breaks; 403 when `allowBreaking` lacks the right to break),
 *   the revision (409).
 * A refused write writes nothing and records nothing.
 */
import {
  impactOf,
  ErrorCodes,
  InputError,
  keyProblem,
  truncate,
  LimitError,
  MAX_ISSUES,
  parseSet,
  prepareSchema,
  ReadOnlyStoreError,
  UnknownStoreError,
  upsert,
  WriteBreaksError,
  WriteForbiddenError,
  type ConfigSchema,
  type ExpressionEvaluator,
  type ImpactEntry,
  type InputIssue,
  type PreparedSchema,
  type ResolvedStore,
  type RunContext,
  type ShownChange,
  type ShownValue,
  type StoreResolver,
} from '../../core/index.js';
import { mayBreak, readableKeys, writeRefusal } from '../access/write-access.js';
import { visibleStores, type Principal } from '../access/scopes.js';
import type { NamedSchemas } from '../schemas/registry.js';
import { unknownSchema } from '../schemas/resolve.js';

const throwUnknown = (name: string, schemas: NamedSchemas, principal: Principal): never => {
  throw unknownSchema(name, schemas, principal.grants === 'all' ? undefined : principal);
};

export interface WriteAnswer {
  store: string;
  set: string;
  dryRun: boolean;
  /** The set's revision after the write (the current one on a dry run or when nothing changed). */
  revision: number | null;
  changes: ShownChange[];
  impact: ImpactEntry[];
  /** The store holds more sets under the written one than the impact looked at. */
  impactTruncated: boolean;
}

export interface WriteContext {
  registry: StoreResolver;
  schemas: NamedSchemas;
  evaluator: ExpressionEvaluator | undefined;
  /** Most keys one write may change (the server's `limits.keys`). */
  maxKeys: number;
}

export interface WriteRequest {
  store?: string;
  set?: string;
  /** A schema object, or the name of one of the server's schemas. */
  schema: ConfigSchema | string;
  values: Record<string, unknown>;
  expectedRevision?: number;
  message?: string;
  dryRun?: boolean;
  allowBreaking?: boolean;
}

export interface Caller {
  principal: Principal;
  requestId: string;
  /** The sandbox's client and budget account of the request. */
  context?: RunContext;
}

/** The store a write names (or the default store); an unknown name lists only the stores the caller may name. */
export function writeStore(registry: StoreResolver, name: string | undefined, principal: Principal): ResolvedStore {
  try {
    return registry.resolve(name);
  } catch (e) {
    if (e instanceof UnknownStoreError) throw new UnknownStoreError(e.store, visibleStores(principal, e.known));
    throw e;
  }
}

/** The subject recorded with a revision: the credential's name, the JWT's `sub`, `preshared:<n>`, or `anonymous`. */
export const subjectOf = (principal: Principal): string => principal.subject ?? 'anonymous';

/**
 * Whether a key's values are shown to the caller: it may read the key, and the key is not `hidden` in `hiddenIn` (a
 * principal with full access sees hidden values too).
 */
export function valueShown(principal: Principal, store: string, set: string, hidden: (key: string) => boolean): (key: string) => boolean {
  const readable = readableKeys(principal, store, set);
  return (key) => readable(key) && (principal.grants === 'all' || !hidden(key));
}

export const show = (value: string | null, shown: boolean): ShownValue => (shown ? (value === '' ? null : value) : { hidden: true });

/**
 * A key the schema does not declare, or declares `const` or `lazy` (never stored): 400 naming every such key (the
 * same messages as `cfgu upsert`'s failures of rules `undeclared`, `const`, `lazy`).
 */
function refuseUnwritableKeys(prepared: PreparedSchema, keys: readonly string[]): void {
  const issues: InputIssue[] = [];
  for (const key of keys) {
    const p = prepared.byName.get(key);
    const path = `/values/${key.replace(/~/g, '~0').replace(/\//g, '~1')}`;
    if (!p) issues.push({ path, message: keyProblem(key) ?? `key "${truncate(key)}" is not declared by the schema` });
    else if (p.isConst) issues.push({ path, message: `key "${key}" is computed by \`const\` and cannot be stored` });
    else if (p.isLazy) issues.push({ path, message: `key "${key}" is \`lazy\`: its value only comes from overrides and is never stored` });
  }
  if (!issues.length) return;
  const more = issues.length > 1 ? ` (and ${issues.length - 1} more)` : '';
  throw new InputError(ErrorCodes.INVALID_KEY, `${issues[0]!.message}${more}`, issues.slice(0, MAX_ISSUES));
}

/** Validate, check the impact and write (or, on a dry run, only say what would change). */
export async function performWrite(ctx: WriteContext, caller: Caller, req: WriteRequest): Promise<WriteAnswer> {
  const { principal } = caller;
  const store = writeStore(ctx.registry, req.store, principal);
  // A named schema is found whatever the caller may read: what it may write is judged key by key below.
  const named = typeof req.schema === 'string' ? (ctx.schemas.get(req.schema) ?? throwUnknown(req.schema, ctx.schemas, principal)) : undefined;
  const schema = named ? named.schema : req.schema as ConfigSchema;
  const keys = Object.keys(req.values);
  if (keys.length > ctx.maxKeys) throw new LimitError(`the write has ${keys.length} keys; the limit is ${ctx.maxKeys}`);
  if (store.readOnly) throw new ReadOnlyStoreError(store.name);
  // The write right, judged on the set in normal form before anything is read (an invalid set: upsert says so).
  const parsed = parseSet(req.set ?? '');
  if (!('problem' in parsed)) {
    const refusal = writeRefusal(principal, store.name, parsed.path, keys);
    if (refusal) throw refusal;
  }
  const prepared = prepareSchema(schema, '/schema');
  refuseUnwritableKeys(prepared, keys);
  let impact: ImpactEntry[] = [];
  let impactTruncated = false;
  const result = await upsert({
    store,
    ...(req.set !== undefined ? { set: req.set } : {}),
    schema,
    values: req.values,
    ...(ctx.evaluator ? { expressions: ctx.evaluator } : {}),
    ...(req.expectedRevision !== undefined ? { expectedRevision: req.expectedRevision } : {}),
    ...(req.message !== undefined ? { message: req.message } : {}),
    subject: subjectOf(principal),
    requestId: caller.requestId,
    dryRun: req.dryRun === true,
    beforeWrite: async (changes, set) => {
      const report = await impactOf({
        store,
        set,
        changes,
        schemas: ctx.schemas.all().map((s) => ({ name: s.name, schema: s.schema })),
        ...(ctx.evaluator ? { expressions: ctx.evaluator } : {}),
        ...(caller.context ? { context: caller.context } : {}),
      });
      impact = report.impact;
      impactTruncated = report.truncated;
      if (!impact.some((i) => i.status === 'breaks')) return;
      if (!req.allowBreaking) throw new WriteBreaksError(impact);
      if (!mayBreak(principal, store.name, set)) throw new WriteForbiddenError(store.name, set, 'break', []);
    },
  });
  const shown = valueShown(principal, store.name, result.set, (k) => prepared.byName.get(k)?.hidden === true);
  return {
    store: store.name,
    set: result.set,
    dryRun: req.dryRun === true,
    revision: result.revision ?? null,
    changes: result.changes.map((c) => ({ key: c.key, before: show(c.before, shown(c.key)), after: show(c.after, shown(c.key)) })),
    impact,
    impactTruncated,
  };
}
