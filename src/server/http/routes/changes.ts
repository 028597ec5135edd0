/**
 * `GET /changes?store=S`: a Server-Sent Events stream that says which sets of one store were written, whoever wrote
 * them (../../watch/store-streams.ts has the events; docs/server.md, "Watching for changes"). In order, after
 * authentication (401) and the rate limit (429):
 *   the query string (400), the scope: a scoped caller needs a grant on the store (403, for an unknown name too, as
 *   POST /export), the store (400 unknown-store, listing only the names the caller may name), then the watch hub:
 *   503 while stopping or at the server's watcher limit, 429 at the client's share, else the stream.
 * HEAD answers the stream's headers without opening one. Audited: the line names the store and how the stream ended.
 */
import type { FastifyPluginAsync } from 'fastify';
import { ForbiddenError, type StoreResolver } from '../../../core/index.js';
import { UNAUTHORIZED } from '../../access/authentication.js';
import { ANONYMOUS, clientIdentity } from '../../access/credentials.js';
import { rateLimitRouteConfig } from '../../access/rate-limit.js';
import { visibleStores, type Principal } from '../../access/scopes.js';
import { watchCredential, type AuthenticatorHolder } from '../../access/watch-credentials.js';
import type { ServerSettings } from '../../process/settings.js';
import type { WatchHub } from '../../watch/hub.js';
import { writeStore } from '../../writes/write-service.js';
import { problemResponse, requestIdHeader } from '../schemas.js';
import { refuseInvalid } from './write-common.js';

export interface ChangesRouteOptions {
  settings: ServerSettings;
  registry: StoreResolver;
  /** The store a request without `store` follows, resolved once. */
  defaultStore: string | undefined;
  holder: AuthenticatorHolder;
  watch: WatchHub;
}

/** A scoped principal without any grant on the store (full access always has one). */
export function storeRefusal(principal: Principal, store: string): ForbiddenError | undefined {
  if (visibleStores(principal, [store]).length) return undefined;
  return new ForbiddenError([], 0, `no grant of this credential covers store "${store}": following its changes needs one`);
}

const EVENTS =
  'A stream of Server-Sent Events: first `event: ready` with `data: {"store": <name>}` (subscribed: no change after it ' +
  'is missed); then, for each write to the store (notices within `watch.debounceMs` merged), `event: change` with ' +
  '`data: {"store": <name>, "sets": [<set>, ...]}` (the sets written that the caller may read, sorted; no event when ' +
  'it may read none of them), or `"sets": null` when any set may have changed (refetch everything); `event: error` ' +
  'with a problem body while the store cannot be followed (503 store-unavailable; a `change` with `"sets": null` ' +
  'follows its recovery); `: heartbeat` comments every `watch.heartbeatMs`; and, when the credential expires or no ' +
  'longer admits the stream, a last `event: end` with the 401 or 403 problem, then the end of the stream.';

export const changesRouteSchema = {
  summary: 'Follow the writes to a store',
  description: 'Which sets of a store change, whoever writes them: cfgu, another replica or another program. For a page that shows sets, not one pipeline\'s answer (for that, POST /export with `Accept: text/event-stream`).',
  tags: ['watch'],
  operationId: 'changes',
  querystring: {
    type: 'object',
    additionalProperties: false,
    properties: { store: { type: 'string', minLength: 1, description: 'The store; the default store when absent.' } },
  },
  response: {
    200: {
      description: EVENTS,
      headers: { ...requestIdHeader },
      content: { 'text/event-stream': { schema: { type: 'string' } } },
    },
    400: problemResponse(400),
    401: problemResponse(401),
    403: problemResponse(403),
    405: problemResponse(405),
    429: problemResponse(429),
    500: problemResponse(500),
    503: problemResponse(503),
  },
} as const;

export const changesRoute: FastifyPluginAsync<ChangesRouteOptions> = async (app, { settings, registry, defaultStore, holder, watch }) => {
  const security = settings.auth.enabled ? [{ bearer: [] }] : [];
  app.get('/changes', {
    schema: { ...changesRouteSchema, security },
    config: { audit: true, ...rateLimitRouteConfig(settings.rateLimit) },
    attachValidation: true,
    handler: async (request, reply) => {
      reply.header('cache-control', 'no-store');
      const query = (request.query ?? {}) as { store?: unknown };
      const named = typeof query.store === 'string' ? query.store : undefined;
      request.cfguChanges = { store: (named ?? defaultStore ?? null)?.slice(0, 200) ?? null };
      refuseInvalid(request, 'the query string is not valid');
      const principal = request.cfguPrincipal ?? ANONYMOUS;
      // The scope before the store: a scoped caller learns nothing of a store outside its grants (POST /export's rule).
      const wanted = named ?? defaultStore;
      const refused = wanted === undefined ? undefined : storeRefusal(principal, wanted);
      if (refused) throw refused;
      const store = writeStore(registry, named, principal).name;
      request.cfguChanges = { store };
      if (request.method === 'HEAD') return reply.type('text/event-stream; charset=utf-8').header('x-accel-buffering', 'no').send('');
      const client = principal.kind === 'anonymous' ? clientIdentity(undefined, request.ip, false) : principal.identity;
      const credential = watchCredential({
        holder,
        authorization: request.headers.authorization,
        principal,
        commands: [],
        refusal: (p) => storeRefusal(p, store),
        defaultStore,
        unauthorized: UNAUTHORIZED,
      });
      return watch.follow(request, reply, store, { client, principal, ...(credential ? { credential } : {}) });
    },
  });
};
