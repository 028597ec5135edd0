/**
 * `POST /upsert`: validate values by a schema (as `cfgu upsert` does) and write the changed ones into one set as a
 * new revision, after the checks of ../../writes/write-service.ts (400, 413, 403, 422, 409). Audited.
 */
import type { FastifyPluginAsync } from 'fastify';
import { rateLimitRouteConfig } from '../../access/rate-limit.js';
import { performWrite, type WriteRequest } from '../../writes/write-service.js';
import { upsertRouteSchema } from '../write-schemas.js';
import { auditWrite, callerOf, keyCount, outcomeOf, refuseInvalid, type WriteRouteOptions } from './write-common.js';

export const upsertRoute: FastifyPluginAsync<WriteRouteOptions> = async (app, { settings, context, defaultStore }) => {
  const security = settings.auth.enabled ? [{ bearer: [] }] : [];
  app.post('/upsert', {
    schema: { ...upsertRouteSchema, security },
    config: { audit: true, ...rateLimitRouteConfig(settings.rateLimit) },
    attachValidation: true,
    handler: async (request, reply) => {
      reply.header('cache-control', 'no-store');
      const body = (request.body ?? {}) as WriteRequest;
      const line = auditWrite(request, defaultStore, { route: 'upsert', store: body.store, set: body.set, keys: keyCount(body.values), dryRun: body.dryRun });
      refuseInvalid(request, 'the request body is not a valid write');
      const answer = await performWrite(context, callerOf(request), body);
      line.outcome = outcomeOf(answer);
      return answer;
    },
  });
};
