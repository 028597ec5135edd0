/**
 * OpenAPI schemas of the routes the browser console starts from (./routes/session.ts): `GET /session` (who the caller
 * is and what it may do), `GET /stores` (the stores it may name) and `GET /sets` (the sets a store holds that it may
 * read). The answers are serialized by these schemas: a member not declared here is never sent.
 */
import { problemResponse, requestIdHeader } from './schemas.js';

const grantSchema = {
  type: 'object',
  required: ['stores', 'sets', 'write', 'breaking', 'metrics'],
  description: 'One grant as the operator wrote it (never the token, its hash or the JWT claim it came from).',
  properties: {
    stores: { type: 'array', items: { type: 'string' }, description: 'Store names; `*` for every store.' },
    sets: { type: 'array', items: { type: 'string' }, description: 'Set patterns (`prod/**`, `staging`, `""` for the root).' },
    keys: { type: 'array', items: { type: 'string' }, description: 'When present: only these keys (patterns with `*`), or keys with one of `labels`.' },
    labels: { type: 'array', items: { type: 'string' }, description: 'When present: only keys carrying one of these labels in the server\'s schemas, or named in `keys`.' },
    write: { type: 'boolean', description: 'May also write what it covers (POST /upsert, POST /rollback).' },
    breaking: { type: 'boolean', description: 'May make a write that breaks a named schema (`allowBreaking`).' },
    metrics: { type: 'boolean', description: 'May read GET /metrics.' },
  },
} as const;

const sessionExample = {
  authentication: true,
  kind: 'jwt',
  subject: 'svc-deploy',
  access: 'scoped',
  grants: [{ stores: ['main'], sets: ['staging/**'], keys: ['LOG_LEVEL'], write: true, breaking: false, metrics: false }],
  expiresAt: '2026-11-23T17:00:00.000Z',
};

export const sessionRouteSchema = {
  summary: 'Who the caller is and what it may do',
  description:
    'The principal the request was answered for: whether authentication is on, the kind of credential, its subject, and (for a scoped token or a JWT) its grants as written. The console shows only what the caller may use.',
  tags: ['session'],
  operationId: 'session',
  response: {
    200: {
      description: 'The caller.',
      headers: { ...requestIdHeader },
      content: {
        'application/json': {
          schema: {
            type: 'object',
            required: ['authentication', 'kind', 'subject', 'access'],
            properties: {
              authentication: { type: 'boolean', description: 'Authentication is on (off: every caller has full access).' },
              kind: { type: 'string', enum: ['anonymous', 'preshared', 'credential', 'jwt'] },
              subject: { type: ['string', 'null'], description: 'The credential\'s name, the JWT\'s `sub`, `preshared:<n>`; null without authentication.' },
              access: { type: 'string', enum: ['full', 'scoped'], description: '`full`: a preshared key, or no authentication; `scoped`: `grants` say what.' },
              grants: { type: 'array', items: grantSchema, description: 'Scoped access only: every grant of the caller (empty for a JWT that matches none).' },
              expiresAt: { type: 'string', description: 'A JWT only: when it expires (its `exp`, ISO 8601).' },
            },
            examples: [sessionExample],
          },
        },
      },
    },
    401: problemResponse(401),
    405: problemResponse(405),
    429: problemResponse(429),
    500: problemResponse(500),
  },
} as const;

export const storesRouteSchema = {
  summary: 'The stores the caller may name',
  description: 'The stores of the server\'s `.configu`, in its order; a scoped caller sees only the stores one of its grants names (or all, with `*`).',
  tags: ['stores'],
  operationId: 'stores',
  response: {
    200: {
      description: 'The stores.',
      headers: { ...requestIdHeader },
      content: {
        'application/json': {
          schema: {
            type: 'object',
            required: ['stores'],
            properties: {
              stores: {
                type: 'array',
                items: {
                  type: 'object',
                  required: ['name', 'kind', 'default', 'readOnly', 'history', 'write'],
                  properties: {
                    name: { type: 'string' },
                    kind: { type: 'string', description: 'The store type (`json-file`, `sqlite`, `postgresql`, ...).' },
                    default: { type: 'boolean', description: 'A command without `store` reads this one.' },
                    readOnly: { type: 'boolean', description: '`.configu` declares it `readOnly: true`: every write is refused.' },
                    history: { type: 'boolean', description: 'The store keeps revisions and their history (GET /history).' },
                    write: { type: 'boolean', description: 'The caller has a write grant for the store, and the store is not read-only.' },
                  },
                },
              },
            },
            examples: [{ stores: [{ name: 'main', kind: 'json-file', default: true, readOnly: false, history: true, write: true }] }],
          },
        },
      },
    },
    401: problemResponse(401),
    405: problemResponse(405),
    429: problemResponse(429),
    500: problemResponse(500),
  },
} as const;

export const setsRouteSchema = {
  summary: 'The sets a store holds',
  description:
    'Every set the store holds a value in (its path; the root is `""`), in path order, that the caller may read. `withheld` counts the sets left out by the caller\'s scope. Ancestors that hold no value are not listed: a tree of sets is derived from the paths. At most `limits.matrixSets` sets are listed (`truncated` says more were held).',
  tags: ['stores'],
  operationId: 'sets',
  querystring: {
    type: 'object',
    additionalProperties: false,
    properties: { store: { type: 'string', minLength: 1, description: 'The store; the default store when absent.' } },
  },
  response: {
    200: {
      description: 'The sets of the store the caller may read.',
      headers: { ...requestIdHeader },
      content: {
        'application/json': {
          schema: {
            type: 'object',
            required: ['store', 'sets', 'withheld', 'truncated'],
            properties: {
              store: { type: 'string' },
              sets: { type: 'array', items: { type: 'string' }, description: 'Set paths, sorted by code point (the root `""` first).' },
              withheld: { type: 'integer', minimum: 0, description: 'How many of the listed sets the caller\'s scope left out (never their names).' },
              truncated: { type: 'boolean', description: 'The store holds more sets than the listing bound (`limits.matrixSets`) let through.' },
            },
            examples: [{ store: 'main', sets: ['', 'prod', 'prod/eu'], withheld: 2, truncated: false }],
          },
        },
      },
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
