/**
 * `POST /export`: evaluate a pipeline and answer its key-value object (with an ETag; 304 when `If-None-Match` names
 * it), or watch it (an SSE stream or a long poll, ../../watch/hub.ts). In order, after authentication and the rate
 * limit (onRequest) and the body's parsing:
 *   preValidation  the pipeline's size (commands, keys per command)                  -> 413
 *   validation     the compiled JSON schema                                          -> 400
 *   handler        schema names resolved (../../schemas/resolve.ts; unknown: 400),
 *                  the scope check (a pipeline with one command out of scope: 403),
 *                  then the engine                                                   -> 200, 304, 400, 422, 503, 500
 * The size and scope checks are shared with POST /explain (./pipeline-guards.ts).
 * The route is marked `audit: true`: every request routed here leaves one audit line (../../access/audit.ts).
 */
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { exportPipelineJson } from '../../../core/index.js';
import { requestContext } from '../../../core/ports.js';
import { UNAUTHORIZED } from '../../access/authentication.js';
import { rateLimitRouteConfig } from '../../access/rate-limit.js';
import { watchCredential, type AuthenticatorHolder } from '../../access/watch-credentials.js';
import type { Observation } from '../../observe/observation.js';
import type { NamedSchemas } from '../../schemas/registry.js';
import { resolveCommands } from '../../schemas/resolve.js';
import type { ServerSettings } from '../../process/settings.js';
import { etagOf, sendAnswer } from '../../watch/etags.js';
import type { WatchHub } from '../../watch/hub.js';
import { admitPipeline, pipelineLimits } from './pipeline-guards.js';
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

export const exportRoute: FastifyPluginAsync<ExportRouteOptions> = async (app, { settings, defaultStore, holder, observation, watch, schemas }) => {
  const serverSchema = (schema: unknown) => schemas.versionOf(schema);
  // Without auth, `security: []` says so in the OpenAPI document (an operation without it reads as undecided).
  const security = settings.auth.enabled ? [{ bearer: [] }] : [];
  app.post('/export', {
    schema: { ...exportRouteSchema, security },
    config: { audit: true, ...rateLimitRouteConfig(settings.rateLimit) },
    preValidation: pipelineLimits(settings.limits),
    handler: async (request: FastifyRequest, reply: FastifyReply) => {
      // Names resolved, then, before anything is read, a pipeline with one command out of scope refused whole (watch
      // requests too).
      const { wire, commands, principal, client, scope } = admitPipeline(request, defaultStore, schemas);
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
        result = await observation.evaluate(request, 'export', commands, (engine) => exportPipelineJson(commands, engine, { context, limits: settings.limits }));
      } catch (e) {
        throw scope ? scope(e) : e;
      }
      const { text: body, keys, backupStores } = result;
      request.cfguKeys = keys;
      return sendAnswer(request, reply, body, etagOf(body), backupStores);
    },
  });
};
