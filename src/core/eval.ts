/**
 * Evaluation of EvalCommands and pipelines (the steps are described in docs/engine.md).
 *
 * Per pipeline: every command is checked first (schema, set, store; all input problems reported together), then
 * every store read is started at once (reads do not depend on the pipe), then the commands are evaluated in order.
 * Per command: empty -> store -> override -> default -> pipe -> const -> validate. Expressions and untrusted regular
 * expressions run in the sandbox, one round trip per command, and only for commands that have any.
 */
import { ErrorCodes, InputError, LimitError, ValidationError, type EvalFailure, type InputIssue } from './errors.js';
import { parseSet, truncate, type ParsedSet } from './names.js';
import { prepareSchemaSteps, type PreparedSchema } from './schema.js';
import { runInSlices, type Steps } from './slices.js';
import type { EvalCommandInput, EvalResult, EvaluatedConfig, PipelineOutcome } from './types.js';
import type { Config, ConfigQuery, EngineObserver, ExpressionEvaluator, ResolvedStore, RunContext, StoreResolver } from './ports.js';

import { evaluateChecked } from './eval-checks.js';
import type { Evaluated } from './eval-values.js';

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
export interface OutputBudget {
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

export function resolveLimits(limits: Partial<EngineLimits> | undefined): EngineLimits {
  const out = { ...DEFAULT_ENGINE_LIMITS };
  for (const name of Object.keys(out) as Array<keyof EngineLimits>) {
    const v = limits?.[name];
    if (typeof v === 'number' && v >= 0) out[name] = v;
  }
  return out;
}


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
