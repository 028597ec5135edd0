/**
 * The request log: one line per answered request (method, path, client address, status, time), never a body, a
 * value or a header. Installed whenever there is a logger: SIGUSR2 can turn the lines on and off (./logger.ts); each
 * request's logger takes the level of the moment the request arrived. A successful health probe (every few seconds
 * from an orchestrator) is left out unless `log.probes` says otherwise.
 */
import fp from 'fastify-plugin';
import type { Logger } from 'pino';
import { pathOf } from '../http/request-basics.js';

export const requestLog = fp<{ probes: boolean }>(async (app, { probes }) => {
  app.addHook('onResponse', (request, reply, done) => {
    if (!(request.log as unknown as Logger).isLevelEnabled('info')) return done();
    const path = pathOf(request.url);
    if (!probes && reply.statusCode < 300 && (path === '/live' || path === '/ready')) return done();
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
});
