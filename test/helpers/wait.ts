/**
 * Waiting on a condition instead of a clock: `waitFor` polls `check` until it holds. The limit is a hang guard (a
 * condition that never comes true fails the test instead of hanging the suite), generous enough for a loaded machine,
 * never a timing goal: timing goals live in bench/.
 */
const pause = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export const HANG_GUARD_MS = 120_000;

export async function waitFor<T>(what: string, check: () => Promise<T | false | undefined> | T | false | undefined, hangGuardMs = HANG_GUARD_MS): Promise<T> {
  const end = Date.now() + hangGuardMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v !== false && v !== undefined) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) throw new Error(`${what}: never happened${last ? ` (last error: ${String(last)})` : ''}`);
    await pause(50);
  }
}

/**
 * The promise, or a rejection after `ms` (a hang guard, not a timing goal). The guard's timer is cleared as soon as
 * the promise settles: a guard of minutes left pending would keep the test file's process alive that long after its
 * last test.
 */
export function within<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const guard = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`still running after ${ms} ms`)), ms);
  });
  return Promise.race([promise, guard]).finally(() => clearTimeout(timer));
}
