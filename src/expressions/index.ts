/**
 * The expression evaluator: a small pool of child processes, each owning one isolated-vm isolate with the libraries
 * loaded once and the realm sealed. The host only does IPC: one JSON line to a child per job, one line back.
 *
 * - Queue: one queue per client (RunContext.client), served by cost (see `vtime`); bounded in total and per client (a full queue
 *   refuses at once with SandboxBusyError). Each child evaluates one job at a time; a few are written ahead to it.
 * - Time: the child counts each job's own CPU time against the budget (see WALL_FACTORS); a host watchdog kills a
 *   child that stops answering at all.
 * - Memory: the isolate's memory limit; a child whose isolate was disposed answers for the job that did it and makes a
 *   new isolate in the same process ("renewal"), as does a child whose heap is left too full after a job. A child
 *   that really dies (V8 fatal error) is replaced by a new process. The warm spares take over at once meanwhile.
 * - Blame: a job fails with a limit only when it was the job running; a job at the head of a child that died without
 *   saying why (no V8 fatal report: killed from outside, say) is run once more elsewhere before it is blamed.
 * - Budget: the jobs of one request (RunContext.usage) share a CPU-time and a restart budget.
 * - Runaways (runaways.ts): a job that hit a limit is answered the same, without running, when its client sends it again
 *   within 5 minutes; clients whose jobs keep hitting limits are served through a slow lane.
 */
import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Socket } from 'node:net';
import type { Readable, Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { BudgetedLru, cacheBudget, estimateAnswerBytes } from '../core/cache-budget.js';
import { BudgetExceededError, ConfigurationError, SandboxBusyError, SandboxUnavailableError } from '../core/errors.js';
import { freezeDeep } from '../core/frozen.js';
import { ExpressionError } from './errors.js';
import { hitLimit, RunawayMemo, SlowLane, SLOW_LANE_MAX_WAIT_MS, SLOW_LANE_OTHERS_MS, SLOW_LANE_QUEUE } from './runaways.js';
import { childRecord, childStaticLimit, encodeWire, lineFor, StaticRegistry, staticLinesOf, type EncodedJob, type UnknownAnswer } from './job-wire.js';
import {
  FLUSH_LINE,
  failureResponse,
  memoryLimitMessage,
  timeLimitMessage,
  watchdogMs,
  cpuWatchdogMs,
  type AnswerMeta,
  type ChildNotice,
  type OverloadedAnswer,
  type SandboxRequest,
  type SandboxResponse,
  type WireJob,
} from './protocol.js';
import type { ExpressionEvaluator, ExpressionJob, ExpressionResult, RequestUsage, RunContext } from './types.js';

export * from './types.js';
export { ExpressionError } from './errors.js';

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
   * Answers of jobs kept to answer the same job of the same client again without running it (see `answers` in the
   * pool); 0 keeps none. Default 10000.
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

/** The repository / package root: the nearest folder above this module that holds package.json. */
function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    const up = dirname(dir);
    if (up === dir) throw new SandboxUnavailableError('the expression sandbox cannot find its files (package.json not found)');
    dir = up;
  }
}

interface Pending {
  request: SandboxRequest;
  /** The line to write; for a job, made per child at dispatch from `wire` (job-wire.ts). */
  line: string;
  wire: EncodedJob | undefined;
  client: string;
  usage: RequestUsage | undefined;
  /** Times this job was at the head of a child that died without an answer or a reason (stuck, crashed). */
  suspect: number;
  /** Handed out through the slow lane (its client is an offender, runaways.ts). */
  slow: boolean;
  resolve: (response: SandboxResponse) => void;
  reject: (error: Error) => void;
}

type ChildProc = ChildProcessByStdio<Writable, Readable, Readable>;

interface Worker {
  proc: ChildProc;
  ready: boolean;
  /** A warm spare: started and sealed, given no job until it replaces a child. */
  spare: boolean;
  /** Said it renews its isolate: its jobs went back to the queue; given none until it is ready again. */
  renewing: boolean;
  /**
   * Jobs written to this child and not yet answered, oldest first. The child answers strictly in order, so the head
   * is the one running; the others wait in the pipe and go back to the queue if the child ends.
   */
  inflight: Pending[];
  /** When the head job became the head (performance.now()). */
  headSince: number;
  /** The job answered last: the one to charge when the child then renews its isolate. */
  lastAnswered: Pending | undefined;
  watchdog: NodeJS.Timeout | undefined;
  /** The child's CPU time (ms, from /proc) at the watchdog's first look at the head job; undefined before it. */
  headCpuMs: number | undefined;
  killedForTime: boolean;
  /** Killed by the watchdog after the head job used more CPU time than any job can (see startHead): it is to blame. */
  killedForCpu: boolean;
  /** The child wrote a V8 fatal-error report: the job it was running made V8 abort the process. */
  fatalReport: boolean;
  buffer: string;
  /** The static halves this child holds (job-wire.ts); a new child starts empty. */
  statics: ReturnType<typeof childRecord>;
  /** Lines written to this child in the current tick, sent together in one write (see dispatch). */
  out: string;
}

/**
 * Jobs written ahead to one child. Pipelining removes the idle gap of a round trip between two jobs (measured: with
 * one job per child at a time, two children topped out near 6,000 jobs/s with the CPUs 30% idle).
 */
const PIPELINE_DEPTH = 4;
/**
 * A job is not written behind a head that has already run this long (ms): it waits on the host instead, where the
 * first child to free up takes it, rather than behind a possibly runaway job in one child's pipe.
 */
const SLOW_HEAD_MS = 5;
/** When the watchdog first reads a running head's CPU time (ms of wall time after the head started). */
const FIRST_CPU_LOOK_MS = 50;

/**
 * CPU time of a process so far (ms): user plus system time of all its threads, from /proc/<pid>/stat (fields 14 and
 * 15, in clock ticks of 1/100 s). Undefined where that cannot be read (not Linux, or the process is gone).
 */
function processCpuMs(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    const ms = (Number(fields[11]) + Number(fields[12])) * 10;
    return Number.isFinite(ms) ? ms : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The start of V8's fatal-error reports ("Fatal JavaScript invalid size error", "FATAL ERROR: ... out of memory"). A
 * child that wrote one was aborted by V8 while running its head job, so that job is blamed at once instead of being
 * run again on another child (which would cost a second child for one bomb).
 */
const V8_FATAL = /Fatal JavaScript|FATAL ERROR|Fatal error in/;

const MAX_START_FAILURES = 3;

/**
 * The kept answers as the process's cache budget sees them (core/cache-budget.ts): at most `max` answers, and their
 * estimated memory (from the key's length, the consts and their text, counted when an answer is kept) counts against
 * the process's cache memory ceiling.
 */
class KeptAnswers extends BudgetedLru<ExpressionResult> {
  constructor(max: number) {
    super('answers', cacheBudget, max);
  }
  get(key: string): ExpressionResult | undefined {
    return this.lru.get(key);
  }
  set(key: string, result: ExpressionResult): void {
    let chars = 0;
    for (const c of result.consts) chars += c.key.length + (c.ok ? c.value.length : 0);
    this.keep(key, result, estimateAnswerBytes(key.length, result.consts.length, chars));
  }
}

/**
 * Virtual-time cost of a sandbox that a job killed or made renew: of the order of what making a new one costs in CPU
 * time (0.4-0.7 s for an isolate or a child, more on a loaded host), rounded up so that a client sending bombs waits.
 */
const RESTART_COST_MS = 1000;
/** Virtual-time cost charged when a job is handed out (before its CPU time is known). */
const DISPATCH_COST_MS = 1;

/** The client of work that names none (CLI, `.configu` rendering, direct callers). */
const LOCAL_CLIENT = '';

class SandboxPool implements SandboxEvaluator {
  readonly options: Readonly<Required<SandboxOptions>>;
  private readonly childFile: string;
  private readonly bundleFile: string;
  private readonly workers = new Set<Worker>();
  /** Static halves of jobs by exact text (job-wire.ts). */
  private readonly registry = new StaticRegistry();
  /**
   * Answers of jobs that can be given again: a job whose every const and test passed and that read neither the clock,
   * Math.random nor `_.uniqueId` (sandbox-prelude.ts; the child says so with `pure`). The sealed realm keeps nothing
   * else from one job to the next, so such a job's answer is a function of the job alone. Keyed by the client and the job's exact wire
   * text (its static half's id, which is never reused for another text, and all of its values), so an answer is only
   * ever given to the client whose identical job produced it: no client learns, even from timing, what another one
   * evaluated. Failed jobs, limit outcomes and jobs without a client (CLI, `.configu` rendering) are never kept.
   */
  private readonly answers: KeptAnswers | undefined;
  /** Jobs answered from `answers`. */
  private given = 0;
  /**
   * Limit answers by client and exact wire text (runaways.ts): a job that hit the time or the memory limit is answered
   * the same, without running, when the same client sends the same job again within 5 minutes. Per client, as
   * `answers`: another client's identical job runs (a client cannot learn, even from timing, what another sent), and
   * no job is ever refused because of another client's runaway.
   */
  private readonly memo: RunawayMemo;
  /** Repeat offenders: clients whose jobs keep hitting limits are served last, one job at a time (runaways.ts). */
  private readonly lane = new SlowLane();
  private laneTimer: NodeJS.Timeout | undefined;
  /**
   * The client without strikes that had a job handed out last, and when; and when the last one before it that was another
   * client was. So for any client, when another one was last served is known (see protecting).
   */
  private served = '';
  private servedAt = -Infinity;
  private servedBeforeAt = -Infinity;
  /** Jobs a child answered "unknown id" for, sent again in full (diagnostics, tests). */
  staticResends = 0;
  /** One FIFO queue per client with jobs waiting. */
  private readonly queues = new Map<string, Pending[]>();
  /**
   * Each client's virtual time: the cost of the work done for it (CPU ms, plus RESTART_COST_MS per child it cost),
   * counted from when it last had work waiting. The waiting client with the least goes next, so clients share the
   * sandbox by cost, not by job count: a client whose jobs are runaways or memory bombs waits longer for each turn.
   */
  private readonly vtime = new Map<string, number>();
  private waiting = 0;
  private closed = false;
  private startFailures = 0;
  private renewals = 0;
  private spawns = 0;
  /** The tail of the last child's stderr (V8 fatal reports, start-up failures): for the operator's diagnostics. */
  lastChildStderr = '';
  private readyWaiters: Array<{ resolve: () => void; reject: (e: Error) => void }> = [];

  constructor(options: SandboxOptions) {
    const int = (v: number | undefined, fallback: number, min: number) => Math.max(min, Math.floor(v ?? fallback));
    const d = DEFAULT_SANDBOX_OPTIONS;
    this.options = {
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
    this.memo = new RunawayMemo(this.options.runawayMemo);
    this.answers = this.options.answers > 0 ? new KeptAnswers(this.options.answers) : undefined;
    const root = packageRoot();
    this.childFile = join(root, 'dist', 'sandbox-child.js');
    this.bundleFile = join(root, 'dist', 'sandbox', 'libraries.js');
    if (!existsSync(this.childFile) || !existsSync(this.bundleFile)) {
      throw new SandboxUnavailableError('the expression sandbox is not built (run `npm run build`)');
    }
    this.rebalance();
  }

  // -------------------------------------------------------------------------------------------------------------
  // Public API
  // -------------------------------------------------------------------------------------------------------------

  async run(job: ExpressionJob, context?: RunContext): Promise<ExpressionResult> {
    let wire: EncodedJob;
    try {
      wire = encodeWire(job, this.registry);
    } catch {
      throw new ExpressionError('error', 'the expression context cannot be copied into the sandbox');
    }
    const key = this.answers && context ? `${context.client}\u0000${wire.head}` : undefined;
    const known = key === undefined ? undefined : this.answers!.get(key);
    if (known) {
      this.given++;
      return known;
    }
    if (context && this.memo.size > 0) {
      const refused = this.memo.get(`${context.client}\u0000${wire.head}`);
      if (refused) return refused;
    }
    // Only consts and tests are read from the request on the host (failure answers).
    const request: SandboxRequest = { t: 'job', job: wire.job as WireJob };
    const response = await this.submit(request, context, wire);
    if (response.t === 'job') {
      const { result } = response;
      if (key !== undefined && response.pure === true && result.tests.length === 0 && result.consts.every((c) => c.ok)) {
        this.answers!.set(key, freezeDeep(result));
      }
      if (context) {
        const limit = hitLimit(result);
        if (limit) this.onRunaway(context.client, `${context.client}\u0000${wire.head}`, limit, result);
      }
      return result;
    }
    // A request-level failure (malformed job): every item fails with it.
    const failed = failureResponse(request, response.ok ? 'error' : response.kind, response.ok ? 'unexpected answer' : response.message);
    return (failed as { t: 'job'; result: ExpressionResult }).result;
  }

  answersGiven(): number {
    return this.given;
  }

  runawaysRefused(): number {
    return this.memo.given;
  }

  isOffender(client: string): boolean {
    return this.lane.isOffender(client);
  }

  /**
   * A job of `client` ran and hit a limit: its answer is remembered for the same job of the same client, and the
   * client gets a strike; a time limit of an offender closes the slow lane for its share (a sandbox it cost does so in
   * chargeRestart).
   */
  private onRunaway(client: string, key: string, limit: 'time-limit' | 'memory-limit', result: ExpressionResult): void {
    this.memo.set(key, freezeDeep(result));
    this.lane.strike(client, limit === 'memory-limit' ? 2 : 1);
    if (limit === 'time-limit' && this.lane.isOffender(client) && this.protecting(client)) this.lane.close(this.options.timeoutMs);
  }

  /** The static halves the children hold, all together: the host's record of each child counts as the child does. */
  childStatics(): { bytes: number; entries: number } {
    let bytes = 0;
    let entries = 0;
    for (const w of this.workers) {
      bytes += w.statics.calculatedSize;
      entries += w.statics.size;
    }
    return { bytes, entries };
  }

  async renderTemplate(template: string, context: unknown): Promise<string> {
    return String(this.value(await this.submit({ t: 'template', template, context })));
  }

  async evaluateBoolean(expression: string, context: unknown): Promise<boolean> {
    return this.value(await this.submit({ t: 'bool', expression, context })) === true;
  }

  async renderTrusted(template: string, variables: Record<string, string>): Promise<string> {
    const copy: Record<string, string> = {};
    for (const [k, v] of Object.entries(variables)) if (typeof v === 'string') copy[k] = v;
    return String(this.value(await this.submit({ t: 'trusted', template, variables: copy })));
  }

  ready(): Promise<void> {
    if (this.closed) return Promise.reject(new SandboxUnavailableError('the expression sandbox is closed'));
    if (this.allReady()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.readyWaiters.push({ resolve, reject });
      this.keepAlive();
    });
  }

  pids(): number[] {
    return [...this.workers].filter((w) => !w.spare).map((w) => w.proc.pid!).filter((p) => typeof p === 'number');
  }

  replacements(): { renewals: number; spawns: number } {
    return { renewals: this.renewals, spawns: this.spawns };
  }

  sparePids(): number[] {
    return [...this.workers].filter((w) => w.spare).map((w) => w.proc.pid!).filter((p) => typeof p === 'number');
  }

  queued(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const [client, q] of this.queues) out[client] = q.length;
    return out;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.laneTimer) clearTimeout(this.laneTimer);
    this.laneTimer = undefined;
    const error = new SandboxUnavailableError('the expression sandbox is closed');
    this.rejectQueued(error);
    for (const w of this.readyWaiters.splice(0)) w.reject(error);
    const exits: Promise<void>[] = [];
    for (const w of this.workers) {
      for (const job of w.inflight.splice(0)) job.reject(error);
      if (w.watchdog) clearTimeout(w.watchdog);
      exits.push(
        new Promise<void>((resolve) => {
          if (w.proc.exitCode !== null || w.proc.signalCode !== null) return resolve();
          w.proc.once('exit', () => resolve());
          w.proc.ref(); // keep the process alive until the child is gone
          w.proc.kill('SIGKILL');
        }),
      );
    }
    // The children and their pipes are unref'd: hold the event loop open until every child has really exited, so a
    // caller that awaits close() (e.g. the CLI, before it sets its exit code) is not cut short.
    const hold = setInterval(() => {}, 1 << 30);
    try {
      await Promise.all(exits);
    } finally {
      clearInterval(hold);
    }
    this.workers.clear();
    this.keepAlive();
  }

  // -------------------------------------------------------------------------------------------------------------
  // Internals
  // -------------------------------------------------------------------------------------------------------------

  private value(response: SandboxResponse): string | boolean {
    if (response.t !== 'value') throw new ExpressionError('error', 'unexpected answer from the sandbox');
    if (!response.ok) throw new ExpressionError(response.kind, response.message);
    return response.value;
  }

  private submit(request: SandboxRequest, context?: RunContext, wire?: EncodedJob): Promise<SandboxResponse> {
    if (this.closed) return Promise.reject(new SandboxUnavailableError('the expression sandbox is closed'));
    const usage = context?.usage;
    if (usage?.exceeded) return Promise.reject(usage.exceeded);
    const client = typeof context?.client === 'string' ? context.client : LOCAL_CLIENT;
    if (this.waiting >= this.options.queueLimit) {
      return Promise.reject(new SandboxBusyError('the expression sandbox has too many jobs waiting; retry later'));
    }
    if ((this.queues.get(client)?.length ?? 0) >= this.options.clientQueueLimit) {
      return Promise.reject(new SandboxBusyError('this client has too many expression jobs waiting; retry later'));
    }
    if (!this.lane.quiet && this.lane.isOffender(client) && this.protecting(client)) {
      // The slow lane holds few jobs and none for long: an offender is told to come back later rather than queued.
      const wait = this.lane.wait();
      if (wait > SLOW_LANE_MAX_WAIT_MS || (this.queues.get(client)?.length ?? 0) >= SLOW_LANE_QUEUE) {
        return Promise.reject(
          new SandboxBusyError("this client's expressions keep exceeding their limits; retry later", Math.max(1, Math.ceil(wait / 1000))),
        );
      }
    }
    let line = '';
    if (!wire) {
      try {
        line = JSON.stringify(request);
      } catch {
        return Promise.reject(new ExpressionError('error', 'the expression context cannot be copied into the sandbox'));
      }
    }
    return new Promise<SandboxResponse>((resolve, reject) => {
      this.enqueue({ request, line, wire, client, usage, suspect: 0, slow: false, resolve, reject }, false);
      if (this.activeCount() < this.options.workers && this.startFailures >= MAX_START_FAILURES) {
        // The pool gave up after start failures: try again for this new work.
        this.startFailures = 0;
        this.rebalance();
      }
      this.pump();
      this.keepAlive();
    });
  }

  private enqueue(job: Pending, front: boolean): void {
    let q = this.queues.get(job.client);
    if (!q) {
      q = [];
      // A client that comes (back) with work starts level with the least-served waiting client: credit is not saved up
      // while idle, and a debt (over that level) is kept.
      if (this.vtime.size > 10_000) this.forgetSettled();
      this.vtime.set(job.client, Math.max(this.vtime.get(job.client) ?? 0, this.vnow));
      this.queues.set(job.client, q);
    }
    if (front) q.unshift(job);
    else q.push(job);
    this.waiting++;
  }

  /** The virtual time of the last job handed out: where a client with no debt starts. */
  private vnow = 0;

  /** Add the cost of a job to its client's virtual time. */
  private charge(client: string, cost: number): void {
    this.vtime.set(client, (this.vtime.get(client) ?? 0) + cost);
  }

  /**
   * The next job: the first of the queue of the waiting client with the least virtual time (ties: the first). Offenders
   * (runaways.ts) only when no other client has a job waiting, one at a time, and while the slow lane is open.
   */
  private takeNext(): Pending | undefined {
    while (this.queues.size) {
      let client = '';
      let least = Infinity;
      let slow = false;
      if (this.lane.quiet) {
        for (const c of this.queues.keys()) {
          const v = this.vtime.get(c) ?? 0;
          if (v < least) {
            least = v;
            client = c;
          }
        }
        this.serve(client);
      } else {
        let slowClient: string | undefined;
        let slowLeast = Infinity;
        for (const c of this.queues.keys()) {
          const v = this.vtime.get(c) ?? 0;
          if (this.lane.isOffender(c)) {
            if (slowClient === undefined || v < slowLeast) {
              slowLeast = v;
              slowClient = c;
            }
          } else if (v < least) {
            least = v;
            client = c;
          }
        }
        if (least === Infinity) {
          if (slowClient === undefined) return undefined;
          if (this.protecting(slowClient)) {
            if (this.slowInFlight()) return undefined;
            const wait = this.lane.wait();
            if (wait > 0) {
              this.armLane(wait);
              return undefined;
            }
            slow = true;
          }
          client = slowClient;
          least = slowLeast;
        } else if (this.lane.strikesOf(client) === 0) this.serve(client);
      }
      const q = this.queues.get(client)!;
      const job = q.shift()!;
      job.slow = slow;
      this.waiting--;
      this.vnow = Math.max(this.vnow, least);
      // Charged a token at once (its real cost is added with its answer), so the client's other jobs wait their turn.
      this.charge(client, DISPATCH_COST_MS);
      if (!q.length) this.queues.delete(client);
      // The request ran out of budget while this job waited: it fails now, without running.
      if (job.usage?.exceeded) {
        job.reject(job.usage.exceeded);
        continue;
      }
      return job;
    }
    return undefined;
  }

  /** Whether the slow lane protects anyone from `offender`: a client without strikes has had a job handed out lately. */
  private protecting(offender: string): boolean {
    const at = this.served !== offender ? this.servedAt : this.servedBeforeAt;
    return performance.now() - at < SLOW_LANE_OTHERS_MS;
  }

  private serve(client: string): void {
    if (client !== this.served) {
      this.servedBeforeAt = this.servedAt;
      this.served = client;
    }
    this.servedAt = performance.now();
  }

  /** Whether a job handed out through the slow lane is in a child (the lane takes one at a time). */
  private slowInFlight(): boolean {
    for (const w of this.workers) for (const j of w.inflight) if (j.slow) return true;
    return false;
  }

  /** Look at the queue again when the slow lane opens (the keep-alive timer holds the process meanwhile). */
  private armLane(ms: number): void {
    if (this.laneTimer || this.closed) return;
    this.laneTimer = setTimeout(() => {
      this.laneTimer = undefined;
      this.pump();
      this.keepAlive();
    }, Math.ceil(ms) + 1);
    this.laneTimer.unref();
  }

  /** Forget the clients with nothing waiting and no debt (they would start at `vnow` anyway). */
  private forgetSettled(): void {
    for (const [client, v] of this.vtime) if (v <= this.vnow && !this.queues.has(client)) this.vtime.delete(client);
  }

  /**
   * The children are unref'd so an idle sandbox never keeps the process alive; while work is pending (queued, in
   * flight, or someone awaits ready()) one ref'd timer does.
   */
  private keepAliveTimer: NodeJS.Timeout | undefined;
  private keepAlive(): void {
    let pending = this.waiting + this.readyWaiters.length;
    if (pending === 0) for (const w of this.workers) pending += w.inflight.length;
    if (pending > 0 && !this.keepAliveTimer && !this.closed) this.keepAliveTimer = setInterval(() => {}, 1 << 30);
    else if ((pending === 0 || this.closed) && this.keepAliveTimer) {
      clearInterval(this.keepAliveTimer);
      this.keepAliveTimer = undefined;
    }
  }

  private activeCount(): number {
    let n = 0;
    for (const w of this.workers) if (!w.spare) n++;
    return n;
  }

  private allReady(): boolean {
    let active = 0;
    let spares = 0;
    for (const w of this.workers) {
      if (!w.ready) return false;
      if (w.spare) spares++;
      else active++;
    }
    return active >= this.options.workers && spares >= this.options.spares;
  }

  /**
   * Keep `workers` children taking jobs and `spares` warm ones: a missing worker is replaced by a spare (a started one
   * first), and every missing child is started.
   */
  private rebalance(): void {
    if (this.closed || this.startFailures >= MAX_START_FAILURES) return;
    let missing = this.options.workers - this.activeCount();
    const spares = [...this.workers].filter((w) => w.spare).sort((a, b) => Number(b.ready) - Number(a.ready));
    while (missing > 0 && spares.length) {
      const w = spares.shift()!;
      w.spare = false;
      missing--;
    }
    for (; missing > 0; missing--) this.spawnWorker(false);
    for (let n = spares.length; n < this.options.spares; n++) this.spawnWorker(true);
  }

  /**
   * Hand queued jobs to ready children: to the one with the fewest jobs in flight, up to the depth; never behind a
   * head that has run for SLOW_HEAD_MS already.
   */
  private pump(): void {
    while (this.waiting > 0) {
      const now = performance.now();
      let best: Worker | undefined;
      for (const w of this.workers) {
        if (!w.ready || w.spare || w.inflight.length >= PIPELINE_DEPTH) continue;
        if (w.inflight.length > 0 && now - w.headSince > SLOW_HEAD_MS) continue;
        if (!best || w.inflight.length < best.inflight.length) best = w;
      }
      if (!best) return;
      const next = this.takeNext();
      if (!next) return;
      this.dispatch(best, next);
    }
  }

  /**
   * Hand a job to a child. The lines of one tick for one child go in one write (one syscall, one read on the other
   * side): the first line schedules the write, later ones join it.
   */
  private dispatch(w: Worker, job: Pending): void {
    w.inflight.push(job);
    const line = job.wire ? lineFor(job.wire, w.statics) : job.line;
    if (w.out === '') setImmediate(() => this.flushOut(w));
    w.out += line + '\n';
    if (w.inflight.length === 1) this.startHead(w);
  }

  private flushOut(w: Worker): void {
    if (w.out === '') return;
    const text = w.out;
    w.out = '';
    w.proc.stdin.write(text);
  }

  /**
   * The head job starts running now. The child enforces the budget itself; the watchdog only catches a child that
   * does not stop: one whose process has used more CPU time since the head started than any job's attempts can (a
   * builtin that V8 cannot interrupt, such as `new Array(1e9).fill(0)`: measured, it ran 13 s before the wall-clock
   * watchdog, then 13 s more when run again), or, where the CPU time cannot be read or the child does not run at all
   * (a stopped process), one that has not answered within every attempt's wall allowance.
   */
  private startHead(w: Worker): void {
    if (w.watchdog) clearTimeout(w.watchdog);
    w.headSince = performance.now();
    w.killedForTime = false;
    w.killedForCpu = false;
    // Read lazily: nearly every job is answered long before the first check, and reading /proc costs about 25 µs,
    // which on every job was 8% of a 10-key export's CPU time (profiled). The CPU time counted is the child's from the
    // first check on, which is never more than the job's own: a kill on it is never wrong.
    w.headCpuMs = undefined;
    const wallMs = watchdogMs(this.options.timeoutMs);
    const cpuMs = cpuWatchdogMs(this.options.timeoutMs);
    const check = (): void => {
      const ranMs = performance.now() - w.headSince;
      const now = processCpuMs(w.proc.pid);
      if (w.headCpuMs === undefined && now !== undefined && ranMs < wallMs) {
        w.headCpuMs = now;
        w.watchdog = setTimeout(check, Math.min(cpuMs, wallMs - ranMs));
        return;
      }
      const usedMs = now === undefined || w.headCpuMs === undefined ? undefined : now - w.headCpuMs;
      if (usedMs !== undefined && usedMs >= cpuMs) w.killedForCpu = true;
      else if (ranMs < wallMs) {
        // Neither limit reached: look again when the first of them could be.
        const next = Math.min(wallMs - ranMs, usedMs === undefined ? Infinity : cpuMs - usedMs);
        w.watchdog = setTimeout(check, Math.max(20, next));
        return;
      }
      w.killedForTime = true;
      w.proc.kill('SIGKILL');
    };
    w.watchdog = setTimeout(check, Math.min(FIRST_CPU_LOOK_MS, wallMs));
  }

  private spawnWorker(spare: boolean): void {
    const config = JSON.stringify({
      bundle: this.bundleFile,
      timeoutMs: this.options.timeoutMs,
      memoryMb: this.options.memoryMb,
      // Half the heap: a job that leaves more than this behind makes its child renew its isolate, so every job starts with at
      // least half of the limit free.
      retireHeapMb: this.options.memoryMb / 2,
    });
    const proc = spawn(process.execPath, ['--no-node-snapshot', this.childFile, config], {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: {},
      windowsHide: true,
    });
    const w: Worker = {
      proc,
      ready: false,
      spare,
      renewing: false,
      inflight: [],
      headSince: 0,
      lastAnswered: undefined,
      watchdog: undefined,
      headCpuMs: undefined,
      killedForTime: false,
      killedForCpu: false,
      fatalReport: false,
      buffer: '',
      statics: childRecord(childStaticLimit(this.options.memoryMb)),
      out: '',
    };
    this.workers.add(w);
    this.spawns++;
    proc.stdout.setEncoding('utf8');
    // V8 prints its fatal-error report here when an isolate blows up; kept (bounded) for diagnostics only.
    proc.stderr.setEncoding('utf8');
    proc.stderr.on('data', (chunk: string) => {
      this.lastChildStderr = (this.lastChildStderr + chunk).slice(-4096);
      // Only V8 and the child write here (an expression has no console), so a fatal report is V8's own.
      if (V8_FATAL.test(chunk)) w.fatalReport = true;
    });
    (proc.stderr as unknown as Socket).unref();
    proc.stdout.on('data', (chunk: string) => this.onData(w, chunk));
    proc.stdin.on('error', () => {
      /* the child died; handled by 'close' */
    });
    proc.on('error', () => {
      /* spawn failure; 'close' follows */
    });
    // 'close', not 'exit': it comes after every line the child wrote was read, so the answers it gave before it
    // ended are taken before deciding which job it was running.
    proc.on('close', (code) => this.onClose(w, code));
    proc.unref();
    (proc.stdout as unknown as Socket).unref();
  }

  private onData(w: Worker, chunk: string): void {
    w.buffer += chunk;
    let nl: number;
    while ((nl = w.buffer.indexOf('\n')) !== -1) {
      const line = w.buffer.slice(0, nl);
      w.buffer = w.buffer.slice(nl + 1);
      this.onLine(w, line);
    }
  }

  private onLine(w: Worker, line: string): void {
    let msg: (SandboxResponse & AnswerMeta) | ChildNotice | OverloadedAnswer | UnknownAnswer;
    try {
      msg = JSON.parse(line) as (SandboxResponse & AnswerMeta) | ChildNotice | OverloadedAnswer | UnknownAnswer;
    } catch {
      return;
    }
    if (msg.t === 'ready') {
      w.ready = true;
      w.renewing = false;
      this.startFailures = 0;
      if (this.allReady()) for (const r of this.readyWaiters.splice(0)) r.resolve();
      this.pump();
      this.keepAlive();
      return;
    }
    if (msg.t === 'renew') {
      this.onRenew(w);
      return;
    }
    const job = w.inflight.shift();
    if (!job) return;
    if (w.watchdog) clearTimeout(w.watchdog);
    w.watchdog = undefined;
    if (w.inflight.length) this.startHead(w);
    if (msg.t === 'unknown') {
      // The child does not hold the job's static half (evicted, or the line that carried it was dropped): it did not
      // run. Forget it for this child; the job goes back to the front of its queue and is sent again in full.
      if (job.wire?.half) w.statics.delete(job.wire.half.id);
      this.staticResends++;
      this.enqueue(job, true);
      this.pump();
      this.keepAlive();
      return;
    }
    w.lastAnswered = job;
    const cpu = typeof msg.cpu === 'number' && Number.isFinite(msg.cpu) ? msg.cpu : 0;
    delete msg.cpu;
    this.chargeCpu(job, cpu);
    if (msg.t === 'overloaded') {
      job.reject(new SandboxBusyError('the server is too busy to run the expressions within their time limit; retry later', 5));
    } else job.resolve(msg);
    this.pump();
    this.keepAlive();
  }

  /**
   * The child gave up its isolate after its last answer (memory limit, or heap left too full) and is making a new one.
   * The job answered last pays for it. The jobs written after that answer never ran: back to the front of their
   * queues, and the flush line tells the child to drop them. The child becomes a spare until it is ready again, so a
   * ready spare takes its place at once.
   */
  private onRenew(w: Worker): void {
    this.renewals++;
    w.ready = false;
    w.renewing = true;
    if (w.watchdog) clearTimeout(w.watchdog);
    w.watchdog = undefined;
    if (w.lastAnswered) this.chargeRestart(w.lastAnswered);
    w.lastAnswered = undefined;
    const notStarted = w.inflight.splice(0);
    for (let i = notStarted.length - 1; i >= 0; i--) this.enqueue(notStarted[i]!, true);
    // Job lines not yet written are not written at all (their jobs are queued again above); static halves among them
    // still go, before the flush line, since this child is recorded as holding them.
    const halves = staticLinesOf(w.out);
    w.out = '';
    w.proc.stdin.write(halves + FLUSH_LINE + '\n');
    w.spare = true;
    this.rebalance();
    this.pump();
    this.keepAlive();
  }

  /**
   * Add a job's CPU time to its request. The job that takes the request over its budget keeps its answer (its own
   * limit already bounded it); every later job of the request fails at once (submit and the queue check `exceeded`).
   */
  private chargeCpu(job: Pending, cpuMs: number): void {
    this.charge(job.client, cpuMs);
    const usage = job.usage;
    if (!usage) return;
    usage.cpuMs += cpuMs;
    if (!usage.exceeded && usage.cpuMs > this.options.requestCpuMs) {
      usage.exceeded = new BudgetExceededError(
        'cpu-budget',
        `the request's expressions used more than its CPU-time budget of ${this.options.requestCpuMs} ms`,
      );
    }
  }

  private chargeRestart(job: Pending): void {
    this.charge(job.client, RESTART_COST_MS);
    if (!this.lane.quiet && this.lane.isOffender(job.client) && this.protecting(job.client)) this.lane.close(RESTART_COST_MS);
    const usage = job.usage;
    if (!usage) return;
    usage.restarts++;
    if (!usage.exceeded && usage.restarts > this.options.requestRestarts) {
      usage.exceeded = new BudgetExceededError(
        'restart-budget',
        `the request's expressions caused more than ${this.options.requestRestarts} sandbox restarts (its budget)`,
      );
    }
  }

  private onClose(w: Worker, code: number | null): void {
    if (!this.workers.delete(w)) return;
    w.out = '';
    if (w.watchdog) clearTimeout(w.watchdog);
    // Exit code 0: the child's stdin was closed (it exits between jobs, and never because of one): none of its
    // remaining jobs ran there. Any other end (V8 abort, watchdog kill, killed from outside) hit the head job.
    const head = code === 0 ? undefined : w.inflight.shift();
    // Jobs still waiting in the dead child's pipe never started: back to the front of their queues, in order.
    const notStarted = w.inflight.splice(0);
    for (let i = notStarted.length - 1; i >= 0; i--) this.enqueue(notStarted[i]!, true);
    if (!w.ready) this.startFailures++;
    if (head) {
      this.chargeRestart(head);
      if (head.usage?.exceeded) head.reject(head.usage.exceeded);
      else if (head.suspect === 0 && !w.fatalReport && !w.killedForCpu) {
        // The child ended without saying why (it may have been stuck or killed for another reason): run the job once
        // more on another child before blaming it.
        head.suspect++;
        this.enqueue(head, true);
      } else {
        head.resolve(
          w.killedForTime
            ? failureResponse(head.request, 'time-limit', timeLimitMessage(this.options.timeoutMs))
            : failureResponse(head.request, 'memory-limit', memoryLimitMessage(this.options.memoryMb)),
        );
      }
    }
    if (this.closed) return;
    if (this.startFailures >= MAX_START_FAILURES) {
      this.keepAlive();
      if (this.activeCount() === 0) {
        const error = new SandboxUnavailableError('the expression sandbox could not start');
        this.rejectQueued(error);
        for (const r of this.readyWaiters.splice(0)) r.reject(error);
      }
      return;
    }
    this.rebalance();
    this.pump();
    this.keepAlive();
  }

  private rejectQueued(error: Error): void {
    for (const q of this.queues.values()) for (const job of q) job.reject(error);
    this.queues.clear();
    this.waiting = 0;
  }
}

/** Start the sandbox (children start at once; `ready()` says when they have). */
export function createSandboxEvaluator(options: SandboxOptions = {}): SandboxEvaluator {
  return new SandboxPool(options);
}
