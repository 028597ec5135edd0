/**
 * `GET /metrics` (and HEAD): the Prometheus text of this process, or of the whole cluster (../../observe/metrics.ts).
 * With a metrics key set, it takes exactly that key (`Authorization: Bearer <key>`) and no other; without one, it
 * takes a preshared key, or a scoped credential or JWT with a grant that says `metrics: true` (any other is 403: the
 * metrics name every store, which a scope may hide), and is open when authentication is off.
 */
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { ErrorCodes } from '../../../core/errors.js';
import { mayReadMetrics } from '../../access/scopes.js';
import type { Observation } from '../../observe/observation.js';
import { PROBLEM_CONTENT_TYPE, cfguProblem, httpProblem } from '../problem.js';

const UNAUTHORIZED = JSON.stringify(cfguProblem(ErrorCodes.UNAUTHORIZED, 'a valid metrics key is required (Authorization: Bearer <key>)'));
const UNAVAILABLE = JSON.stringify(httpProblem(503, 'the metrics of the other workers could not be collected; retry'));
const FORBIDDEN = JSON.stringify(
  cfguProblem(ErrorCodes.FORBIDDEN, 'reading /metrics needs the metrics key, a preshared key, or a scope with metrics: true'),
);

/** The route exists only when metrics are on. */
export const metricsRoute: FastifyPluginAsync<{ observation: Observation }> = async (app, { observation }) => {
  const { metrics, metricsKey } = observation;
  if (!metrics) return;
  const scrape = async (request: FastifyRequest, reply: FastifyReply) => {
    reply.header('cache-control', 'no-store');
    if (metricsKey && !metricsKey.check(request.headers.authorization)) {
      return reply.code(401).header('www-authenticate', 'Bearer realm="cfgu-metrics"').type(PROBLEM_CONTENT_TYPE).send(UNAUTHORIZED);
    }
    // Without a metrics key: authenticated by the server's credentials (access/authentication.ts), and only a scope
    // that says so reads.
    const principal = metricsKey ? null : request.cfguPrincipal;
    if (principal && !mayReadMetrics(principal)) return reply.code(403).type(PROBLEM_CONTENT_TYPE).send(FORBIDDEN);
    let text: string;
    try {
      text = await metrics.text();
    } catch {
      return reply.code(503).header('retry-after', '1').type(PROBLEM_CONTENT_TYPE).send(UNAVAILABLE);
    }
    return reply.type(metrics.contentType).send(text);
  };
  app.get('/metrics', { schema: { hide: true } }, scrape);
};
