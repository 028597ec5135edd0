/**
 * `POST /rollback`: restore a set's values as of a revision (all keys its history changed since, or `keys`) as a new
 * revision, through the same checks as POST /upsert (../../writes/rollback.ts). Audited.
 */
import type { FastifyPluginAsync } from 'fastify';
import { rateLimitRouteConfig } from '../../access/rate-limit.js';
import { performRollback, type RollbackRequest } from '../../writes/rollback.js';
import { rollbackRouteSchema } from '../write-schemas.js';
import { auditWrite, callerOf, outcomeOf, refuseInvalid, type WriteRouteOptions } from './write-common.js';

export const rollbackRoute: FastifyPluginAsync<WriteRouteOptions> = async (app, { settings, context, defaultStore }) => {
  const security = settings.auth.enabled ? [{ bearer: [] }] : [];
  app.post('/rollback', {
    schema: { ...rollbackRouteSchema, security },
    config: { audit: true, ...rateLimitRouteConfig(settings.rateLimit) },
    attachValidation: true,
    handler: async (request, reply) => {
      reply.header('cache-control', 'no-store');
      const body = (request.body ?? {}) as RollbackRequest;
      const keys = Array.isArray(body.keys) ? body.keys.length : 0;
      const line = auditWrite(request, defaultStore, { route: 'rollback', store: body.store, set: body.set, keys, dryRun: body.dryRun });
      refuseInvalid(request, 'the request body is not a valid rollback');
      const answer = await performRollback(context, callerOf(request), body);
      line.outcome = outcomeOf(answer);
      return answer;
    },
  });
};
