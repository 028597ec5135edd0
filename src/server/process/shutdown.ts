/**
 * Shutting one serving process down (docs/server.md): /ready answers 503 at once; after SIGTERM the server keeps
 * listening and serving for the drain period (not after SIGINT, nor on a fatal path); then it keeps answering, with
 * `Connection: close`, until no request is in flight (at most half the grace period, 5 s at most); then it stops
 * listening, closes idle keep-alive connections and lets in-flight requests finish; then it closes the stores, the
 * sandbox and the tracer. When the grace period runs out, the remaining connections are cut and the process exits
 * anyway. A second stop during the drain (a Ctrl-C) ends the drain now.
 */
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Lifecycle } from './lifecycle.js';
import type { ServerSettings } from './settings.js';

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref());

export interface ShutdownInput {
  app: FastifyInstance;
  lifecycle: Lifecycle;
  settings: ServerSettings;
  log: Logger;
  /** Close the stores, the sandbox and the tracer (never rejects). */
  closeResources: () => Promise<unknown>;
}

export interface Shutdown {
  /** Resolves with the exit code once shutdown is complete (the caller exits). */
  done: Promise<number>;
  shutdown(reason: string, exitCode?: number): Promise<number>;
}

export function createShutdown(input: ShutdownInput): Shutdown {
  const { lifecycle, settings, log } = input;
  let resolveDone!: (code: number) => void;
  const done = new Promise<number>((r) => (resolveDone = r));
  let shuttingDown: Promise<number> | undefined;
  const drain: { end?: () => void } = {};

  const shutdown = (reason: string, exitCode = 0): Promise<number> => {
    if (shuttingDown) {
      // A Ctrl-C (or any later stop) during the drain ends the drain now; the rest of the shutdown is unchanged.
      if (reason !== 'SIGTERM') drain.end?.();
      return shuttingDown;
    }
    lifecycle.beginShutdown();
    // SIGTERM (an orchestrator, a load balancer's host) drains: the server keeps listening and serving, not ready, for
    // drainSeconds, so traffic routed to it before the balancer noticed is still answered. SIGINT (a terminal's
    // Ctrl-C) and fatal paths stop at once.
    const drainMs = reason === 'SIGTERM' ? settings.shutdown.drainSeconds * 1000 : 0;
    log.info(
      { reason, inflight: lifecycle.inflight, drainSeconds: drainMs / 1000, graceSeconds: settings.shutdown.gracePeriodSeconds },
      'shutting down: not ready',
    );
    shuttingDown = stop(input, drainMs, drain).then(() => {
      resolveDone(exitCode);
      return exitCode;
    });
    return shuttingDown;
  };
  return { done, shutdown };
}

/** The drain (`drainMs`, ended early by `drain.end`), the wait for requests in flight, and the closing. */
async function stop(input: ShutdownInput, drainMs: number, drain: { end?: () => void }): Promise<void> {
  const { app, lifecycle, settings, log } = input;
  const graceMs = settings.shutdown.gracePeriodSeconds * 1000;
  let forced = false;
  if (drainMs > 0) {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, drainMs);
      drain.end = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    drain.end = undefined;
    log.info({ inflight: lifecycle.inflight }, 'drain over: no longer accepting connections');
  }
  const deadline = setTimeout(() => {
    forced = true;
    log.warn({ inflight: lifecycle.inflight }, 'grace period over: closing the remaining connections');
    app.server.closeAllConnections?.();
  }, graceMs);
  deadline.unref();
  // Keep answering (with `Connection: close`) until nothing is in flight, so /ready reports 503 to whoever asks.
  await lifecycle.whenIdle(Math.min(graceMs / 2, 5000));
  await Promise.race([app.close(), sleep(graceMs + 1000)]);
  await Promise.race([input.closeResources(), sleep(2000)]);
  clearTimeout(deadline);
  log.info({ forced }, 'stopped');
}
