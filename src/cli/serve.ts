/**
 * `cfgu serve [--config PATH] [--port N] [--host ADDR] [--workers N]`: run the configuration proxy.
 * Start-up failures print one line naming the file and the property, and exit 1; never a stack.
 */
import cluster from 'node:cluster';
import { parseArgs } from 'node:util';
import { runPrimary, notifyPrimary } from '../server/cluster.js';
import { createLogger } from '../server/logger.js';
import { formatStartupError, prepare, startServer, type RunningServer, type ServeInput } from '../server/start.js';

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

export async function serveCommand(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      options: {
        config: { type: 'string' },
        port: { type: 'string' },
        host: { type: 'string' },
        workers: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
      allowPositionals: false,
      strict: true,
    });
  } catch (e) {
    process.stderr.write(`cfgu serve: ${(e as Error).message.split('\n')[0]}\n${serveUsage}\n`);
    return 2;
  }
  const v = parsed.values;
  if (v.help) {
    process.stdout.write(`${serveUsage}\n`);
    return 0;
  }
  const input: ServeInput = {
    ...(v.config !== undefined ? { config: v.config } : {}),
    flags: {
      ...(v.port !== undefined ? { port: v.port } : {}),
      ...(v.host !== undefined ? { host: v.host } : {}),
      ...(v.workers !== undefined ? { workers: v.workers } : {}),
    },
    env: process.env,
    cwd: process.cwd(),
  };

  const isWorker = cluster.isWorker && process.env.CFGU_CLUSTER_WORKER === '1';

  let prepared;
  try {
    prepared = await prepare(input);
  } catch (e) {
    return startupFailed(e, isWorker);
  }

  if (!isWorker && prepared.settings.workers > 1) {
    // The primary only validated the configuration; the workers load it themselves.
    await prepared.evaluator.close().catch(() => undefined);
    const log = createLogger(prepared.settings, { role: 'primary' });
    return runPrimary(prepared.settings, log);
  }

  const log = createLogger(prepared.settings, isWorker ? { role: 'worker' } : {});
  let running: RunningServer | undefined;
  try {
    running = await startServer(prepared, {
      onReady: () => {
        const a = running?.app.server.address();
        notifyPrimary({ cfgu: 'ready', port: typeof a === 'object' && a ? a.port : prepared.settings.http.port });
      },
    }, log);
  } catch (e) {
    return startupFailed(e, isWorker);
  }
  const r = running;
  // In a cluster, Ctrl-C reaches every process; the primary also forwards SIGTERM. Both paths are idempotent.
  process.once('SIGTERM', () => void r.shutdown('SIGTERM'));
  process.once('SIGINT', () => void r.shutdown('SIGINT'));
  // A worker whose primary is gone (killed) shuts itself down instead of living on as an orphan.
  if (isWorker) process.once('disconnect', () => void r.shutdown('primary gone'));
  process.on('unhandledRejection', (reason) => {
    log.error({ err: reason }, 'unhandled rejection');
  });
  process.on('uncaughtException', (err) => {
    log.fatal({ err }, 'uncaught exception: shutting down');
    void r.shutdown('uncaught exception').then(() => process.exit(1));
  });
  return r.done;
}

async function startupFailed(e: unknown, isWorker: boolean): Promise<number> {
  const line = formatStartupError(e);
  if (isWorker && process.send) {
    await new Promise<void>((resolve) => process.send!({ cfgu: 'fatal', message: line }, undefined, {}, () => resolve()));
  } else {
    process.stderr.write(`${line}\n`);
  }
  return 1;
}
