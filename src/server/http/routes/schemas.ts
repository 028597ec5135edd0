/**
 * `GET /schemas` (the named schemas: name, key count, labels) and `GET /schemas/{name}` (one schema's declaration,
 * with a strong ETag; 304 when `If-None-Match` names it). Authenticated like every route of the API; a scoped
 * credential or JWT sees only the schemas it may use whole, those whose every key one of its grants allows by `keys`
 * or by the labels the schema gives it (../../access/scopes.ts, `mayUseServerSchema`): a schema it may not use is
 * answered as one the server does not hold. A schema's text is no value, but its keys' names and declarations are
 * what a narrow scope is meant not to learn. These routes read no value, so they leave no audit line.
 */
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { ANONYMOUS } from '../../access/credentials.js';
import { mayUseServerSchema } from '../../access/scopes.js';
import type { ServerSettings } from '../../process/settings.js';
import type { NamedSchemas } from '../../schemas/registry.js';
import { unknownSchema } from '../../schemas/resolve.js';
import { sendAnswer } from '../../watch/etags.js';
import { PROBLEM_CONTENT_TYPE, httpProblem } from '../problem.js';
import { getSchemaRouteSchema, listSchemasRouteSchema } from '../schemas-named.js';

/** The paths served here, with their methods (for 405 and `Allow`). */
export const SCHEMA_ROUTES: Record<string, string[]> = { '/schemas': ['GET', 'HEAD'], '/schemas/:name': ['GET', 'HEAD'] };

export const schemaRoutes: FastifyPluginAsync<{ settings: ServerSettings; schemas: NamedSchemas }> = async (app, { settings, schemas }) => {
  const security = settings.auth.enabled ? [{ bearer: [] }] : [];

  app.get('/schemas', { schema: { ...listSchemasRouteSchema, security } }, (request: FastifyRequest, reply: FastifyReply) => {
    const principal = request.cfguPrincipal ?? ANONYMOUS;
    const list = schemas
      .all()
      .filter((s) => mayUseServerSchema(principal, s))
      .map((s) => ({ name: s.name, keys: s.keyCount, labels: s.labelNames }));
    reply.header('cache-control', 'no-store');
    return reply.send({ schemas: list });
  });

  app.get('/schemas/:name', { schema: { ...getSchemaRouteSchema, security } }, (request: FastifyRequest, reply: FastifyReply) => {
    const { name } = request.params as { name: string };
    const principal = request.cfguPrincipal ?? ANONYMOUS;
    const held = schemas.get(name);
    if (!held || !mayUseServerSchema(principal, held)) {
      const e = unknownSchema(name, schemas, principal.grants === 'all' ? undefined : principal);
      const body = { ...httpProblem(404, e.message), schema: e.schema, closestSchemas: e.closest };
      return reply.code(404).header('cache-control', 'no-store').type(PROBLEM_CONTENT_TYPE).send(JSON.stringify(body));
    }
    return sendAnswer(request, reply, held.text, held.etag, []);
  });
};
