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
