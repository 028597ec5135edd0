/**
 * Kept answers (SandboxOptions.answers): answers of jobs that can be given again without running.
 *
 * A job can be answered again when its every const passed, it has no tests, and it read neither the clock,
 * Math.random nor `_.uniqueId` (isolate/prelude.ts; the child says so with `pure`). The sealed realm keeps nothing
 * else from one job to the next, so such a job's answer is a function of the job alone. Keyed by the client and the
 * job's exact wire text (its static half's id, which is never reused for another text, and all of its values; see
 * answerKey), so an answer is only ever given to the client whose identical job produced it: no client learns, even
 * from timing, what another one evaluated. Failed jobs, limit outcomes and jobs without a client (CLI, `.configu`
 * rendering) are never kept.
 */
import { BudgetedLru, cacheBudget, estimateAnswerBytes } from '../../core/cache-budget.js';
import { freezeDeep } from '../../core/frozen.js';
import type { ExpressionResult } from '../../core/ports.js';

/** The key of a job's answer (kept answers, remembered runaways): its client and its exact wire text. */
export const answerKey = (client: string, head: string): string => `${client}\u0000${head}`;

/**
 * The kept answers as the process's cache budget sees them (core/cache-budget.ts): at most `max` answers, and their
 * estimated memory (from the key's length, the consts and their text, counted when an answer is kept) counts against
 * the process's cache memory ceiling.
 */
export class KeptAnswers extends BudgetedLru<ExpressionResult> {
  /** Jobs answered from here. */
  given = 0;

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

  /** The kept answer of the job, counted as given; undefined when there is none. */
  answer(key: string): ExpressionResult | undefined {
    const known = this.get(key);
    if (known) this.given++;
    return known;
  }

  /** Keep the answer of a job that ran, when it can be given again (see above). */
  offer(key: string, result: ExpressionResult, pure: boolean | undefined): void {
    if (pure === true && result.tests.length === 0 && result.consts.every((c) => c.ok)) this.set(key, freezeDeep(result));
  }
}
