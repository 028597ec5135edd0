/**
 * Why every value is what it is (docs/explain.md): a pipeline evaluated by the engine itself, with a record kept of
 * each key of each command. The evaluation is the one `exportPipeline` runs (eval.ts, runPipeline): a witness is told
 * about each command once it is evaluated, and the expression evaluator is wrapped to keep each command's const and
 * test outcomes. Nothing here runs on the export path.
 *
 * What is shown follows the export's rules: a key whose Cfgu says `hidden: true` has its value withheld (and so have
 * its store candidates, override and default, and any const's read of it or of a const computed from it), unless the
 * caller asks for `revealHidden`. Test and const messages are the engine's own failure messages, already redacted
 * (redact.ts), whatever `revealHidden` says. A const computed from a hidden key is shown, as the export shows it.
 */
import { coerceValue, declaredTypeOf, type JsonValue } from './coerce.js';
import { ValidationError, type EvalFailure, type FailureRule } from './errors.js';
import { exportResult } from './export.js';
import { hiddenNames, type RedactionEntry } from './redact.js';
import { analyseTemplate } from './template.js';
import { stringifyValue, type PreparedKey } from './schema.js';
import { runPipeline, type CheckedCommand, type CommandWitness, type EngineDeps, type PipelineOptions } from './eval.js';
import type { EvalCommandInput, EvalResult, EvaluatedConfig, ExportedConfigs, Origin } from './types.js';
import type { Config, ConstOutcome, ExpressionEvaluator, ExpressionJob, ExpressionResult, RunContext, TestOutcome } from './ports.js';

/** Version of the explanation's shape (docs/explain.md); raised when a field changes meaning or goes away. */
export const EXPLANATION_VERSION = 1;

/** Why a value is left out: the key is hidden, or the caller may not read the set that holds it. */
export type Withheld = 'hidden' | 'scope';

/** One value the store holds for a key at one set of the command's hierarchy. */
export interface ExplainedCandidate {
  set: string;
  /**
   * `won`: the key's value came from here; `shadowed`: a set nearer the command's set holds a value too;
   * `overridden`: the nearest value, replaced by the command's override.
   */
  status: 'won' | 'shadowed' | 'overridden';
  /** The stored text; absent when withheld. */
  value?: string;
  withheld?: Withheld;
}

/** A value given by the request (an override) or by the schema (a default). */
export interface ExplainedInput {
  /** As text (a non-string as JSON text); absent when withheld. */
  value?: string;
  withheld?: Withheld;
}

/** A key a `const` template names, with the value it had when the command's consts were computed. */
export interface ExplainedRead {
  key: string;
  origin: Origin;
  value?: string;
  withheld?: Withheld;
}

export interface ExplainedConst {
  template: string;
  /** Whether the template's value became the key's value (false: it failed; see the key's `failures`). */
  computed: boolean;
  /** The keys of the command's result that the template names as whole tokens, in order of first mention. */
  reads: ExplainedRead[];
}

/** One `test` expression of a key. */
export interface ExplainedTest {
  /** Position in the key's `test` list. */
  index: number;
  expression: string;
  /** null: not run (see `skipped`). */
  passed: boolean | null;
  /** For a failed test: the engine's failure message (redacted as the export's 422 is). */
  message?: string;
  /** For a test not run: why. */
  skipped?: string;
}

/** One key of one command's result. */
export interface KeyExplanation {
  key: string;
  /** Whether this command's schema declares the key (false: carried through from an earlier command). */
  declared: boolean;
  /** Whether the key is hidden (its Cfgu says `hidden: true`): the export leaves it out. */
  hidden: boolean;
  /** The value as the pipe carries it (the stored text form); absent when withheld. */
  value?: string;
  withheld?: Withheld;
  /** The value as the export gives it (coerced to its declared type); absent for a hidden key. */
  exported?: JsonValue;
  origin: Origin;
  /** The set that supplied the value: for `store`, the set that holds it; otherwise the set of the command that gave it. */
  set: string;
  /** The value came through the pipe: from command `command`, or from the pipeline's input (null: the CLI's standard input). */
  piped?: { command: number | null };
  /** The key is `lazy`: the store is never asked for it. */
  lazy?: true;
  /** A `const` whose template reads a hidden key: exported all the same (docs/security.md). */
  derivedFromHidden?: true;
  /** Every value the store holds for the key down the hierarchy, root first. */
  candidates: ExplainedCandidate[];
  override?: ExplainedInput;
  default?: ExplainedInput;
  const?: ExplainedConst;
  tests: ExplainedTest[];
  /** Every failure of this key in this command, as the export's 422 lists them. */
  failures: Array<{ rule: FailureRule; message: string }>;
}

export interface CommandExplanation {
  command: number;
  /** The store's declared name (null: none read, e.g. defaults only). */
  store: string | null;
  set: string;
  /** The sets the command reads, root first. */
  hierarchy: string[];
  /** False when the pipeline stopped before this command (an output limit was hit). */
  evaluated: boolean;
  /** The keys of the command's result, in the export's order. */
  keys: KeyExplanation[];
}

export interface ExplainOutcome {
  version: typeof EXPLANATION_VERSION;
  /** False when the evaluation failed validation (`failures`); the explanations then go as far as it went. */
  ok: boolean;
  /** What the export answers (hidden keys left out, values coerced); null when the evaluation failed. */
  values: ExportedConfigs | null;
  /** Every failure of the pipeline, as the export's 422 lists them (empty when ok). */
  failures: EvalFailure[];
  explanations: CommandExplanation[];
  /** Stores answered from their backup. */
  backupStores: string[];
}

export interface ExplainOptions extends PipelineOptions {
  /** Show the values of hidden keys (default false: they are withheld, as the export leaves them out). */
  revealHidden?: boolean;
  /**
   * Whether the caller may read the values a set holds (the server's access check). A shadowed candidate at a set it
   * may not read is withheld (`scope`): the export would never give it. Without it every candidate is shown.
   */
  mayReadSet?: (set: string, command: number) => boolean;
}

/**
 * Evaluate a pipeline as `exportPipeline` does and explain every key of every command. A pipeline that fails
 * validation is answered (ok false, with its failures) rather than thrown; other errors (bad input, limits, an
 * unavailable store or sandbox) are thrown as the export throws them.
 */
export async function explainPipeline(commands: readonly EvalCommandInput[], deps: EngineDeps, options: ExplainOptions = {}): Promise<ExplainOutcome> {
  const recorder = new Recorder(options, deps.expressions);
  const traced: EngineDeps = { ...deps, expressions: recorder.evaluator };
  let values: ExportedConfigs | null = null;
  let failures: EvalFailure[] = [];
  let backupStores: string[] = [];
  try {
    const outcome = await runPipeline(commands, traced, options, recorder);
    values = exportResult(outcome.result);
    backupStores = outcome.backupStores;
  } catch (e) {
    if (!(e instanceof ValidationError)) throw e;
    failures = e.failures;
  }
  return { version: EXPLANATION_VERSION, ok: values !== null, values, failures, explanations: recorder.explanations(commands), backupStores };
}

/** The expression outcomes of the command being evaluated (one job per command; more are merged). */
interface Outcomes {
  jobs: ExpressionJob[];
  consts: ConstOutcome[];
  tests: TestOutcome[];
}

/** What the explanation of one command's keys reads, grouped by key once per command. */
interface CommandFacts {
  command: CheckedCommand;
  result: EvalResult;
  /** The store's values for each key, root first. */
  stored: Map<string, Config[]>;
  /** Hidden keys and the consts computed from them (redact.ts, hiddenNames). */
  secret: ReadonlySet<string>;
  /** The consts this command computed (their value is this command's). */
  computed: ReadonlySet<string>;
  /** The checks (pattern, schema, tests) the sandbox ran for each key, in the job's order. */
  checks: Map<string, readonly string[]>;
  /** The failed checks of each key, in the order the sandbox reported them. */
  failedChecks: Map<string, TestOutcome[]>;
  /** This command's failures of each key, in the engine's order. */
  failures: Map<string, EvalFailure[]>;
  /** The keys of the command's result, as a set (what a const's template may name), made once per command. */
  names: ReadonlySet<string>;
}

function groupBy<T>(items: Iterable<T>, keyOf: (item: T) => string): Map<string, T[]> {
  const map = new Map<string, T[]>();
  for (const item of items) {
    const k = keyOf(item);
    const list = map.get(k);
    if (list) list.push(item);
    else map.set(k, [item]);
  }
  return map;
}

/** Keeps the record of each command as the pipeline runs (the engine's witness). */
class Recorder implements CommandWitness {
  readonly evaluator: ExpressionEvaluator | undefined;
  private readonly done: CommandExplanation[] = [];
  private pending: Outcomes = { jobs: [], consts: [], tests: [] };
  private failuresSeen = 0;
  /** The command each entry's value came from (entries travel by reference down the pipe); null: the pipeline's input. */
  private readonly from = new WeakMap<EvaluatedConfig, number | null>();
  /** Consts computed from a hidden key, kept for the rest of the pipeline as the engine keeps them (eval.ts). */
  private readonly tainted = new WeakSet<EvaluatedConfig>();

  constructor(
    private readonly options: ExplainOptions,
    inner: ExpressionEvaluator | undefined,
  ) {
    if (options.pipe) for (const key of Object.keys(options.pipe)) this.from.set(options.pipe[key]!, null);
    this.evaluator = inner && recordingEvaluator(inner, (job, result) => this.noteJob(job, result));
  }

  private noteJob(job: ExpressionJob, result: ExpressionResult): void {
    this.pending.jobs.push(job);
    this.pending.consts.push(...result.consts);
    this.pending.tests.push(...result.tests);
  }

  evaluated(command: CheckedCommand, stored: readonly Config[], evaluated: { result: EvalResult }, failures: readonly EvalFailure[]): void {
    const mine = failures.slice(this.failuresSeen);
    this.failuresSeen = failures.length;
    const outcomes = this.pending;
    this.pending = { jobs: [], consts: [], tests: [] };
    const result = evaluated.result;
    const names = Object.keys(result);
    const entries = names.map((key) => result[key]!);
    const secret = hiddenNames(
      entries.map((e): RedactionEntry => ({ key: e.key, text: e.value, origin: e.origin, cfgu: e.cfgu as RedactionEntry['cfgu'], tainted: this.tainted.has(e) })),
    );
    for (const e of entries) if (e.origin === 'const' && e.cfgu.hidden !== true && secret.has(e.key)) this.tainted.add(e);
    const failed = groupBy(mine, (f) => f.key);
    const computed = new Set<string>();
    for (const c of outcomes.consts) {
      if (c.ok && command.schema.byName.get(c.key)?.isConst && !failed.get(c.key)?.some((f) => f.rule === 'const')) computed.add(c.key);
    }
    const hierarchy = new Map(command.set.hierarchy.map((s, i) => [s, i]));
    const byKey = groupBy(
      stored.filter((c) => c.value !== '' && hierarchy.has(c.set)),
      (c) => c.key,
    );
    for (const list of byKey.values()) list.sort((a, b) => hierarchy.get(a.set)! - hierarchy.get(b.set)!);
    const facts: CommandFacts = {
      command,
      result,
      stored: byKey,
      secret,
      computed,
      checks: new Map(outcomes.jobs.flatMap((j) => j.tests).map((t) => [t.key, t.expressions])),
      failedChecks: groupBy(
        outcomes.tests.filter((t) => !t.ok),
        (t) => t.key,
      ),
      failures: failed,
      names: new Set(names),
    };
    const keys = names.map((key) => this.explainKey(facts, key));
    for (const e of entries) if (!this.from.has(e) || computed.has(e.key)) this.from.set(e, command.index);
    this.done.push({ command: command.index, store: command.store?.name ?? null, set: command.set.path, hierarchy: [...command.set.hierarchy], evaluated: true, keys });
  }

  /** Every command of the pipeline: those evaluated, then those the pipeline stopped before. */
  explanations(commands: readonly EvalCommandInput[]): CommandExplanation[] {
    const out = this.done.slice();
    for (let i = out.length; i < commands.length; i++) {
      const c = commands[i]!;
      out.push({ command: i, store: c.store ?? null, set: typeof c.set === 'string' ? c.set : '', hierarchy: [], evaluated: false, keys: [] });
    }
    return out;
  }

  private explainKey(facts: CommandFacts, key: string): KeyExplanation {
    const { command, result } = facts;
    const reveal = this.options.revealHidden === true;
    const e = result[key]!;
    const p = command.schema.byName.get(key);
    const hidden = e.cfgu.hidden === true;
    const from = this.from.get(e);
    const piped = from !== undefined && !facts.computed.has(key);
    // Built in the order the fields are documented (docs/explain.md), which is the order JSON text shows them in.
    const out = { key, declared: p !== undefined, hidden } as KeyExplanation;
    if (hidden && !reveal) out.withheld = 'hidden';
    else out.value = e.value;
    if (!hidden) out.exported = coerceValue(e.value, declaredTypeOf(e.cfgu));
    out.origin = e.origin;
    out.set = e.set;
    if (piped) out.piped = { command: from };
    if (p?.isLazy) out.lazy = true;
    if (e.origin === 'const' && !hidden && facts.secret.has(key)) out.derivedFromHidden = true;
    // Values of this declaration (its store, override, default) are withheld when it or the winner is hidden.
    const withhold = (hidden || p?.hidden === true) && !reveal;
    const given = (value: string): ExplainedInput => (withhold ? { withheld: 'hidden' } : { value });
    out.candidates = p ? this.candidates(facts, p, e, piped, withhold) : [];
    if (p && Object.prototype.hasOwnProperty.call(command.overrides, key)) {
      let text: string | undefined;
      try {
        text = stringifyValue(command.overrides[key]);
      } catch {
        text = undefined; // nested too deeply: the engine failed it (rule `override`)
      }
      if (text !== undefined) out.override = given(text);
    }
    if (p?.defaultText !== undefined) out.default = given(p.defaultText);
    if (p?.isConst) out.const = constOf(p, result, facts.names, facts.computed.has(key), reveal);
    out.tests = p ? testsOf(p, e, facts) : [];
    out.failures = (facts.failures.get(key) ?? []).map((f) => ({ rule: f.rule, message: f.message }));
    return out;
  }

  private candidates(facts: CommandFacts, p: PreparedKey, e: EvaluatedConfig, piped: boolean, withhold: boolean): ExplainedCandidate[] {
    const found = p.isConst || p.isLazy ? undefined : facts.stored.get(p.key);
    if (!found) return [];
    const nearest = found[found.length - 1]!;
    const mayRead = this.options.mayReadSet;
    return found.map((c) => {
      const status: ExplainedCandidate['status'] = c !== nearest ? 'shadowed' : !piped && e.origin === 'store' && e.set === c.set ? 'won' : 'overridden';
      if (withhold) return { set: c.set, status, withheld: 'hidden' };
      if (status === 'shadowed' && mayRead && !mayRead(c.set, facts.command.index)) return { set: c.set, status, withheld: 'scope' };
      return { set: c.set, status, value: c.value };
    });
  }
}

/** A const's template and the keys it names, with their values (a hidden key's withheld unless revealed). */
function constOf(p: PreparedKey, result: EvalResult, names: ReadonlySet<string>, computed: boolean, reveal: boolean): ExplainedConst {
  const template = p.cfgu.const!;
  const reads = analyseTemplate(template, names).references.map((name): ExplainedRead => {
    const r = result[name]!;
    const read: ExplainedRead = { key: name, origin: r.origin };
    if (r.cfgu.hidden === true && !reveal) read.withheld = 'hidden';
    else read.value = r.value;
    return read;
  });
  return { template, computed, reads };
}

/**
 * The `test` expressions of a key and whether each passed. The sandbox runs every test of a present key (it does not
 * stop at the first failure) and reports the failed ones; the engine turns each into a failure, in the same order.
 * The key's `pattern` and `schema` checks come first in the job's list for the key, its tests last.
 */
function testsOf(p: PreparedKey, e: EvaluatedConfig, facts: CommandFacts): ExplainedTest[] {
  if (!p.tests.length) return [];
  const checks = facts.checks.get(p.key);
  const skip = (skipped: string) => p.tests.map((expression, index): ExplainedTest => ({ index, expression, passed: null, skipped }));
  if (!checks) return skip(e.origin === 'empty' ? 'the key has no value' : 'not evaluated');
  if (p.isConst && !facts.computed.has(p.key)) return skip('its `const` failed');
  const offset = checks.length - p.tests.length;
  // The key's failed checks in the order the sandbox reported them, and the failure the engine made of each.
  const failed = facts.failedChecks.get(p.key) ?? [];
  const messages = (facts.failures.get(p.key) ?? []).filter((f) => f.rule === 'pattern' || f.rule === 'schema' || f.rule === 'test');
  return p.tests.map((expression, index): ExplainedTest => {
    const at = failed.findIndex((t) => t.index === offset + index);
    if (at === -1) return { index, expression, passed: true };
    const message = messages[at]?.message;
    return message === undefined ? { index, expression, passed: false } : { index, expression, passed: false, message };
  });
}

/** The evaluator, with every job's outcome told to `note` (a command's sandbox work is one job). */
function recordingEvaluator(inner: ExpressionEvaluator, note: (job: ExpressionJob, result: ExpressionResult) => void): ExpressionEvaluator {
  return {
    async run(job: ExpressionJob, context?: RunContext) {
      const result = await inner.run(job, context);
      note(job, result);
      return result;
    },
    renderTemplate: (template, context) => inner.renderTemplate(template, context),
    evaluateBoolean: (expression, context) => inner.evaluateBoolean(expression, context),
    renderTrusted: (template, variables) => inner.renderTrusted(template, variables),
    close: () => inner.close(),
  };
}
