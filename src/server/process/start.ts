/**
 * Running the proxy in one process: load `.configu`, resolve settings, build the app, listen, initialise the stores,
 * turn ready; on SIGTERM/SIGINT drain and exit. Used directly for `--workers 1` and by every cluster worker.
 *
 * Start-up:  load .configu (fatal on error) -> settings (fatal on error) -> build app -> listen (fatal on error)
 *            -> stores init (a store without a backup is retried with backoff until it answers once; /ready stays
 *            503 meanwhile) -> ready. Readiness never goes back for a store outage after that (docs/server.md).
 * Shutdown (./shutdown.ts): /ready 503 at once -> after SIGTERM, keep listening and serving for the drain period (not after SIGINT)
 *            -> keep serving until no request is in flight (at most half the grace period, 5 s at most) -> stop listening, close idle keep-alive connections, let in-flight requests finish -> close
 *            stores and the sandbox -> exit 0. When the grace period runs out, remaining connections are cut and
 *            the process exits anyway.
 */
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { ConfigurationError } from '../../core/errors.js';
import { cliLinesOf } from '../../core/error-catalogue.js';
import { NO_CONFIG_FILE, findConfigFile, loadConfiguration } from '../../config/index.js';
import { createStoreRegistry, type StoreRegistryWithStatus } from '../../stores/index.js';
import type { LoadedConfiguration } from '../../config/types.js';
import { createSandboxEvaluator, expressionOptionsFromEnv, type SandboxOptions } from '../../expressions/index.js';
import { onlyVariableNames, renderVariables } from '../../config/render.js';
import type { ExpressionEvaluator } from '../../core/ports.js';
import { buildServer } from '../http/app.js';
import { pinnedPort } from './cluster.js';
import { Lifecycle } from './lifecycle.js';
import { createLogger } from '../observe/logger.js';
import { describeSandboxBuild } from '../../expressions/isolated-vm.js';
import { describeSqliteBuild } from '../../stores/drivers.js';
import { resolveSettings, type SettingsFlags } from './resolve-settings.js';
import type { ServerSettings } from './settings.js';
import { keyLabelsFor, type KeyLabels } from '../access/key-labels.js';
import { NamedSchemas } from '../schemas/registry.js';
import { SchemaWatcher } from '../schemas/watch.js';
import { startTracing } from '../observe/tracing.js';
import { defaultConnectionsPerClient, guardConnections, openFileLimits, RESERVED_FILES } from './connections.js';
import { createShutdown, sleep } from './shutdown.js';

/** A limit for the log: a number, or 'unlimited'. */
const finite = (n: number): number | 'unlimited' => (Number.isFinite(n) ? n : 'unlimited');

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
  /** The labels the server's own schemas give each key (for scopes with `labels`); default: none. */
  keyLabels?: KeyLabels;
  /** The named schemas of `.configu` (read by `load()`; watched once the server listens); default: none. */
  schemas?: NamedSchemas;
  /** Said once in the log (`warn`) when the server starts. */
  warnings?: string[];
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

/** What `load()` found: the configuration and settings, and the sandbox's options (no sandbox started yet). */
export interface Loaded {
  file: string;
  configuration: LoadedConfiguration;
  settings: ServerSettings;
  sandboxOptions: SandboxOptions;
  keyLabels: KeyLabels;
  schemas: NamedSchemas;
  warnings: string[];
}

/**
 * Find and load `.configu`, resolve the settings. Throws ConfigurationError. Starts no sandbox: a bad file fails
 * without starting one, and a cluster primary (which only checks the file) never starts one.
 */
export async function load(input: ServeInput): Promise<Loaded> {
  const file = await findConfigFile({ explicit: input.config, env: input.env, cwd: input.cwd });
  if (!file) {
    throw new ConfigurationError(
      NO_CONFIG_FILE,
      undefined,
      '--config',
    );
  }
  let sandboxOptions;
  try {
    sandboxOptions = expressionOptionsFromEnv(input.env);
  } catch (e) {
    // The message starts with the variable's name: "CONFIGU_EXPRESSION_TIMEOUT_MS must be an integer from 1 to ..."
    throw new ConfigurationError(`environment variable ${(e as Error).message}`);
  }
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
  // The schemas `.configu` names (requests may name them; scopes with labels are judged by them): read now, so a
  // missing or invalid one stops start-up.
  const { schemas, warnings: schemaWarnings } = NamedSchemas.load(configuration);
  const { table: keyLabels, warnings } = keyLabelsFor(schemas, settings);
  return { file: configuration.file ?? file, configuration, settings, sandboxOptions, keyLabels, schemas, warnings: [...schemaWarnings, ...warnings] };
}

/** The sandbox for a loaded configuration: `load()` then the evaluator that serves requests. */
export function withSandbox(loaded: Loaded): Prepared {
  const { file, configuration, settings, sandboxOptions, keyLabels, schemas, warnings } = loaded;
  return { file, configuration, settings, evaluator: createSandboxEvaluator(sandboxOptions), keyLabels, schemas, warnings };
}

/** Find and load `.configu`, resolve the settings, start the sandbox. Throws ConfigurationError. */
export async function prepare(input: ServeInput): Promise<Prepared> {
  return withSandbox(await load(input));
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

/** Start one serving process from prepared configuration. Throws ConfigurationError / listen errors at start-up. */
export async function startServer(prepared: Prepared, hooks: StartHooks = {}, logger?: Logger): Promise<RunningServer> {
  const { settings, configuration, evaluator } = prepared;
  const log = logger ?? createLogger(settings);
  const lifecycle = new Lifecycle();
  for (const notice of configuration.notices ?? []) log.warn({ file: configuration.file }, `.configu: ${notice}`);
  let registry: StoreRegistryWithStatus;
  try {
    registry = await createStoreRegistry(configuration, { logger: log });
  } catch (e) {
    await evaluator.close().catch(() => undefined);
    throw e;
  }

  // Traces only when the OTEL_* variables ask for them (docs/operations.md); before the app, which looks for a tracer.
  const tracing = startTracing(process.env);
  for (const warning of tracing?.warnings ?? []) log.warn(warning);
  for (const warning of prepared.warnings ?? []) log.warn(warning);
  const listenPort = pinnedPort() ?? settings.http.port;
  // Open files (Node raised the soft limit to the hard one at start): connections capped in all and per client.
  const files = openFileLimits();
  const perClient = settings.http.maxConnectionsPerClient ?? (files ? defaultConnectionsPerClient(files.soft) : 0);
  let app: FastifyInstance;
  try {
    app = await buildServer({
      registry,
      configuration,
      evaluator,
      settings,
      logger: log,
      lifecycle,
      ...(prepared.keyLabels ? { keyLabels: prepared.keyLabels } : {}),
      ...(prepared.schemas ? { schemas: prepared.schemas } : {}),
    });
    capConnections(app, files, perClient, log);
    // Node's default accept queue (511) overflows when hundreds of clients cut at the same tick reconnect at once; the
    // kernel then drops new connections, probes included, for a 1 s SYN retry. The kernel caps this at somaxconn.
    await app.listen({ port: listenPort, host: settings.http.host, backlog: 4096 });
  } catch (e) {
    await Promise.allSettled([registry.close(), evaluator.close(), tracing?.shutdown()]);
    throw listenError(e, settings, listenPort);
  }
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : settings.http.port;
  log.info(listeningLine(settings, port, registry, files, perClient), 'listening; initialising stores');
  // Each serving process watches the schema files itself (a cluster worker too).
  const schemaWatcher = prepared.schemas?.size ? new SchemaWatcher(prepared.schemas) : undefined;

  const { done, shutdown } = createShutdown({
    app,
    lifecycle,
    settings,
    log,
    closeResources: () => Promise.allSettled([registry.close(), evaluator.close(), tracing?.shutdown(), schemaWatcher?.close()]),
  });
  void initialiseStores(registry, lifecycle, log, port, hooks);
  return { app, lifecycle, done, shutdown: (reason) => shutdown(reason) };
}

/** Connections capped in all (what the open-file limit leaves) and per client; a refusal logged at most every 10 s. */
function capConnections(app: FastifyInstance, files: { soft: number } | undefined, perClient: number, log: Logger): void {
  let lastRefusalLog = 0;
  guardConnections(app.server, files ? files.soft - RESERVED_FILES : undefined, perClient, (client) => {
    // At most one line every 10 s: a client that keeps opening connections must not flood the log.
    const now = Date.now();
    if (now - lastRefusalLog < 10_000) return;
    lastRefusalLog = now;
    log.warn({ client, maxConnectionsPerClient: perClient }, 'connection refused: the client already holds its share of connections');
  });
}

/** The fields of the `listening` line. */
function listeningLine(settings: ServerSettings, port: number, registry: StoreRegistryWithStatus, files: { soft: number; hard: number } | undefined, perClient: number) {
  return {
    host: settings.http.host,
    port,
    tls: settings.http.tls.enabled,
    auth: settings.auth.enabled,
    stores: registry.names(),
    node: process.versions.node,
    sandbox: describeSandboxBuild(),
    sqlite: describeSqliteBuild(),
    // What the process may open (the soft limit, raised by Node to the hard one) and each client's share.
    ...(files ? { openFiles: finite(files.soft), openFilesHard: finite(files.hard) } : {}),
    maxConnectionsPerClient: perClient,
    // The ceiling of the caches' estimated memory (limits.cacheMemoryMb; default from the heap limit).
    cacheMemoryMb: settings.limits.cacheMemoryMb,
  };
}

/**
 * Stores: initialised after listening, so /ready says 503 while they connect. Ready once every store without a
 * backup has answered once: a replica that cannot reach its database (wrong password, network) never takes traffic,
 * while a store with a backup can answer from it. Afterwards an outage does not turn readiness off (every replica
 * would leave the load balancer at once): requests to that store get 503, or its backup.
 */
async function initialiseStores(registry: StoreRegistryWithStatus, lifecycle: Lifecycle, log: Logger, port: number, hooks: StartHooks): Promise<void> {
  let delay = 500;
  for (;;) {
    if (lifecycle.stopping) return;
    await registry.init(); // never rejects: a store it cannot reach is logged and counted in awaiting()
    if (lifecycle.stopping) return;
    const waiting = registry.awaiting();
    if (!waiting.length) {
      lifecycle.markReady();
      log.info({ port }, 'ready');
      hooks.onReady?.();
      return;
    }
    log.warn({ stores: waiting, retryInSeconds: delay / 1000 }, 'not ready: waiting for stores without a backup to answer');
    await sleep(delay);
    delay = Math.min(delay * 2, 30_000);
  }
}

function listenError(e: unknown, settings: ServerSettings, port: number): unknown {
  if (e instanceof ConfigurationError) return e;
  const code = (e as NodeJS.ErrnoException)?.code;
  const where = `${settings.http.host}:${port}`;
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
  // The catalogue's line for a configuration error, with the file's path as given (not made relative).
  if (e instanceof ConfigurationError) return `cfgu serve: ${cliLinesOf(e, (file) => file)![0]}`;
  const err = e as Error;
  const code = (e as NodeJS.ErrnoException)?.code;
  const text = `${err?.message ?? String(e)}`.split('\n')[0] ?? '';
  return `cfgu serve: start-up failed: ${text}${code && !text.includes(code) ? ` (${code})` : ''}`;
}
