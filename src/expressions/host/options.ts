/**
 * What a caller of the sandbox sets and gets: the options, their defaults, the environment variables that set them
 * (`CONFIGU_EXPRESSION_*`) and the effective limits the pool runs with; and the evaluator's interface (pool.ts
 * implements it).
 */
import { ConfigurationError } from '../../core/errors.js';
import type { ExpressionEvaluator } from '../../core/ports.js';

export interface SandboxOptions {
  /** Number of child processes that run jobs (each one job at a time). Default 2. */
  workers?: number;
  /** CPU-time budget of one job (all its consts and tests), in ms. Default 100. */
  timeoutMs?: number;
  /** Heap limit of each isolate, in MB. Default 64. */
  memoryMb?: number;
  /** Children started and sealed ahead, idle, to replace one that dies or renews its isolate without a wait. Default 1. */
  spares?: number;
  /** Jobs waiting for a child, all clients together; beyond it a job is refused (SandboxBusyError). Default 1000. */
  queueLimit?: number;
  /** Jobs waiting for a child, per client. Default 100. */
  clientQueueLimit?: number;
  /** CPU time of all the jobs of one request (RunContext.usage), in ms. Default 1000. */
  requestCpuMs?: number;
  /** Sandboxes (isolates or children) that the jobs of one request may kill or make renew. Default 2. */
  requestRestarts?: number;
  /**
   * Answers of jobs kept to answer the same job of the same client again without running it (see kept-answers.ts);
   * 0 keeps none. Default 10000.
   */
  answers?: number;
  /**
   * Limit answers (time or memory) kept to answer the same job of the same client again, for 5 minutes, without
   * running it (see runaways.ts); 0 keeps none. Default 2000.
   */
  runawayMemo?: number;
}

export const DEFAULT_SANDBOX_OPTIONS: Required<SandboxOptions> = {
  workers: 2,
  timeoutMs: 100,
  memoryMb: 64,
  spares: 1,
  queueLimit: 1000,
  clientQueueLimit: 100,
  requestCpuMs: 1000,
  requestRestarts: 2,
  answers: 10_000,
  runawayMemo: 2000,
};

/** The environment variables of the sandbox options, with their bounds. */
export const ENV_OPTIONS: Array<[keyof SandboxOptions, string, number, number]> = [
  ['timeoutMs', 'CONFIGU_EXPRESSION_TIMEOUT_MS', 1, 60_000],
  ['memoryMb', 'CONFIGU_EXPRESSION_MEMORY_MB', 8, 4096],
  ['workers', 'CONFIGU_EXPRESSION_WORKERS', 1, 256],
  ['spares', 'CONFIGU_EXPRESSION_SPARES', 0, 16],
  ['queueLimit', 'CONFIGU_EXPRESSION_QUEUE_LIMIT', 1, 1_000_000],
  ['clientQueueLimit', 'CONFIGU_EXPRESSION_CLIENT_QUEUE_LIMIT', 1, 1_000_000],
  ['requestCpuMs', 'CONFIGU_EXPRESSION_REQUEST_CPU_MS', 1, 3_600_000],
  ['requestRestarts', 'CONFIGU_EXPRESSION_REQUEST_RESTARTS', 0, 1000],
  ['answers', 'CONFIGU_EXPRESSION_ANSWERS', 0, 1_000_000],
  ['runawayMemo', 'CONFIGU_EXPRESSION_RUNAWAY_MEMO', 0, 1_000_000],
];

/** Read the sandbox options from the environment (`CONFIGU_EXPRESSION_*`, see ENV_OPTIONS). */
export function expressionOptionsFromEnv(env: Record<string, string | undefined> = process.env): SandboxOptions {
  const out: SandboxOptions = {};
  for (const [option, name, min, max] of ENV_OPTIONS) {
    const raw = env[name];
    if (raw === undefined || raw.trim() === '') continue;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < min || n > max) {
      throw new ConfigurationError(`${name} must be an integer from ${min} to ${max} (got "${raw}")`, undefined, name);
    }
    out[option] = n;
  }
  return out;
}

/** The effective limits: each option an integer, at least its minimum, its default when unset. */
export function effectiveOptions(options: SandboxOptions): Required<SandboxOptions> {
  const int = (v: number | undefined, fallback: number, min: number) => Math.max(min, Math.floor(v ?? fallback));
  const d = DEFAULT_SANDBOX_OPTIONS;
  return {
    workers: int(options.workers, d.workers, 1),
    timeoutMs: int(options.timeoutMs, d.timeoutMs, 1),
    memoryMb: int(options.memoryMb, d.memoryMb, 8),
    spares: int(options.spares, d.spares, 0),
    queueLimit: int(options.queueLimit, d.queueLimit, 1),
    clientQueueLimit: int(options.clientQueueLimit, d.clientQueueLimit, 1),
    // Unset, the request's budget follows the job limit, so that one job at its limit never exhausts it.
    requestCpuMs: int(options.requestCpuMs, options.timeoutMs === undefined ? d.requestCpuMs : 10 * options.timeoutMs, 1),
    requestRestarts: int(options.requestRestarts, d.requestRestarts, 0),
    answers: int(options.answers, d.answers, 0),
    runawayMemo: int(options.runawayMemo, d.runawayMemo, 0),
  };
}

/** The sandbox evaluator: the contract plus start-up and introspection helpers. */
export interface SandboxEvaluator extends ExpressionEvaluator {
  /** Resolves when every child (spares included) has started (loaded and sealed its isolate). */
  ready(): Promise<void>;
  /** The effective limits. */
  readonly options: Readonly<Required<SandboxOptions>>;
  /** Process ids of the live children that run jobs (for tests and diagnostics). */
  pids(): number[];
  /** Isolates renewed in place (memory limit, full heap) and child processes started, since the pool started. */
  replacements(): { renewals: number; spawns: number };
  /** Process ids of the warm spares. */
  sparePids(): number[];
  /** Jobs waiting for a child, per client (for tests and diagnostics). */
  queued(): Record<string, number>;
  /** Jobs answered from kept answers without running (SandboxOptions.answers), since the pool started. */
  answersGiven(): number;
  /** Jobs answered with a remembered limit answer, without running (SandboxOptions.runawayMemo), since the pool started. */
  runawaysRefused(): number;
  /** Whether the client is in the slow lane (its jobs keep hitting limits; see runaways.ts). */
  isOffender(client: string): boolean;
  /** Static halves held by the children (estimated bytes and entries, all children together). */
  childStatics(): { bytes: number; entries: number };
}
