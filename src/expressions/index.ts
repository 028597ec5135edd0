/**
 * The expression evaluator: a small pool of child processes, each owning one isolated-vm isolate with the libraries
 * loaded once and the realm sealed. The host only does IPC: one JSON line to a child per job, one line back.
 *
 * - A child evaluates one job at a time; jobs wait in a FIFO queue for an idle child.
 * - Time: isolated-vm's `timeout` inside the child, plus a host watchdog (budget + margin) that kills a stuck child.
 * - Memory: the isolate's memory limit; a child that dies (V8 fatal out-of-memory) is replaced, and only its in-flight
 *   job fails (`memory-limit`). A child killed by the watchdog fails its job with `time-limit`.
 */
import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Socket } from 'node:net';
import type { Readable, Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { SandboxUnavailableError } from '../core/errors.js';
import { ExpressionError } from './errors.js';
import { encodeJob, failureResponse, memoryLimitMessage, timeLimitMessage, type SandboxRequest, type SandboxResponse } from './protocol.js';
import type { ExpressionEvaluator, ExpressionJob, ExpressionResult } from './types.js';

export * from './types.js';
export { ExpressionError } from './errors.js';

export interface SandboxOptions {
  /** Number of child processes (each runs one job at a time). Default 2. */
  workers?: number;
  /** Time budget of one job (all its consts and tests), in ms. Default 100. */
  timeoutMs?: number;
  /** Heap limit of each isolate, in MB. Default 64. */
  memoryMb?: number;
}

export const DEFAULT_SANDBOX_OPTIONS: Required<SandboxOptions> = { workers: 2, timeoutMs: 100, memoryMb: 64 };

/** The sandbox evaluator: the contract plus start-up and introspection helpers. */
export interface SandboxEvaluator extends ExpressionEvaluator {
  /** Resolves when every child has started (loaded and sealed its isolate). */
  ready(): Promise<void>;
  /** The effective limits. */
  readonly options: Readonly<Required<SandboxOptions>>;
  /** Process ids of the live children (for tests and diagnostics). */
  pids(): number[];
}

/** Read the sandbox limits from the environment (`CONFIGU_EXPRESSION_TIMEOUT_MS`, `..._MEMORY_MB`, `..._WORKERS`). */
export function expressionOptionsFromEnv(env: Record<string, string | undefined> = process.env): SandboxOptions {
  const read = (name: string, min: number, max: number): number | undefined => {
    const raw = env[name];
    if (raw === undefined || raw.trim() === '') return undefined;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < min || n > max) {
      throw new RangeError(`${name} must be an integer from ${min} to ${max} (got "${raw}")`);
    }
    return n;
  };
  const out: SandboxOptions = {};
  const timeoutMs = read('CONFIGU_EXPRESSION_TIMEOUT_MS', 1, 60_000);
  const memoryMb = read('CONFIGU_EXPRESSION_MEMORY_MB', 8, 4096);
  const workers = read('CONFIGU_EXPRESSION_WORKERS', 1, 256);
  if (timeoutMs !== undefined) out.timeoutMs = timeoutMs;
  if (memoryMb !== undefined) out.memoryMb = memoryMb;
  if (workers !== undefined) out.workers = workers;
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
  line: string;
  resolve: (response: SandboxResponse) => void;
  reject: (error: Error) => void;
}

type ChildProc = ChildProcessByStdio<Writable, Readable, Readable>;

interface Worker {
  proc: ChildProc;
  ready: boolean;
  /**
   * Jobs written to this child and not yet answered, oldest first. The child answers strictly in order, so the head
   * is the one running; the others wait in the pipe. If the child dies, only the head failed; the rest go back to
   * the front of the queue for another child.
   */
  inflight: Pending[];
  watchdog: NodeJS.Timeout | undefined;
  killedForTime: boolean;
  buffer: string;
}

/**
 * Jobs written ahead to one child. Pipelining removes the idle gap of a round trip between two jobs (measured: with
 * one job per child at a time, two children topped out near 6,000 jobs/s with the CPUs 30% idle). A runaway job can
 * delay the ones queued behind it in the same child by at most the time limit.
 */
const PIPELINE_DEPTH = 4;

const MAX_START_FAILURES = 3;

class SandboxPool implements SandboxEvaluator {
  readonly options: Readonly<Required<SandboxOptions>>;
  private readonly childFile: string;
  private readonly bundleFile: string;
  private readonly workers = new Set<Worker>();
  private readonly queue: Pending[] = [];
  private queueHead = 0;
  private closed = false;
  private startFailures = 0;
  /** The tail of the last child's stderr (V8 fatal reports, start-up failures): for the operator's diagnostics. */
  lastChildStderr = '';
  private readyWaiters: Array<{ resolve: () => void; reject: (e: Error) => void }> = [];

  constructor(options: SandboxOptions) {
    this.options = {
      workers: Math.max(1, Math.floor(options.workers ?? DEFAULT_SANDBOX_OPTIONS.workers)),
      timeoutMs: Math.max(1, Math.floor(options.timeoutMs ?? DEFAULT_SANDBOX_OPTIONS.timeoutMs)),
      memoryMb: Math.max(8, Math.floor(options.memoryMb ?? DEFAULT_SANDBOX_OPTIONS.memoryMb)),
    };
    const root = packageRoot();
    this.childFile = join(root, 'dist', 'sandbox-child.js');
    this.bundleFile = join(root, 'dist', 'sandbox', 'libraries.js');
    if (!existsSync(this.childFile) || !existsSync(this.bundleFile)) {
      throw new SandboxUnavailableError('the expression sandbox is not built (run `npm run build`)');
    }
    for (let i = 0; i < this.options.workers; i++) this.spawnWorker();
  }

  // -------------------------------------------------------------------------------------------------------------
  // Public API
  // -------------------------------------------------------------------------------------------------------------

  async run(job: ExpressionJob): Promise<ExpressionResult> {
    const request = { t: 'job' as const, job: encodeJob(job) };
    const response = await this.submit(request);
    if (response.t === 'job') return response.result;
    // A request-level failure (malformed job): every item fails with it.
    const failed = failureResponse(request, response.ok ? 'error' : response.kind, response.ok ? 'unexpected answer' : response.message);
    return (failed as { t: 'job'; result: ExpressionResult }).result;
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
    return [...this.workers].map((w) => w.proc.pid!).filter((p) => typeof p === 'number');
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
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

  private submit(request: SandboxRequest): Promise<SandboxResponse> {
    if (this.closed) return Promise.reject(new SandboxUnavailableError('the expression sandbox is closed'));
    let line: string;
    try {
      line = JSON.stringify(request);
    } catch {
      return Promise.reject(new ExpressionError('error', 'the expression context cannot be copied into the sandbox'));
    }
    return new Promise<SandboxResponse>((resolve, reject) => {
      this.queue.push({ request, line, resolve, reject });
      if (this.workers.size < this.options.workers) {
        // The pool gave up after start failures: try again for this new work.
        this.startFailures = 0;
        while (this.workers.size < this.options.workers) this.spawnWorker();
      }
      this.pump();
      this.keepAlive();
    });
  }

  /**
   * The children are unref'd so an idle sandbox never keeps the process alive; while work is pending (queued, in
   * flight, or someone awaits ready()) one ref'd timer does.
   */
  private keepAliveTimer: NodeJS.Timeout | undefined;
  private keepAlive(): void {
    let pending = this.queue.length - this.queueHead + this.readyWaiters.length;
    if (pending === 0) for (const w of this.workers) pending += w.inflight.length;
    if (pending > 0 && !this.keepAliveTimer && !this.closed) this.keepAliveTimer = setInterval(() => {}, 1 << 30);
    else if ((pending === 0 || this.closed) && this.keepAliveTimer) {
      clearInterval(this.keepAliveTimer);
      this.keepAliveTimer = undefined;
    }
  }

  private allReady(): boolean {
    if (this.workers.size < this.options.workers) return false;
    for (const w of this.workers) if (!w.ready) return false;
    return true;
  }

  /** Hand queued jobs to ready children, always to the one with the fewest jobs in flight, up to the depth. */
  private pump(): void {
    while (this.queueHead < this.queue.length) {
      let best: Worker | undefined;
      for (const w of this.workers) {
        if (!w.ready || w.inflight.length >= PIPELINE_DEPTH) continue;
        if (!best || w.inflight.length < best.inflight.length) best = w;
      }
      if (!best) return;
      const next = this.queue[this.queueHead]!;
      this.queue[this.queueHead++] = undefined as unknown as Pending;
      if (this.queueHead > 1024 && this.queueHead * 2 > this.queue.length) {
        this.queue.splice(0, this.queueHead);
        this.queueHead = 0;
      }
      this.dispatch(best, next);
    }
  }

  private dispatch(w: Worker, job: Pending): void {
    w.inflight.push(job);
    w.proc.stdin.write(job.line + '\n');
    if (w.inflight.length === 1) this.armWatchdog(w);
  }

  /**
   * The child enforces the budget itself; the watchdog only catches a child that cannot (stuck native code). It
   * covers the head job, from the moment that job became the head (the child starts it then).
   */
  private armWatchdog(w: Worker): void {
    if (w.watchdog) clearTimeout(w.watchdog);
    w.killedForTime = false;
    w.watchdog = setTimeout(() => {
      w.killedForTime = true;
      w.proc.kill('SIGKILL');
    }, this.options.timeoutMs + Math.max(250, this.options.timeoutMs));
  }

  private spawnWorker(): void {
    const config = JSON.stringify({ bundle: this.bundleFile, timeoutMs: this.options.timeoutMs, memoryMb: this.options.memoryMb });
    const proc = spawn(process.execPath, ['--no-node-snapshot', this.childFile, config], {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: {},
      windowsHide: true,
    });
    const w: Worker = { proc, ready: false, inflight: [], watchdog: undefined, killedForTime: false, buffer: '' };
    this.workers.add(w);
    proc.stdout.setEncoding('utf8');
    // V8 prints its fatal-error report here when an isolate blows up; kept (bounded) for diagnostics only.
    proc.stderr.setEncoding('utf8');
    proc.stderr.on('data', (chunk: string) => {
      this.lastChildStderr = (this.lastChildStderr + chunk).slice(-4096);
    });
    (proc.stderr as unknown as Socket).unref();
    proc.stdout.on('data', (chunk: string) => this.onData(w, chunk));
    proc.stdin.on('error', () => {
      /* the child died; handled by 'exit' */
    });
    proc.on('error', () => {
      /* spawn failure; 'exit' (or close) follows */
    });
    proc.on('exit', (code) => this.onExit(w, code));
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
    let msg: SandboxResponse | { t: 'ready' };
    try {
      msg = JSON.parse(line) as SandboxResponse | { t: 'ready' };
    } catch {
      return;
    }
    if (msg.t === 'ready') {
      w.ready = true;
      this.startFailures = 0;
      if (this.allReady()) for (const r of this.readyWaiters.splice(0)) r.resolve();
      this.pump();
      this.keepAlive();
      return;
    }
    const job = w.inflight.shift();
    if (!job) return;
    if (w.watchdog) clearTimeout(w.watchdog);
    w.watchdog = undefined;
    if (w.inflight.length) this.armWatchdog(w);
    job.resolve(msg);
    this.pump();
    this.keepAlive();
  }

  private onExit(w: Worker, code: number | null = null): void {
    if (!this.workers.delete(w)) return;
    if (w.watchdog) clearTimeout(w.watchdog);
    // Exit code 0: the child answered every job it started (after a disposed isolate's memory-limit answer it reads
    // nothing more), so none of its remaining jobs ran there. Any other end (V8 abort, watchdog kill) hit the head job.
    const job = code === 0 ? undefined : w.inflight.shift();
    const notStarted = w.inflight.splice(0);
    // Jobs still waiting in the dead child's pipe never started: back to the front of the queue, in order.
    if (notStarted.length) this.queue.splice(this.queueHead, 0, ...notStarted);
    if (!w.ready) this.startFailures++;
    if (job) {
      const response = w.killedForTime
        ? failureResponse(job.request, 'time-limit', timeLimitMessage(this.options.timeoutMs))
        : failureResponse(job.request, 'memory-limit', memoryLimitMessage(this.options.memoryMb));
      job.resolve(response);
    }
    if (this.closed) return;
    if (this.startFailures >= MAX_START_FAILURES) {
      this.keepAlive();
      if (this.workers.size === 0) {
        const error = new SandboxUnavailableError('the expression sandbox could not start');
        this.rejectQueued(error);
        for (const r of this.readyWaiters.splice(0)) r.reject(error);
      }
      return;
    }
    this.spawnWorker();
    this.pump();
    this.keepAlive();
  }

  private rejectQueued(error: Error): void {
    for (let i = this.queueHead; i < this.queue.length; i++) this.queue[i]?.reject(error);
    this.queue.length = 0;
    this.queueHead = 0;
  }
}

/** Start the sandbox (children start at once; `ready()` says when they have). */
export function createSandboxEvaluator(options: SandboxOptions = {}): SandboxEvaluator {
  return new SandboxPool(options);
}
