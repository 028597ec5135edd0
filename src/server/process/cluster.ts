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
  const pinned = settings.http.port === 0 ? await pickPort(settings.http.host) : undefined;
  return new Promise<number>((resolve) => new Primary(settings, log, pinned, resolve).start());
}

/** The primary's state: its workers, the respawn backoff, and whether it is stopping. */
class Primary {
  private readonly count: number;
  /** Request lines as SIGUSR2 last set them (the configured default until then): what every new worker starts with. */
  private requestLines: boolean;
  private readonly graceMs: number;
  private readonly everReady = new Set<number>();
  private serverReady = false;
  private stopping = false;
  private exitCode = 0;
  private streak = 0;
  private lastDeath = 0;
  private readonly pendingRespawns = new Set<NodeJS.Timeout>();
  /**
   * Sandbox children per worker, unless the operator chose (CONFIGU_EXPRESSION_WORKERS): share the cores between the
   * workers, so the whole server runs about one sandbox process per core. Measured on 2 cores (bench/RESULTS.md): 2
   * workers x 1 child served the 10-key workload ~15% faster than 2 x 2, with less memory.
   */
  private readonly sandboxPerWorker: string;

  constructor(
    private readonly settings: ServerSettings,
    private readonly log: Logger,
    private readonly pinned: number | undefined,
    private readonly resolve: (code: number) => void,
  ) {
    this.count = settings.workers;
    this.requestLines = settings.log.enabled;
    this.graceMs = settings.shutdown.gracePeriodSeconds * 1000;
    this.sandboxPerWorker = String(Math.max(1, Math.round(availableParallelism() / this.count)));
  }

  start(): void {
    cluster.on('exit', (w, code, signal) => this.exited(w, code, signal));
    process.on('SIGTERM', () => this.stopAll('SIGTERM', 0));
    process.on('SIGINT', () => this.stopAll('SIGINT', 0));
    // Credentials reloaded (src/cli/serve.ts): each worker reads .configu again itself.
    process.on('SIGHUP', () => {
      for (const w of Object.values(cluster.workers ?? {})) w?.process.kill('SIGHUP');
    });
    // Request lines on/off (observe/logger.ts): every worker switches its own; workers forked later start with the new state.
    process.on('SIGUSR2', () => {
      this.requestLines = !this.requestLines;
      for (const w of Object.values(cluster.workers ?? {})) w?.process.kill('SIGUSR2');
    });
    // GET /metrics on any worker answers for all of them: the primary gathers and adds up their metrics.
    if (this.settings.metrics.enabled) serveClusterMetrics();
    this.log.info({ workers: this.count }, 'starting workers');
    for (let i = 0; i < this.count; i++) this.fork();
  }

  private finishIfDone(): void {
    if (this.stopping && Object.keys(cluster.workers ?? {}).length === 0) this.resolve(this.exitCode);
  }

  private stopAll(reason: string, code: number): void {
    if (this.stopping) {
      // A Ctrl-C during the workers' drain ends it: passed on, each worker stops draining.
      if (reason === 'SIGINT') for (const w of Object.values(cluster.workers ?? {})) w?.process.kill('SIGINT');
      return;
    }
    this.stopping = true;
    this.exitCode = code;
    for (const t of this.pendingRespawns) clearTimeout(t);
    this.pendingRespawns.clear();
    this.log.info({ reason }, 'shutting down: stopping workers');
    // Each worker drains after SIGTERM (docs/server.md); a Ctrl-C, or a failed start-up, stops them without a drain.
    const signal = reason === 'SIGTERM' ? 'SIGTERM' : 'SIGINT';
    for (const w of Object.values(cluster.workers ?? {})) w?.process.kill(signal);
    const hard = setTimeout(() => {
      for (const w of Object.values(cluster.workers ?? {})) {
        this.log.warn({ worker: w?.process.pid }, 'worker still running after the grace period: killing it');
        w?.process.kill('SIGKILL');
      }
    }, this.graceMs + (reason === 'SIGTERM' ? this.settings.shutdown.drainSeconds * 1000 : 0) + 3000);
    hard.unref();
    this.finishIfDone();
  }

  private fork(): Worker {
    const w = cluster.fork({
      CFGU_CLUSTER_WORKER: '1',
      [REQUEST_LINES_ENV]: this.requestLines ? 'on' : 'off',
      ...(process.env.CONFIGU_EXPRESSION_WORKERS ? {} : { CONFIGU_EXPRESSION_WORKERS: this.sandboxPerWorker }),
      ...(this.pinned !== undefined ? { [CLUSTER_PORT_ENV]: String(this.pinned) } : {}),
    });
    if (this.serverReady) this.log.info({ worker: w.process.pid }, 'replacement worker started');
    w.on('message', (msg: unknown) => {
      if (isWorkerMessage(msg)) this.message(w, msg);
    });
    return w;
  }

  private message(w: Worker, msg: WorkerMessage): void {
    if (msg.cfgu === 'ready') {
      this.everReady.add(w.id);
      if (!this.serverReady && this.everReady.size >= this.count) {
        this.serverReady = true;
        this.log.info({ workers: this.count, port: msg.port }, 'ready');
      } else if (this.serverReady) {
        this.log.info({ worker: w.process.pid, port: msg.port }, 'replacement worker ready');
      }
    } else if (msg.cfgu === 'fatal') {
      if (!this.serverReady) {
        // The first start-up: the failure is the same in every worker, so say it once and stop.
        if (!this.stopping) {
          process.stderr.write(`${msg.message}\n`);
          this.stopAll('a worker failed to start', msg.code ?? 1);
        }
      } else {
        // The server has served: keep the others serving, and keep trying (the 'exit' handler respawns).
        this.log.error({ worker: w.process.pid, reason: msg.message }, 'a replacement worker failed to start');
      }
    }
  }

  private respawnLater(): number {
    const now = Date.now();
    this.streak = now - this.lastDeath > RESPAWN_CALM_MS ? 1 : this.streak + 1;
    this.lastDeath = now;
    const delay = respawnDelay(this.streak);
    // Not unref'd: while every worker is dead, this timer is what keeps the primary alive.
    const t = setTimeout(() => {
      this.pendingRespawns.delete(t);
      if (!this.stopping) this.fork();
    }, delay);
    this.pendingRespawns.add(t);
    return delay;
  }

  private exited(w: Worker, code: number | null, signal: string | null): void {
    const wasReady = this.everReady.has(w.id);
    this.everReady.delete(w.id);
    if (this.stopping) {
      this.finishIfDone();
      return;
    }
    if (!wasReady && !this.serverReady && code !== 0) {
      // Died during the first start-up. Its 'fatal' message (if any) may still be in flight on the IPC channel:
      // give it a moment, then stop with a generic line if none came.
      setTimeout(() => {
        if (this.stopping) return this.finishIfDone();
        process.stderr.write(`cfgu serve: a worker exited during start-up (code ${code ?? signal}); stopping\n`);
        this.stopAll('a worker failed to start', 1);
      }, 200);
      return;
    }
    const delay = this.respawnLater();
    this.log.warn(
      { worker: w.process.pid, code, signal, wasReady, alive: Object.keys(cluster.workers ?? {}).length, respawnInMs: delay },
      'worker died: starting a replacement',
    );
  }
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
