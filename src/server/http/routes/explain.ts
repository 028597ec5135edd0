/**
 * `POST /explain`: evaluate a pipeline as POST /export does and answer why each value is what it is (core/explain.ts,
 * docs/explain.md). The same body, the same size limits, scope check and rate limit as POST /export
 * (./pipeline-guards.ts); in order, after authentication and the rate limit (onRequest) and the body's parsing:
 *   preValidation  the pipeline's size                                                -> 413
 *   validation     the compiled JSON schema (the body schema of POST /export)         -> 400
 *   handler        the scope check (403), then the engine                             -> 200, 400, 422, 503, 500
 *
 * A pipeline that fails validation is answered 200 with `ok: false`: the explanation is what was asked for, and it
 * is complete; `ok` and `failures` say that the export would have been 422 (docs/server.md, "POST /explain").
 *
 * What an explanation shows is never more than the export gives the same caller: hidden values are withheld (there
 * is no grant that reveals them over HTTP), and so are shadowed values at sets the principal could not export
 * (../../access/readable-sets.ts). The answer is made for each request: no ETag, no watch, `Cache-Control: no-store`.
 * Audited like POST /export, the line marked `explain: true`.
 */
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { explainPipeline, type ExplainOutcome } from '../../../core/explain.js';
import { requestContext } from '../../../core/ports.js';
import { rateLimitRouteConfig } from '../../access/rate-limit.js';
import { readableSets } from '../../access/readable-sets.js';
import type { Observation } from '../../observe/observation.js';
import type { ServerSettings } from '../../process/settings.js';
import { headerSafe } from '../../watch/etags.js';
import { explainRouteSchema } from '../explain-schemas.js';
import type { NamedSchemas } from '../../schemas/registry.js';
import { admitPipeline, pipelineLimits } from './pipeline-guards.js';

export interface ExplainRouteOptions {
  settings: ServerSettings;
  /** The store a command without `store` reads (for scope checks), resolved once. */
  defaultStore: string | undefined;
  /** The server's named schemas (a command may name one instead of carrying it). */
  schemas: NamedSchemas;
  observation: Observation;
}

/** Every key explained, over all commands: what the audit line counts as the keys answered. */
const explainedKeys = (outcome: ExplainOutcome): number => outcome.explanations.reduce((n, c) => n + c.keys.length, 0);

export const explainRoute: FastifyPluginAsync<ExplainRouteOptions> = async (app, { settings, defaultStore, observation, schemas }) => {
  const security = settings.auth.enabled ? [{ bearer: [] }] : [];
  app.post('/explain', {
    schema: { ...explainRouteSchema, security },
    config: { audit: 'explain', ...rateLimitRouteConfig(settings.rateLimit) },
    preValidation: pipelineLimits(settings.limits),
    handler: async (request: FastifyRequest, reply: FastifyReply) => {
      const { commands, principal, client, scope } = admitPipeline(request, defaultStore, schemas);
      const mayReadSet = readableSets(principal, commands, defaultStore, (schema) => schemas.versionOf(schema));
      const options = { context: requestContext(client), limits: settings.limits, revealHidden: false, ...(mayReadSet ? { mayReadSet } : {}) };
      let outcome: ExplainOutcome;
      try {
        outcome = await observation.evaluate(request, 'explain', commands, (engine) => explainPipeline(commands, engine, options));
      } catch (e) {
        throw scope ? scope(e) : e;
      }
      request.cfguKeys = explainedKeys(outcome);
      if (outcome.backupStores.length) reply.header('x-configu-backup', headerSafe(outcome.backupStores));
      reply.header('cache-control', 'no-store');
      reply.type('application/json; charset=utf-8');
      return reply.send(JSON.stringify(outcome));
    },
  });
};
