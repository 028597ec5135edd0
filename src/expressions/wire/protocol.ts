/**
 * The messages between the host, the sandbox child process and the in-isolate runtime. One request line goes to a
 * child, one response line comes back (JSON, one object per line). Pure: imports only types, so the isolate bundle and
 * the host share it.
 */
import type { ConfigView, ConstOutcome, ExpressionFailureKind, ExpressionJob, ExpressionResult, InputView, TestOutcome } from '../../core/ports.js';

/**
 * One config on the wire: the stored string and the origin, plus the Cfgu only when it is not the command's own
 * declaration of that key (`input.schema.keys[key]`, the common case). The coerced `value` and the `labels` are
 * derived again inside the sandbox with the same functions the host uses (coerceValue, the label rule), so they are
 * never sent. This keeps a job small: a 100-key job went from 14 KB to a third of that.
 */
export type WireConfig = [storedValue: string, origin: ConfigView['origin'], cfgu?: Record<string, unknown>];

export interface WireJob {
  input: ExpressionJob['input'];
  configs: Record<string, WireConfig>;
  consts: ExpressionJob['consts'];
  tests: ExpressionJob['tests'];
}

/** Encode a job for the wire (see WireConfig). Keys may be any ConfigKey, `__proto__` included: no prototype. */
export function encodeJob(job: ExpressionJob): WireJob {
  const declared = job.input.schema.keys;
  const configs: Record<string, WireConfig> = Object.create(null);
  for (const key of Object.keys(job.configs)) {
    const v = job.configs[key]!;
    configs[key] = Object.prototype.hasOwnProperty.call(declared, key) && v.cfgu === declared[key] ? [v.storedValue, v.origin] : [v.storedValue, v.origin, v.cfgu];
  }
  return { input: job.input, configs, consts: job.consts, tests: job.tests };
}

/**
 * A job in the static-half form (job-wire.ts): `s` is the schema's static half (declarations, consts,
 * tests), `d` the job's own data. `d` is `[store, set, values, extras, order]`: `values[i]` is the i-th declared key's
 * WireConfig without its Cfgu when that is the declaration, or 0 when the job has no config for the key; `extras` are
 * the configs of undeclared keys as `[key, ...WireConfig]`; `order` is the configs' key order when it is not "declared
 * keys, then extras" (0 otherwise).
 */
export type StaticHalfJson = [keys: Record<string, unknown>, consts: WireJob['consts'], tests: WireJob['tests']];
export type DynamicHalfJson = [
  store: InputView['store'],
  set: InputView['set'],
  values: Array<WireConfig | 0>,
  extras: Array<[string, ...WireConfig]> | 0,
  order: string[] | 0,
];

/** The WireJob a static-half job stands for: the same object the whole-job form would have parsed into. */
export function wireJobOf(s: StaticHalfJson, d: DynamicHalfJson): WireJob {
  const [keys, consts, tests] = s;
  const [store, set, values, extras, order] = d;
  const configs: Record<string, WireConfig> = Object.create(null);
  const names = Object.keys(keys);
  if (order) {
    const at: Record<string, number> = Object.create(null);
    for (let i = 0; i < names.length; i++) at[names[i]!] = i;
    const extra: Record<string, WireConfig> = Object.create(null);
    if (extras) for (const e of extras) extra[e[0]] = e.slice(1) as WireConfig;
    for (const key of order) {
      const i = at[key];
      const v = i === undefined ? extra[key] : values[i];
      if (v) configs[key] = v;
    }
  } else {
    for (let i = 0; i < names.length; i++) if (values[i]) configs[names[i]!] = values[i] as WireConfig;
    if (extras) for (const e of extras) configs[e[0]] = e.slice(1) as WireConfig;
  }
  return { input: { store, set, schema: { keys } }, configs, consts, tests };
}

/** Consts and tests of a job request in either form (for failure answers). */
function jobParts(request: SandboxRequest): Pick<WireJob, 'consts' | 'tests'> | undefined {
  if (request.t === 'job') return request.job;
  if (request.t === 'j') return { consts: request.s[1], tests: request.s[2] };
  return undefined;
}

export type SandboxRequest =
  | { t: 'job'; job: WireJob }
  | { t: 'j'; s: StaticHalfJson; d: DynamicHalfJson }
  | { t: 'template'; template: string; context: unknown }
  | { t: 'bool'; expression: string; context: unknown }
  | { t: 'trusted'; template: string; variables: Record<string, string> };

export type SandboxResponse =
  /**
   * `pure`: the job read neither the clock, Math.random nor `_.uniqueId` (isolate/prelude.ts), so the same job gives
   * the same answer again; left out otherwise.
   */
  | { t: 'job'; result: ExpressionResult; pure?: true }
  | { t: 'value'; ok: true; value: string | boolean }
  | { t: 'value'; ok: false; kind: ExpressionFailureKind; message: string };

/**
 * What the child adds to every answer line: the CPU time the request took in the child process, over all its attempts (ms).
 * Added as a last property of the answer's JSON object (see withCpu), so a multi-megabyte answer is not parsed again.
 */
export interface AnswerMeta {
  cpu?: number;
}

/**
 * A child's notices besides answers: an isolate started and sealed; or the isolate was given up after the last answer
 * (disposed at its memory limit, or its heap left too full) and a new one is being made in the same process.
 */
export type ChildNotice = { t: 'ready'; startupMs?: number; renewals?: number; cpuMs?: number } | { t: 'renew' };

/** The script name the bundle is compiled under in every isolate (a code cache is looked up under it too). */
export const SANDBOX_FILENAME = 'cfgu-sandbox.js';

/**
 * What the host writes to a child when it learns of a renewal: the child drops every job line before it (those were
 * written before the host knew, never ran, and are queued again by the host).
 */
export const FLUSH_LINE = '{"t":"flush"}';

/** The answer for a job that every wall allowance cut before its CPU time reached the budget: the host is overloaded. */
export type OverloadedAnswer = { t: 'overloaded' } & AnswerMeta;

/** Append the CPU time to an answer line (a JSON object). */
export function withCpu(line: string, cpuMs: number): string {
  return line.endsWith('}') ? `${line.slice(0, -1)},"cpu":${Math.round(cpuMs * 1000) / 1000}}` : line;
}

/**
 * The time limit counts the job's own CPU time; isolated-vm's `timeout` is wall-clock time. A run cut by the wall
 * clock before its CPU time reached the budget (the host was busy) is run again from the start (a job is pure) with
 * the next, larger wall allowance. These are the allowances, as multiples of the budget.
 */
export const WALL_FACTORS = [1, 2, 4, 8, 16, 32, 64] as const;

/** The host's watchdog for one job: every attempt's wall allowance, the partial answer's, and a margin. */
export function watchdogMs(budgetMs: number): number {
  const attempts = WALL_FACTORS.reduce((sum, f) => sum + f * budgetMs, 0);
  return attempts + Math.max(50, budgetMs) + Math.max(500, budgetMs);
}

/**
 * The host's CPU watchdog for one job (ms of the child's CPU time): every attempt the child may make can use at most
 * the budget each, plus one budget for the partial answer, plus a second for what the child does between jobs (an
 * isolate renewal after an answer is counted against the next head).
 */
export function cpuWatchdogMs(budgetMs: number): number {
  return (WALL_FACTORS.length + 1) * budgetMs + 1000;
}

export const IMPORT_MESSAGE = 'dynamic import() is not available in the sandbox';
export const timeLimitMessage = (ms: number): string => `exceeded the time limit of ${ms} ms`;
export const memoryLimitMessage = (mb: number): string => `exceeded the sandbox memory limit of ${mb} MB`;

/**
 * The response for a request that could not finish: what completed is kept (`done`), everything else fails with
 * `kind` / `message`.
 */
export function failureResponse(
  request: SandboxRequest,
  kind: ExpressionFailureKind,
  message: string,
  done: { consts: ConstOutcome[]; tests: TestOutcome[]; testsDone: number } = { consts: [], tests: [], testsDone: 0 },
): SandboxResponse {
  const job = jobParts(request);
  if (!job) return { t: 'value', ok: false, kind, message };
  const consts: ConstOutcome[] = done.consts.slice();
  for (let i = consts.length; i < job.consts.length; i++) consts.push({ key: job.consts[i]!.key, ok: false, kind, message });
  const tests: TestOutcome[] = done.tests.slice();
  let n = 0;
  for (const t of job.tests) {
    t.expressions.forEach((_expr, index) => {
      if (n++ >= done.testsDone) tests.push({ key: t.key, index, ok: false, kind, message });
    });
  }
  return { t: 'job', result: { consts, tests } };
}
