/**
 * Evaluation of EvalCommands and pipelines (the steps are described in docs/engine.md).
 *
 * Per pipeline: every command is checked first (schema, set, store; all input problems reported together), then
 * every store read is started at once (reads do not depend on the pipe), then the commands are evaluated in order.
 * Per command: empty -> store -> override -> default -> pipe -> const -> validate. Expressions and untrusted regular
 * expressions run in the sandbox, one round trip per command, and only for commands that have any.
 */
import {
  ErrorCodes,
  InputError,
  LimitError,
  SandboxUnavailableError,
  ValidationError,
  type EvalFailure,
  type FailureRule,
  type InputIssue,
} from './errors.js';
import { isArrayIndex, parseSet, keyProblem, newRecord, setOwn, truncate, type ParsedSet } from './names.js';
import { prepareSchema, prepareSchemaSteps, stringifyValue, type PreparedKey, type PreparedSchema } from './schema.js';
import { STEP, checkpoint, runInSlices, type Steps } from './slices.js';
import { declaredTypeOf } from './coerce.js';
import { viewOf } from './view.js';
import { freezeDeep, isDeepFrozen } from './frozen.js';
import { Redactor, redactorFor, secretKeys, type RedactionEntry } from './redact.js';
import type { EvalCommandInput, EvalResult, EvaluatedConfig, PipelineOutcome } from './types.js';
import type {
  Config,
  ConfigQuery,
  ConfigView,
  EngineObserver,
  ExpressionEvaluator,
  ExpressionJob,
  ExpressionResult,
  ResolvedStore,
  RunContext,
  StoreResolver,
} from './ports.js';

export interface EngineDeps {
  /** Resolves store names; required unless `defaultsOnly`. */
  stores?: StoreResolver;
  /** The sandboxed expression evaluator; required when a schema has `const`, `test`, `pattern` or `schema`. */
  expressions?: ExpressionEvaluator;
  /** Evaluate schema defaults (and overrides, pipe, const) without querying any store (`cfgu eval --defaults`). */
  defaultsOnly?: boolean;
  /** Passed with every sandbox job: who the pipeline runs for and its budget account (PipelineOptions.context). */
  context?: RunContext;
  /** Told about each command as it is evaluated (traces); never given a value. */
  observer?: EngineObserver;
}

/**
 * Bounds of one request's host-side work, checked before the work is done (413, LimitError) or as soon as an
 * expression's output is known (422, rule `const`). The server takes them from its settings (docs/engine.md).
 */
export interface EngineLimits {
  /** Most segments of a set path. */
  setDepth: number;
  /** Most store entries a pipeline reads: each command's store keys times the sets of its hierarchy, summed. */
  lookups: number;
  /** Longest `const` template, in UTF-8 bytes. */
  templateBytes: number;
  /** Most expression parts (`{{ }}`, `<% %>`) in one `const` template. */
  templateExpressions: number;
  /** Largest value one `const` may compute, in UTF-8 bytes. */
  valueBytes: number;
  /** Largest total of the values computed by `const` that a request holds at once (the pipe carries them), in bytes. */
  outputBytes: number;
}

export const DEFAULT_ENGINE_LIMITS: Readonly<EngineLimits> = Object.freeze({
  setDepth: 32,
  lookups: 250_000,
  templateBytes: 64 * 1024,
  templateExpressions: 256,
  valueBytes: 1024 * 1024,
  outputBytes: 4 * 1024 * 1024,
});

export interface PipelineOptions {
  /** A result to pipe into the first command (the CLI's stdin). */
  pipe?: EvalResult;
  /** Who the pipeline runs for and its budget account: passed with every sandbox job (queueing, request budget). */
  context?: RunContext;
  /** Limits of this request; DEFAULT_ENGINE_LIMITS for any left out. */
  limits?: Partial<EngineLimits>;
}

/** What one request has spent of its output limits. */
interface OutputBudget {
  limits: EngineLimits;
  /** UTF-8 sizes of const values, by the evaluated entry that holds them (entries travel by reference in the pipe). */
  sizes: WeakMap<EvaluatedConfig, number>;
  /** Set when a limit was hit: the commands after this one are not evaluated. */
  exceeded: boolean;
  /**
   * Entries whose value a `const` computed from a hidden key's (redact.ts, secretKeys). Kept for the rest of the
   * pipeline: a later command may shadow the hidden key the const read, but the const's value stays a secret.
   */
  tainted: WeakSet<EvaluatedConfig>;
}

function resolveLimits(limits: Partial<EngineLimits> | undefined): EngineLimits {
  const out = { ...DEFAULT_ENGINE_LIMITS };
  for (const name of Object.keys(out) as Array<keyof EngineLimits>) {
    const v = limits?.[name];
    if (typeof v === 'number' && v >= 0) out[name] = v;
  }
  return out;
}

const utf8Length = (text: string): number => Buffer.byteLength(text, 'utf8');

/** Segments of a set path as parseSet counts them, without building its hierarchy (which grows with depth squared). */
function setDepth(input: unknown): number {
  if (typeof input !== 'string') return 0;
  let path = input.trim();
  if (path.startsWith('/')) path = path.slice(1);
  if (path.endsWith('/')) path = path.slice(0, -1);
  if (path === '') return 0;
  let n = 1;
  for (let i = path.indexOf('/'); i !== -1; i = path.indexOf('/', i + 1)) n++;
  return n;
}

/** A command after its input was checked. */
export interface CheckedCommand {
  index: number;
  schema: PreparedSchema;
  set: ParsedSet;
  store: ResolvedStore | undefined;
  overrides: Record<string, unknown>;
}

/**
 * Told about each command of a pipeline once it is evaluated, with the store's whole answer and every failure so far
 * (explain.ts). Internal to the engine: evaluatePipeline passes none, and the export path does nothing more for it.
 */
export interface CommandWitness {
  evaluated(command: CheckedCommand, stored: readonly Config[], evaluated: Pick<Evaluated, 'byIndex' | 'result'>, failures: readonly EvalFailure[]): void;
}

/** Runs the pipeline; throws InputError, UnknownStoreError, StoreUnavailableError or ValidationError. */
export function evaluatePipeline(commands: readonly EvalCommandInput[], deps: EngineDeps, options: PipelineOptions = {}): Promise<PipelineOutcome> {
  return runPipeline(commands, deps, options, undefined);
}

/** evaluatePipeline, telling `witness` about each command as it is evaluated (explain.ts). */
export async function runPipeline(
  commands: readonly EvalCommandInput[],
  deps: EngineDeps,
  options: PipelineOptions,
  witness: CommandWitness | undefined,
): Promise<PipelineOutcome> {
  const limits = resolveLimits(options.limits);
  // Checking and preparing a large schema, and evaluating it, are done in slices of the event loop (slices.ts).
  const checked = await runInSlices(checkCommands(commands, deps, limits));
  const budget: OutputBudget = { limits, sizes: new WeakMap(), exceeded: false, tainted: new WeakSet() };
  // Every sandbox job of this pipeline carries the request's context (its client for queueing, its budget account).
  if (options.context) deps = { ...deps, context: options.context };
  const backupStores = new Set<string>();
  // Start every store read now: reads depend only on the command, not on the pipe.
  const reads = checked.map((c) => readStore(c, backupStores));
  // A rejected read is awaited below in order; keep Node from reporting the others as unhandled meanwhile.
  for (const r of reads) r.catch(() => undefined);

  const failures: EvalFailure[] = [];
  let last: Evaluated | undefined;
  for (const command of checked) {
    const stored = await reads[command.index]!;
    // The record of the command before is made only here, when a command follows it (Evaluated).
    const piped = last ? last.result : options.pipe;
    last = deps.observer
      ? await deps.observer.command({ index: command.index, store: command.store?.name, keys: command.schema.keys.length }, () =>
          evaluateChecked(command, stored, piped, deps, failures, budget),
        )
      : await evaluateChecked(command, stored, piped, deps, failures, budget);
    witness?.evaluated(command, stored, last, failures);
    if (budget.exceeded) break;
  }
  if (failures.length) throw new ValidationError(failures);
  if (!last) return { result: options.pipe ?? {}, backupStores: [...backupStores] };
  return new Outcome(last, [...backupStores]);
}

function* checkCommands(commands: readonly EvalCommandInput[], deps: EngineDeps, limits: EngineLimits): Steps<CheckedCommand[]> {
  if (!Array.isArray(commands) || commands.length === 0) {
    throw new InputError(ErrorCodes.INVALID_INPUT, 'a pipeline must be a non-empty array of commands', [
      { path: '', message: 'expected a non-empty array of commands' },
    ]);
  }
  const issues: InputIssue[] = [];
  const checked: CheckedCommand[] = [];
  let firstStoreError: unknown;
  for (let index = 0; index < commands.length; index++) {
    const command = commands[index]!;
    if (!command || typeof command !== 'object' || Array.isArray(command)) {
      issues.push({ path: `/${index}`, message: `command ${index} must be an object` });
      continue;
    }
    // Limits first: over one, the request is 413 whatever else is wrong with it, and nothing costly has run.
    const depth = setDepth(command.set);
    if (depth > limits.setDepth) throw new LimitError(`command ${index}: the set path has ${depth} segments; the limit is ${limits.setDepth}`);
    let schema: PreparedSchema | undefined;
    try {
      schema = yield* prepareSchemaSteps(command.schema, `/${index}/schema`);
    } catch (e) {
      // Nesting is bounded before any recursive step (schema.ts), so nothing else here is the client's fault.
      if (e instanceof InputError) issues.push(...e.issues);
      else throw e;
    }
    if (schema) checkTemplates(index, schema, limits);
    const set = parseSet(command.set ?? '');
    if ('problem' in set) issues.push({ path: `/${index}/set`, message: set.problem });
    const overrides = command.configs ?? {};
    if (typeof overrides !== 'object' || overrides === null || Array.isArray(overrides)) {
      issues.push({ path: `/${index}/configs`, message: '`configs` must be an object of key -> value' });
    }
    let store: ResolvedStore | undefined;
    if (!deps.defaultsOnly) {
      if (!deps.stores) throw new InputError(ErrorCodes.INVALID_INPUT, 'no stores are configured');
      try {
        store = deps.stores.resolve(command.store);
      } catch (e) {
        firstStoreError ??= e;
      }
    }
    if (schema && !('problem' in set)) checked.push({ index, schema, set, store, overrides: overrides as Record<string, unknown> });
  }
  let lookups = 0;
  for (const c of checked) if (c.store) lookups += c.set.hierarchy.length * c.schema.storeKeys.length;
  if (lookups > limits.lookups) {
    throw new LimitError(`the pipeline reads ${lookups} store entries (each command's keys times the sets of its hierarchy); the limit is ${limits.lookups}`);
  }
  if (issues.length) {
    throw new InputError(
      issues.some((i) => /\/schema/.test(i.path)) ? ErrorCodes.INVALID_SCHEMA : issues.some((i) => /\/set$/.test(i.path)) ? ErrorCodes.INVALID_SET : ErrorCodes.INVALID_INPUT,
      issues.length === 1 ? issues[0]!.message : `${issues.length} problems in the request`,
      issues,
    );
  }
  if (firstStoreError) throw firstStoreError;
  return checked;
}

function checkTemplates(index: number, schema: PreparedSchema, limits: EngineLimits): void {
  for (const p of schema.keys) {
    if (!p.isConst) continue;
    if (p.templateBytes > limits.templateBytes) {
      throw new LimitError(`command ${index}: the \`const\` of key "${truncate(p.key)}" is ${p.templateBytes} bytes long; the limit is ${limits.templateBytes}`);
    }
    if (p.templateExpressions > limits.templateExpressions) {
      throw new LimitError(
        `command ${index}: the \`const\` of key "${truncate(p.key)}" has ${p.templateExpressions} expressions; the limit is ${limits.templateExpressions}`,
      );
    }
  }
}

/**
 * The store queries of a prepared schema for one set path, made once and frozen: a schema's key list and a set's
 * hierarchy are fixed, so a repeated request (the body cache hands out the same prepared schema) asks with the same
 * array. The in-process stores answer a frozen batch they have answered before from a memo while their data is
 * unchanged (src/stores/common.ts, AnswerMemo). One set path is kept per schema: a schema is nearly always asked for
 * with one set, and the array is about as large as the prepared schema itself.
 */
const schemaQueries = new WeakMap<PreparedSchema, { set: string; queries: readonly ConfigQuery[] }>();

function queriesOf(schema: PreparedSchema, set: ParsedSet): readonly ConfigQuery[] {
  const known = schemaQueries.get(schema);
  if (known && known.set === set.path) return known.queries;
  const queries: ConfigQuery[] = [];
  for (const s of set.hierarchy) for (const key of schema.storeKeys) queries.push(Object.freeze({ set: s, key }));
  schemaQueries.set(schema, { set: set.path, queries: Object.freeze(queries) });
  return queries;
}

async function readStore(command: CheckedCommand, backupStores: Set<string>): Promise<readonly Config[]> {
  const { store, schema, set } = command;
  if (!store || schema.storeKeys.length === 0) return [];
  const answer = await store.read(queriesOf(schema, set));
  if (answer.fromBackup) backupStores.add(store.name);
  return answer.configs;
}

/**
 * A command's evaluation (steps 1-5, then const and validate):
 * - `byIndex`: the entry the result holds for each schema key, by the key's position (PreparedKey.index);
 * - `ordered`: the result's entries in the order `Object.keys(result)` gives, when no key is an array index (then that
 *   order is the order the keys were set in); undefined otherwise;
 * - `result`: the record itself, made when first asked for.
 * The export walks `ordered` (export.ts) and the checks reach entries through `byIndex`, so for a command without a
 * pipe the record is never made on the way to `POST /export`'s answer. Making a 1,000-key record (a hash table,
 * names.ts, newRecord), enumerating it and looking every key up again took about a third of such an export's time.
 * The steps after evaluateValues change an entry's fields, never which entry a key holds, so all three stay true;
 * `upsert`, which replaces entries, uses only the record.
 */
class Evaluated {
  private record: EvalResult | undefined;

  constructor(
    readonly byIndex: readonly EvaluatedConfig[],
    readonly ordered: readonly EvaluatedConfig[] | undefined,
    record: EvalResult | undefined,
  ) {
    this.record = record;
  }

  get result(): EvalResult {
    if (!this.record) {
      // Only a command without a pipe comes without its record, and then `byIndex` is in schema order.
      const record = newRecord<EvaluatedConfig>(this.byIndex.length);
      for (const e of this.byIndex) setOwn(record, e.key, e);
      this.record = record;
    }
    return this.record;
  }
}

/**
 * Step 2's choice for each schema key, by position: the config of the deepest set of the hierarchy holding a non-empty
 * value, or undefined. A pure function of the schema, the set path and the store's answer; for a frozen answer (the
 * in-process stores hand out the same frozen answer while their data is unchanged, src/stores/common.ts AnswerMemo)
 * it is kept with the answer, so a repeated request skips the walk. A network store's answer is new each time and
 * is walked each time.
 */
const winnersByAnswer = new WeakMap<readonly Config[], { schema: PreparedSchema; set: string; winners: ReadonlyArray<Config | undefined> }>();

function storeWinners(schema: PreparedSchema, set: ParsedSet, stored: readonly Config[]): ReadonlyArray<Config | undefined> {
  const frozen = Object.isFrozen(stored);
  const known = frozen ? winnersByAnswer.get(stored) : undefined;
  if (known && known.schema === schema && known.set === set.path) return known.winners;
  const depth = new Map<string, number>();
  set.hierarchy.forEach((s, i) => depth.set(s, i));
  const winners = new Array<Config | undefined>(schema.keys.length);
  // Depth of the set each key's value came from so far (-1: none yet).
  const best = new Int32Array(schema.keys.length).fill(-1);
  for (const c of stored) {
    if (c.value === '') continue;
    const p = schema.byName.get(c.key);
    if (!p || p.isConst || p.isLazy) continue;
    const d = depth.get(c.set);
    if (d === undefined) continue;
    if (best[p.index]! < d) {
      best[p.index] = d;
      winners[p.index] = c;
    }
  }
  if (frozen) winnersByAnswer.set(stored, { schema, set: set.path, winners });
  return winners;
}

/**
 * A pipeline's outcome whose record is made only when read (Evaluated). A class, so that the getter holds nothing
 * but the last command's evaluation: a getter written in evaluatePipeline's object literal kept the whole call's
 * scope (its reads, budget and failures) alive with the outcome, and the 1,000-key benchmark then ran five times as
 * many full garbage collections. `result` and `ordered` are getters of the class: callers read them (none spreads an
 * outcome).
 */
class Outcome implements PipelineOutcome {
  constructor(
    private readonly last: Evaluated,
    readonly backupStores: string[],
  ) {}

  get result(): EvalResult {
    return this.last.result;
  }

  get ordered(): readonly EvaluatedConfig[] | undefined {
    return this.last.ordered;
  }
}

/** Steps 1-5: empty, store, override, default, pipe. Pure; in steps (slices.ts), a checkpoint every STEP keys. */
function* evaluateValues(
  command: CheckedCommand,
  stored: readonly Config[],
  pipe: EvalResult | undefined,
  failures: EvalFailure[],
): Steps<Evaluated> {
  const { schema, set, overrides, index } = command;
  const n = schema.keys.length;
  // The entries by the key's position in the schema (PreparedKey.index).
  const entries: EvaluatedConfig[] = new Array<EvaluatedConfig>(n);
  // 1. empty, 2. store: each key starts empty or with the value its store step chose (storeWinners).
  const winners = stored.length ? storeWinners(schema, set, stored) : undefined;
  for (let i = 0; i < n; i++) {
    if (i % STEP === STEP - 1) yield;
    const p = schema.keys[i]!;
    const w = winners?.[i];
    entries[i] = w
      ? { key: p.key, value: w.value, origin: 'store', cfgu: p.cfgu, set: w.set }
      : { key: p.key, value: '', origin: 'empty', cfgu: p.cfgu, set: set.path };
  }
  // 3. override
  const overridden = Object.keys(overrides);
  for (let i = 0; i < overridden.length; i++) {
    if (i % STEP === STEP - 1) yield;
    const key = overridden[i]!;
    const p = schema.byName.get(key);
    if (!p) {
      const problem = keyProblem(key);
      failures.push({
        command: index,
        key,
        rule: 'override',
        message: problem ? `override for an invalid key: ${problem}` : `override for key "${truncate(key)}", which the command's schema does not declare`,
      });
      continue;
    }
    if (p.isConst) {
      failures.push({ command: index, key, rule: 'override', message: `key "${key}" is computed by \`const\` and cannot be overridden` });
      continue;
    }
    let text: string;
    try {
      text = stringifyValue(overrides[key]);
    } catch {
      // JSON.stringify overflows the stack on a value nested too deeply (the body parser does not): a bad override.
      failures.push({ command: index, key, rule: 'override', message: `the override for key "${key}" cannot be stored: it is nested too deeply` });
      continue;
    }
    const e = entries[p.index]!;
    e.value = text;
    e.origin = 'override';
    e.set = set.path;
  }
  // 4. default
  for (let i = 0; i < n; i++) {
    if (i % STEP === STEP - 1) yield;
    const p = schema.keys[i]!;
    const e = entries[i]!;
    if (e.origin === 'empty' && p.defaultText !== undefined) {
      e.value = p.defaultText;
      e.origin = 'default';
    }
  }
  // 5. pipe: the piped result's keys in its order, then this command's other keys in schema order.
  if (!pipe) return new Evaluated(entries, schema.keysInOrder ? entries : undefined, undefined);
  const pipeKeys = Object.keys(pipe);
  const merged: EvalResult = newRecord(pipeKeys.length + n);
  const byIndex = entries.slice();
  const ordered: EvaluatedConfig[] = [];
  let inOrder = schema.keysInOrder;
  for (let i = 0; i < pipeKeys.length; i++) {
    if (i % STEP === STEP - 1) yield;
    const key = pipeKeys[i]!;
    const piped = pipe[key]!;
    const p = schema.byName.get(key);
    const e = p ? (byIndex[p.index] = pipeWinner(piped, entries[p.index]!)) : piped;
    setOwn(merged, key, e);
    ordered.push(e);
    if (inOrder && isArrayIndex(key)) inOrder = false;
  }
  for (let i = 0; i < entries.length; i++) {
    if (i % STEP === STEP - 1) yield;
    const e = entries[i]!;
    if (Object.prototype.hasOwnProperty.call(merged, e.key)) continue;
    setOwn(merged, e.key, e);
    ordered.push(e);
  }
  return new Evaluated(byIndex, inOrder ? ordered : undefined, merged);
}

/** The pipe's merge rule for a key both results hold. */
export function pipeWinner(piped: EvaluatedConfig, current: EvaluatedConfig): EvaluatedConfig {
  if (piped.origin === 'empty') return current;
  if (current.origin === 'empty') return piped;
  if (current.origin === 'default' && piped.origin !== 'default') return piped;
  return current;
}

interface PlannedCheck {
  key: string;
  rule: FailureRule;
  /** For `test`: the index within the key's own test list. */
  testIndex: number;
}

function sandboxPatternExpression(pattern: string): string {
  return `new RegExp(${JSON.stringify(pattern)}).test($.storedValue)`;
}

function sandboxSchemaExpression(schema: Record<string, unknown>): string {
  return `JSONSchema.validate(${JSON.stringify(schema)}, $.value)`;
}

/**
 * What every sandbox job of one schema shares, made once per prepared schema (prepared schemas are themselves cached by
 * text and identity, schema.ts): the declarations sent as `input.schema.keys`, the consts in dependency order, and
 * each key's checks (pattern, schema, tests) with their plan. Frozen, so that the job wire (src/expressions/wire/job-wire.ts)
 * may remember their JSON text by identity; the declarations only when every Cfgu in them was deep-frozen already
 * (request bodies are), as freezing them here would freeze a caller's objects.
 */
interface SchemaStatics {
  keys: Record<string, unknown>;
  consts: ExpressionJob['consts'];
  checks: Map<string, { test: ExpressionJob['tests'][number]; plan: PlannedCheck[] }>;
}

const schemaStatics = new WeakMap<PreparedSchema, SchemaStatics>();

function* staticsOf(schema: PreparedSchema): Steps<SchemaStatics> {
  let statics = schemaStatics.get(schema);
  if (statics) return statics;
  const keys: Record<string, unknown> = {};
  let allFrozen = true;
  for (let i = 0; i < schema.keys.length; i++) {
    if (i % STEP === STEP - 1) yield;
    const p = schema.keys[i]!;
    setOwn(keys, p.key, p.cfgu);
    if (allFrozen && !isDeepFrozen(p.cfgu)) allFrozen = false;
  }
  if (allFrozen) freezeDeep(keys);
  const checks: SchemaStatics['checks'] = new Map();
  for (let i = 0; i < schema.keys.length; i++) {
    if (i % STEP === STEP - 1) yield;
    const p = schema.keys[i]!;
    const expressions: string[] = [];
    const plan: PlannedCheck[] = [];
    if (p.pattern !== undefined) {
      expressions.push(sandboxPatternExpression(p.pattern));
      plan.push({ key: p.key, rule: 'pattern', testIndex: 0 });
    }
    if (p.jsonSchema !== undefined) {
      expressions.push(sandboxSchemaExpression(p.jsonSchema));
      plan.push({ key: p.key, rule: 'schema', testIndex: 0 });
    }
    p.tests.forEach((t, i) => {
      expressions.push(t);
      plan.push({ key: p.key, rule: 'test', testIndex: i });
    });
    if (expressions.length) checks.set(p.key, { test: freezeDeep({ key: p.key, expressions }), plan });
  }
  statics = {
    keys,
    consts: freezeDeep(schema.constOrder.map((key) => ({ key, template: schema.byName.get(key)!.cfgu.const! }))),
    checks,
  };
  schemaStatics.set(schema, statics);
  return statics;
}

async function evaluateChecked(
  command: CheckedCommand,
  stored: readonly Config[],
  pipe: EvalResult | undefined,
  deps: EngineDeps,
  failures: EvalFailure[],
  budget: OutputBudget,
): Promise<Evaluated> {
  const from = failures.length;
  const evaluated = await runInSlices(evaluateValues(command, stored, pipe, failures));
  await computeAndValidate(command, evaluated, deps, failures, { only: undefined, required: true }, budget);
  sortFailures(failures, from, command.schema);
  return evaluated;
}

/** Order a command's failures by the schema's key order (undeclared keys first), stable otherwise. */
function sortFailures(failures: EvalFailure[], from: number, schema: PreparedSchema): void {
  if (failures.length - from < 2) return;
  const position = new Map(schema.keys.map((p, i) => [p.key, i]));
  const mine = failures.splice(from).map((f, i) => ({ f, i, at: position.get(f.key) ?? -1 }));
  mine.sort((a, b) => a.at - b.at || a.i - b.i);
  failures.push(...mine.map((m) => m.f));
}

interface ValidateScope {
  /** Validate only these keys (upsert); all declared keys when undefined. */
  only: Set<string> | undefined;
  /** Whether `required` is checked. */
  required: boolean;
}

/** Steps 6-7: const and validate. Mutates `result` with const values; pushes failures. */
async function computeAndValidate(
  command: CheckedCommand,
  evaluated: Pick<Evaluated, 'byIndex' | 'result'>,
  deps: EngineDeps,
  failures: EvalFailure[],
  scope: ValidateScope,
  budget: OutputBudget,
): Promise<void> {
  const { schema, index } = command;
  const { byIndex } = evaluated;
  for (const [key, cycle] of schema.constCycles) {
    failures.push({ command: index, key, rule: 'const', message: `\`const\` expressions form a cycle: ${cycle}` });
  }
  const inScope = (p: PreparedKey) => (scope.only ? scope.only.has(p.key) : true);

  // Plan the sandbox work: consts in order, then for each present key its pattern, schema and tests (staticsOf).
  const statics = schemaStatics.get(schema) ?? (await runInSlices(staticsOf(schema)));
  let consts = statics.consts;
  const tests: ExpressionJob['tests'] = [];
  const plans = new Map<string, PlannedCheck[]>();
  for (const p of statics.checks.size ? schema.keys : []) {
    if (!inScope(p)) continue;
    const check = statics.checks.get(p.key);
    if (!check) continue;
    const e = byIndex[p.index]!;
    const present = e.origin !== 'empty' || (p.isConst && !schema.constCycles.has(p.key));
    if (!present) continue;
    tests.push(check.test);
    plans.set(p.key, check.plan);
  }

  // Upsert validates only assigned values: consts are worth computing only when a check may read them.
  if (scope.only && tests.length === 0) consts = [];
  const failedConsts = new Set<string>();
  if (consts.length || tests.length) {
    if (!deps.expressions) throw new SandboxUnavailableError('this schema uses expressions, but no expression evaluator is configured');
    const { result } = evaluated;
    const resultKeys = Object.keys(result);
    const configs = newRecord<ConfigView>(resultKeys.length);
    for (const key of resultKeys) setOwn(configs, key, viewOf(result[key]!));
    const job: ExpressionJob = {
      input: {
        store: { type: command.store?.type ?? '' },
        set: { path: command.set.path, hierarchy: command.set.hierarchy },
        schema: { keys: statics.keys },
      },
      configs,
      consts,
      tests,
    };
    const outcome: ExpressionResult = await deps.expressions.run(job, deps.context);
    // Output limits: what this job computes, plus the const values the request already holds from earlier commands.
    const computing = new Set(consts.map((c) => c.key));
    let held = 0;
    for (const key of Object.keys(result)) {
      const e = result[key]!;
      if (e.origin === 'const' && !computing.has(key)) held += budget.sizes.get(e) ?? utf8Length(e.value);
    }
    // Messages from the sandbox may quote any value the expressions could read: hidden values are redacted from them
    // (redact.ts). The redactor is built once the const values are known, and only when there is a message.
    let redactor: Redactor | undefined;
    const clean = (message: string | undefined): string | undefined =>
      message === undefined ? undefined : (redactor ??= redactorFor(redactionEntries(result, budget.tainted))).redact(message);
    const constMessages = new Map<string, string>();
    for (const c of outcome.consts) {
      const e = result[c.key];
      if (!e) continue;
      if (!c.ok) {
        failedConsts.add(c.key);
        constMessages.set(c.key, c.message);
        continue;
      }
      const size = utf8Length(c.value);
      const over = outputProblem(c.key, size, held, budget);
      if (over) {
        budget.exceeded = true;
        failedConsts.add(c.key);
        failures.push({ command: index, key: c.key, rule: 'const', message: over });
        continue;
      }
      held += size;
      budget.sizes.set(e, size);
      e.value = c.value;
      e.origin = 'const';
      e.set = command.set.path;
    }
    if (consts.length) markTainted(result, budget.tainted);
    for (const [key, message] of constMessages) {
      failures.push({ command: index, key, rule: 'const', message: `\`const\` of key "${key}" failed: ${clean(message)}` });
    }
    for (const t of outcome.tests) {
      if (t.ok || failedConsts.has(t.key)) continue;
      const check = plans.get(t.key)?.[t.index];
      if (!check) continue;
      failures.push({ command: index, key: t.key, rule: check.rule, message: checkMessage(check, t.kind, clean(t.message), schema.byName.get(t.key)!) });
    }
  }

  // Host-side checks: required and enum (no untrusted code involved). A key with neither has nothing to check.
  for (let i = 0; i < schema.keys.length; i++) {
    if (i % STEP === STEP - 1) await checkpoint();
    const p = schema.keys[i]!;
    if ((!p.required && !p.enumRule) || !inScope(p)) continue;
    const e = byIndex[p.index]!;
    if (e.origin === 'empty') {
      if (scope.required && p.required) {
        failures.push({ command: index, key: p.key, rule: 'required', message: `key "${p.key}" is required but has no value` });
      }
      continue;
    }
    if (p.enumRule && !p.enumRule.accepts(e.value, declaredTypeOf(e.cfgu))) {
      failures.push({
        command: index,
        key: p.key,
        rule: 'enum',
        message: `the value of key "${p.key}" is not one of the allowed values: ${truncate(p.enumRule.items.map((v) => JSON.stringify(v)).join(', '), 200)}`,
      });
    }
  }
}

/** The result's entries as redaction sees them. */
function redactionEntries(result: EvalResult, tainted: WeakSet<EvaluatedConfig>): RedactionEntry[] {
  return Object.keys(result).map((key) => {
    const e = result[key]!;
    return { key, text: e.value, origin: e.origin, cfgu: e.cfgu as RedactionEntry['cfgu'], tainted: tainted.has(e) };
  });
}

/** Remember the const entries whose value was computed from a hidden one (only worth it when a key is hidden). */
function markTainted(result: EvalResult, tainted: WeakSet<EvaluatedConfig>): void {
  const keys = Object.keys(result);
  if (!keys.some((k) => result[k]!.cfgu.hidden === true || tainted.has(result[k]!))) return;
  for (const key of secretKeys(redactionEntries(result, tainted))) {
    const e = result[key]!;
    if (e.origin === 'const' && e.cfgu.hidden !== true) tainted.add(e);
  }
}

/** Why a const value of `size` bytes goes over an output limit when the request already holds `held`, if it does. */
function outputProblem(key: string, size: number, held: number, budget: OutputBudget): string | undefined {
  const { valueBytes, outputBytes } = budget.limits;
  if (size > valueBytes) return `the value of \`const\` of key "${key}" is ${size} bytes; the limit is ${valueBytes}`;
  if (held + size > outputBytes) {
    return `the value of \`const\` of key "${key}" brings the values computed by \`const\` in this request to ${held + size} bytes; the limit is ${outputBytes}`;
  }
  return undefined;
}

function checkMessage(check: PlannedCheck, kind: string | undefined, message: string | undefined, p: PreparedKey): string {
  const limit = kind === 'time-limit' || kind === 'memory-limit';
  switch (check.rule) {
    case 'pattern':
      return limit || kind === 'error'
        ? `the \`pattern\` check of key "${p.key}" failed: ${message ?? kind}`
        : `the value of key "${p.key}" does not match the pattern ${truncate(p.pattern ?? '', 200)}`;
    case 'schema':
      return `the value of key "${p.key}" does not match its \`schema\`: ${message ?? 'invalid'}`;
    default: {
      const source = p.tests[check.testIndex] ?? '';
      if (kind === 'falsy') return `the value of key "${p.key}" failed the test ${truncate(source, 200)}`;
      return `the test ${truncate(source, 200)} of key "${p.key}" failed: ${message ?? kind}`;
    }
  }
}

// ---------------------------------------------------------------- upsert

export interface UpsertInput {
  store: ResolvedStore;
  /** Set path; the root when absent. */
  set?: string;
  schema: unknown;
  /** Key -> new value; `""`, `null` and `undefined` delete the stored value. Non-strings are JSON-stringified. */
  values: Record<string, unknown>;
  expressions?: ExpressionEvaluator;
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
export async function upsert(input: UpsertInput): Promise<{ changes: UpsertChange[] }> {
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
  if (changes.length) await input.store.write(changes.map((c) => ({ set: set.path, key: c.key, value: c.after })));
  return { changes };
}
