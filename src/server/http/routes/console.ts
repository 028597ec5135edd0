/**
 * The browser console's files: `GET /console` (and `/console/`) answers its `index.html`, `GET /console/assets/<path>`
 * a file of its `assets/` folder, all from memory (../console-files.ts). Open without a credential (the files hold no
 * data: the page asks for a token and sends it on its own API calls; ../../access/authentication.ts); without
 * authentication, served to loopback clients only (403 otherwise). Every answer carries a Content-Security-Policy that
 * allows no inline script or style and nothing from another origin. Left out of the OpenAPI document. Exists only with
 * `console.enabled`.
 */
import { BlockList, isIP } from 'node:net';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { ConsoleLoopbackOnlyError } from '../../../core/errors.js';
import type { ServerSettings } from '../../process/settings.js';
import { acceptsGzip, notModified, servablePath, type ConsoleFile, type ConsoleFiles } from '../console-files.js';
import { httpProblem } from '../problem.js';
import { sendProblem } from '../problem-answers.js';
import { pathOf } from '../request-basics.js';

/** The paths of the console, with their methods (for 405 and `Allow`; a path ending in `/*` covers what is below). */
export const CONSOLE_ROUTES: Record<string, string[]> = {
  '/console': ['GET', 'HEAD'],
  '/console/': ['GET', 'HEAD'],
  '/console/assets/*': ['GET', 'HEAD'],
};

const ASSETS = '/console/assets/';

/** Whether a request path (as sent, without its query) is one of the console's (open without a credential). */
export const isConsolePath = (path: string): boolean => path === '/console' || path === '/console/' || path.startsWith(ASSETS);

export const CONSOLE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; " +
  "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const HEADERS = { 'content-security-policy': CONSOLE_CSP, 'referrer-policy': 'no-referrer', 'x-content-type-options': 'nosniff' };

const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');

/** 127.0.0.0/8, ::1, and IPv4 loopback written as IPv6 (`::ffff:127.0.0.1`). */
export function isLoopback(ip: string | undefined): boolean {
  const family = typeof ip === 'string' ? isIP(ip) : 0;
  return family !== 0 && LOOPBACK.check(ip!, family === 4 ? 'ipv4' : 'ipv6');
}

export const NOT_BUILT = 'the console was not built: run `npm run build` (it writes dist/console), then restart the server';

function sendFile(request: FastifyRequest, reply: FastifyReply, file: ConsoleFile): FastifyReply {
  const packed = file.gzip !== undefined && acceptsGzip(request.headers['accept-encoding']);
  reply.header('cache-control', file.cacheControl);
  reply.header('etag', packed ? file.gzipEtag : file.etag);
  if (file.gzip !== undefined) {
    const vary = reply.getHeader('vary');
    reply.header('vary', vary ? `${String(vary)}, Accept-Encoding` : 'Accept-Encoding');
  }
  if (notModified(request.headers['if-none-match'], file)) return reply.code(304).send();
  if (packed) reply.header('content-encoding', 'gzip');
  return reply.type(file.type).send(packed ? file.gzip : file.body);
}

export const consoleRoutes: FastifyPluginAsync<{ settings: ServerSettings; files: ConsoleFiles }> = async (app, { settings, files }) => {
  const loopbackOnly = !settings.auth.enabled;
  app.addHook('onRequest', (request, reply, done) => {
    reply.headers(HEADERS);
    // Without authentication nothing stands between the page and the API but the network: this host only.
    if (loopbackOnly && !isLoopback(request.ip)) return done(new ConsoleLoopbackOnlyError());
    done();
  });
  const index = (request: FastifyRequest, reply: FastifyReply) =>
    files.index ? sendFile(request, reply, files.index) : sendProblem(reply.header('cache-control', 'no-store'), httpProblem(404, NOT_BUILT));
  app.get('/console', { schema: { hide: true } }, index);
  app.get('/console/', { schema: { hide: true } }, index);
  app.get('/console/assets/*', { schema: { hide: true } }, (request, reply) => {
    const path = pathOf(request.url);
    // The path as sent (never decoded): `..`, `%2e%2e`, `%2f` and the like are no name of the folder.
    const name = path.startsWith(ASSETS) ? path.slice(ASSETS.length) : '';
    const file = servablePath(name) ? files.assets.get(name) : undefined;
    if (!file) return sendProblem(reply.header('cache-control', 'no-store'), httpProblem(404, `no route ${request.method} ${path.length > 200 ? `${path.slice(0, 200)}...` : path}`));
    return sendFile(request, reply, file);
  });
};
