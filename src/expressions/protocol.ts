/**
 * The messages between the host, the sandbox child process and the in-isolate runtime. One request line goes to a
 * child, one response line comes back (JSON, one object per line). Pure: imports only types, so the isolate bundle and
 * the host share it.
 */
import type { ConstOutcome, ExpressionFailureKind, ExpressionJob, ExpressionResult, TestOutcome } from './types.js';

export type SandboxRequest =
  | { t: 'job'; job: ExpressionJob }
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
