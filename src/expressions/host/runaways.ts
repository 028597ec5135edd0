/**
 * What the pool remembers of runaway jobs (jobs that hit the time or the memory limit), so that they cost the other
 * clients as little as possible (docs/expressions.md, "Runaways"):
 *
 * - `RunawayMemo`: the limit answer of a job, by client and the job's exact wire text, for a while. The same job of
 *   the same client again is answered with it at once, without running: a broken schema sent again and again costs
 *   one run (one dead sandbox for a memory bomb) per `RUNAWAY_TTL_MS`, not one per request.
 * - `SlowLane`: clients whose jobs keep hitting limits (strikes, decaying) are served last, one job at a time in the
 *   whole pool, and after each limit their lane stays closed long enough that what their runaways cost stays a small
 *   share (`SLOW_LANE_SHARE`) of the time.
 */
import type { ExpressionResult } from '../../core/ports.js';

/** How long a limit answer is given again without running the job (ms). */
export const RUNAWAY_TTL_MS = 5 * 60_000;
/** Characters of keys and answers the memo holds at most (about twice that in bytes). */
export const RUNAWAY_MEMO_CHARS = 4 * 1024 * 1024;

/** Whether a job's answer says it hit the time or the memory limit. */
export function hitLimit(result: ExpressionResult): 'time-limit' | 'memory-limit' | undefined {
  let hit: 'time-limit' | 'memory-limit' | undefined;
  for (const c of result.consts) if (!c.ok && (c.kind === 'time-limit' || c.kind === 'memory-limit')) hit = c.kind;
  if (hit === 'memory-limit') return hit;
  for (const t of result.tests) if (!t.ok && (t.kind === 'time-limit' || t.kind === 'memory-limit')) hit = t.kind;
  return hit;
}

function resultChars(result: ExpressionResult): number {
  let n = 1;
  for (const c of result.consts) n += c.key.length + (c.ok ? c.value.length : (c.message?.length ?? 0));
  for (const t of result.tests) n += t.key.length + (t.message?.length ?? 0);
  return n;
}

interface MemoEntry {
  result: ExpressionResult;
  expires: number;
  size: number;
}

/**
 * Limit answers by key (the pool's key: client and exact wire text), at most `max` entries and `maxChars`
 * characters, each for `ttlMs` from when it was run (a hit does not extend it: the job runs again after that, and a
 * job that now passes is no longer refused). The oldest entry goes first.
 */
export class RunawayMemo {
  private readonly entries = new Map<string, MemoEntry>();
  private chars = 0;
  /** Jobs answered from the memo. */
  given = 0;

  constructor(
    readonly max: number,
    readonly maxChars = RUNAWAY_MEMO_CHARS,
    readonly ttlMs = RUNAWAY_TTL_MS,
    private readonly now: () => number = () => performance.now(),
  ) {}

  get size(): number {
    return this.entries.size;
  }

  get(key: string): ExpressionResult | undefined {
    const e = this.entries.get(key);
    if (!e) return undefined;
    if (e.expires <= this.now()) {
      this.delete(key, e);
      return undefined;
    }
    this.given++;
    return e.result;
  }

  set(key: string, result: ExpressionResult): void {
    if (this.max <= 0) return;
    const size = key.length + resultChars(result);
    if (size > this.maxChars) return;
    const old = this.entries.get(key);
    if (old) this.delete(key, old);
    this.entries.set(key, { result, expires: this.now() + this.ttlMs, size });
    this.chars += size;
    for (const [k, e] of this.entries) {
      if (this.entries.size <= this.max && this.chars <= this.maxChars) break;
      this.delete(k, e);
    }
  }

  private delete(key: string, e: MemoEntry): void {
    this.entries.delete(key);
    this.chars -= e.size;
  }
}

/** Strikes (limits hit by jobs that ran) from which a client is in the slow lane. */
export const OFFENDER_STRIKES = 3;
/** Strikes halve every this many ms. */
export const STRIKE_HALF_LIFE_MS = 60_000;
/** The share of the time that runaways of the slow lane may cost, all offenders together. */
export const SLOW_LANE_SHARE = 0.1;
/** Jobs an offender may have waiting; beyond it, or while the lane is closed longer than MAX_WAIT, a job is refused. */
export const SLOW_LANE_QUEUE = 2;
export const SLOW_LANE_MAX_WAIT_MS = 1000;
/**
 * The lane holds an offender back only while it protects someone: while a client without strikes has had a job handed
 * out within this many ms. A client alone (every request from one address, say) is not held back, since nobody else
 * waits for it.
 */
export const SLOW_LANE_OTHERS_MS = 10_000;
/** Clients whose strikes are remembered at most (the oldest are forgotten first). */
const STRIKE_CLIENTS = 10_000;

/**
 * Repeat offenders. A client gets a strike for every job of its own that ran and hit the time limit, two for the memory
 * limit (it costs a sandbox); an answer from the memo is no strike: it cost nothing. Strikes halve every STRIKE_HALF_LIFE_MS. From OFFENDER_STRIKES on, the
 * client is an offender: the pool takes its jobs only when no other client has a job waiting, one at a time in the
 * whole pool (all offenders share one lane), and only while the lane is open. Every runaway of an offender (its CPU
 * time, the sandbox it cost) closes the lane for (1 / SLOW_LANE_SHARE - 1) times that cost, so that the runaways of
 * all offenders together use at most about SLOW_LANE_SHARE of the time. All this only while the lane protects another
 * client (SLOW_LANE_OTHERS_MS).
 */
export class SlowLane {
  private readonly strikes = new Map<string, { n: number; at: number }>();
  /** When the lane admits a job again (this.now() time). */
  openAt = 0;

  constructor(private readonly now: () => number = () => performance.now()) {}

  /** Whether any client has strikes (else nobody is an offender: the common path skips every other look-up). */
  get quiet(): boolean {
    return this.strikes.size === 0;
  }

  /** A job of the client hit a limit: `weight` strikes (2 for a memory limit, which costs a sandbox; else 1). */
  strike(client: string, weight = 1): void {
    const now = this.now();
    const s = this.strikes.get(client);
    const n = (s ? s.n * 2 ** (-(now - s.at) / STRIKE_HALF_LIFE_MS) : 0) + weight;
    this.strikes.delete(client);
    this.strikes.set(client, { n, at: now });
    if (this.strikes.size > STRIKE_CLIENTS) this.strikes.delete(this.strikes.keys().next().value!);
  }

  /** The client's strikes now (decayed). */
  strikesOf(client: string): number {
    const s = this.strikes.get(client);
    if (!s) return 0;
    const n = s.n * 2 ** (-(this.now() - s.at) / STRIKE_HALF_LIFE_MS);
    if (n < 0.5) {
      this.strikes.delete(client);
      return 0;
    }
    return n;
  }

  isOffender(client: string): boolean {
    // Half a strike of slack: strikes decay from the moment they are counted, so three in a row sum to a little under 3.
    return this.strikes.size > 0 && this.strikesOf(client) > OFFENDER_STRIKES - 0.5;
  }

  /** A runaway of an offender cost `ms` (CPU time, or a sandbox): the lane stays closed for its share. */
  close(ms: number): void {
    this.openAt = Math.max(this.openAt, this.now()) + (ms * (1 - SLOW_LANE_SHARE)) / SLOW_LANE_SHARE;
  }

  /** Ms until the lane opens (0 when open). */
  wait(): number {
    return Math.max(0, this.openAt - this.now());
  }
}
