/**
 * `cfgu serve [--config PATH] [--port N] [--host ADDR] [--workers N]`: run the configuration proxy.
 * Start-up failures print one line naming the file and the property, never a stack, and exit with the error
 * catalogue's code (2 for a bad configuration, 1 for anything else).
 */
import cluster from 'node:cluster';
import type { Logger } from 'pino';
import { inheritedRequestLines, runPrimary, notifyPrimary } from '../server/process/cluster.js';
import { createLogger, toggleRequestLines } from '../server/observe/logger.js';
import { formatStartupError, load, startServer, withSandbox, type Loaded, type RunningServer, type ServeInput } from '../server/process/start.js';
import { EXIT_FAILED, EXIT_OK, EXIT_USAGE, exitCodeFor } from '../core/error-catalogue.js';
import { parseFlags, rejectPositionals } from './args.js';
import { errorLines, flagErrorLines, UsageError } from './errors.js';
import { processIO, type CommandIO } from './io.js';

export const serveUsage = `Usage: cfgu serve [options]

Run the configuration proxy (POST /export, GET /live, GET /ready, GET /docs).

Options:
  --config PATH   the .configu file (default: $CONFIGU_CONFIG, $CONFIGU_CONFIGURATION,
                  else the nearest .configu walking up from the current folder)
  --port N        port to listen on (default: $CONFIGU_HTTP_PORT, interface.proxy.http.port, 8080)
  --host ADDR     address to listen on (default: $CONFIGU_HTTP_HOST, interface.proxy.http.host, 0.0.0.0)
  --workers N     processes sharing the port (default: $CONFIGU_WORKERS, interface.proxy.workers,
                  the number of CPUs); 1 serves in-process
  -h, --help      show this help

Every setting, its environment variable and its .configu property: docs/server.md.`;

/** `cfgu serve`'s flags (no `--debug`: the server's log says what went wrong). */
const OPTIONS = {
  config: { type: 'string' },
  port: { type: 'string' },
  host: { type: 'string' },
  workers: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

let signalLog: Logger | undefined;
let signalCaught = false;
/** SIGUSR2 signals a starting worker received before its logger existed. */
let signalEarly = 0;
/** What SIGHUP does once the server runs (reload the credentials); before that the signal is caught and ignored. */
let onHangup: (() => void) | undefined;

export async function serveCommand(argv: string[], io: CommandIO = processIO()): Promise<number> {
  let parsed;
  try {
    parsed = parseFlags(argv, OPTIONS);
    rejectPositionals(parsed.positionals);
  } catch (e) {
    // The same words as the other commands' flag errors (args.ts), pointing at --help rather than printing it.
    io.stderr.write(`${(e instanceof UsageError ? flagErrorLines('serve', e) : errorLines('serve', e)).join('\n')}\n`);
    return EXIT_USAGE;
  }
  const v = parsed.values;
  if (v.help) {
    io.stdout.write(`${serveUsage}\n`);
    return EXIT_OK;
  }
  const input: ServeInput = {
    ...(v.config !== undefined ? { config: v.config } : {}),
    flags: {
      ...(v.port !== undefined ? { port: v.port } : {}),
      ...(v.host !== undefined ? { host: v.host } : {}),
      ...(v.workers !== undefined ? { workers: v.workers } : {}),
    },
    env: io.env,
    cwd: io.cwd,
  };

  const isWorker = cluster.isWorker && process.env.CFGU_CLUSTER_WORKER === '1';
  // SIGUSR2 switches request lines on/off (server/logger.ts). Caught from the start, so that a signal that comes while
  // the process is still starting does not kill it (the default action): a single process ignores it; a worker applies
  // it once its logger exists (the primary already counted it, and forked this worker with the state before it).
  // One listener per process: a command run in-process many times (tests) adds no listener each time.
  signalLog = undefined;
  signalEarly = 0;
  onHangup = undefined;
  if (!signalCaught) {
    signalCaught = true;
    // SIGHUP reloads the credentials (docs/security.md, "Rotating credentials"); caught from the start so that one
    // arriving during start-up does not kill the process (its default action).
    process.on('SIGHUP', () => onHangup?.());
    process.on('SIGUSR2', () => {
      if (signalLog) toggleRequestLines(signalLog);
      else if (cluster.isWorker && process.env.CFGU_CLUSTER_WORKER === '1') signalEarly++;
    });
  }

  let loaded: Loaded;
  try {
    loaded = await load(input);
  } catch (e) {
    return startupFailed(e, isWorker, io);
  }

  if (!isWorker && loaded.settings.workers > 1) {
    // The primary only validated the configuration (no sandbox); the workers load it themselves.
    const log = createLogger(loaded.settings, { role: 'primary' });
    return runPrimary(loaded.settings, log);
  }
  let prepared;
  try {
    prepared = withSandbox(loaded);
  } catch (e) {
    return startupFailed(e, isWorker, io);
  }

  // A worker starts with the request lines as the primary last set them (SIGUSR2), not the configured default.
  const lines = isWorker ? inheritedRequestLines() : undefined;
  if (lines !== undefined && lines !== prepared.settings.log.enabled) {
    prepared = { ...prepared, settings: { ...prepared.settings, log: { ...prepared.settings.log, enabled: lines } } };
  }
  const log = createLogger(prepared.settings, isWorker ? { role: 'worker' } : {});
  signalLog = log;
  if (signalEarly % 2) toggleRequestLines(log);
  let running: RunningServer | undefined;
  try {
    running = await startServer(prepared, {
      onReady: () => {
        const a = running?.app.server.address();
        notifyPrimary({ cfgu: 'ready', port: typeof a === 'object' && a ? a.port : prepared.settings.http.port });
      },
    }, log);
  } catch (e) {
    return startupFailed(e, isWorker, io);
  }
  const r = running;
  // In a cluster, Ctrl-C reaches every process; the primary also forwards SIGTERM. Both paths are idempotent.
  // Both stay installed: a SIGINT during the drain that follows SIGTERM ends the drain (docs/server.md, Shutdown).
  process.on('SIGTERM', () => void r.shutdown('SIGTERM'));
  process.on('SIGINT', () => void r.shutdown('SIGINT'));
  onHangup = () => void reloadCredentials(r, input, log);
  // A worker whose primary is gone (killed) shuts itself down instead of living on as an orphan.
  if (isWorker) process.once('disconnect', () => void r.shutdown('primary gone'));
  process.on('unhandledRejection', (reason) => {
    log.error({ err: reason }, 'unhandled rejection');
  });
  process.on('uncaughtException', (err) => {
    log.fatal({ err }, 'uncaught exception: shutting down');
    void r.shutdown('uncaught exception').then(() => process.exit(EXIT_FAILED));
  });
  return r.done;
}

async function startupFailed(e: unknown, isWorker: boolean, io: CommandIO): Promise<number> {
  const line = formatStartupError(e);
  const code = exitCodeFor(e);
  if (isWorker && process.send) {
    // The primary exits with the worker's code.
    await new Promise<void>((resolve) => process.send!({ cfgu: 'fatal', message: line, code }, undefined, {}, () => resolve()));
  } else {
    io.stderr.write(`${line}\n`);
  }
  return code;
}

/**
 * SIGHUP: read `.configu` again and put its credentials in place (preshared keys, scoped tokens, JWT settings and
 * grants, and the labels of the schemas it names). Streams and held long polls whose credential is gone or no longer
 * allows them end at once. Every other setting, and the environment, stay as they were at start-up: they need a
 * restart. A file that cannot be used changes nothing and is logged.
 */
async function reloadCredentials(running: RunningServer, input: ServeInput, log: Logger): Promise<void> {
  try {
    const next = await load(input);
    running.app.cfgu.replaceCredentials(next.settings.auth, next.keyLabels);
    for (const warning of next.warnings) log.warn(warning);
    const auth = next.settings.auth;
    log.info({ preshared: auth.presharedKeys.length, credentials: auth.credentials.length, jwt: auth.jwt !== undefined }, 'credentials reloaded');
  } catch (e) {
    log.error({ reason: formatStartupError(e).replace(/^cfgu serve: /, '') }, 'credentials not reloaded: the old ones stay in force');
  }
}
