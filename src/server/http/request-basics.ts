/**
 * What every request gets first, before authentication: it is counted in flight (the shutdown waits for none),
 * its answer carries `X-Request-Id` and `X-Content-Type-Options: nosniff`, and an HTTP/1.1 request without a Host
 * header is answered 400 here. While the server drains, every answer asks the client to reconnect
 * (`Connection: close`).
 */
import fp from 'fastify-plugin';
import type { Lifecycle } from '../process/lifecycle.js';
import { blankProblem } from './client-errors.js';
import { PROBLEM_CONTENT_TYPE } from './problem.js';

/** The path of a request URL, without its query. */
export const pathOf = (url: string): string => {
  const q = url.indexOf('?');
  return q === -1 ? url : url.slice(0, q);
};

const NO_HOST = JSON.stringify(blankProblem(400, 'an HTTP/1.1 request must carry a Host header'));

export const requestBasics = fp<{ lifecycle: Lifecycle }>(async (app, { lifecycle }) => {
  app.addHook('onRequest', (request, reply, done) => {
    lifecycle.requestStarted();
    reply.raw.once('close', () => lifecycle.requestEnded());
    reply.header('x-request-id', request.id);
    reply.header('x-content-type-options', 'nosniff');
    if (request.headers.host === undefined && request.raw.httpVersion === '1.1') {
      reply.code(400).header('connection', 'close').type(PROBLEM_CONTENT_TYPE).send(NO_HOST);
      return;
    }
    done();
  });
});

/**
 * While draining, every response (including those of requests that started before) asks the client to reconnect,
 * so keep-alive connections end with their current request.
 */
export const closeWhileDraining = fp<{ lifecycle: Lifecycle }>(async (app, { lifecycle }) => {
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (lifecycle.stopping) reply.header('connection', 'close');
    done(null, payload);
  });
});
