/**
 * The pool's children: those that take jobs and the warm spares (SandboxOptions.workers and spares), as one set of
 * ChildHandle (child-handle.ts), with what the pool asks of them all together.
 */
import { ChildHandle, type ChildEvents, type ChildLimits, type SandboxFiles } from './child-handle.js';

export class Children extends Set<ChildHandle> {
  /** Child processes started since the pool started. */
  spawns = 0;

  constructor(
    private readonly files: SandboxFiles,
    private readonly limits: ChildLimits & { workers: number; spares: number },
    private readonly events: ChildEvents,
  ) {
    super();
  }

  /** The children that take jobs (not spares). */
  activeCount(): number {
    let n = 0;
    for (const w of this) if (!w.spare) n++;
    return n;
  }

  /** Whether every child is ready and there are as many as the options say (spares included). */
  allReady(): boolean {
    let active = 0;
    let spares = 0;
    for (const w of this) {
      if (!w.ready) return false;
      if (w.spare) spares++;
      else active++;
    }
    return active >= this.limits.workers && spares >= this.limits.spares;
  }

  /**
   * Keep `workers` children taking jobs and `spares` warm ones: a missing worker is replaced by a spare (a started one
   * first), and every missing child is started.
   */
  rebalance(): void {
    let missing = this.limits.workers - this.activeCount();
    const spares = [...this].filter((w) => w.spare).sort((a, b) => Number(b.ready) - Number(a.ready));
    while (missing > 0 && spares.length) {
      const w = spares.shift()!;
      w.spare = false;
      missing--;
    }
    for (; missing > 0; missing--) this.spawn(false);
    for (let n = spares.length; n < this.limits.spares; n++) this.spawn(true);
  }

  private spawn(spare: boolean): void {
    this.add(new ChildHandle(this.files, this.limits, spare, this.events));
    this.spawns++;
  }

  /** The child to write the next job to: of those that can take one, the one with the fewest jobs in flight. */
  pick(now: number): ChildHandle | undefined {
    let best: ChildHandle | undefined;
    for (const w of this) {
      if (!w.canTake(now)) continue;
      if (!best || w.inflight.length < best.inflight.length) best = w;
    }
    return best;
  }

  /** Process ids of the children that take jobs (`spare` false) or of the spares (`spare` true). */
  pids(spare: boolean): number[] {
    return [...this].filter((w) => w.spare === spare).map((w) => w.proc.pid!).filter((p) => typeof p === 'number');
  }

  /** Jobs written to the children and not yet answered, all together. */
  inflight(): number {
    let n = 0;
    for (const w of this) n += w.inflight.length;
    return n;
  }

  /** Whether a job handed out through the slow lane is in a child (the lane takes one at a time). */
  slowInFlight(): boolean {
    for (const w of this) for (const j of w.inflight) if (j.slow) return true;
    return false;
  }

  /** The static halves the children hold, all together: the host's record of each child counts as the child does. */
  statics(): { bytes: number; entries: number } {
    let bytes = 0;
    let entries = 0;
    for (const w of this) {
      bytes += w.statics.calculatedSize;
      entries += w.statics.size;
    }
    return { bytes, entries };
  }
}
