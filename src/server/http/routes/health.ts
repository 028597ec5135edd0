/**
 * Health probes, open without a credential: `GET /live` (the process answers: its uptime) and `GET /ready` (200
 * while the server is ready, 503 while it starts or shuts down; ../../process/lifecycle.ts).
 */
import type { FastifyPluginAsync } from 'fastify';
import type { Lifecycle } from '../../process/lifecycle.js';
import { liveRouteSchema, readyRouteSchema } from '../schemas.js';

export const healthRoutes: FastifyPluginAsync<{ lifecycle: Lifecycle }> = async (app, { lifecycle }) => {
  app.get('/live', { schema: liveRouteSchema }, (_request, reply) => {
    reply.header('cache-control', 'no-store');
    return reply.send({ uptime: Math.round(process.uptime() * 1000) / 1000 });
  });

  app.get('/ready', { schema: readyRouteSchema }, (_request, reply) => {
    reply.header('cache-control', 'no-store');
    if (lifecycle.ready) return reply.send({ status: 'ready' });
    return reply.code(503).send();
  });
};
