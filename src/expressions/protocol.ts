/**
 * The messages between the host, the sandbox child process and the in-isolate runtime. One request line goes to a
 * child, one response line comes back (JSON, one object per line). Pure: imports only types, so the isolate bundle and
 * the host share it.
 */
import type { ConfigView, ConstOutcome, ExpressionFailureKind, ExpressionJob, ExpressionResult, TestOutcome } from './types.js';

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

/** `$.labels`: always an array. */
export function labelsOf(cfgu: Record<string, unknown>): string[] {
  const label = cfgu.label;
  return label === undefined ? [] : Array.isArray(label) ? (label as string[]) : [label as string];
}

export type SandboxRequest =
  | { t: 'job'; job: WireJob }
  | { t: 'template'; template: string; context: unknown }
  | { t: 'bool'; expression: string; context: unknown }
  | { t: 'trusted'; template: string; variables: Record<string, string> };

export type SandboxResponse =
  | { t: 'job'; result: ExpressionResult }
  | { t: 'value'; ok: true; value: string | boolean }
  | { t: 'value'; ok: false; kind: ExpressionFailureKind; message: string };

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
  if (request.t !== 'job') return { t: 'value', ok: false, kind, message };
  const job = request.job;
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
