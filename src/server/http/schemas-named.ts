/**
 * JSON schemas of `GET /schemas` and `GET /schemas/{name}` (./routes/schemas.ts), documented in the OpenAPI document
 * beside those of ./schemas.ts.
 */
import { ErrorCodes } from '../../core/errors.js';
import { cfguProblem } from './problem.js';
import { problemResponse, problemResponses } from './schemas.js';

const requestIdHeader = {
  'X-Request-Id': { type: 'string', description: 'The request id (echoed from the request, or generated).' },
};

/** What a 404 of GET /schemas/{name} says (the detail of the 400 a command naming it gets). */
export const schemaNotFoundExample = {
  ...cfguProblem(ErrorCodes.UNKNOWN_SCHEMA, 'unknown schema "ap": did you mean "app"?', { schema: 'ap', closestSchemas: ['app'] }),
  type: 'about:blank',
  title: 'Not Found',
  status: 404,
};

export const listSchemasRouteSchema = {
  summary: 'The named schemas',
  description:
    'The schemas the server holds by name (`.configu`\'s `schemas`), in the order `.configu` lists them: each with its number of keys and the labels its keys carry. A command of `POST /export` may name one (`"schema": "app"`) instead of carrying it. A scoped credential sees only the schemas whose every key its scope allows.',
  tags: ['schemas'],
  operationId: 'listSchemas',
  response: {
    200: {
      description: 'The named schemas.',
      headers: { ...requestIdHeader },
      content: {
        'application/json': {
          schema: {
            type: 'object',
            required: ['schemas'],
            additionalProperties: false,
            properties: {
              schemas: {
                type: 'array',
                items: {
                  type: 'object',
                  required: ['name', 'keys', 'labels'],
                  additionalProperties: false,
                  properties: {
                    name: { type: 'string', description: 'The name a command gives as its `schema`.' },
                    keys: { type: 'integer', description: 'How many keys the schema declares.' },
                    labels: { type: 'array', items: { type: 'string' }, description: 'Every label of its keys, sorted.' },
                  },
                },
              },
            },
            examples: [{ schemas: [{ name: 'app', keys: 4, labels: [] }] }],
          },
        },
      },
    },
    ...problemResponses(401, 405),
  },
} as const;

export const getSchemaRouteSchema = {
  summary: 'One named schema',
  description:
    'The declaration of a named schema as its file (or files) declare it: `{"keys": {...}}`, the body a command could carry instead of the name. With a strong ETag (from the content); `If-None-Match` naming it answers 304. A change of the file is served as soon as the server has read it (it watches the files).',
  tags: ['schemas'],
  operationId: 'getSchema',
  params: {
    type: 'object',
    required: ['name'],
    properties: { name: { type: 'string', description: 'The schema\'s name in `.configu`\'s `schemas`.' } },
  },
  response: {
    200: {
      description: 'The schema.',
      headers: { ...requestIdHeader, ETag: { type: 'string', description: 'A strong tag of the exact answer.' } },
      content: {
        'application/json': {
          schema: {
            type: 'object',
            required: ['keys'],
            properties: { keys: { type: 'object', additionalProperties: { $ref: 'Cfgu#' } } },
            examples: [{ keys: { LOG_LEVEL: { enum: ['debug', 'info', 'warn', 'error'], default: 'info' } } }],
          },
        },
      },
    },
    304: {
      description: '`If-None-Match` names the current tag: no body.',
      headers: { ...requestIdHeader, ETag: { type: 'string', description: 'The tag of the current answer.' } },
    },
    ...problemResponses(401, 405),
    404: {
      ...problemResponse(404),
      description:
        'Not Found: the server holds no schema of that name (for a scoped credential: none of that name whose every key its scope allows). `closestSchemas` lists close names it may use.',
      content: {
        'application/problem+json': {
          schema: { $ref: 'Problem#' },
          examples: { unknownSchema: { summary: 'Unknown schema', value: schemaNotFoundExample } },
        },
      },
    },
  },
} as const;
