/**
 * The API reference: the OpenAPI document (@fastify/swagger, built from the routes' schemas) at `/openapi.json`, and
 * the Swagger UI page at `/docs` (../docs-ui.ts). Both exist only with `docs.enabled`; they need a credential when
 * authentication is on, unless `docs.public` says otherwise (../../access/authentication.ts).
 */
import type { FastifyPluginAsync } from 'fastify';
import fp from 'fastify-plugin';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { ServerSettings } from '../../process/settings.js';
import { docsUiOptions, finishOpenapi, openapiInfo } from '../docs-ui.js';

/** The paths of the docs, with their methods (for 404 and 405). */
export const DOCS_ROUTES: Record<string, string[]> = {
  '/openapi.json': ['GET', 'HEAD'],
  '/docs': ['GET', 'HEAD'],
};

/**
 * The document's generator and the UI. Registered at the root before the routes (it learns every route as it is
 * added), hence `fastify-plugin`.
 */
export const apiDocs = fp<{ settings: ServerSettings }>(async (app, { settings }) => {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: openapiInfo,
      tags: [
        { name: 'configuration', description: 'Evaluate and export configuration' },
        { name: 'health', description: 'Liveness and readiness (never need a key)' },
        { name: 'schemas', description: 'The named schemas of the server (.configu `schemas`)' },
        { name: 'session', description: 'Who the caller is and what it may do' },
        { name: 'stores', description: 'The stores the caller may name and the sets they hold' },
        { name: 'watch', description: 'Follow the writes to a store as they happen' },
      ],
      components: settings.auth.enabled
        ? { securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'A preshared key, a scoped token, or a JWT of the configured issuer (docs/security.md)' } } }
        : {},
    },
    transformObject: finishOpenapi as never,
    refResolver: {
      buildLocalReference(json, _baseUri, _fragment, i) {
        return typeof json.$id === 'string' ? json.$id : `def-${i}`;
      },
    },
  });
  await app.register(swaggerUi, docsUiOptions());
});

/** `GET /openapi.json`: the document, made once on the first request (the app makes it at start already). */
export const openapiRoute: FastifyPluginAsync = async (app) => {
  let openapi: string | undefined;
  app.get('/openapi.json', { schema: { hide: true } }, (_request, reply) => {
    openapi ??= JSON.stringify(app.swagger());
    return reply.type('application/json; charset=utf-8').send(openapi);
  });
};
