/**
 * Work that grows with a request, done in slices. The server runs every request on one event loop: a step that walks
 * a 10,000-key schema at once (checking each declaration, preparing it, evaluating it, writing the answer) held the
 * loop 65-90 ms, and every other request, `GET /live` included, waited that long (bench/RESULTS.md).
 *
 * Such a step is written once, as a generator (`Steps`) that yields at a checkpoint every STEP units of work (keys,
 * objects). Synchronous callers run it to the end at once (`runAtOnce`); the server's path runs it in slices
 * (`runInSlices`): at each checkpoint it looks at the clock, and once the loop has been held SLICE_MS since it last
 * gave way, it waits for the loop's next turn (setImmediate), so that waiting I/O (other requests) is served first.
 * Work smaller than STEP units never reaches a checkpoint: small requests neither read the clock nor wait.
 */
import { setImmediate as nextTurn } from 'node:timers/promises';

/** A step of work that yields at its checkpoints and returns a T. */
export type Steps<T> = Generator<undefined, T, undefined>;

/** Units of work (keys, objects) between two checkpoints. A checkpoint costs one clock reading. */
export const STEP = 256;

/** How long the loop is held at most between two turns it gives away (ms), checked at each checkpoint. */
export const SLICE_MS = 4;

/**
 * When the loop was last given away by a slice. Shared by every sliced step of the process: a step that starts in the
 * middle of another's slice counts the time already spent. A step that starts long after (in another turn of the loop)
 * gives way at its first checkpoint: one wait more than needed, never a longer hold.
 */
let resumedAt = 0;

/** Turns of the loop given away so far (tests wait on it: a request is being worked on in slices). */
let turns = 0;

/** How many turns of the event loop sliced work has given away in this process. */
export function turnsGiven(): number {
  return turns;
}

async function giveWay(): Promise<void> {
  turns++;
  await nextTurn();
  resumedAt = performance.now();
}

/** True at a checkpoint when the loop has been held SLICE_MS or more since a slice last gave it away. */
function sliceSpent(): boolean {
  return performance.now() - resumedAt >= SLICE_MS;
}

/** Run steps to the end at once (callers that are not on a shared event loop: the CLI, tests, small inputs). */
export function runAtOnce<T>(steps: Steps<T>): T {
  for (;;) {
    const r = steps.next();
    if (r.done) return r.value;
  }
}

/** Run steps in slices of about SLICE_MS, giving the event loop a turn between them (see the module comment). */
export async function runInSlices<T>(steps: Steps<T>): Promise<T> {
  for (;;) {
    const r = steps.next();
    if (r.done) return r.value;
    if (sliceSpent()) await giveWay();
  }
}

/** A checkpoint of async work: gives the loop a turn when the slice is spent (see runInSlices). */
export async function checkpoint(): Promise<void> {
  if (sliceSpent()) await giveWay();
}

/** Run `work` on every item, at most `n` at once; the first failure stops the rest and is thrown. */
export async function eachAtMost<T>(items: readonly T[], n: number, work: (item: T, index: number) => Promise<void>): Promise<void> {
  let next = 0;
  let failed = false;
  const worker = async (): Promise<void> => {
    while (!failed && next < items.length) {
      const i = next++;
      try {
        await work(items[i]!, i);
        // A set without expressions or I/O never gives the loop away: after each, give it away once a slice is spent.
        await checkpoint();
      } catch (e) {
        failed = true;
        throw e;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(n, items.length)) }, worker));
}
