/**
 * `POST /export`: evaluate a pipeline and answer its key-value object (with an ETag; 304 when `If-None-Match` names
 * it), or watch it (an SSE stream or a long poll, ../../watch/hub.ts). In order, after authentication and the rate
 * limit (onRequest) and the body's parsing:
 *   preValidation  the pipeline's size (commands, keys per command)                  -> 413
 *   validation     the compiled JSON schema                                          -> 400
 *   handler        schema names resolved (../../schemas/resolve.ts; unknown: 400),
 *                  the scope check (a pipeline with one command out of scope: 403),
 *                  then the engine                                                   -> 200, 304, 400, 422, 503, 500
 * The route is marked `audit: true`: every request routed here leaves one audit line (../../access/audit.ts).
 */
import type { FastifyPluginAsync, FastifyReply, FastifyRequest, preValidationHookHandler } from 'fastify';
import { exportPipelineJson, keyCount } from '../../../core/index.js';
import { ForbiddenError, LimitError, UnknownStoreError } from '../../../core/errors.js';
import { requestContext } from '../../../core/ports.js';
import { UNAUTHORIZED } from '../../access/authentication.js';
import { ANONYMOUS, clientIdentity } from '../../access/credentials.js';
import { rateLimitRouteConfig } from '../../access/rate-limit.js';
import { refusedCommands, visibleStores, type Principal } from '../../access/scopes.js';
import { watchCredential, type AuthenticatorHolder } from '../../access/watch-credentials.js';
import type { Observation } from '../../observe/observation.js';
import type { NamedSchemas } from '../../schemas/registry.js';
import { resolveCommands, type WireCommand } from '../../schemas/resolve.js';
import type { ServerSettings } from '../../process/settings.js';
import { etagOf, sendAnswer } from '../../watch/etags.js';
import type { WatchHub } from '../../watch/hub.js';
import { exportRouteSchema } from '../schemas.js';

export interface ExportRouteOptions {
  settings: ServerSettings;
  /** The store a command without `store` reads (for scope checks), resolved once. */
  defaultStore: string | undefined;
  holder: AuthenticatorHolder;
  observation: Observation;
  watch: WatchHub;
  /** The server's named schemas (a command may name one instead of carrying it). */
  schemas: NamedSchemas;
}

/** Limits first, so an oversized pipeline is 413 and never walked by the validator. */
function pipelineLimits(limits: ServerSettings['limits']): preValidationHookHandler {
  return (request, _reply, done) => {
    const body = request.body;
    if (Array.isArray(body)) {
      if (body.length > limits.commands) {
        done(new LimitError(`the pipeline has ${body.length} commands; the limit is ${limits.commands}`));
        return;
      }
      for (let i = 0; i < body.length; i++) {
        const keys = (body[i] as { schema?: { keys?: unknown } } | null)?.schema?.keys;
        if (keys && typeof keys === 'object') {
          const n = keyCount(keys);
          if (n > limits.keys) {
            done(new LimitError(`command ${i} declares ${n} keys; the limit is ${limits.keys}`));
            return;
          }
        }
      }
    }
    done();
  };
}

/** A scoped credential learns only the store names it may name (plain and watch requests alike). */
const errorScope = (principal: Principal) =>
  principal.grants === 'all' ? undefined : (e: unknown) => (e instanceof UnknownStoreError ? new UnknownStoreError(e.store, visibleStores(principal, e.known)) : e);

export const exportRoute: FastifyPluginAsync<ExportRouteOptions> = async (app, { settings, defaultStore, holder, observation, watch, schemas }) => {
  const serverSchema = (schema: unknown) => schemas.versionOf(schema);
  // Without auth, `security: []` says so in the OpenAPI document (an operation without it reads as undecided).
  const security = settings.auth.enabled ? [{ bearer: [] }] : [];
  app.post('/export', {
    schema: { ...exportRouteSchema, security },
    config: { audit: true, ...rateLimitRouteConfig(settings.rateLimit) },
    preValidation: pipelineLimits(settings.limits),
    handler: async (request: FastifyRequest, reply: FastifyReply) => {
      const wire = request.body as WireCommand[];
      const principal = request.cfguPrincipal ?? ANONYMOUS;
      // Names become the server's schema objects (the same object each time, until the file changes).
      const commands = resolveCommands(wire, schemas, principal);
      if (principal.grants !== 'all') {
        // Before anything is read: a pipeline with one command out of scope is refused whole (watch requests too).
        const refused = refusedCommands(principal, commands, defaultStore, serverSchema);
        if (refused.length) throw new ForbiddenError(refused, commands.length);
      }
      const client = principal.kind === 'anonymous' ? clientIdentity(undefined, request.ip, false) : principal.identity;
      const scope = errorScope(principal);
      if (watch.wants(request)) {
        // A watch keeps the names: each evaluation (and each check of the credential) uses the schemas of that moment.
        const credential = watchCredential({
          holder,
          authorization: request.headers.authorization,
          principal,
          commands: wire,
          resolve: (c) => resolveCommands(c, schemas),
          serverSchema,
          defaultStore,
          unauthorized: UNAUTHORIZED,
        });
        try {
          return await watch.serve(request, reply, wire, { client, ...(scope ? { scope } : {}), ...(credential ? { credential } : {}) });
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
};
