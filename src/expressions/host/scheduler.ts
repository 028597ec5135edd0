/**
 * The pool's queue and fair share: one FIFO queue per client (RunContext.client), served by cost.
 *
 * - Each client has a virtual time: the cost of the work done for it (CPU ms, plus RESTART_COST_MS per sandbox it
 *   cost), counted from when it last had work waiting. The waiting client with the least goes next, so clients share
 *   the sandbox by cost, not by job count: a client whose jobs are runaways or memory bombs waits longer for each turn.
 * - The queue is bounded in total and per client: a full queue refuses at once with SandboxBusyError.
 * - Repeat offenders (runaways.ts, SlowLane) are served only when no other client has a job waiting, one at a time,
 *   and while the slow lane is open; all that only while the lane protects another client (see `protecting`).
 */
import { SandboxBusyError } from '../../core/errors.js';
import type { EncodedJob } from '../wire/job-wire.js';
import type { SandboxRequest, SandboxResponse } from '../wire/protocol.js';
import type { RequestUsage } from '../../core/ports.js';
import { SlowLane, SLOW_LANE_MAX_WAIT_MS, SLOW_LANE_OTHERS_MS, SLOW_LANE_QUEUE } from './runaways.js';

/** A job of the pool, from when it is submitted until it is answered. */
export interface Pending {
  request: SandboxRequest;
  /** The line to write; for a job, made per child at dispatch from `wire` (wire/job-wire.ts). */
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

/**
 * Virtual-time cost of a sandbox that a job killed or made renew: of the order of what making a new one costs in CPU
 * time (0.4-0.7 s for an isolate or a child, more on a loaded host), rounded up so that a client sending bombs waits.
 */
export const RESTART_COST_MS = 1000;
/** Virtual-time cost charged when a job is handed out (before its CPU time is known). */
const DISPATCH_COST_MS = 1;

export interface SchedulerHooks {
  /** Whether a job handed out through the slow lane is in a child (the lane takes one at a time). */
  slowInFlight(): boolean;
  /** The slow lane has opened: look at the queue again. */
  laneOpen(): void;
}

export class Scheduler {
  /** One FIFO queue per client with jobs waiting. */
  private readonly queues = new Map<string, Pending[]>();
  /** Each client's virtual time (see the file's comment). */
  private readonly vtime = new Map<string, number>();
  /** The virtual time of the last job handed out: where a client with no debt starts. */
  private vnow = 0;
  /** Jobs waiting, all clients together. */
  waiting = 0;
  /** Repeat offenders: clients whose jobs keep hitting limits are served last, one job at a time (runaways.ts). */
  readonly lane = new SlowLane();
  private laneTimer: NodeJS.Timeout | undefined;
  private closed = false;
  /**
   * The client without strikes that had a job handed out last, and when; and when the last one before it that was another
   * client was. So for any client, when another one was last served is known (see protecting).
   */
  private served = '';
  private servedAt = -Infinity;
  private servedBeforeAt = -Infinity;

  constructor(
    private readonly limits: { queueLimit: number; clientQueueLimit: number },
    private readonly hooks: SchedulerHooks,
  ) {}

  /** Why a new job of `client` is refused at once (a full queue, or an offender held back); undefined when it is not. */
  refusal(client: string): SandboxBusyError | undefined {
    if (this.waiting >= this.limits.queueLimit) {
      return new SandboxBusyError('the expression sandbox has too many jobs waiting; retry later');
    }
    if ((this.queues.get(client)?.length ?? 0) >= this.limits.clientQueueLimit) {
      return new SandboxBusyError('this client has too many expression jobs waiting; retry later');
    }
    if (!this.lane.quiet && this.lane.isOffender(client) && this.protecting(client)) {
      // The slow lane holds few jobs and none for long: an offender is told to come back later rather than queued.
      const wait = this.lane.wait();
      if (wait > SLOW_LANE_MAX_WAIT_MS || (this.queues.get(client)?.length ?? 0) >= SLOW_LANE_QUEUE) {
        return new SandboxBusyError("this client's expressions keep exceeding their limits; retry later", Math.max(1, Math.ceil(wait / 1000)));
      }
    }
    return undefined;
  }

  /** Queue a job: at the end of its client's queue, or at the front (a job that goes back, not yet run). */
  enqueue(job: Pending, front: boolean): void {
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

  /** Add the cost of a job to its client's virtual time. */
  charge(client: string, cost: number): void {
    this.vtime.set(client, (this.vtime.get(client) ?? 0) + cost);
  }

  /** A job of `client` cost a sandbox: its virtual time, and the slow lane's share when it is an offender. */
  chargeRestart(client: string): void {
    this.charge(client, RESTART_COST_MS);
    if (!this.lane.quiet && this.lane.isOffender(client) && this.protecting(client)) this.lane.close(RESTART_COST_MS);
  }

  /**
   * A job of `client` ran and hit a limit: the client gets a strike; a time limit of an offender closes the slow lane
   * for its share (a sandbox it cost does so in chargeRestart).
   */
  strike(client: string, limit: 'time-limit' | 'memory-limit', timeoutMs: number): void {
    this.lane.strike(client, limit === 'memory-limit' ? 2 : 1);
    if (limit === 'time-limit' && this.lane.isOffender(client) && this.protecting(client)) this.lane.close(timeoutMs);
  }

  /**
   * The next job: the first of the queue of the waiting client with the least virtual time (ties: the first). Offenders
   * (runaways.ts) only when no other client has a job waiting, one at a time, and while the slow lane is open.
   */
  takeNext(): Pending | undefined {
    while (this.queues.size) {
      const turn = this.lane.quiet ? this.leastServed() : this.turnWithOffenders();
      if (!turn) return undefined;
      const { client, least, slow } = turn;
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

  /** Nobody has strikes: the waiting client with the least virtual time. */
  private leastServed(): { client: string; least: number; slow: boolean } {
    let client = '';
    let least = Infinity;
    for (const c of this.queues.keys()) {
      const v = this.vtime.get(c) ?? 0;
      if (v < least) {
        least = v;
        client = c;
      }
    }
    this.serve(client);
    return { client, least, slow: false };
  }

  /**
   * Someone has strikes: the waiting client without offence with the least virtual time; else the offender with the
   * least, through the slow lane while the lane protects someone (undefined while the lane is busy or closed).
   */
  private turnWithOffenders(): { client: string; least: number; slow: boolean } | undefined {
    let client = '';
    let least = Infinity;
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
    if (least !== Infinity) {
      if (this.lane.strikesOf(client) === 0) this.serve(client);
      return { client, least, slow: false };
    }
    if (slowClient === undefined) return undefined;
    let slow = false;
    if (this.protecting(slowClient)) {
      if (this.hooks.slowInFlight()) return undefined;
      const wait = this.lane.wait();
      if (wait > 0) {
        this.armLane(wait);
        return undefined;
      }
      slow = true;
    }
    return { client: slowClient, least: slowLeast, slow };
  }

  /** Whether the slow lane protects anyone from `offender`: a client without strikes has had a job handed out lately. */
  protecting(offender: string): boolean {
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

  /** Look at the queue again when the slow lane opens (the pool's keep-alive timer holds the process meanwhile). */
  private armLane(ms: number): void {
    if (this.laneTimer || this.closed) return;
    this.laneTimer = setTimeout(() => {
      this.laneTimer = undefined;
      this.hooks.laneOpen();
    }, Math.ceil(ms) + 1);
    this.laneTimer.unref();
  }

  /** Forget the clients with nothing waiting and no debt (they would start at `vnow` anyway). */
  private forgetSettled(): void {
    for (const [client, v] of this.vtime) if (v <= this.vnow && !this.queues.has(client)) this.vtime.delete(client);
  }

  /** Jobs waiting, per client. */
  queued(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const [client, q] of this.queues) out[client] = q.length;
    return out;
  }

  /** Fail every waiting job with `error`. */
  rejectAll(error: Error): void {
    for (const q of this.queues.values()) for (const job of q) job.reject(error);
    this.queues.clear();
    this.waiting = 0;
  }

  /** The pool is closing: no lane timer any more. */
  close(): void {
    this.closed = true;
    if (this.laneTimer) clearTimeout(this.laneTimer);
    this.laneTimer = undefined;
  }
}
