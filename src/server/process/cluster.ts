/**
 * `--workers N` (N > 1): node:cluster. The primary validates the configuration once (so a bad file fails with one
 * message, not N), forks N workers that each load it and share the port, and reports ready when every worker is
 * ready.
 *
 * Deaths: until the server has been ready once, a worker that fails start-up means the configuration is bad: the
 * primary stops with that worker's message and exit code. From then on the primary never stops because workers die
 * (requests can kill a worker; they must not kill the server): every death is logged and the worker is replaced after
 * a backoff that doubles with each death in a row (capped), however often it happens, including replacements that
 * die before they are ready. SIGTERM/SIGINT is passed on to every worker; the primary exits 0 once all are gone.
 */
import cluster, { type Worker } from 'node:cluster';
import { createServer } from 'node:net';
import { availableParallelism } from 'node:os';
import type { Logger } from 'pino';
import type { ServerSettings } from './settings.js';
import { serveClusterMetrics } from '../observe/cluster-metrics.js';

/** Messages from a worker to the primary. */
export type WorkerMessage = { cfgu: 'ready'; port: number } | { cfgu: 'fatal'; message: string; code?: number };

const isWorkerMessage = (m: unknown): m is WorkerMessage =>
  typeof m === 'object' && m !== null && ((m as WorkerMessage).cfgu === 'ready' || (m as WorkerMessage).cfgu === 'fatal');

/** Environment variable that carries the port the primary chose for `--port 0` to every worker. */
export const CLUSTER_PORT_ENV = 'CFGU_CLUSTER_PORT';

/** Respawn backoff: the first replacement after `RESPAWN_BASE_MS`, doubling per death in a row, at most the cap. */
export const RESPAWN_BASE_MS = 100;
export const RESPAWN_CAP_MS = 10_000;
/** A death this long after the previous one starts a new streak (the backoff falls back to its base). */
export const RESPAWN_CALM_MS = 60_000;

export function respawnDelay(streak: number): number {
  return Math.min(RESPAWN_BASE_MS * 2 ** Math.max(0, Math.min(streak - 1, 20)), RESPAWN_CAP_MS);
}

/**
 * `--port 0`: the primary picks the port once, so that every worker, including replacements forked after all workers
 * died (when node:cluster closes the shared listening socket), listens on the same one.
 */
function pickPort(host: string): Promise<number | undefined> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', () => resolve(undefined)); // the workers' own listen will report it
    probe.listen(0, host, () => {
      const a = probe.address();
      probe.close(() => resolve(typeof a === 'object' && a ? a.port : undefined));
    });
  });
}

/**
 * Primary -> worker: whether request lines are on (`on`/`off`) as SIGUSR2 last left them, so that a worker forked to
 * replace a dead one starts like the others rather than with the configured default.
 */
export const REQUEST_LINES_ENV = 'CFGU_REQUEST_LINES';

/** In a worker: the request-line setting the primary passed (undefined outside a cluster or when not given). */
export function inheritedRequestLines(): boolean | undefined {
  if (!cluster.isWorker) return undefined;
  const raw = process.env[REQUEST_LINES_ENV];
  return raw === 'on' ? true : raw === 'off' ? false : undefined;
}

export async function runPrimary(settings: ServerSettings, log: Logger): Promise<number> {
  const count = settings.workers;
  // Request lines as SIGUSR2 last set them (the configured default until then): what every new worker starts with.
  let requestLines = settings.log.enabled;
  const pinned = settings.http.port === 0 ? await pickPort(settings.http.host) : undefined;
  const graceMs = settings.shutdown.gracePeriodSeconds * 1000;
  const everReady = new Set<number>();
  let serverReady = false;
  let stopping = false;
  let exitCode = 0;
  let streak = 0;
  let lastDeath = 0;
  const pendingRespawns = new Set<NodeJS.Timeout>();

  return new Promise<number>((resolve) => {
    const finishIfDone = () => {
      if (stopping && Object.keys(cluster.workers ?? {}).length === 0) resolve(exitCode);
    };

    const stopAll = (reason: string, code: number) => {
      if (stopping) {
        // A Ctrl-C during the workers' drain ends it: passed on, each worker stops draining.
        if (reason === 'SIGINT') for (const w of Object.values(cluster.workers ?? {})) w?.process.kill('SIGINT');
        return;
      }
      stopping = true;
      exitCode = code;
      for (const t of pendingRespawns) clearTimeout(t);
      pendingRespawns.clear();
      log.info({ reason }, 'shutting down: stopping workers');
      // Each worker drains after SIGTERM (docs/server.md); a Ctrl-C, or a failed start-up, stops them without a drain.
      const signal = reason === 'SIGTERM' ? 'SIGTERM' : 'SIGINT';
      for (const w of Object.values(cluster.workers ?? {})) w?.process.kill(signal);
      const hard = setTimeout(() => {
        for (const w of Object.values(cluster.workers ?? {})) {
          log.warn({ worker: w?.process.pid }, 'worker still running after the grace period: killing it');
          w?.process.kill('SIGKILL');
        }
      }, graceMs + (reason === 'SIGTERM' ? settings.shutdown.drainSeconds * 1000 : 0) + 3000);
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
        [REQUEST_LINES_ENV]: requestLines ? 'on' : 'off',
        ...(process.env.CONFIGU_EXPRESSION_WORKERS ? {} : { CONFIGU_EXPRESSION_WORKERS: sandboxPerWorker }),
        ...(pinned !== undefined ? { [CLUSTER_PORT_ENV]: String(pinned) } : {}),
      });
      if (serverReady) log.info({ worker: w.process.pid }, 'replacement worker started');
      w.on('message', (msg: unknown) => {
        if (!isWorkerMessage(msg)) return;
        if (msg.cfgu === 'ready') {
          everReady.add(w.id);
          if (!serverReady && everReady.size >= count) {
            serverReady = true;
            log.info({ workers: count, port: msg.port }, 'ready');
          } else if (serverReady) {
            log.info({ worker: w.process.pid, port: msg.port }, 'replacement worker ready');
          }
        } else if (msg.cfgu === 'fatal') {
          if (!serverReady) {
            // The first start-up: the failure is the same in every worker, so say it once and stop.
            if (!stopping) {
              process.stderr.write(`${msg.message}\n`);
              stopAll('a worker failed to start', msg.code ?? 1);
            }
          } else {
            // The server has served: keep the others serving, and keep trying (the 'exit' handler respawns).
            log.error({ worker: w.process.pid, reason: msg.message }, 'a replacement worker failed to start');
          }
        }
      });
      return w;
    };

    const respawnLater = () => {
      const now = Date.now();
      streak = now - lastDeath > RESPAWN_CALM_MS ? 1 : streak + 1;
      lastDeath = now;
      const delay = respawnDelay(streak);
      // Not unref'd: while every worker is dead, this timer is what keeps the primary alive.
      const t = setTimeout(() => {
        pendingRespawns.delete(t);
        if (!stopping) fork();
      }, delay);
      pendingRespawns.add(t);
      return delay;
    };

    cluster.on('exit', (w, code, signal) => {
      const wasReady = everReady.has(w.id);
      everReady.delete(w.id);
      if (stopping) {
        finishIfDone();
        return;
      }
      if (!wasReady && !serverReady && code !== 0) {
        // Died during the first start-up. Its 'fatal' message (if any) may still be in flight on the IPC channel:
        // give it a moment, then stop with a generic line if none came.
        setTimeout(() => {
          if (stopping) return finishIfDone();
          process.stderr.write(`cfgu serve: a worker exited during start-up (code ${code ?? signal}); stopping\n`);
          stopAll('a worker failed to start', 1);
        }, 200);
        return;
      }
      const delay = respawnLater();
      log.warn(
        { worker: w.process.pid, code, signal, wasReady, alive: Object.keys(cluster.workers ?? {}).length, respawnInMs: delay },
        'worker died: starting a replacement',
      );
    });

    process.on('SIGTERM', () => stopAll('SIGTERM', 0));
    process.on('SIGINT', () => stopAll('SIGINT', 0));
    // Credentials reloaded (src/cli/serve.ts): each worker reads .configu again itself.
    process.on('SIGHUP', () => {
      for (const w of Object.values(cluster.workers ?? {})) w?.process.kill('SIGHUP');
    });
    // Request lines on/off (logger.ts): every worker switches its own; workers forked later start with the new state.
    process.on('SIGUSR2', () => {
      requestLines = !requestLines;
      for (const w of Object.values(cluster.workers ?? {})) w?.process.kill('SIGUSR2');
    });

    // GET /metrics on any worker answers for all of them: the primary gathers and adds up their metrics.
    if (settings.metrics.enabled) serveClusterMetrics();
    log.info({ workers: count }, 'starting workers');
    for (let i = 0; i < count; i++) fork();
  });
}

/** In a worker: tell the primary. */
export function notifyPrimary(msg: WorkerMessage): void {
  if (cluster.isWorker && process.send) process.send(msg);
}

/** In a worker: the port to listen on when the primary pinned it (see CLUSTER_PORT_ENV). */
export function pinnedPort(): number | undefined {
  if (!cluster.isWorker) return undefined;
  const raw = process.env[CLUSTER_PORT_ENV];
  return raw && /^\d{1,5}$/.test(raw) ? Number(raw) : undefined;
}
