/**
 * What a watched pipeline depends on, and when to evaluate it again: shared by the server's watchers
 * (src/server/watch.ts) and `cfgu eval --watch`.
 *
 * A command of set `prod/eu` reads the root, `prod` and `prod/eu` (inheritance), so a change notice for any of those
 * sets concerns it; a notice without sets concerns every pipeline of that store.
 */
import { parseSet } from './names.js';
import type { ChangeNotice, StoreResolver } from './ports.js';
import type { EvalCommandInput } from './types.js';

/** Store name -> the sets the pipeline reads from it. Commands naming an unknown store or a bad set are skipped. */
export function setsRead(commands: readonly EvalCommandInput[], stores: StoreResolver): Map<string, Set<string>> {
  const reads = new Map<string, Set<string>>();
  for (const c of commands) {
    let name: string;
    try {
      name = stores.resolve(c.store).name;
    } catch {
      continue; // the evaluation reports it
    }
    const parsed = parseSet(c.set ?? '');
    if ('problem' in parsed) continue;
    let sets = reads.get(name);
    if (!sets) reads.set(name, (sets = new Set()));
    for (const s of parsed.hierarchy) sets.add(s);
  }
  return reads;
}

/** The notice may change what a pipeline reading `sets` gets. */
export function noticeConcerns(sets: ReadonlySet<string> | undefined, notice: ChangeNotice): boolean {
  if (!sets) return false;
  return notice.sets === undefined || notice.sets.some((s) => sets.has(s));
}

/**
 * Runs `evaluate` after change notices: the first notice starts a `delayMs` wait, notices meanwhile join it (a burst
 * costs one evaluation), and a notice during an evaluation starts one more wait once it is done (never two at once).
 */
export class Debouncer {
  private timer: ReturnType<typeof setTimeout> | undefined;
  private running = false;
  private again = false;
  private stopped = false;

  constructor(
    private readonly evaluate: () => Promise<void>,
    private readonly delayMs: number,
  ) {}

  /** Waiting for its delay or evaluating. */
  get pending(): boolean {
    return this.timer !== undefined || this.running;
  }

  schedule(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.run();
    }, this.delayMs);
  }

  /** Evaluate now (the first evaluation); later notices wait for it. */
  async run(): Promise<void> {
    this.running = true;
    this.again = false;
    try {
      await this.evaluate();
    } finally {
      this.running = false;
      if (this.again) this.schedule();
    }
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }
}
