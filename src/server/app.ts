/**
 * The HTTP app. Everything is built once here: the Fastify instance, the compiled body validator, the response
 * serializers, the hashed bearer keys, the OpenAPI document. The request path reads no file and compiles nothing.
 *
 * Request order for POST /export:
 *   onRequest  (request id, auth, in-flight count)  -> 401
 *   onRequest of /export (rate limit, when on)       -> 429
 *   parsing    (JSON only, body limit)               -> 415, 400, 413
 *   preValidation (command / key limits)             -> 413
 *   validation (compiled JSON schema)                -> 400
 *   handler    (scope check, then engine)            -> 403, 200 (with ETag), 304, 400, 422, 503, 500
 *              watch requests (SSE, long polls)       -> watch.ts (503 beyond the watcher limit)
 *   onResponse (request log, audit line)
 *
 * The audit line: one per request routed to a route marked `config: { audit: true }` (a route that reads values),
 * decided on the route that served the request, never on the text of its URL; written once, on the response, or
 * when the response closes first (the client hung up; a stream ended): see installAudit below.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import Fastify, { LogController, errorCodes, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import cors from '@fastify/cors';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { Logger } from 'pino';
import { exportPipelineJson, keyCount } from '../core/index.js';
import { ConfigurationError, ForbiddenError, LimitError, UnknownStoreError } from '../core/errors.js';
import type { EvalCommandInput } from '../core/types.js';
import { requestContext, type ExpressionEvaluator } from '../expressions/types.js';
import type { StoreResolver } from '../stores/types.js';
import type { LoadedConfiguration } from '../config/types.js';
import { clientIdentity } from './auth.js';
import { ANONYMOUS, createAuthenticator, type AuthResult } from './authenticate.js';
import { watchCredential, type AuthenticatorHolder } from './watch-access.js';
import { refusedCommands, visibleStores, type Principal } from './access.js';
import type { KeyLabels } from './key-labels.js';
import { auditCommands, createAuditLogger, defaultStoreName, type AuditRecord } from './audit.js';
import { budgetKey, rateLimitRouteConfig, registerRateLimit } from './rate-limit.js';
import { answerConnect, answerExpectation, blankProblem, createClientErrorHandler } from './client-errors.js';
import { Lifecycle } from './lifecycle.js';
import { BodyCache } from './body-cache.js';
import { cacheBudget } from '../core/cache-budget.js';
import { MAX_BODY_NESTING, nestsDeeperThan } from './body-depth.js';
import { BodyParseError, LARGE_BODY, parseLargeBody } from './body-parse.js';
import { FORBIDDEN_PROPERTY, UNSUPPORTED_CHARSET, httpProblem, problem, PROBLEM_CONTENT_TYPE, PROBLEM_TYPES, toProblem, type Problem } from './problem.js';
import {
  cfguSchema,
  evalCommandSchema,
  exportRouteSchema,
  liveRouteSchema,
  problemSchema,
  readyRouteSchema,
} from './schemas.js';
import type { ServerSettings } from './settings.js';
import { docsUiOptions, finishOpenapi, openapiInfo } from './docs-ui.js';
import { createLogger } from './logger.js';
import { etagOf, sendAnswer, WatchHub } from './watch.js';
import { createObservation } from './observe.js';
import { bodyValidatorFactory } from './body-validation.js';
import { lazySerializerFactory } from './response-serializers.js';

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
   * Which labels the server's own schemas give each key (loadKeyLabels in key-labels.ts, read at start-up by
   * start.ts): the only labels scopes are judged by. Default: none, so a grant's `labels` allow no key.
   */
  keyLabels?: KeyLabels;
}

declare module 'fastify' {
  interface FastifyInstance {
    cfgu: {
      lifecycle: Lifecycle;
      settings: ServerSettings;
      watch: WatchHub;
      /**
       * Replace the credentials (preshared keys, scoped tokens, JWT settings) without a restart: new requests use
       * them at once, and every open stream and held long poll is checked against them now (one whose credential is
       * gone or out of scope ends). Authentication must stay on. Throws ConfigurationError for unusable settings.
       */
      replaceCredentials(auth: ServerSettings['auth'], keyLabels?: KeyLabels): void;
    };
  }
  interface FastifyRequest {
    /** Who the request is for (set by authentication; null until then, or when it failed). */
    cfguPrincipal: Principal | null;
    /** Why authentication failed (for the audit line). */
    cfguAuthFailure: string | null;
    /** How many keys the export answered. */
    cfguKeys: number;
    /** The request's audit line is written (once per request). */
    cfguAudited: boolean;
    /** The client's address as the request arrived (a socket the client closed has none any more). */
    cfguAuditClient: string;
  }
  interface FastifyContextConfig {
    /** The route reads values: every request routed to it leaves exactly one audit line. */
    audit?: boolean;
  }
}

/** Routes that exist, with their methods (for 405 and `Allow`). */
const ROUTES: Record<string, string[]> = {
  '/export': ['POST'],
  '/live': ['GET', 'HEAD'],
  '/ready': ['GET', 'HEAD'],
};
const DOCS_ROUTES: Record<string, string[]> = {
  '/openapi.json': ['GET', 'HEAD'],
  '/docs': ['GET', 'HEAD'],
};

const REQUEST_ID = /^[A-Za-z0-9._:@-]{1,128}$/;

const pathOf = (url: string): string => {
  const q = url.indexOf('?');
  return q === -1 ? url : url.slice(0, q);
};

function sendProblem(reply: FastifyReply, p: Problem, headers?: Record<string, string>): FastifyReply {
  reply.code(p.status).type(PROBLEM_CONTENT_TYPE);
  if (headers) reply.headers(headers);
  return reply.send(JSON.stringify(p));
}


export async function buildServer(options: BuildServerOptions): Promise<FastifyInstance> {
  const { settings, registry, evaluator } = options;
  /** For scope checks and audit lines of commands that name no store: resolved once, not per request. */
  const defaultStore = defaultStoreName(registry);
  const lifecycle = options.lifecycle ?? new Lifecycle();
  // A logger given with request lines off in the settings is held at `warn` (createLogger's does that itself, and
  // SIGUSR2 can switch it).
  const given = options.logger;
  const logger = given === undefined ? createLogger(settings) : given && !settings.log.enabled && given.isLevelEnabled('info') ? given.child({}, { level: 'warn' }) : given;

  let https: { cert: Buffer; key: Buffer } | null = null;
  if (settings.http.tls.enabled) {
    const { cert, key } = settings.http.tls;
    if (!cert || !key) throw new ConfigurationError('TLS is enabled but the certificate or key path is missing', undefined, 'http.tls');
    try {
      https = { cert: readFileSync(cert), key: readFileSync(key) };
    } catch (e) {
      throw new ConfigurationError(`cannot read the TLS certificate or key (${(e as NodeJS.ErrnoException).code ?? 'error'})`, undefined, 'http.tls');
    }
  }

  // Slow clients: Node checks the headers and request timeouts of every connection on an interval (30 s by default,
  // which would stretch a 10 s timeout to 40 s); check often enough that a timeout fires within a tenth of itself.
  const { headersTimeoutMs, requestTimeoutMs, idleTimeoutMs } = settings.http;
  const serverOptions = {
    headersTimeout: headersTimeoutMs,
    connectionsCheckingInterval: Math.max(5, Math.min(1000, Math.floor(Math.min(headersTimeoutMs, requestTimeoutMs) / 10))),
    // Node would answer a missing Host with an empty 400; the onRequest hook answers it as a problem instead.
    requireHostHeader: false,
  };

  const app = Fastify({
    ...(logger ? { loggerInstance: logger } : { logger: false }),
    logController: new LogController({ disableRequestLogging: true }),
    requestIdHeader: false,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    },
    bodyLimit: settings.limits.bodyBytes,
    trustProxy: settings.http.trustProxy as boolean,
    return503OnClosing: false,
    forceCloseConnections: 'idle',
    requestTimeout: requestTimeoutMs,
    keepAliveTimeout: idleTimeoutMs,
    clientErrorHandler: createClientErrorHandler(settings, settings.log.enabled && logger ? logger : undefined),
    ...(https ? { https: { ...https, ...serverOptions } } : { http: serverOptions }),
    // Fastify's own Ajv compiler, with body checks remembered for the body cache's frozen bodies (body-validation.ts).
    // Response serializers: Fastify's own compiler, each serializer compiled on first use (response-serializers.ts).
    schemaController: { compilersFactory: { buildValidator: bodyValidatorFactory(), buildSerializer: lazySerializerFactory() } },
    ajv: {
      customOptions: {
        // The body is checked, never repaired: no coercion, no defaults, no silent removal of unknown properties.
        coerceTypes: false,
        useDefaults: false,
        removeAdditional: false,
        allErrors: false,
        // The route schemas are this project's own (test/server/openapi.test.ts checks them against the
        // meta-schema); checking them here would compile the meta-schema at every start, about 60 ms of CPU.
        validateSchema: false,
      },
    },
  }) as unknown as FastifyInstance;

  // Watch evaluations are counted and traced like requests (`observation` is made below, before any request).
  const watch = new WatchHub({
    registry,
    ...(evaluator ? { evaluator } : {}),
    settings,
    lifecycle,
    log: app.log,
    observer: { watchEvaluation: (c, w, run) => observation.watchEvaluation(c, w, run), watchStreamEnded: (reason) => observation.watchStreamEnded(reason) },
  });
  // The authenticator, replaceable (a reload of the credentials); streams and long polls re-check through it.
  const auth: AuthenticatorHolder = { authenticator: createAuthenticator(settings, options.keyLabels), jwtClockSkewSeconds: settings.auth.jwt?.clockSkewSeconds ?? 0 };
  let keyLabels = options.keyLabels;
  const replaceCredentials = (next: ServerSettings['auth'], nextLabels: KeyLabels | undefined = keyLabels): void => {
    if (!settings.auth.enabled || !next.enabled) throw new ConfigurationError('authentication can be turned on or off only by a restart', undefined, 'auth.enabled');
    auth.authenticator = createAuthenticator({ ...settings, auth: next }, nextLabels);
    keyLabels = nextLabels;
    auth.jwtClockSkewSeconds = next.jwt?.clockSkewSeconds ?? 0;
    watch.recheck();
  };
  app.decorate('cfgu', { lifecycle, settings, watch, replaceCredentials });
  app.addHook('onClose', () => watch.close());
  app.server.on('checkExpectation', answerExpectation);
  app.server.on('connect', answerConnect);

  // JSON only: drop the built-in text/plain parser so anything but JSON is 415. The default JSON parser keeps its
  // prototype-poisoning protection.
  app.removeAllContentTypeParsers();
  const defaultJsonParser = app.getDefaultJsonParser('error', 'error');
  // Fastify reports every parser failure as "invalid JSON". When the text is valid JSON after all, the failure was the
  // prototype-poisoning guard (`__proto__`, `constructor.prototype`): say so (only this error path pays the re-parse).
  // Every cache of this process counts against one ceiling (core/cache-budget.ts, limits.cacheMemoryMb).
  cacheBudget.configure(settings.limits.cacheMemoryMb * 1024 * 1024);
  const bodies = new BodyCache();
  app.addHook('onClose', async () => bodies.unregister());
  // Metrics and traces (docs/operations.md): the stores and the sandbox as the engine uses them, observed.
  const observation = createObservation({ settings, stores: registry, evaluator, bodyCache: bodies, caches: cacheBudget, watchers: () => watch.watchers });
  const jsonParser: typeof defaultJsonParser = (request, body, done) => {
    // JSON is UTF-8 (RFC 8259); a body declared in another charset would be misread, so it is refused.
    const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(request.headers['content-type'] ?? '')?.[1]?.toLowerCase();
    if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
      return done(Object.assign(new Error('unsupported charset'), { statusCode: 415, code: UNSUPPORTED_CHARSET }), undefined);
    }
    const cached = typeof body === 'string' ? bodies.get(body) : undefined;
    if (cached !== undefined) return done(null, cached);
    // Refused before any object is made: parsing, checking and freezing grow with the nesting (body-depth.ts).
    if (typeof body === 'string' && nestsDeeperThan(body, MAX_BODY_NESTING)) {
      return done(new LimitError(`the request body nests more than ${MAX_BODY_NESTING} arrays or objects inside one another; the limit is ${MAX_BODY_NESTING}`), undefined);
    }
    const forbidden = () => Object.assign(new Error('forbidden prototype property'), { statusCode: 400, code: FORBIDDEN_PROPERTY });
    if (typeof body === 'string' && body.length > LARGE_BODY) {
      // Parsed and frozen in slices of the event loop, so that no other request waits for it (body-parse.ts).
      parseLargeBody(body, defaultJsonParser, request)
        .then((value) => bodies.addInSlices(body, value))
        .then(
          (value) => done(null, value),
          (e) => done(e instanceof BodyParseError ? (e.kind === 'forbidden' ? forbidden() : new errorCodes.FST_ERR_CTP_INVALID_JSON_BODY()) : e, undefined),
        );
      return;
    }
    defaultJsonParser(request, body, (error, value) => {
      if (error && typeof body === 'string') {
        let validJson = false;
        try {
          JSON.parse(body);
          validJson = true;
        } catch {
          /* really malformed */
        }
        if (validJson) return done(forbidden(), undefined);
      }
      done(error, error || typeof body !== 'string' ? value : bodies.add(body, value));
    });
  };
  app.addContentTypeParser('application/json', { parseAs: 'string' }, jsonParser);
  app.addContentTypeParser(/^application\/[a-z0-9.+-]+\+json\s*(;|$)/i, { parseAs: 'string' }, jsonParser);

  app.addSchema(cfguSchema);
  app.addSchema(evalCommandSchema);
  app.addSchema(problemSchema);

  const auditLogger = options.auditLogger === undefined ? createAuditLogger(settings.audit, logger) : options.auditLogger || undefined;
  app.decorateRequest('cfguPrincipal', null);
  app.decorateRequest('cfguAuthFailure', null);
  app.decorateRequest('cfguKeys', 0);
  app.decorateRequest('cfguAudited', false);
  app.decorateRequest('cfguAuditClient', '');
  app.decorateRequest('cfguWatch', null);
  const docsOpen = !settings.auth.enabled || settings.docs.public;
  const corsOn = settings.http.allowedOrigins.length > 0;
  const noHost = JSON.stringify(blankProblem(400, 'an HTTP/1.1 request must carry a Host header'));
  const unauthorized = JSON.stringify(
    problem(401, PROBLEM_TYPES.unauthorized, 'Unauthorized', 'a valid bearer key is required (Authorization: Bearer <key>)'),
  );

  if (corsOn) {
    const origins = settings.http.allowedOrigins;
    await app.register(cors, {
      origin: origins.includes('*') ? '*' : origins,
      methods: ['GET', 'HEAD', 'POST'],
      allowedHeaders: ['Content-Type', 'Authorization', 'X-Request-Id', 'If-None-Match', 'Prefer', 'Last-Event-ID'],
      exposedHeaders: ['X-Request-Id', 'X-Configu-Backup', 'Retry-After', 'WWW-Authenticate', 'ETag'],
      maxAge: 600,
    });
  }

  observation.install(app);
  // Before authentication: a request refused there, or whose client hangs up while it is checked, has its line too.
  if (auditLogger) installAudit(app, auditLogger, () => auth.authenticator !== undefined, defaultStore);
  app.addHook('onRequest', (request, reply, done) => {
    lifecycle.requestStarted();
    reply.raw.once('close', () => lifecycle.requestEnded());
    reply.header('x-request-id', request.id);
    reply.header('x-content-type-options', 'nosniff');

    if (request.headers.host === undefined && request.raw.httpVersion === '1.1') {
      reply.code(400).header('connection', 'close').type(PROBLEM_CONTENT_TYPE).send(noHost);
      return;
    }

    const authenticator = auth.authenticator;
    if (authenticator) {
      const path = pathOf(request.url);
      const open =
        path === '/live' ||
        path === '/ready' ||
        observation.ownKey(path) ||
        (corsOn && request.method === 'OPTIONS') ||
        (docsOpen && (path === '/openapi.json' || path === '/docs' || path.startsWith('/docs/')));
      if (!open) {
        const finish = (result: AuthResult): void => {
          if ('principal' in result) {
            request.cfguPrincipal = result.principal;
            done();
            return;
          }
          // The reason is for the operator; the client gets the same answer whatever it was.
          request.cfguAuthFailure = result.reason;
          request.log[result.level ?? 'warn']({ reason: result.reason, ip: request.ip }, 'authentication failed');
          reply.code(401).header('www-authenticate', 'Bearer realm="cfgu"').type(PROBLEM_CONTENT_TYPE).send(unauthorized);
        };
        const result = authenticator.authenticate(request.headers.authorization);
        if (result instanceof Promise) {
          result.then(finish, (e: unknown) => finish({ reason: `verification failed (${(e as Error)?.name ?? 'error'})`, level: 'error' }));
        } else {
          finish(result);
        }
        return;
      }
    }
    done();
  });

  // While draining, every response (including those of requests that started before) asks the client to reconnect,
  // so keep-alive connections end with their current request.
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (lifecycle.stopping) reply.header('connection', 'close');
    done(null, payload);
  });

  if (logger) {
    // Installed whenever there is a logger: SIGUSR2 can turn the lines on and off (logger.ts); each request's logger
    // takes the level of the moment the request arrived.
    const logProbes = settings.log.probes;
    app.addHook('onResponse', (request, reply, done) => {
      if (!(request.log as unknown as Logger).isLevelEnabled('info')) return done();
      const path = pathOf(request.url);
      // A successful health probe (every few seconds from an orchestrator) is left out unless log.probes says.
      if (!logProbes && reply.statusCode < 300 && (path === '/live' || path === '/ready')) return done();
      request.log.info(
        {
          method: request.method,
          path,
          // The client's address; behind a proxy, taken from X-Forwarded-For only when trustProxy allows it.
          ip: request.ip,
          status: reply.statusCode,
          ms: Math.round(reply.elapsedTime * 100) / 100,
        },
        'request',
      );
      done();
    });
  }

  await registerRateLimit(
    app,
    settings.rateLimit,
    // One budget per kind and identity (`credential:<name>`, `jwt:<sub>`, `preshared:<n>`, `ip:<address>`): a JWT whose
    // `sub` is a credential's name never spends that credential's budget.
    (request) => budgetKey(request.cfguPrincipal, request.ip),
    logger,
  );

  app.setErrorHandler((error, request, reply) => {
    const status = (error as { statusCode?: unknown }).statusCode;
    if ((error as { code?: unknown }).code === 'FST_STATIC_FORBIDDEN_PATH') {
      // A docs asset path that climbs out of its folder (`/docs/static/../x`, `%2e%2e`): there is no such asset.
      return sendProblem(reply, httpProblem(404, `no route ${request.method} ${pathOf(request.url).slice(0, 200)}`));
    }
    const { problem: p, headers, log } = toProblem(error, request.id);
    if (p.status === 500 && typeof status === 'number' && status >= 400 && status < 500) {
      // A client error raised by a plugin (the docs' static files, ...) stays the client's: never a 500 with a stack.
      return sendProblem(reply, blankProblem(status, 'the request cannot be served'));
    }
    if (log === 'error') request.log.error({ err: error }, 'request failed');
    else if (log === 'warn') request.log.warn({ err: { type: (error as Error).name, message: (error as Error).message } }, 'request failed');
    return sendProblem(reply, p, headers);
  });

  const known: Record<string, string[]> = { ...ROUTES, ...observation.routes, ...(settings.docs.enabled ? DOCS_ROUTES : {}) };
  app.setNotFoundHandler((request, reply) => {
    const path = pathOf(request.url);
    const allowed = known[path];
    if (allowed && !allowed.includes(request.method)) {
      return sendProblem(reply, httpProblem(405, `${request.method} is not allowed on ${path}; allowed: ${allowed.join(', ')}`), {
        allow: allowed.join(', '),
      });
    }
    return sendProblem(reply, httpProblem(404, `no route ${request.method} ${path.length > 200 ? `${path.slice(0, 200)}...` : path}`));
  });

  if (settings.docs.enabled) {
    await app.register(swagger, {
      openapi: {
        openapi: '3.1.0',
        info: openapiInfo,
        tags: [
          { name: 'configuration', description: 'Evaluate and export configuration' },
          { name: 'health', description: 'Liveness and readiness (never need a key)' },
        ],
        components: settings.auth.enabled
          ? { securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'A preshared key, a scoped token, or a JWT of the configured issuer (docs/security.md)' } } }
          : {},
      },
      transformObject: finishOpenapi as never,
      refResolver: {
        buildLocalReference(json, _baseUri, _fragment, i) {
          return typeof json.$id === 'string' ? json.$id : `def-${i}`;
        },
      },
    });
    await app.register(swaggerUi, docsUiOptions());
  }

  // Without auth, `security: []` says so in the OpenAPI document (an operation without it reads as undecided).
  const security = settings.auth.enabled ? [{ bearer: [] }] : [];

  app.post('/export', {
    schema: { ...exportRouteSchema, security },
    config: { audit: true, ...rateLimitRouteConfig(settings.rateLimit) },
    preValidation: (request, _reply, done) => {
      // Limits first, so an oversized pipeline is 413 and never walked by the validator.
      const body = request.body;
      if (Array.isArray(body)) {
        if (body.length > settings.limits.commands) {
          done(new LimitError(`the pipeline has ${body.length} commands; the limit is ${settings.limits.commands}`));
          return;
        }
        for (let i = 0; i < body.length; i++) {
          const keys = (body[i] as { schema?: { keys?: unknown } } | null)?.schema?.keys;
          if (keys && typeof keys === 'object') {
            const n = keyCount(keys);
            if (n > settings.limits.keys) {
              done(new LimitError(`command ${i} declares ${n} keys; the limit is ${settings.limits.keys}`));
              return;
            }
          }
        }
      }
      done();
    },
    handler: async (request: FastifyRequest, reply: FastifyReply) => {
      const commands = request.body as EvalCommandInput[];
      const principal = request.cfguPrincipal ?? ANONYMOUS;
      if (principal.grants !== 'all') {
        // Before anything is read: a pipeline with one command out of scope is refused whole (watch requests too).
        const refused = refusedCommands(principal, commands, defaultStore);
        if (refused.length) throw new ForbiddenError(refused, commands.length);
      }
      const client = principal.kind === 'anonymous' ? clientIdentity(undefined, request.ip, false) : principal.identity;
      // A scoped credential learns only the store names it may name (plain and watch requests alike).
      const scope =
        principal.grants === 'all' ? undefined : (e: unknown) => (e instanceof UnknownStoreError ? new UnknownStoreError(e.store, visibleStores(principal, e.known)) : e);
      if (watch.wants(request)) {
        const credential = watchCredential({ holder: auth, authorization: request.headers.authorization, principal, commands, defaultStore, unauthorized });
        try {
          return await watch.serve(request, reply, commands, { client, ...(scope ? { scope } : {}), ...(credential ? { credential } : {}) });
        } catch (e) {
          throw scope ? scope(e) : e;
        }
      }
      const context = requestContext(client);
      let result;
      try {
        result = await observation.evaluate(request, commands, (engine) => exportPipelineJson(commands, engine, { context, limits: settings.limits }));
      } catch (e) {
        throw scope ? scope(e) : e;
      }
      const { text: body, keys, backupStores } = result;
      request.cfguKeys = keys;
      return sendAnswer(request, reply, body, etagOf(body), backupStores);
    },
  });

  app.get('/live', { schema: liveRouteSchema }, (_request, reply) => {
    reply.header('cache-control', 'no-store');
    return reply.send({ uptime: Math.round(process.uptime() * 1000) / 1000 });
  });

  app.get('/ready', { schema: readyRouteSchema }, (_request, reply) => {
    reply.header('cache-control', 'no-store');
    if (lifecycle.ready) return reply.send({ status: 'ready' });
    return reply.code(503).send();
  });

  observation.addRoutes(app);

  if (settings.docs.enabled) {
    let openapi: string | undefined;
    app.get('/openapi.json', { schema: { hide: true } }, (_request, reply) => {
      openapi ??= JSON.stringify(app.swagger());
      return reply.type('application/json; charset=utf-8').send(openapi);
    });
  }

  await app.ready();
  if (settings.docs.enabled) app.swagger(); // build (and cache) the document now, not on the first request
  if (options.ready) lifecycle.markReady();
  return app;
}

/**
 * The audit: one line per request routed to a route marked `config: { audit: true }`, whatever its path's spelling
 * (the route that served it decides, not the URL's text) and whatever its outcome. Written once (a per-request flag),
 * at the first of: the response sent (onResponse), or the raw response closing before that (the client hung up: status
 * 499, `ended: "client"`; a stream ended: its events, keys and why it ended).
 */
function installAudit(app: FastifyInstance, auditLogger: Logger, authOn: () => boolean, defaultStore: string | undefined): void {
  const write = (request: FastifyRequest, reply: FastifyReply, closedEarly: boolean): void => {
    if (request.cfguAudited) return;
    request.cfguAudited = true;
    const principal = request.cfguPrincipal ?? (authOn() ? null : ANONYMOUS);
    const watch = request.cfguWatch;
    const stream = watch?.kind === 'stream';
    // A stream's status is the 200 it opened with; a request whose client hung up before its answer: 499.
    const status = stream ? 200 : closedEarly ? 499 : reply.statusCode;
    const ended = stream ? (watch.ended ?? 'client') : closedEarly ? 'client' : watch?.ended;
    const line: AuditRecord = {
      requestId: request.id,
      subject: principal?.subject ?? null,
      auth: principal?.kind ?? null,
      client: request.cfguAuditClient,
      commands: auditCommands(request.body, defaultStore),
      keys: stream ? watch.keys : status === 200 ? request.cfguKeys : 0,
      status,
      ...(request.cfguAuthFailure ? { reason: request.cfguAuthFailure } : {}),
      ...(watch ? { watch: watch.kind } : {}),
      ...(stream ? { events: watch.events, ms: Math.round(performance.now() - watch.opened) } : {}),
      ...(ended ? { ended } : {}),
    };
    auditLogger.info(line, 'audit');
  };
  app.addHook('onRequest', (request, reply, done) => {
    if (request.routeOptions.config.audit) {
      request.cfguAuditClient = request.ip;
      const raw = reply.raw;
      raw.once('close', () => write(request, reply, !raw.writableFinished));
    }
    done();
  });
  app.addHook('onResponse', (request, reply, done) => {
    if (request.routeOptions.config.audit) write(request, reply, false);
    done();
  });
}
