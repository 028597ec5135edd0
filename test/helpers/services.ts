/**
 * Tests that need a real service (PostgreSQL, MariaDB, Redis, etcd, ...) call `requireService` first:
 *
 *   test('reads', async (t) => {
 *     if (!(await requireService(t, 'redis', probeTcp(6379)))) return;
 *     ...
 *   });
 *
 * When the service cannot be reached the test is SKIPPED with a loud reason on stderr, except under `CI=true`, where
 * the test FAILS instead (CI must never pass by skipping). Probe results are cached per service name for the process.
 */
import { connect } from 'node:net';
import type { TestContext } from 'node:test';

export type Probe = () => Promise<unknown>;

const results = new Map<string, Promise<string | undefined>>();

export const isCI = (): boolean => /^(1|true|yes)$/i.test(process.env.CI ?? '');

/** A probe that opens (and closes) a TCP connection. */
export function probeTcp(port: number, host = '127.0.0.1', timeoutMs = 2000): Probe {
  return () =>
    new Promise<void>((resolve, reject) => {
      const socket = connect({ host, port });
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new Error(`no answer from ${host}:${port} in ${timeoutMs} ms`));
      }, timeoutMs);
      socket.once('connect', () => {
        clearTimeout(timer);
        socket.end();
        resolve();
      });
      socket.once('error', (e) => {
        clearTimeout(timer);
        reject(e);
      });
    });
}

/** Run the probe once per service name (cached); resolves to the failure reason, or undefined when reachable. */
export function checkService(name: string, probe: Probe, timeoutMs = 60_000): Promise<string | undefined> {
  let r = results.get(name);
  if (!r) {
    r = (async () => {
      let timer: NodeJS.Timeout | undefined;
      try {
        await Promise.race([
          probe(),
          new Promise((_, reject) => {
            timer = setTimeout(() => reject(new Error(`probe timed out after ${timeoutMs} ms`)), timeoutMs);
          }),
        ]);
        return undefined;
      } catch (e) {
        return e instanceof Error ? e.message || e.name : String(e);
      } finally {
        clearTimeout(timer);
      }
    })();
    results.set(name, r);
  }
  return r;
}

/** Forget a cached probe result (after a test stopped and restarted a service). */
export function forgetService(name: string): void {
  results.delete(name);
}

/**
 * The one place a test skips for a missing precondition (a binary, a service, a browser): prints the reason loudly
 * and skips `t`, or under CI=true throws (CI must never pass by skipping). Returns false so callers can `return`.
 */
export function requireOrSkip(t: TestContext, what: string, reason: string): false {
  const message = `${what} is not available (${reason})`;
  if (isCI()) throw new Error(`${message}; CI=true forbids skipping a test that needs it`);
  process.stderr.write(`\n*** SKIPPED "${t.name}": ${message} ***\n\n`);
  t.skip(`SKIPPED: ${message}`);
  return false;
}

/**
 * True when the service answers. Otherwise skips the test with a loud reason (returns false), or under CI=true
 * fails it (throws).
 */
export async function requireService(t: TestContext, name: string, probe: Probe): Promise<boolean> {
  const reason = await checkService(name, probe);
  if (reason === undefined) return true;
  return requireOrSkip(t, `service "${name}"`, `not reachable: ${reason}`);
}
