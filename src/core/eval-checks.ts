/**
 * Steps 6-7 of a command's evaluation (docs/engine.md): const and validate, with the checks each schema plans for
 * the sandbox once (its statics), the output limits of const values, and the failures' messages and order.
 */
import { SandboxUnavailableError, type EvalFailure, type FailureRule } from './errors.js';
import { newRecord, setOwn, truncate } from './names.js';
import { type PreparedKey, type PreparedSchema } from './schema.js';
import { STEP, checkpoint, runInSlices, type Steps } from './slices.js';
import { declaredTypeOf } from './coerce.js';
import { viewOf } from './view.js';
import { freezeDeep, isDeepFrozen } from './frozen.js';
import { Redactor, redactorFor, secretKeys, type RedactionEntry } from './redact.js';
import type { EvalResult, EvaluatedConfig } from './types.js';
import type { Config, ConfigView, ExpressionJob, ExpressionResult } from './ports.js';
import type { CheckedCommand, EngineDeps, OutputBudget } from './eval.js';
import { evaluateValues, type Evaluated } from './eval-values.js';

const utf8Length = (text: string): number => Buffer.byteLength(text, 'utf8');

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

export async function evaluateChecked(
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
export function sortFailures(failures: EvalFailure[], from: number, schema: PreparedSchema): void {
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
export async function computeAndValidate(
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

  await checkRequiredAndEnum(command, byIndex, failures, scope, inScope);
}

/** Host-side checks: required and enum (no untrusted code involved). A key with neither has nothing to check. */
async function checkRequiredAndEnum(
  command: CheckedCommand,
  byIndex: Evaluated['byIndex'],
  failures: EvalFailure[],
  scope: ValidateScope,
  inScope: (p: PreparedKey) => boolean,
): Promise<void> {
  const { schema, index } = command;
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
