/**
 * The app's error answers, as problem details (./problem.ts): the error handler (every error a hook, a parser or a
 * route throws) and the answer for a request no route matches: 405 with `Allow` for a known path (or a path below a
 * known prefix) and another method, else 404.
 */
import type { FastifyReply } from 'fastify';
import fp from 'fastify-plugin';
import { blankProblem } from './client-errors.js';
import { httpProblem, PROBLEM_CONTENT_TYPE, toProblem, type Problem } from './problem.js';
import { pathOf } from './request-basics.js';

export function sendProblem(reply: FastifyReply, p: Problem, headers?: Record<string, string>): FastifyReply {
  reply.code(p.status).type(PROBLEM_CONTENT_TYPE);
  if (headers) reply.headers(headers);
  return reply.send(JSON.stringify(p));
}

export interface ProblemAnswersOptions {
  /** The paths the app serves, with their methods (for 405 and `Allow`); a path ending in `/*` covers every path below. */
  routes: Record<string, string[]>;
}

export const problemAnswers = fp<ProblemAnswersOptions>(async (app, { routes }) => {
  const prefixes = Object.entries(routes).filter(([p]) => p.endsWith('/*')).map(([p, methods]) => [p.slice(0, -1), methods] as const);
  const methodsOf = (path: string): string[] | undefined => routes[path] ?? prefixes.find(([prefix]) => path.startsWith(prefix))?.[1];
  app.setErrorHandler((error, request, reply) => {
    const status = (error as { statusCode?: unknown }).statusCode;
    if ((error as { code?: unknown }).code === 'FST_STATIC_FORBIDDEN_PATH') {
      // A docs asset path that climbs out of its folder (`/docs/static/../x`, `%2e%2e`): there is no such asset.
      return sendProblem(reply, httpProblem(404, `no route ${request.method} ${pathOf(request.url).slice(0, 200)}`));
    }
    const { problem: p, headers, log } = toProblem(error, request.id);
    if (p.status === 500 && typeof status === 'number' && status >= 400 && status < 500) {
      // A client error raised by a plugin (the docs' static files, ...) stays the client's: never a 500 with a stack.
      return sendProblem(reply, blankProblem(status, 'the request cannot be served'));
    }
    if (log === 'error') request.log.error({ err: error }, 'request failed');
    else if (log === 'warn') request.log.warn({ err: { type: (error as Error).name, message: (error as Error).message } }, 'request failed');
    return sendProblem(reply, p, headers);
  });

  app.setNotFoundHandler((request, reply) => {
    const path = pathOf(request.url);
    const allowed = methodsOf(path);
    if (allowed && !allowed.includes(request.method)) {
      return sendProblem(reply, httpProblem(405, `${request.method} is not allowed on ${path}; allowed: ${allowed.join(', ')}`), {
        allow: allowed.join(', '),
      });
    }
    return sendProblem(reply, httpProblem(404, `no route ${request.method} ${path.length > 200 ? `${path.slice(0, 200)}...` : path}`));
  });
});
