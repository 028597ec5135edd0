/**
 * Running the proxy in one process: load `.configu`, resolve settings, build the app, listen, initialise the stores,
 * turn ready; on SIGTERM/SIGINT drain and exit. Used directly for `--workers 1` and by every cluster worker.
 *
 * Start-up:  load .configu (fatal on error) -> settings (fatal on error) -> build app -> listen (fatal on error)
 *            -> stores init (retried with backoff while unreachable; /ready stays 503) -> ready.
 * Shutdown:  /ready 503 at once -> keep serving until no request is in flight (at most half the grace period, 5 s
 *            at most) -> stop listening, close idle keep-alive connections, let in-flight requests finish -> close
 *            stores and the sandbox -> exit 0. When the grace period runs out, remaining connections are cut and
 *            the process exits anyway.
 */
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { ConfigurationError, StoreUnavailableError } from '../core/errors.js';
import { createStoreRegistry, findConfigFile, loadConfiguration } from '../config/index.js';
import type { LoadedConfiguration, StoreRegistry } from '../config/types.js';
import { createSandboxEvaluator, expressionOptionsFromEnv, type SandboxOptions } from '../expressions/index.js';
import { onlyVariableNames, renderVariables } from '../config/render.js';
import type { ExpressionEvaluator } from '../expressions/types.js';
import { buildServer } from './app.js';
import { Lifecycle } from './lifecycle.js';
import { createLogger } from './logger.js';
import { resolveSettings, type ServerSettings, type SettingsFlags } from './settings.js';

export interface ServeInput {
  /** `--config` */
  config?: string;
  flags: SettingsFlags;
  env: NodeJS.ProcessEnv;
  cwd: string;
}

export interface Prepared {
  file: string;
  configuration: LoadedConfiguration;
  settings: ServerSettings;
  evaluator: ExpressionEvaluator;
}

/**
 * Render `.configu` with the environment. The environment never enters the sandbox that serves requests: bare names
 * (`{{ DB_PASSWORD }}`) are substituted here, and a file with real expressions gets a sandbox of its own, used for
 * this render only and closed before any request is served.
 */
export async function renderConfigu(
  template: string,
  variables: Record<string, string>,
  options: SandboxOptions,
  sandbox: (options: SandboxOptions) => Pick<ExpressionEvaluator, 'renderTrusted' | 'close'> = createSandboxEvaluator,
): Promise<string> {
  if (onlyVariableNames(template)) return renderVariables(template, variables);
  const once = sandbox({ ...options, workers: 1 });
  try {
    return await once.renderTrusted(template, variables);
  } finally {
    await once.close();
  }
}

/** Find and load `.configu`, start the sandbox, resolve the settings. Throws ConfigurationError. */
export async function prepare(input: ServeInput): Promise<Prepared> {
  const file = await findConfigFile({ explicit: input.config, env: input.env, cwd: input.cwd });
  if (!file) {
    throw new ConfigurationError(
      'no .configu file found: pass --config PATH, set CONFIGU_CONFIG, or create a .configu in this folder or a parent',
      undefined,
      '--config',
    );
  }
  let sandboxOptions;
  try {
    sandboxOptions = expressionOptionsFromEnv(input.env);
  } catch (e) {
    // e.g. "CONFIGU_EXPRESSION_TIMEOUT_MS must be an integer from 1 to 60000 (got "x")"
    const message = (e as Error).message;
    throw new ConfigurationError(`environment variable ${message}`, undefined, /^(\S+)/.exec(message)?.[1]);
  }
  const evaluator: ExpressionEvaluator = createSandboxEvaluator(sandboxOptions);
  try {
    const configuration = await loadConfiguration({
      file,
      env: input.env,
      cwd: input.cwd,
      render: (template, variables) => renderConfigu(template, variables as Record<string, string>, sandboxOptions),
    });
    const settings = resolveSettings({
      flags: input.flags,
      env: input.env,
      fileSettings: (configuration.interface as Record<string, unknown> | undefined)?.proxy,
      file: configuration.file ?? file,
      cwd: input.cwd,
    });
    return { file: configuration.file ?? file, configuration, settings, evaluator };
  } catch (e) {
    await evaluator.close().catch(() => undefined);
    throw e;
  }
}

export interface RunningServer {
  app: FastifyInstance;
  lifecycle: Lifecycle;
  /** Resolves with the exit code once shutdown is complete (the caller exits). */
  done: Promise<number>;
  shutdown(reason: string): Promise<number>;
}

export interface StartHooks {
  /** Called once the server is ready (cluster workers tell the primary). */
  onReady?: () => void;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref());

/** Start one serving process from prepared configuration. Throws ConfigurationError / listen errors at start-up. */
export async function startServer(prepared: Prepared, hooks: StartHooks = {}, logger?: Logger): Promise<RunningServer> {
  const { settings, configuration, evaluator } = prepared;
  const log = logger ?? createLogger(settings);
  const lifecycle = new Lifecycle();
  let registry: StoreRegistry;
  try {
    registry = await createStoreRegistry(configuration, { logger: log });
  } catch (e) {
    await evaluator.close().catch(() => undefined);
    throw e;
  }

  let app: FastifyInstance;
  try {
    app = await buildServer({ registry, configuration, evaluator, settings, logger: log, lifecycle });
    await app.listen({ port: settings.http.port, host: settings.http.host });
  } catch (e) {
    await Promise.allSettled([registry.close(), evaluator.close()]);
    throw listenError(e, settings);
  }
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : settings.http.port;
  log.info(
    { host: settings.http.host, port, tls: settings.http.tls.enabled, auth: settings.auth.enabled, stores: registry.names() },
    'listening; initialising stores',
  );

  let resolveDone!: (code: number) => void;
  const done = new Promise<number>((r) => (resolveDone = r));
  let shuttingDown: Promise<number> | undefined;

  const shutdown = (reason: string, exitCode = 0): Promise<number> => {
    if (shuttingDown) return shuttingDown;
    lifecycle.beginShutdown();
    const graceMs = settings.shutdown.gracePeriodSeconds * 1000;
    log.info({ reason, inflight: lifecycle.inflight, graceSeconds: settings.shutdown.gracePeriodSeconds }, 'shutting down: not ready');
    let forced = false;
    const deadline = setTimeout(() => {
      forced = true;
      log.warn({ inflight: lifecycle.inflight }, 'grace period over: closing the remaining connections');
      app.server.closeAllConnections?.();
    }, graceMs);
    deadline.unref();
    shuttingDown = (async () => {
      // Keep answering (with `Connection: close`) until nothing is in flight, so /ready reports 503 to whoever asks.
      await lifecycle.whenIdle(Math.min(graceMs / 2, 5000));
      await Promise.race([app.close(), sleep(graceMs + 1000)]);
      await Promise.race([Promise.allSettled([registry.close(), evaluator.close()]), sleep(2000)]);
      clearTimeout(deadline);
      log.info({ forced }, 'stopped');
      resolveDone(exitCode);
      return exitCode;
    })();
    return shuttingDown;
  };

  // Stores: initialised after listening, so /ready says 503 while they connect. The registry logs a store it cannot
  // reach and carries on (the store reconnects when a request uses it; such requests get 503 or the backup until
  // then). Should init itself fail, it is retried with backoff; a configuration problem is fatal.
  void (async () => {
    let delay = 500;
    for (;;) {
      if (lifecycle.stopping) return;
      try {
        await registry.init();
        if (lifecycle.stopping) return;
        lifecycle.markReady();
        log.info({ port }, 'ready');
        hooks.onReady?.();
        return;
      } catch (e) {
        if (e instanceof StoreUnavailableError) {
          log.warn({ store: e.store, retryInSeconds: delay / 1000 }, 'a store cannot be initialised yet; not ready');
        } else {
          log.error({ err: e }, 'stores failed to initialise');
          if (e instanceof ConfigurationError) {
            void shutdown('configuration error', 1);
            return;
          }
        }
        await sleep(delay);
        delay = Math.min(delay * 2, 30_000);
      }
    }
  })();

  return { app, lifecycle, done, shutdown: (reason) => shutdown(reason) };
}

function listenError(e: unknown, settings: ServerSettings): unknown {
  if (e instanceof ConfigurationError) return e;
  const code = (e as NodeJS.ErrnoException)?.code;
  const where = `${settings.http.host}:${settings.http.port}`;
  if (code === 'EADDRINUSE') return new ConfigurationError(`cannot listen on ${where}: the address is already in use`, undefined, 'http.port');
  if (code === 'EACCES') return new ConfigurationError(`cannot listen on ${where}: permission denied`, undefined, 'http.port');
  if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND') {
    return new ConfigurationError(`cannot listen on ${where}: the host address is not available here`, undefined, 'http.host');
  }
  if (code && /^ERR_OSSL|^ERR_SSL|PEM|ASN1/.test(code + String((e as Error).message))) {
    return new ConfigurationError('the TLS certificate or key cannot be used (not a matching PEM pair)', undefined, 'http.tls');
  }
  return e;
}

/** One line for the operator: never a stack. Names the file and the property when known. */
export function formatStartupError(e: unknown): string {
  if (e instanceof ConfigurationError) {
    let msg = e.message.replace(/\s*\n\s*/g, '; ');
    if (e.property && !msg.includes(e.property)) msg = `${e.property}: ${msg}`;
    if (e.file && !msg.includes(e.file)) msg = `${e.file}: ${msg}`;
    return `cfgu serve: ${msg}`;
  }
  const err = e as Error;
  const code = (e as NodeJS.ErrnoException)?.code;
  const text = `${err?.message ?? String(e)}`.split('\n')[0] ?? '';
  return `cfgu serve: start-up failed: ${text}${code && !text.includes(code) ? ` (${code})` : ''}`;
}
