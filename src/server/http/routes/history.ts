/**
 * `GET /history?store=S&set=P[&key=K][&since=ISO][&until=ISO][&before=REV][&limit=N]`: one page of a set's revisions,
 * newest first, values masked for the caller (../../writes/history.ts). Audited (it answers values).
 */
import type { FastifyPluginAsync } from 'fastify';
import { rateLimitRouteConfig } from '../../access/rate-limit.js';
import { readHistory, type HistoryRequest } from '../../writes/history.js';
import { historyRouteSchema } from '../write-schemas.js';
import { auditWrite, callerOf, refuseInvalid, type WriteRouteOptions } from './write-common.js';

export const historyRoute: FastifyPluginAsync<WriteRouteOptions> = async (app, { settings, context, defaultStore }) => {
  const security = settings.auth.enabled ? [{ bearer: [] }] : [];
  app.get('/history', {
    schema: { ...historyRouteSchema, security },
    config: { audit: true, ...rateLimitRouteConfig(settings.rateLimit) },
    attachValidation: true,
    handler: async (request, reply) => {
      reply.header('cache-control', 'no-store');
      const raw = (request.query ?? {}) as Record<string, string | undefined>;
      const query: HistoryRequest = { ...raw, before: raw.before === undefined ? undefined : Number(raw.before), limit: raw.limit === undefined ? undefined : Number(raw.limit) } as HistoryRequest;
      const line = auditWrite(request, defaultStore, { route: 'history', store: query.store, set: query.set, keys: query.key === undefined ? 0 : 1, dryRun: false });
      refuseInvalid(request, 'the query string is not valid');
      const answer = await readHistory(context, callerOf(request).principal, query);
      line.outcome = 'read';
      return answer;
    },
  });
};
