/**
 * `POST /matrix`: one schema evaluated at many sets (a list, or every set the store holds under a prefix), answered
 * as a cell per key and set (core/matrix.ts; docs/server.md, "POST /matrix"). In order, after authentication and the
 * rate limit (onRequest) and the body's parsing:
 *   preValidation  the sets (limits.matrixSets), the schema's keys (limits.keys), the cells (limits.matrixCells) -> 413
 *   validation     the compiled JSON schema                                                                  -> 400
 *   handler        the scope check: each given set as an export command, or the prefix's whole subtree       -> 403
 *                  then the engine: the listing, one read, each set evaluated       -> 200, 400, 413, 422, 503, 500
 * Audited (`audit: true`): one line per request, naming the store and the sets or the prefix.
 */
import type { FastifyPluginAsync, FastifyReply, FastifyRequest, preValidationHookHandler } from 'fastify';
import { matrixOf, type MatrixRequest } from '../../../core/matrix.js';
import { ErrorCodes, ForbiddenError, InputError, LimitError, UnknownStoreError, type RefusedCommand } from '../../../core/errors.js';
import { keyCount } from '../../../core/frozen.js';
import { truncate } from '../../../core/names.js';
import { requestContext } from '../../../core/ports.js';
import type { EvalCommandInput } from '../../../core/types.js';
import { ANONYMOUS, clientIdentity } from '../../access/credentials.js';
import { rateLimitRouteConfig } from '../../access/rate-limit.js';
import { mayListPrefix, refusedCommands, visibleStores, type Principal, type ServerSchemaOf } from '../../access/scopes.js';
import type { Observation } from '../../observe/observation.js';
import type { ServerSettings } from '../../process/settings.js';
import { headerSafe } from '../../watch/etags.js';
import { matrixRouteSchema } from '../matrix-schemas.js';
import type { NamedSchemas } from '../../schemas/registry.js';
import { resolveCommands } from '../../schemas/resolve.js';
import { issuesFromValidation } from '../problem.js';

export interface MatrixRouteOptions {
  settings: ServerSettings;
  /** The store a request without `store` reads (for scope checks), resolved once. */
  defaultStore: string | undefined;
  observation: Observation;
  /** The server's named schemas (the request may name one instead of carrying it). */
  schemas: NamedSchemas;
}

/** The size limits, before the body is validated: more sets, keys or cells than allowed is 413 whatever else is wrong. */
function matrixLimits(limits: ServerSettings['limits']): preValidationHookHandler {
  return (request, _reply, done) => {
    const body = request.body as { sets?: unknown; schema?: { keys?: unknown } } | null;
    if (!body || typeof body !== 'object') return done();
    const sets = Array.isArray(body.sets) ? body.sets.length : 0;
    if (sets > limits.matrixSets) return done(new LimitError(`the matrix has ${sets} sets; the limit is ${limits.matrixSets}`));
    const keys = body.schema?.keys && typeof body.schema.keys === 'object' ? keyCount(body.schema.keys) : 0;
    if (keys > limits.keys) return done(new LimitError(`the schema declares ${keys} keys; the limit is ${limits.keys}`));
    if (sets * keys > limits.matrixCells) return done(new LimitError(`the matrix has ${sets} sets of ${keys} keys, ${sets * keys} cells; the limit is ${limits.matrixCells}`));
    done();
  };
}

const shown = (store: string | undefined): string => (store === undefined ? '(none)' : `"${store}"`);

/** The given sets the principal may not read, each checked as the export command `{ store, set, schema }` would be. */
function refusedSets(principal: Principal, body: MatrixRequest, defaultStore: string | undefined, serverSchema?: ServerSchemaOf): ForbiddenError | undefined {
  const sets = body.sets!;
  const commands: EvalCommandInput[] = sets.map((set) => ({ ...(body.store !== undefined ? { store: body.store } : {}), set, schema: body.schema }));
  const refused = refusedCommands(principal, commands, defaultStore, serverSchema);
  if (!refused.length) return undefined;
  const store = body.store ?? defaultStore;
  const list = refused.slice(0, 20).map((r) => `"${truncate(r.set)}"`);
  const more = refused.length > 20 ? ` and ${refused.length - 20} more` : '';
  return new ForbiddenError(
    refused,
    sets.length,
    `${refused.length} of ${sets.length} set${sets.length === 1 ? '' : 's'} of store ${shown(store)} ${refused.length === 1 ? 'is' : 'are'} outside the scope of this credential: ${list.join(', ')}${more}`,
  );
}

/** The refusal of a prefix the principal may not list (a grant of its whole subtree is needed). */
function refusedPrefix(prefix: string, store: string | undefined): ForbiddenError {
  const p = prefix.trim().replace(/^\/|\/$/g, '');
  const refused: RefusedCommand[] = [{ command: 0, store: store ?? null, set: p }];
  const grant = p === '' ? '**' : `${p}/**`;
  return new ForbiddenError(
    refused,
    1,
    `the prefix "${truncate(p)}" of store ${shown(store)} is outside the scope of this credential: listing it needs a grant of its whole subtree ("${truncate(grant)}")`,
  );
}

export const matrixRoute: FastifyPluginAsync<MatrixRouteOptions> = async (app, { settings, defaultStore, observation, schemas }) => {
  const serverSchema: ServerSchemaOf = (schema) => schemas.versionOf(schema);
  const security = settings.auth.enabled ? [{ bearer: [] }] : [];
  app.post('/matrix', {
    schema: { ...matrixRouteSchema, security },
    attachValidation: true,
    config: { audit: true, ...rateLimitRouteConfig(settings.rateLimit) },
    preValidation: matrixLimits(settings.limits),
    handler: async (request: FastifyRequest, reply: FastifyReply) => {
      if (request.validationError) {
        const issues = issuesFromValidation((request.validationError as { validation?: [] }).validation ?? []);
        const first = issues[0];
        const detail = first ? `: ${first.path} ${first.message}${issues.length > 1 ? ` (and ${issues.length - 1} more)` : ''}` : '';
        throw new InputError(ErrorCodes.INVALID_INPUT, `the request body is not a valid matrix request${detail}`, issues);
      }
      const principal = request.cfguPrincipal ?? ANONYMOUS;
      // A schema named by the request is the server's own (an unknown name, or one the principal may not use: 400).
      const sent = request.body as MatrixRequest;
      const body: MatrixRequest =
        typeof (sent.schema as unknown) === 'string'
          ? { ...sent, schema: resolveCommands([{ schema: sent.schema as unknown as string }], schemas, principal)[0]!.schema as MatrixRequest['schema'] }
          : sent;
      const store = body.store ?? defaultStore;
      const scoped = principal.grants !== 'all';
      // Before anything is read: a set out of scope refuses the whole request; a prefix needs its whole subtree.
      if (scoped && body.sets !== undefined && body.prefix === undefined) {
        const refused = refusedSets(principal, body, defaultStore, serverSchema);
        if (refused) throw refused;
      }
      if (scoped && body.prefix !== undefined && body.sets === undefined && !mayListPrefix(principal, store, body.prefix, body.schema, serverSchema)) {
        throw refusedPrefix(body.prefix, store);
      }
      const client = principal.kind === 'anonymous' ? clientIdentity(undefined, request.ip, false) : principal.identity;
      const commands: EvalCommandInput[] = [{ ...(body.store !== undefined ? { store: body.store } : {}), schema: body.schema }];
      let matrix;
      try {
        matrix = await observation.evaluate(request, 'matrix', commands, (engine) =>
          matrixOf(body, engine, {
            limits: { sets: settings.limits.matrixSets, cells: settings.limits.matrixCells },
            engineLimits: settings.limits,
            // Each set is budgeted in the sandbox as one export is; all run for the same client (served in turn).
            context: () => requestContext(client),
            // The listed sets, checked again as export commands (a listing of an allowed subtree passes).
            ...(scoped && body.prefix !== undefined ? { authorize: (sets) => authorizeListed(principal, body, sets, defaultStore, serverSchema) } : {}),
          }),
        );
      } catch (e) {
        throw scoped && e instanceof UnknownStoreError ? new UnknownStoreError(e.store, visibleStores(principal, e.known)) : e;
      }
      request.cfguKeys = matrix.keys.length * matrix.sets.length;
      if (matrix.fromBackup) reply.header('x-configu-backup', headerSafe([matrix.store]));
      reply.header('cache-control', 'no-store');
      reply.type('application/json; charset=utf-8');
      return reply.send(JSON.stringify(matrix));
    },
  });
};

function authorizeListed(principal: Principal, body: MatrixRequest, sets: readonly string[], defaultStore: string | undefined, serverSchema?: ServerSchemaOf): void {
  const refused = refusedSets(principal, { ...body, sets }, defaultStore, serverSchema);
  if (refused) throw refused;
}
