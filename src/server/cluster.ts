/**
 * `--workers N` (N > 1): node:cluster. The primary validates the configuration once (so a bad file fails with one
 * message, not N), forks N workers that each load it and share the port, and reports ready when every worker is
 * ready. A worker that dies after start-up is replaced; one that fails start-up makes the primary stop with that
 * worker's message and exit 1. SIGTERM/SIGINT is passed on to every worker; the primary exits 0 once all are gone.
 */
import cluster, { type Worker } from 'node:cluster';
import { availableParallelism } from 'node:os';
import type { Logger } from 'pino';
import type { ServerSettings } from './settings.js';

/** Messages from a worker to the primary. */
export type WorkerMessage = { cfgu: 'ready'; port: number } | { cfgu: 'fatal'; message: string };

const isWorkerMessage = (m: unknown): m is WorkerMessage =>
  typeof m === 'object' && m !== null && ((m as WorkerMessage).cfgu === 'ready' || (m as WorkerMessage).cfgu === 'fatal');

export function runPrimary(settings: ServerSettings, log: Logger): Promise<number> {
  const count = settings.workers;
  const graceMs = settings.shutdown.gracePeriodSeconds * 1000;
  const ready = new Set<number>();
  const everReady = new Set<number>();
  let reportedReady = false;
  let stopping = false;
  let exitCode = 0;
  let recentCrashes: number[] = [];

  return new Promise<number>((resolve) => {
    const finishIfDone = () => {
      if (stopping && Object.keys(cluster.workers ?? {}).length === 0) resolve(exitCode);
    };

    const stopAll = (reason: string, code: number) => {
      if (stopping) return;
      stopping = true;
      exitCode = code;
      log.info({ reason }, 'shutting down: stopping workers');
      for (const w of Object.values(cluster.workers ?? {})) w?.process.kill('SIGTERM');
      const hard = setTimeout(() => {
        for (const w of Object.values(cluster.workers ?? {})) {
          log.warn({ worker: w?.process.pid }, 'worker still running after the grace period: killing it');
          w?.process.kill('SIGKILL');
        }
      }, graceMs + 3000);
      hard.unref();
      finishIfDone();
    };

    // Sandbox children per worker, unless the operator chose (CONFIGU_EXPRESSION_WORKERS): share the cores between
    // the workers, so the whole server runs about one sandbox process per core. Measured on 2 cores (bench/RESULTS.md):
    // 2 workers x 1 child served the 10-key workload ~15% faster than 2 x 2, with less memory.
    const sandboxPerWorker = String(Math.max(1, Math.round(availableParallelism() / count)));
    const fork = (): Worker => {
      const w = cluster.fork({
        CFGU_CLUSTER_WORKER: '1',
        ...(process.env.CONFIGU_EXPRESSION_WORKERS ? {} : { CONFIGU_EXPRESSION_WORKERS: sandboxPerWorker }),
      });
      w.on('message', (msg: unknown) => {
        if (!isWorkerMessage(msg)) return;
        if (msg.cfgu === 'ready') {
          ready.add(w.id);
          everReady.add(w.id);
          if (!reportedReady && ready.size >= count) {
            reportedReady = true;
            log.info({ workers: count, port: msg.port }, 'ready');
          } else if (reportedReady) {
            log.info({ worker: w.process.pid }, 'replacement worker ready');
          }
        } else if (msg.cfgu === 'fatal') {
          // A start-up failure is the same in every worker: say it once and stop.
          if (!stopping) {
            process.stderr.write(`${msg.message}\n`);
            stopAll('a worker failed to start', 1);
          }
        }
      });
      return w;
    };

    cluster.on('exit', (w, code, signal) => {
      const wasReady = everReady.has(w.id);
      ready.delete(w.id);
      if (stopping) {
        finishIfDone();
        return;
      }
      if (!wasReady && code !== 0) {
        // Died during start-up. Its 'fatal' message (if any) may still be in flight on the IPC channel: give it a
        // moment, then stop with a generic line if none came.
        setTimeout(() => {
          if (stopping) return finishIfDone();
          process.stderr.write(`cfgu serve: a worker exited during start-up (code ${code ?? signal}); stopping\n`);
          stopAll('a worker failed to start', 1);
        }, 200);
        return;
      }
      const now = Date.now();
      recentCrashes = recentCrashes.filter((t) => now - t < 60_000);
      recentCrashes.push(now);
      if (recentCrashes.length > 10) {
        log.error({ crashes: recentCrashes.length }, 'workers keep dying: stopping');
        stopAll('crash loop', 1);
        return;
      }
      log.warn({ worker: w.process.pid, code, signal }, 'worker died: starting a replacement');
      setTimeout(() => {
        if (!stopping) fork();
      }, Math.min(200 * recentCrashes.length, 2000)).unref();
    });

    process.once('SIGTERM', () => stopAll('SIGTERM', 0));
    process.once('SIGINT', () => stopAll('SIGINT', 0));

    log.info({ workers: count }, 'starting workers');
    for (let i = 0; i < count; i++) fork();
  });
}

/** In a worker: tell the primary. */
export function notifyPrimary(msg: WorkerMessage): void {
  if (cluster.isWorker && process.send) process.send(msg);
}
