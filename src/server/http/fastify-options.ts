/**
 * The options the Fastify instance is made with: its logger, request ids, body limit, proxy trust, timeouts of slow
 * clients, TLS, the answer to what Node's HTTP parser refuses (./client-errors.ts), and the schema compilers (body
 * checks remembered for cached bodies, response serializers compiled on first use).
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { LogController, type FastifyServerOptions } from 'fastify';
import type { Logger } from 'pino';
import { ConfigurationError } from '../../core/errors.js';
import { createLogger } from '../observe/logger.js';
import type { ServerSettings } from '../process/settings.js';
import { bodyValidatorFactory } from './body/body-validation.js';
import { createClientErrorHandler } from './client-errors.js';
import { lazySerializerFactory } from './response-serializers.js';

const REQUEST_ID = /^[A-Za-z0-9._:@-]{1,128}$/;

/**
 * The server's logger: the one given (`false` for none), else a JSON logger on stdout per `settings.log`. A logger
 * given with request lines off in the settings is held at `warn` (createLogger's does that itself, and SIGUSR2 can
 * switch it).
 */
export function serverLogger(given: Logger | false | undefined, settings: ServerSettings): Logger | false {
  if (given === undefined) return createLogger(settings);
  return given && !settings.log.enabled && given.isLevelEnabled('info') ? given.child({}, { level: 'warn' }) : given;
}

/** The certificate and key, read now (a missing or unreadable file stops start-up); null without TLS. */
function tlsFiles(settings: ServerSettings): { cert: Buffer; key: Buffer } | null {
  if (!settings.http.tls.enabled) return null;
  const { cert, key } = settings.http.tls;
  if (!cert || !key) throw new ConfigurationError('TLS is enabled but the certificate or key path is missing', undefined, 'http.tls');
  try {
    return { cert: readFileSync(cert), key: readFileSync(key) };
  } catch (e) {
    throw new ConfigurationError(`cannot read the TLS certificate or key (${(e as NodeJS.ErrnoException).code ?? 'error'})`, undefined, 'http.tls');
  }
}

export function fastifyOptions(settings: ServerSettings, logger: Logger | false): FastifyServerOptions {
  const https = tlsFiles(settings);
  // Slow clients: Node checks the headers and request timeouts of every connection on an interval (30 s by default,
  // which would stretch a 10 s timeout to 40 s); check often enough that a timeout fires within a tenth of itself.
  const { headersTimeoutMs, requestTimeoutMs, idleTimeoutMs } = settings.http;
  const serverOptions = {
    headersTimeout: headersTimeoutMs,
    connectionsCheckingInterval: Math.max(5, Math.min(1000, Math.floor(Math.min(headersTimeoutMs, requestTimeoutMs) / 10))),
    // Node would answer a missing Host with an empty 400; the onRequest hook answers it as a problem instead.
    requireHostHeader: false,
  };
  return {
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
        // A command's `schema` is an object or a string (a named schema): one union type, on purpose.
        allowUnionTypes: true,
        // The route schemas are this project's own (test/server/openapi.test.ts checks them against the
        // meta-schema); checking them here would compile the meta-schema at every start, about 60 ms of CPU.
        validateSchema: false,
      },
    },
  } as FastifyServerOptions;
}
