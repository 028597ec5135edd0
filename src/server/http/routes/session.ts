/**
 * What the browser console asks first, and any client may ask: `GET /session` (who the caller is and what it may do),
 * `GET /stores` (the stores it may name) and `GET /sets?store=S` (the sets a store holds that it may read). Each obeys
 * what POST /export obeys: authentication (401), the caller's scope, the rate limit (a budget per route), one audit
 * line per request (names and counts, never a value), `Cache-Control: no-store`.
 *
 * Scope: a scoped caller sees only the stores one of its grants names, and of a store's sets only those some grant
 * covering the store matches, whatever its keys (../../access/write-access.ts, `mayReadSet`): the set names are what
 * POST /matrix with a prefix would list. How many sets were left out is said (`withheld`), never which.
 */
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { ErrorCodes, ForbiddenError, InputError, UnknownStoreError } from '../../../core/errors.js';
import type { StoreResolver } from '../../../core/ports.js';
import { ANONYMOUS } from '../../access/credentials.js';
import { rateLimitRouteConfig } from '../../access/rate-limit.js';
import { visibleStores, type Principal, type WrittenGrant } from '../../access/scopes.js';
import { mayReadSet, mayWriteStore } from '../../access/write-access.js';
import type { ServerSettings } from '../../process/settings.js';
import { sessionRouteSchema, setsRouteSchema, storesRouteSchema } from '../session-schemas.js';
import { refuseInvalid } from './write-common.js';

/** The paths served here, with their methods (for 405 and `Allow`). */
export const SESSION_ROUTES: Record<string, string[]> = { '/session': ['GET', 'HEAD'], '/stores': ['GET', 'HEAD'], '/sets': ['GET', 'HEAD'] };

export interface SessionRouteOptions {
  settings: ServerSettings;
  registry: StoreResolver;
  /** The store a request without `store` lists, resolved once. */
  defaultStore: string | undefined;
}

/** The answer of GET /session. */
export interface Session {
  authentication: boolean;
  kind: Principal['kind'];
  subject: string | null;
  access: 'full' | 'scoped';
  grants?: WrittenGrant[];
  expiresAt?: string;
}

export function sessionOf(principal: Principal, authentication: boolean): Session {
  if (principal.grants === 'all') return { authentication, kind: principal.kind, subject: principal.subject, access: 'full' };
  return {
    authentication,
    kind: principal.kind,
    subject: principal.subject,
    access: 'scoped',
    grants: principal.grants.map((g) => g.written),
    ...(principal.expiresAt !== undefined ? { expiresAt: new Date(principal.expiresAt * 1000).toISOString() } : {}),
  };
}

/** The answer of GET /sets. */
export interface SetList {
  store: string;
  sets: string[];
  withheld: number;
  truncated: boolean;
}

/** The store GET /sets lists, after the scope check: a store the caller may not name is 403 whether it exists or not. */
function storeToList(options: SessionRouteOptions, principal: Principal, asked: string | undefined) {
  const { registry, defaultStore } = options;
  const name = asked ?? defaultStore;
  if (name === undefined) throw new UnknownStoreError(undefined, visibleStores(principal, registry.names()));
  if (visibleStores(principal, [name]).length === 0) {
    throw new ForbiddenError([{ command: 0, store: name, set: '' }], 1, `store "${name.slice(0, 200)}" is outside the scope of this credential`);
  }
  try {
    return registry.resolve(name);
  } catch (e) {
    throw e instanceof UnknownStoreError ? new UnknownStoreError(e.store, visibleStores(principal, e.known)) : e;
  }
}

/** Every set the store holds (bounded by `limits.matrixSets` sets and `limits.lookups` key names), filtered by the scope. */
export async function listSets(options: SessionRouteOptions, principal: Principal, asked: string | undefined): Promise<SetList> {
  const store = storeToList(options, principal, asked);
  if (!store.list) throw new InputError(ErrorCodes.INVALID_INPUT, `store "${store.name}" cannot list its sets`, [{ path: '/store', message: 'cannot list its sets' }]);
  const { matrixSets, lookups } = options.settings.limits;
  const listing = await store.list('', { sets: matrixSets, keys: lookups });
  const sets = listing.sets.map((s) => s.set).filter((set) => mayReadSet(principal, store.name, set));
  return { store: store.name, sets, withheld: listing.sets.length - sets.length, truncated: listing.truncated };
}

export const sessionRoutes: FastifyPluginAsync<SessionRouteOptions> = async (app, options) => {
  const { settings, registry, defaultStore } = options;
  const security = settings.auth.enabled ? [{ bearer: [] }] : [];
  const config = { audit: true, ...rateLimitRouteConfig(settings.rateLimit) };
  const principalOf = (request: FastifyRequest): Principal => request.cfguPrincipal ?? ANONYMOUS;

  app.get('/session', { schema: { ...sessionRouteSchema, security }, config }, (request: FastifyRequest, reply: FastifyReply) => {
    request.cfguLookup = { route: 'session' };
    reply.header('cache-control', 'no-store');
    return reply.send(sessionOf(principalOf(request), settings.auth.enabled));
  });

  app.get('/stores', { schema: { ...storesRouteSchema, security }, config }, (request: FastifyRequest, reply: FastifyReply) => {
    const principal = principalOf(request);
    const stores = visibleStores(principal, registry.names()).map((name) => {
      const store = registry.resolve(name);
      const readOnly = store.readOnly === true;
      return { name, kind: store.type, default: name === defaultStore, readOnly, history: store.revisions !== undefined, write: !readOnly && mayWriteStore(principal, name) };
    });
    request.cfguLookup = { route: 'stores', listed: stores.length };
    reply.header('cache-control', 'no-store');
    return reply.send({ stores });
  });

  app.get('/sets', {
    schema: { ...setsRouteSchema, security },
    config,
    attachValidation: true,
    handler: async (request: FastifyRequest, reply: FastifyReply) => {
      reply.header('cache-control', 'no-store');
      const asked = (request.query as { store?: unknown } | undefined)?.store;
      const line = (request.cfguLookup = { route: 'sets', store: typeof asked === 'string' ? asked.slice(0, 200) : (defaultStore ?? null) });
      refuseInvalid(request, 'the query string is not valid');
      const answer = await listSets(options, principalOf(request), asked as string | undefined);
      Object.assign(line, { store: answer.store, listed: answer.sets.length, withheld: answer.withheld });
      return reply.send(answer);
    },
  });
};
