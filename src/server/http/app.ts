/**
 * The HTTP app: a Fastify instance and the plugins that make the server, registered in the order they must run.
 * Everything is built once here: the compiled body validator, the response serializers, the hashed bearer keys, the
 * OpenAPI document. The request path reads no file and compiles nothing.
 *
 * Concerns that must be seen by every route (hooks, decorations, the body parser, the error answers) are plugins
 * wrapped with `fastify-plugin`, registered at the root; each route is an encapsulated plugin of its own
 * (./routes/). Request order for POST /export:
 *   onRequest  metrics and traces (observe/request-hooks.ts), the audit's start (access/audit.ts),
 *              request id and in-flight count (./request-basics.ts), auth (access/authentication.ts)  -> 400, 401
 *   onRequest of /export (rate limit, when on; access/rate-limit.ts)                                 -> 429
 *   parsing    (JSON only, UTF-8, nesting, body limit; ./body/json-parser.ts)                         -> 415, 400, 413
 *   preValidation, validation, handler (./routes/export.ts)                                           -> 413, 400, 403, 200, 304, 422, 503, 500
 *              watch requests (SSE, long polls)                                                       -> watch/ (503 beyond the watcher limit)
 *   onResponse (metrics, audit line, request log line)
 */
import Fastify, { type FastifyInstance } from 'fastify';
import cors from '@fastify/cors';
import type { Logger } from 'pino';
import { cacheBudget } from '../../core/cache-budget.js';
import type { ExpressionEvaluator } from '../../core/ports.js';
import type { StoreResolver } from '../../core/ports.js';
import type { LoadedConfiguration } from '../../config/types.js';
import { auditHooks, createAuditLogger, defaultStoreName } from '../access/audit.js';
import { authentication, createCredentials } from '../access/authentication.js';
import { labelTable, type KeyLabels } from '../access/key-labels.js';
import { budgetKey, registerRateLimit } from '../access/rate-limit.js';
import { createObservation, type Observation } from '../observe/observation.js';
import { observeRequests } from '../observe/request-hooks.js';
import { requestLog } from '../observe/request-log.js';
import { NamedSchemas } from '../schemas/registry.js';
import { Lifecycle } from '../process/lifecycle.js';
import type { ServerSettings } from '../process/settings.js';
import { WatchHub } from '../watch/hub.js';
import { BodyCache } from './body/body-cache.js';
import { jsonBodies } from './body/json-parser.js';
import { fastifyOptions, serverLogger } from './fastify-options.js';
import { problemAnswers } from './problem-answers.js';
import { closeWhileDraining, requestBasics } from './request-basics.js';
import { requestState } from './request-state.js';
import { defaultConsoleDir, loadConsoleFiles } from './console-files.js';
import { CONSOLE_ROUTES, consoleRoutes } from './routes/console.js';
import { changesRoute } from './routes/changes.js';
import { apiDocs, DOCS_ROUTES, openapiRoute } from './routes/docs.js';
import { explainRoute } from './routes/explain.js';
import { exportRoute } from './routes/export.js';
import { healthRoutes } from './routes/health.js';
import { matrixRoute } from './routes/matrix.js';
import { metricsRoute } from './routes/metrics.js';
import { SCHEMA_ROUTES, schemaRoutes } from './routes/schemas.js';
import { historyRoute } from './routes/history.js';
import { rollbackRoute } from './routes/rollback.js';
import { SESSION_ROUTES, sessionRoutes } from './routes/session.js';
import { upsertRoute } from './routes/upsert.js';
import { cfguSchema, evalCommandSchema, problemSchema } from './schemas.js';

export interface BuildServerOptions {
  /** The stores requests may name (a StoreRegistry from src/config, already built; init is the caller's job). */
  registry: StoreResolver;
  /** The loaded `.configu` (informational; the registry is what serves requests). */
  configuration?: LoadedConfiguration;
  /** The expression sandbox; without it, schemas with `test`/`const` fail as the engine decides. */
  evaluator?: ExpressionEvaluator;
  settings: ServerSettings;
  /** A pino logger; `false` for none; default: a JSON logger on stdout per `settings.log`. */
  logger?: Logger | false;
  /** Readiness state; default: a new one in `starting`. */
  lifecycle?: Lifecycle;
  /** Mark the server ready as soon as it is built (tests, benchmarks with an initialised registry). */
  ready?: boolean;
  /** Where audit lines go; default: per `settings.audit` (its file, else `logger`, else stdout). */
  auditLogger?: Logger | false;
  /**
   * Which labels the server's own schemas give each key (loadKeyLabels in access/key-labels.ts, read at start-up by
   * process/start.ts): the only labels scopes are judged by. Default: none, so a grant's `labels` allow no key.
   */
  keyLabels?: KeyLabels;
  /**
   * The named schemas of `.configu` (NamedSchemas.load, read at start-up by process/start.ts, which also watches
   * their files). Default: none.
   */
  schemas?: NamedSchemas;
  /** The browser console's files (index.html, assets/), read once; default: dist/console of the package. */
  consoleDir?: string;
}

/** The routes the app itself serves, with their methods (for 405 and `Allow`). */
const ROUTES: Record<string, string[]> = {
  '/export': ['POST'],
  '/explain': ['POST'],
  '/matrix': ['POST'],
  '/live': ['GET', 'HEAD'],
  '/ready': ['GET', 'HEAD'],
  ...SCHEMA_ROUTES,
  '/upsert': ['POST'],
  '/rollback': ['POST'],
  '/history': ['GET', 'HEAD'],
  ...SESSION_ROUTES,
  '/changes': ['GET', 'HEAD'],
};

export async function buildServer(options: BuildServerOptions): Promise<FastifyInstance> {
  const { settings, registry, evaluator } = options;
  /** For scope checks and audit lines of commands that name no store: resolved once, not per request. */
  const defaultStore = defaultStoreName(registry);
  const lifecycle = options.lifecycle ?? new Lifecycle();
  const logger = serverLogger(options.logger, settings);
  const app = Fastify(fastifyOptions(settings, logger)) as unknown as FastifyInstance;
  const schemas = options.schemas ?? NamedSchemas.empty();
  // The console's files, read (and compressed, off the main thread) while the app is put together: a request reads no file.
  const loadingConsole = settings.console.enabled ? loadConsoleFiles(options.consoleDir ?? defaultConsoleDir()) : undefined;
  // Not awaited until the routes are registered; a failure is not left unhandled meanwhile.
  loadingConsole?.catch(() => undefined);

  // Watch evaluations are counted and traced like requests (`observation` is made below, before any request).
  const watch = new WatchHub({
    registry,
    ...(evaluator ? { evaluator } : {}),
    settings,
    lifecycle,
    log: app.log,
    schemas,
    observer: { watchEvaluation: (c, w, run) => observation.watchEvaluation(c, w, run), watchStreamEnded: (reason) => observation.watchStreamEnded(reason) },
  });
  // The authenticator, replaceable (a reload of the credentials); streams and long polls re-check through it.
  const credentials = createCredentials(settings, options.keyLabels, () => watch.recheck());
  // Every cache of this process counts against one ceiling (core/cache-budget.ts, limits.cacheMemoryMb).
  cacheBudget.configure(settings.limits.cacheMemoryMb * 1024 * 1024);
  const bodies = new BodyCache();
  // Metrics and traces (docs/operations.md): the stores and the sandbox as the engine uses them, observed.
  const observation: Observation = createObservation({ settings, stores: registry, evaluator, bodyCache: bodies, caches: cacheBudget, watchers: () => watch.watchers, schemas });
  followSchemas(app, schemas, observation, credentials.relabel);
  const auditLogger = options.auditLogger === undefined ? createAuditLogger(settings.audit, logger) : options.auditLogger || undefined;

  await app.register(requestState, { state: { lifecycle, settings, watch, replaceCredentials: credentials.replace } });
  await app.register(jsonBodies, { bodies });
  for (const schema of [cfguSchema, evalCommandSchema, problemSchema]) app.addSchema(schema);
  if (settings.http.allowedOrigins.length > 0) await app.register(cors, corsOptions(settings.http.allowedOrigins));
  await app.register(observeRequests, { tracer: observation.tracer, metrics: observation.metrics });
  // Before authentication: a request refused there, or whose client hangs up while it is checked, has its line too.
  if (auditLogger) await app.register(auditHooks, { auditLogger, authOn: () => credentials.holder.authenticator !== undefined, defaultStore });
  await app.register(requestBasics, { lifecycle });
  await app.register(authentication, { holder: credentials.holder, settings, ownKey: (path) => observation.ownKey(path) });
  await app.register(closeWhileDraining, { lifecycle });
  if (logger) await app.register(requestLog, { probes: settings.log.probes });
  // One budget per kind and identity (`credential:<name>`, `jwt:<sub>`, `preshared:<n>`, `ip:<address>`): a JWT whose
  // `sub` is a credential's name never spends that credential's budget.
  await registerRateLimit(app, settings.rateLimit, (request) => budgetKey(request.cfguPrincipal, request.ip), logger);
  const optional = { ...(settings.docs.enabled ? DOCS_ROUTES : {}), ...(loadingConsole ? CONSOLE_ROUTES : {}) };
  await app.register(problemAnswers, { routes: { ...ROUTES, ...observation.routes, ...optional } });
  if (settings.docs.enabled) await app.register(apiDocs, { settings });

  await app.register(exportRoute, { settings, defaultStore, holder: credentials.holder, observation, watch, schemas });
  await app.register(explainRoute, { settings, defaultStore, observation, schemas });
  await app.register(schemaRoutes, { settings, schemas });
  await app.register(matrixRoute, { settings, defaultStore, observation, schemas });
  await app.register(healthRoutes, { lifecycle });
  await app.register(metricsRoute, { observation });
  const writes = { settings, defaultStore, context: { registry, schemas, evaluator, maxKeys: settings.limits.keys } };
  await app.register(upsertRoute, writes);
  await app.register(rollbackRoute, writes);
  await app.register(historyRoute, writes);
  await app.register(sessionRoutes, { settings, registry, defaultStore });
  if (loadingConsole) await app.register(consoleRoutes, { settings, files: await loadingConsole });
  await app.register(changesRoute, { settings, registry, defaultStore, holder: credentials.holder, watch });
  if (settings.docs.enabled) await app.register(openapiRoute);

  await app.ready();
  if (settings.docs.enabled) app.swagger(); // build (and cache) the document now, not on the first request
  if (options.ready) lifecycle.markReady();
  return app;
}

/**
 * What a change of a named schema's file does in this app (the watch hub re-evaluates the pipelines naming it itself):
 * a valid change is logged and the scopes are judged by the new labels; an invalid one is logged (the file and the
 * problem) and counted, and the last good version keeps serving.
 */
function followSchemas(app: FastifyInstance, schemas: NamedSchemas, observation: Observation, relabel: (labels: KeyLabels) => void): void {
  const stop = schemas.on((event) => {
    if (event.kind === 'changed') {
      app.log.info({ schema: event.name, files: event.schema.files, keys: event.schema.keyCount }, 'schema reloaded');
      relabel(labelTable(schemas));
      return;
    }
    observation.metrics?.schemaReloadFailed(event.name);
    app.log.warn({ schema: event.name, problem: event.problem }, `schema "${event.name}" not reloaded: ${event.problem}; the last good version stays in use`);
  });
  app.addHook('onClose', async () => void stop());
}

function corsOptions(origins: string[]) {
  return {
    origin: origins.includes('*') ? '*' : origins,
    methods: ['GET', 'HEAD', 'POST'],
    allowedHeaders: ['Content-Type', 'Authorization', 'X-Request-Id', 'If-None-Match', 'Prefer', 'Last-Event-ID'],
    exposedHeaders: ['X-Request-Id', 'X-Configu-Backup', 'Retry-After', 'WWW-Authenticate', 'ETag'],
    maxAge: 600,
  };
}
