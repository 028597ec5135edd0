/**
 * The expression evaluator: a small pool of child processes, each owning one isolated-vm isolate with the libraries
 * loaded once and the realm sealed. The host only does IPC: one JSON line to a child per job, one line back.
 *
 * The pool composes the parts of the host (each in its own module of host/):
 * - Queue (scheduler.ts): one queue per client (RunContext.client), served by cost; bounded in total and per client (a
 *   full queue refuses at once with SandboxBusyError). Each child evaluates one job at a time; a few are written ahead
 *   to it (child-handle.ts).
 * - Time: the child counts each job's own CPU time against the budget (see WALL_FACTORS, wire/protocol.ts); a host
 *   watchdog (child-handle.ts) kills a child that stops answering at all.
 * - Memory: the isolate's memory limit; a child whose isolate was disposed answers for the job that did it and makes a
 *   new isolate in the same process ("renewal"), as does a child whose heap is left too full after a job. A child
 *   that really dies (V8 fatal error) is replaced by a new process. The warm spares take over at once meanwhile.
 * - Blame: a job fails with a limit only when it was the job running; a job at the head of a child that died without
 *   saying why (no V8 fatal report: killed from outside, say) is run once more elsewhere before it is blamed.
 * - Budget (budgets.ts): the jobs of one request (RunContext.usage) share a CPU-time and a restart budget.
 * - Kept answers (kept-answers.ts): a job that passed and read neither the clock nor chance is answered again, for the
 *   same client, without running.
 * - Runaways (runaways.ts): a job that hit a limit is answered the same, without running, when its client sends it again
 *   within 5 minutes; clients whose jobs keep hitting limits are served through a slow lane.
 */
import { SandboxBusyError, SandboxUnavailableError } from '../../core/errors.js';
import { freezeDeep } from '../../core/frozen.js';
import { ExpressionError } from '../errors.js';
import type { ExpressionJob, ExpressionResult, RunContext } from '../../core/ports.js';
import { encodeWire, StaticRegistry, type EncodedJob } from '../wire/job-wire.js';
import { failureResponse, type SandboxRequest, type SandboxResponse, type WireJob } from '../wire/protocol.js';
import { RequestBudgets } from './budgets.js';
import { sandboxFiles, type ChildHandle, type ChildMessage } from './child-handle.js';
import { Children } from './children.js';
import { answerKey, KeptAnswers } from './kept-answers.js';
import { effectiveOptions, type SandboxEvaluator, type SandboxOptions } from './options.js';
import { hitLimit, RunawayMemo } from './runaways.js';
import { Scheduler, type Pending } from './scheduler.js';

const MAX_START_FAILURES = 3;

/** The client of work that names none (CLI, `.configu` rendering, direct callers). */
const LOCAL_CLIENT = '';

const closedError = (): SandboxUnavailableError => new SandboxUnavailableError('the expression sandbox is closed');

class SandboxPool implements SandboxEvaluator {
  readonly options: Readonly<Required<SandboxOptions>>;
  /** The children (tests reach them through this name). */
  private readonly workers: Children;
  /** Static halves of jobs by exact text (wire/job-wire.ts). */
  private readonly registry = new StaticRegistry();
  /** Answers of jobs that can be given again (kept-answers.ts); undefined when SandboxOptions.answers is 0. */
  private readonly answers: KeptAnswers | undefined;
  /**
   * Limit answers by client and exact wire text (runaways.ts): a job that hit the time or the memory limit is answered
   * the same, without running, when the same client sends the same job again within 5 minutes. Per client, as
   * `answers`: another client's identical job runs (a client cannot learn, even from timing, what another sent), and
   * no job is ever refused because of another client's runaway.
   */
  private readonly memo: RunawayMemo;
  private readonly scheduler: Scheduler;
  private readonly budgets: RequestBudgets;
  /** Jobs a child answered "unknown id" for, sent again in full (diagnostics, tests). */
  staticResends = 0;
  private closed = false;
  private startFailures = 0;
  private renewals = 0;
  /** The tail of the last child's stderr (V8 fatal reports, start-up failures): for the operator's diagnostics. */
  lastChildStderr = '';
  private readyWaiters: Array<{ resolve: () => void; reject: (e: Error) => void }> = [];
  /**
   * The children are unref'd so an idle sandbox never keeps the process alive; while work is pending (queued, in
   * flight, or someone awaits ready()) one ref'd timer does.
   */
  private keepAliveTimer: NodeJS.Timeout | undefined;

  constructor(options: SandboxOptions) {
    this.options = effectiveOptions(options);
    this.memo = new RunawayMemo(this.options.runawayMemo);
    this.answers = this.options.answers > 0 ? new KeptAnswers(this.options.answers) : undefined;
    this.budgets = new RequestBudgets(this.options.requestCpuMs, this.options.requestRestarts);
    this.scheduler = new Scheduler(this.options, {
      slowInFlight: () => this.workers.slowInFlight(),
      laneOpen: () => {
        this.pump();
        this.keepAlive();
      },
    });
    this.workers = new Children(sandboxFiles(), this.options, {
      message: (child, msg) => this.onMessage(child, msg),
      close: (child, code) => this.onClose(child, code),
      stderr: (chunk) => {
        this.lastChildStderr = (this.lastChildStderr + chunk).slice(-4096);
      },
    });
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
    const key = this.answers && context ? answerKey(context.client, wire.head) : undefined;
    const known = key === undefined ? undefined : this.answers!.answer(key);
    if (known) return known;
    if (context && this.memo.size > 0) {
      const refused = this.memo.get(answerKey(context.client, wire.head));
      if (refused) return refused;
    }
    // Only consts and tests are read from the request on the host (failure answers).
    const request: SandboxRequest = { t: 'job', job: wire.job as WireJob };
    const response = await this.submit(request, context, wire);
    if (response.t === 'job') {
      const { result } = response;
      if (key !== undefined) this.answers!.offer(key, result, response.pure);
      if (context) {
        const limit = hitLimit(result);
        if (limit) {
          // Remembered for the same job of the same client; the client gets a strike (scheduler.ts).
          this.memo.set(answerKey(context.client, wire.head), freezeDeep(result));
          this.scheduler.strike(context.client, limit, this.options.timeoutMs);
        }
      }
      return result;
    }
    // A request-level failure (malformed job): every item fails with it.
    const failed = failureResponse(request, response.ok ? 'error' : response.kind, response.ok ? 'unexpected answer' : response.message);
    return (failed as { t: 'job'; result: ExpressionResult }).result;
  }

  answersGiven(): number {
    return this.answers?.given ?? 0;
  }

  runawaysRefused(): number {
    return this.memo.given;
  }

  isOffender(client: string): boolean {
    return this.scheduler.lane.isOffender(client);
  }

  childStatics(): { bytes: number; entries: number } {
    return this.workers.statics();
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
    if (this.closed) return Promise.reject(closedError());
    if (this.workers.allReady()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.readyWaiters.push({ resolve, reject });
      this.keepAlive();
    });
  }

  pids(): number[] {
    return this.workers.pids(false);
  }

  replacements(): { renewals: number; spawns: number } {
    return { renewals: this.renewals, spawns: this.workers.spawns };
  }

  sparePids(): number[] {
    return this.workers.pids(true);
  }

  queued(): Record<string, number> {
    return this.scheduler.queued();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.scheduler.close();
    const error = closedError();
    this.scheduler.rejectAll(error);
    for (const w of this.readyWaiters.splice(0)) w.reject(error);
    const exits = [...this.workers].map((w) => w.kill(error));
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
    if (this.closed) return Promise.reject(closedError());
    const usage = context?.usage;
    if (usage?.exceeded) return Promise.reject(usage.exceeded);
    const client = typeof context?.client === 'string' ? context.client : LOCAL_CLIENT;
    const refused = this.scheduler.refusal(client);
    if (refused) return Promise.reject(refused);
    let line = '';
    if (!wire) {
      try {
        line = JSON.stringify(request);
      } catch {
        return Promise.reject(new ExpressionError('error', 'the expression context cannot be copied into the sandbox'));
      }
    }
    return new Promise<SandboxResponse>((resolve, reject) => {
      this.scheduler.enqueue({ request, line, wire, client, usage, suspect: 0, slow: false, resolve, reject }, false);
      if (this.workers.activeCount() < this.options.workers && this.startFailures >= MAX_START_FAILURES) {
        // The pool gave up after start failures: try again for this new work.
        this.startFailures = 0;
        this.rebalance();
      }
      this.pump();
      this.keepAlive();
    });
  }

  private keepAlive(): void {
    let pending = this.scheduler.waiting + this.readyWaiters.length;
    if (pending === 0) pending = this.workers.inflight();
    if (pending > 0 && !this.keepAliveTimer && !this.closed) this.keepAliveTimer = setInterval(() => {}, 1 << 30);
    else if ((pending === 0 || this.closed) && this.keepAliveTimer) {
      clearInterval(this.keepAliveTimer);
      this.keepAliveTimer = undefined;
    }
  }

  /** Keep the children the options say (Children.rebalance), unless the pool is closed or gave up starting them. */
  private rebalance(): void {
    if (this.closed || this.startFailures >= MAX_START_FAILURES) return;
    this.workers.rebalance();
  }

  /**
   * Hand queued jobs to ready children: to the one with the fewest jobs in flight, up to the pipeline's depth; never
   * behind a head that has run for a few ms already (ChildHandle.canTake).
   */
  private pump(): void {
    while (this.scheduler.waiting > 0) {
      const best = this.workers.pick(performance.now());
      if (!best) return;
      const next = this.scheduler.takeNext();
      if (!next) return;
      best.send(next);
    }
  }

  /** Jobs that never ran go back to the front of their queues, in order. */
  private requeue(notStarted: Pending[]): void {
    for (let i = notStarted.length - 1; i >= 0; i--) this.scheduler.enqueue(notStarted[i]!, true);
  }

  private onMessage(w: ChildHandle, msg: ChildMessage): void {
    if (msg.t === 'ready') {
      w.ready = true;
      w.renewing = false;
      this.startFailures = 0;
      if (this.workers.allReady()) for (const r of this.readyWaiters.splice(0)) r.resolve();
    } else if (msg.t === 'renew') {
      // The child gave up its isolate after its last answer (memory limit, or heap left too full) and is making a new
      // one; a ready spare takes its place at once.
      this.renewals++;
      const { charged, notStarted } = w.renew();
      if (charged) this.chargeRestart(charged);
      this.requeue(notStarted);
      this.rebalance();
    } else {
      const job = w.takeHead();
      if (!job) return;
      if (msg.t === 'unknown') {
        // The child does not hold the job's static half (evicted, or the line that carried it was dropped): it did not
        // run. Forget it for this child; the job goes back to the front of its queue and is sent again in full.
        if (job.wire?.half) w.statics.delete(job.wire.half.id);
        this.staticResends++;
        this.scheduler.enqueue(job, true);
      } else {
        w.lastAnswered = job;
        const cpu = typeof msg.cpu === 'number' && Number.isFinite(msg.cpu) ? msg.cpu : 0;
        delete msg.cpu;
        this.scheduler.charge(job.client, cpu);
        this.budgets.chargeCpu(job.usage, cpu);
        if (msg.t === 'overloaded') {
          job.reject(new SandboxBusyError('the server is too busy to run the expressions within their time limit; retry later', 5));
        } else job.resolve(msg);
      }
    }
    this.pump();
    this.keepAlive();
  }

  /** A job killed a sandbox or made it renew: its client's fair share and its request's restart budget pay. */
  private chargeRestart(job: Pending): void {
    this.scheduler.chargeRestart(job.client);
    this.budgets.chargeRestart(job.usage);
  }

  private onClose(w: ChildHandle, code: number | null): void {
    if (!this.workers.delete(w)) return;
    const { head, notStarted } = w.ended(code);
    this.requeue(notStarted);
    if (!w.ready) this.startFailures++;
    if (head) {
      this.chargeRestart(head);
      if (head.usage?.exceeded) head.reject(head.usage.exceeded);
      else {
        const answer = w.blame(head);
        if (answer) head.resolve(answer);
        else {
          // Run once more on another child before blaming it (ChildHandle.blame).
          head.suspect++;
          this.scheduler.enqueue(head, true);
        }
      }
    }
    if (this.closed) return;
    if (this.startFailures >= MAX_START_FAILURES) {
      this.keepAlive();
      if (this.workers.activeCount() === 0) {
        const error = new SandboxUnavailableError('the expression sandbox could not start');
        this.scheduler.rejectAll(error);
        for (const r of this.readyWaiters.splice(0)) r.reject(error);
      }
      return;
    }
    this.rebalance();
    this.pump();
    this.keepAlive();
  }
}

/** Start the sandbox (children start at once; `ready()` says when they have). */
export function createSandboxEvaluator(options: SandboxOptions = {}): SandboxEvaluator {
  return new SandboxPool(options);
}
