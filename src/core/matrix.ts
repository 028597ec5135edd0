/**
 * One schema over many sets (docs/explain.md, "Comparing sets"): for each key and each set, a cell saying whether the
 * key's value there passes the schema (and which rule it fails if not), where the value came from and what it is.
 *
 * Each set is evaluated by the engine itself, as the one-command pipeline `{ store, set, schema, configs }` run by
 * `runPipeline` (eval.ts) with a witness that keeps its result and failures (as explain.ts does, without the rest of
 * the explanation), so every rule, message and redaction is the export's. What the matrix adds is the batching:
 *   - the sets are a given list, or every set the store holds under a prefix (ResolvedStore.list);
 *   - the store is read once for all of them: every key of the schema at every set of every set's hierarchy, in one
 *     batch, and each set's evaluation is answered from that batch (no read per set);
 *   - the schema is frozen once, so each set's evaluation finds it prepared by identity (schema.ts);
 *   - the sets are evaluated a few at a time (`limits.concurrency`); each set that needs the sandbox is one job there;
 *     between two sets the event loop is given away once a slice of it is spent (slices.ts), so a large matrix never
 *     holds other requests for long.
 * Hidden values are withheld (the cell says `withheld: "hidden"`) unless the caller asks for `revealHidden`.
 */
import { ErrorCodes, InputError, LimitError, ValidationError, type EvalFailure, type FailureRule, type InputIssue } from './errors.js';
import { resolveLimits, runPipeline, type CommandWitness, type EngineDeps, type EngineLimits } from './eval.js';
import { freezeDeep, isDeepFrozen } from './frozen.js';
import { parseSet, truncate } from './names.js';
import { prepareSchema, type PreparedSchema } from './schema.js';
import { batchExtent, batchStore, readBatch, resolverOf, type Batch } from './batch-read.js';
import { eachAtMost } from './slices.js';
import type { ExpressionEvaluator, ResolvedStore, RunContext, TestOutcome } from './ports.js';
import type { ConfigSchema, EvalCommandInput, EvalResult, EvaluatedConfig, Origin } from './types.js';

/** Version of the matrix's shape (docs/server.md, "POST /matrix"); raised when a field changes meaning or goes away. */
export const MATRIX_VERSION = 1;

/**
 * A cell's state: `ok`, or the rule of the key's first failure at that set: `missing` (required, no value), `test`,
 * `enum`, `pattern`, `schema`, `const` (the template failed or went over a limit), `override` (a bad override).
 */
export type CellState = 'ok' | 'missing' | 'test' | 'enum' | 'pattern' | 'schema' | 'const' | 'override';

export interface MatrixFailure {
  rule: FailureRule;
  /** The engine's message, redacted as the export's 422 is. */
  message: string;
  /** For rule `test`: the position of the failed expression in the key's `test` list. */
  test?: number;
}

/** One key at one set. */
export interface MatrixCell {
  state: CellState;
  /** Where the value came from: `store`, `default`, `const`, `override`, or `empty` (no value). */
  origin: Origin;
  /** For origin `store`: the set that holds the value (the column's own set, or one of its ancestors). */
  set?: string;
  /** For origin `store`: the value is held by an ancestor of the column's set, not by the set itself. */
  inherited?: true;
  /** The key is hidden (its Cfgu says `hidden: true`). */
  hidden?: true;
  /** The value as text (the stored form); absent without a value and when withheld. */
  value?: string;
  withheld?: 'hidden';
  /** Every failure of the key at this set, in the engine's order (absent when `state` is `ok`). */
  failures?: MatrixFailure[];
}

export interface Matrix {
  version: typeof MATRIX_VERSION;
  /** The store's declared name. */
  store: string;
  /** The prefix listed, in normal form (absent when the sets were given). */
  prefix?: string;
  /** The sets (columns), in normal form: as given (duplicates dropped), or as listed (by path). */
  sets: string[];
  /** The schema's keys (rows), in declaration order. */
  keys: string[];
  /** `cells[k][s]`: key `keys[k]` at set `sets[s]`. */
  cells: MatrixCell[][];
  /** For each set, how many of its cells are not `ok`. */
  failed: number[];
  /** True when the store could not be read and its backup answered. */
  fromBackup: boolean;
}

export interface MatrixRequest {
  /** The store's declared name; the default store when absent. */
  store?: string;
  schema: ConfigSchema;
  /** The sets to compare (exactly one of `sets` and `prefix`). */
  sets?: readonly string[];
  /** Every set the store holds under this set path (exactly one of `sets` and `prefix`). */
  prefix?: string;
  /** Overrides, applied at every set. */
  configs?: Record<string, unknown>;
}

export interface MatrixLimits {
  /** Most sets (columns). */
  sets: number;
  /** Most cells: sets times the schema's keys. */
  cells: number;
  /** Sets evaluated at once. */
  concurrency: number;
}

export const DEFAULT_MATRIX_LIMITS: Readonly<MatrixLimits> = Object.freeze({ sets: 1000, cells: 100_000, concurrency: 4 });

export interface MatrixOptions {
  limits?: Partial<MatrixLimits>;
  /**
   * The engine's limits of each set's evaluation. `lookups` also bounds the one read of the whole matrix (keys times
   * the sets of every hierarchy) and the key names a prefix's listing may return.
   */
  engineLimits?: Partial<EngineLimits>;
  /** The sandbox context of one set's evaluation (who it runs for, its budget account); none by default. */
  context?: (set: string) => RunContext | undefined;
  /** Told the sets once they are known, before any value is read: throws to refuse them (the server's scope check). */
  authorize?: (sets: readonly string[]) => void;
  /** Show hidden values (default false: withheld). */
  revealHidden?: boolean;
}

export type MatrixDeps = Pick<EngineDeps, 'stores' | 'expressions' | 'observer'>;

/** Evaluate `request.schema` at every set of the request and answer a cell per key and set. */
export async function matrixOf(request: MatrixRequest, deps: MatrixDeps, options: MatrixOptions = {}): Promise<Matrix> {
  const limits = { ...DEFAULT_MATRIX_LIMITS, ...options.limits };
  const engineLimits = resolveLimits(options.engineLimits);
  const hasSets = request.sets !== undefined;
  if (hasSets === (request.prefix !== undefined)) {
    throw new InputError(ErrorCodes.INVALID_INPUT, 'give either `sets` (a list of set paths) or `prefix` (a set path), not both, not neither', [
      { path: '/', message: 'exactly one of `sets` and `prefix` is required' },
    ]);
  }
  if (hasSets && request.sets!.length > limits.sets) throw new LimitError(`the matrix has ${request.sets!.length} sets; the limit is ${limits.sets}`);
  // Frozen once: each set's evaluation then finds the prepared schema by identity instead of serialising it again.
  const schema = isDeepFrozen(request.schema) ? request.schema : freezeDeep(structuredClone(request.schema));
  const prepared = prepareSchema(schema, '/schema');
  const keys = prepared.keys.map((p) => p.key);
  if (!deps.stores) throw new InputError(ErrorCodes.INVALID_INPUT, 'no stores are configured');
  const store = deps.stores.resolve(request.store);

  let sets: string[];
  let prefix: string | undefined;
  if (hasSets) {
    sets = givenSets(request.sets!);
    checkCells(sets.length, keys.length, limits);
  } else {
    prefix = parsedPath(request.prefix!, '/prefix');
    sets = await listedSets(store, prefix, limits, engineLimits);
  }
  options.authorize?.(sets);
  if (!hasSets) checkCells(sets.length, keys.length, limits);
  for (const set of sets) {
    const depth = set === '' ? 0 : set.split('/').length;
    if (depth > engineLimits.setDepth) throw new LimitError(`the set path "${truncate(set)}" has ${depth} segments; the limit is ${engineLimits.setDepth}`);
  }

  const batch = await readAll(store, sets, prepared.storeKeys, engineLimits);
  // Each set's explanation is turned into its cells at once, so that only the cells are kept, not the explanations.
  const cells: MatrixCell[][] = keys.map(() => new Array<MatrixCell>(sets.length));
  const failed = sets.map(() => 0);
  const stores = resolverOf(batchStore(store, batch, 'the matrix never writes'));
  const reveal = options.revealHidden === true;
  await eachAtMost(sets, limits.concurrency, async (set, s) => {
    const context = options.context?.(set);
    const command: EvalCommandInput = { store: store.name, set, schema, ...(request.configs !== undefined ? { configs: request.configs } : {}) };
    const column = await evaluateSet(command, prepared, { ...deps, stores }, engineLimits, context);
    for (let k = 0; k < prepared.keys.length; k++) {
      const cell = cellOf(column, prepared.keys[k]!.key, set, reveal);
      cells[k]![s] = cell;
      if (cell.state !== 'ok') failed[s]!++;
    }
  });
  return { version: MATRIX_VERSION, store: store.name, ...(prefix !== undefined ? { prefix } : {}), sets, keys, cells, failed, fromBackup: batch.fromBackup };
}

function checkCells(sets: number, keys: number, limits: MatrixLimits): void {
  if (sets * keys > limits.cells) {
    throw new LimitError(`the matrix has ${sets} sets of ${keys} keys, ${sets * keys} cells; the limit is ${limits.cells}`);
  }
}

/** A set path in normal form; InputError (CFGU_INVALID_SET) at `path` otherwise. */
function parsedPath(text: unknown, path: string): string {
  const parsed = parseSet(text as string);
  if ('problem' in parsed) throw new InputError(ErrorCodes.INVALID_SET, parsed.problem, [{ path, message: parsed.problem }]);
  return parsed.path;
}

/** The given sets in normal form, each once (first mention kept); every bad one reported together. */
function givenSets(given: readonly string[]): string[] {
  const issues: InputIssue[] = [];
  const seen = new Set<string>();
  given.forEach((text, i) => {
    const parsed = parseSet(text);
    if ('problem' in parsed) issues.push({ path: `/sets/${i}`, message: parsed.problem });
    else seen.add(parsed.path);
  });
  if (issues.length) {
    throw new InputError(ErrorCodes.INVALID_SET, issues.length === 1 ? issues[0]!.message : `${issues.length} problems in the request`, issues);
  }
  return [...seen];
}

/** Every set the store holds under `prefix`, bounded: more sets than `limits.sets`, or too many key names, is 413. */
async function listedSets(store: ResolvedStore, prefix: string, limits: MatrixLimits, engineLimits: EngineLimits): Promise<string[]> {
  if (!store.list) throw new InputError(ErrorCodes.INVALID_INPUT, `store "${store.name}" cannot list its sets`);
  const listing = await store.list(prefix, { sets: limits.sets, keys: engineLimits.lookups });
  if (listing.truncated) {
    const shown = `"${truncate(prefix)}"`;
    if (listing.sets.length >= limits.sets) throw new LimitError(`the store holds more than ${limits.sets} sets under the prefix ${shown}; the limit is ${limits.sets}`);
    throw new LimitError(`the sets under the prefix ${shown} hold more than ${engineLimits.lookups} keys in all; the limit is ${engineLimits.lookups}`);
  }
  return listing.sets.map((s) => s.set);
}

/** One read of every store key at every set of every set's hierarchy (batch-read.ts), within the lookups limit. */
async function readAll(store: ResolvedStore, sets: readonly string[], storeKeys: readonly string[], engineLimits: EngineLimits): Promise<Batch> {
  const { union, lookups } = batchExtent(sets, storeKeys.length);
  if (lookups > engineLimits.lookups) {
    throw new LimitError(`the matrix reads ${lookups} store entries (the keys times every set of the sets' hierarchies); the limit is ${engineLimits.lookups}`);
  }
  return readBatch(store, union, storeKeys);
}

const STATE_OF: Record<FailureRule, CellState> = {
  required: 'missing',
  pattern: 'pattern',
  enum: 'enum',
  schema: 'schema',
  test: 'test',
  const: 'const',
  override: 'override',
  undeclared: 'override',
  lazy: 'override',
};

/** What one set's evaluation left: its result, its failures by key, and the failed checks of each key. */
interface SetOutcome {
  result: EvalResult;
  failures: Map<string, EvalFailure[]>;
  /** For each key, the indexes of its failed `test` expressions, in order. */
  failedTests: Map<string, number[]>;
}

/**
 * Evaluate one set: the engine's pipeline of one command (eval.ts, runPipeline), with a witness that keeps its result
 * and failures (a failed validation is an outcome here, not an error), and the sandbox's failed tests noted to know
 * their index. Nothing else is recorded: this is the export's evaluation, not the explanation's (explain.ts).
 */
async function evaluateSet(command: EvalCommandInput, prepared: PreparedSchema, deps: EngineDeps, limits: EngineLimits, context: RunContext | undefined): Promise<SetOutcome> {
  let result: EvalResult = {};
  let failures: readonly EvalFailure[] = [];
  const witness: CommandWitness = {
    evaluated(_command, _stored, evaluated, all) {
      result = evaluated.result;
      failures = all;
    },
  };
  const failedTests = new Map<string, number[]>();
  const expressions = deps.expressions && notingFailedTests(deps.expressions, prepared, failedTests);
  try {
    await runPipeline([command], { ...deps, ...(expressions ? { expressions } : {}) }, { limits, ...(context ? { context } : {}) }, witness);
  } catch (e) {
    if (!(e instanceof ValidationError)) throw e;
  }
  const byKey = new Map<string, EvalFailure[]>();
  for (const f of failures) {
    const list = byKey.get(f.key);
    if (list) list.push(f);
    else byKey.set(f.key, [f]);
  }
  return { result, failures: byKey, failedTests };
}

/**
 * The evaluator, noting the index of each failed `test` expression by key: in a key's checks, its `pattern` and
 * `schema` come first and its tests last (eval-checks.ts), so a test's index is its check's index less the others.
 */
function notingFailedTests(inner: ExpressionEvaluator, prepared: PreparedSchema, into: Map<string, number[]>): ExpressionEvaluator {
  return {
    async run(job, context) {
      const result = await inner.run(job, context);
      const checks = new Map(job.tests.map((t) => [t.key, t.expressions.length]));
      const failed = result.tests.filter((t: TestOutcome) => !t.ok).sort((a, b) => a.index - b.index);
      for (const t of failed) {
        const p = prepared.byName.get(t.key);
        const index = t.index - ((checks.get(t.key) ?? 0) - (p?.tests.length ?? 0));
        if (!p || index < 0) continue;
        const list = into.get(t.key);
        if (list) list.push(index);
        else into.set(t.key, [index]);
      }
      return result;
    },
    renderTemplate: (template, context) => inner.renderTemplate(template, context),
    evaluateBoolean: (expression, context) => inner.evaluateBoolean(expression, context),
    renderTrusted: (template, variables) => inner.renderTrusted(template, variables),
    close: () => inner.close(),
  };
}

/** The cell of `key` at `set`. */
function cellOf(outcome: SetOutcome, key: string, set: string, reveal: boolean): MatrixCell {
  const e: EvaluatedConfig | undefined = outcome.result[key];
  const failures = outcome.failures.get(key) ?? [];
  const origin: Origin = e?.origin ?? 'empty';
  const cell: MatrixCell = { state: failures.length ? STATE_OF[failures[0]!.rule] : 'ok', origin };
  if (e && origin === 'store') {
    cell.set = e.set;
    if (e.set !== set) cell.inherited = true;
  }
  const hidden = e?.cfgu.hidden === true;
  if (hidden) cell.hidden = true;
  if (hidden && !reveal) cell.withheld = 'hidden';
  else if (e && origin !== 'empty') cell.value = e.value;
  if (failures.length) {
    // The engine reports a key's failed tests in the order of their index.
    const failedTests = outcome.failedTests.get(key) ?? [];
    let nextTest = 0;
    cell.failures = failures.map((f): MatrixFailure => {
      if (f.rule !== 'test' || nextTest >= failedTests.length) return { rule: f.rule, message: f.message };
      return { rule: f.rule, message: f.message, test: failedTests[nextTest++]! };
    });
  }
  return cell;
}
