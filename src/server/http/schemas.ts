/**
 * JSON schemas of the routes: the request body of POST /export (compiled once by Fastify's Ajv at start-up) and the
 * responses, documented in the OpenAPI 3.1 document that /docs and /openapi.json serve.
 *
 * The body schema checks the pipeline's shape only: an array of commands, each `{ store?, set?, schema: { keys },
 * configs? }` with no other properties. Inside `keys`, a declaration is an object or null; its properties are
 * described (and their basic types checked) but the deep Cfgu rules (v0 properties, exclusive pairs, `default`
 * in `enum`, ...) are the engine's, which reports them with better messages. `default` and the items of `enum` may be
 * any JSON value, scalars included.
 */
import { cfguProblem, httpProblem, STATUS_TITLES, unauthorizedReply } from './problem.js';
import { ErrorCodes } from '../../core/errors.js';
import { CFGU_PROPERTIES, CFGU_PROPERTY_NAMES } from '../../core/cfgu.js';

export const cfguSchema = {
  $id: 'Cfgu',
  title: 'Cfgu',
  description: 'The declaration of one key (Cfgu v1). `null` or `{}` declares a key without constraints.',
  type: ['object', 'null'],
  properties: Object.fromEntries(CFGU_PROPERTY_NAMES.map((p) => [p, { description: CFGU_PROPERTIES[p].doc, ...CFGU_PROPERTIES[p].wire }])),
};

export const evalCommandSchema = {
  $id: 'EvalCommand',
  title: 'EvalCommand',
  type: 'object',
  additionalProperties: false,
  required: ['schema'],
  properties: {
    store: { type: 'string', description: 'Name of a store declared in the server\'s `.configu`; the default store when absent.' },
    set: { type: 'string', description: 'Configuration set path such as `production/eu`; the root when absent.' },
    schema: {
      // An object (the schema itself) or a string (the name of one of the server's schemas): the object's keywords
      // apply to objects only, `minLength` to strings only.
      type: ['object', 'string'],
      minLength: 1,
      additionalProperties: false,
      required: ['keys'],
      description:
        'The configuration schema: `keys` maps each key name to its declaration. Or the name of a schema the server holds (`.configu`\'s `schemas`, listed by `GET /schemas`), e.g. `"app"`.',
      properties: {
        keys: { type: 'object', additionalProperties: { $ref: 'Cfgu#' } },
      },
    },
    configs: {
      type: 'object',
      description: 'Overrides: key name -> value (non-strings are JSON-encoded). Only keys the schema declares.',
    },
  },
} as const;

/**
 * The requests shown (and sent by "Try it out") in /docs, by name. The first runs as is against `npm start`
 * (examples/.configu: the store `example` and its `production/eu` values) and answers `exportResponseExample`; the
 * second names no store and no set, and declares no required key, so it answers 200 on any server with a default
 * store.
 */
export const exportBodyExamples = {
  exampleStore: {
    summary: 'The example store of `npm start`',
    value: [
      {
        store: 'example',
        set: 'production/eu',
        schema: {
          keys: {
            API_HOST: { required: true, test: 'validator.isFQDN($.value)' },
            PORT: { test: 'Number.isInteger($.value) && $.value > 0', default: 8080 },
            LOG_LEVEL: { enum: ['debug', 'info', 'warn', 'error'], default: 'info' },
            API_URL: { const: 'https://{{ $.configs.API_HOST.value }}:{{ $.configs.PORT.value }}' },
          },
        },
        configs: { LOG_LEVEL: 'debug' },
      },
    ],
  },
  anyServer: {
    summary: 'Any server: the default store, the root set',
    value: [
      {
        schema: {
          keys: {
            LOG_LEVEL: { enum: ['debug', 'info', 'warn', 'error'], default: 'info' },
            TIMEOUT_MS: { test: 'Number.isInteger($.value) && $.value > 0', default: 3000 },
          },
        },
      },
    ],
  },
};

/** What the server of `npm start` answers to the first example. */
export const exportResponseExample = { API_HOST: 'eu.api.example.com', PORT: 8443, LOG_LEVEL: 'debug', API_URL: 'https://eu.api.example.com:8443' };

export const exportBodySchema = {
  type: 'array',
  minItems: 1,
  description: 'A pipeline: the commands run in order, each receiving the previous result; the last result is exported.',
  items: { $ref: 'EvalCommand#' },
  // Valid JSON Schema for the validator; /docs shows the named `exportBodyExamples` instead (./docs-ui.ts).
  examples: [exportBodyExamples.exampleStore.value],
} as const;

export const problemSchema = {
  $id: 'Problem',
  title: 'Problem',
  description: 'RFC 9457 problem details (`application/problem+json`).',
  type: 'object',
  required: ['type', 'title', 'status', 'detail'],
  properties: {
    type: { type: 'string', description: 'A URI naming the kind of problem (`urn:cfgu:problem:*` or `about:blank`).' },
    title: { type: 'string' },
    status: { type: 'integer' },
    detail: { type: 'string' },
    errors: {
      type: 'array',
      description: 'Every evaluation failure (422).',
      items: {
        type: 'object',
        required: ['command', 'key', 'rule', 'message'],
        properties: {
          command: { type: 'integer', description: '0-based index of the command in the pipeline.' },
          key: { type: 'string' },
          rule: { type: 'string', enum: ['required', 'pattern', 'enum', 'schema', 'test', 'const', 'override', 'undeclared', 'lazy'] },
          message: { type: 'string' },
        },
      },
    },
    issues: {
      type: 'array',
      description: 'Where the request is malformed (400): JSON-pointer paths into the body.',
      items: { type: 'object', properties: { path: { type: 'string' }, message: { type: 'string' } } },
    },
    store: { type: 'string', description: 'The unknown store name (400).' },
    knownStores: { type: 'array', items: { type: 'string' }, description: 'The store names the server knows (400).' },
    schema: { type: 'string', description: 'The unknown schema name (400 from POST /export, 404 from GET /schemas/{name}).' },
    closestSchemas: { type: 'array', items: { type: 'string' }, description: 'The names of the server\'s schemas close to the unknown one (at most three).' },
    requestId: { type: 'string', description: 'Request id to quote to the operator (500).' },
    set: { type: 'string', description: 'The set whose revision moved (409).' },
    expectedRevision: { type: 'integer', description: 'The revision the write expected (409).' },
    currentRevision: { type: 'integer', description: 'The set\'s revision now, to read and write again against (409).' },
    refused: {
      type: 'array',
      description: 'The commands outside the credential\'s scope (403): index, store and set.',
      items: {
        type: 'object',
        properties: { command: { type: 'integer' }, store: { type: ['string', 'null'] }, set: { type: 'string' } },
      },
    },
    impact: {
      type: 'array',
      description: 'What a refused write would do to each named schema at each set (422 write-breaks).',
      items: { type: 'object', additionalProperties: true },
    },
    right: { type: 'string', description: 'The right a write lacks (403): `write` or `break`.' },
    keys: { type: 'array', items: { type: 'string' }, description: 'The keys a write may not change (403).' },
  },
} as const;

/** Examples of each error status, shown in the OpenAPI document (name -> [summary, body]); cfgu's own are built from the
 * error catalogue's rows, as the server builds its answers. */
const problemExamples: Record<number, Record<string, [string, unknown]>> = {
  400: {
    unknownStore: [
      'Unknown store',
      cfguProblem(ErrorCodes.UNKNOWN_STORE, 'unknown store "prod-db"; known stores: "example"', { store: 'prod-db', knownStores: ['example'] }),
    ],
    notAPipeline: [
      'Body is not a pipeline',
      cfguProblem(ErrorCodes.INVALID_INPUT, 'the request body is not a valid pipeline: /0/schema is required', { issues: [{ path: '/0/schema', message: 'is required' }] }),
    ],
    unknownSchema: [
      'Unknown schema name',
      cfguProblem(ErrorCodes.UNKNOWN_SCHEMA, 'unknown schema "ap": did you mean "app"?', { schema: 'ap', closestSchemas: ['app'] }),
    ],
    invalidJson: ['Malformed JSON', cfguProblem(ErrorCodes.INVALID_INPUT, 'the request body is not valid JSON')],
    invalidSchema: [
      'Invalid schema',
      cfguProblem(ErrorCodes.INVALID_SCHEMA, '`type` of key "PORT" was removed in Cfgu v1: write a `test` expression instead (e.g. "typeof $.value === \'number\'")', {
        issues: [{ path: '/0/schema/keys/PORT/type', message: '`type` of key "PORT" was removed in Cfgu v1: write a `test` expression instead (e.g. "typeof $.value === \'number\'")' }],
      }),
    ],
  },
  401: { missingKey: ['Missing or wrong bearer key', unauthorizedReply().problem] },
  403: {
    outOfScope: [
      'A command outside the credential\'s scope',
      cfguProblem(ErrorCodes.FORBIDDEN, '1 of 2 commands is outside the scope of this credential: command 1 (store "main", set "prod")', {
        refused: [{ command: 1, store: 'main', set: 'prod' }],
      }),
    ],
  },
  404: { noRoute: ['No such route', httpProblem(404, 'no route GET /nope')] },
  405: {
    wrongMethod: ['Wrong method', httpProblem(405, 'GET is not allowed on /export; allowed: POST')],
  },
  413: {
    commands: ['Too many commands', cfguProblem(ErrorCodes.LIMIT_EXCEEDED, 'the pipeline has 51 commands; the limit is 50')],
    body: ['Body too large', cfguProblem(ErrorCodes.LIMIT_EXCEEDED, 'the request body is larger than the configured limit')],
  },
  415: {
    notJson: ['Not JSON', httpProblem(415, 'the request body must be JSON (Content-Type: application/json)')],
  },
  422: {
    validation: [
      'Validation failures',
      cfguProblem(ErrorCodes.VALIDATION_FAILED, '2 keys failed validation', {
        errors: [
          { command: 0, key: 'API_URL', rule: 'required', message: 'key "API_URL" is required but has no value' },
          { command: 0, key: 'LOG_LEVEL', rule: 'enum', message: 'the value of key "LOG_LEVEL" is not one of the allowed values: "verbose"' },
        ],
      }),
    ],
  },
  429: {
    rateLimited: ['Rate limit', cfguProblem(ErrorCodes.RATE_LIMITED, 'more than 100 requests in 60 s; retry after 12 s')],
  },
  500: {
    internal: [
      'Unexpected failure',
      { ...httpProblem(500, 'the server could not process the request; quote the request id to the operator'), requestId: 'b7c1f0e2-6a8e-4f0a-9a57-3f1d2d1b9c11' },
    ],
  },
  503: {
    storeUnavailable: ['Store unavailable', cfguProblem(ErrorCodes.STORE_UNAVAILABLE, 'store "example" cannot be reached or read; retry later')],
  },
};

const problemDescriptions: Record<number, string> = {
  400: 'Malformed JSON, not a pipeline, an empty pipeline, an invalid schema / key / set, an unknown store (the detail names the store and the known names), or an unknown schema name (the closest names the caller may use).',
  401: 'Authentication is on and the bearer key is missing or wrong. Comes with `WWW-Authenticate: Bearer`.',
  403: 'The credential is valid but may not run some commands of the pipeline (`refused` names them); nothing was read.',
  404: 'No such route.',
  405: 'The route exists but not for this method. Comes with `Allow`.',
  413: 'The body, the number of commands or the number of keys of a schema is over the configured limit.',
  415: 'The `Content-Type` is not JSON, or declares a charset other than UTF-8.',
  422: 'Evaluation failed: `errors` lists every failure (required, pattern, enum, schema, test, const, override).',
  429: 'The caller is over its rate limit. Comes with `Retry-After`.',
  409: 'A write named a revision of the set that is no longer its current one (`currentRevision`); nothing was written.',
  500: 'Unexpected failure. The detail is in the server log under the request id.',
  503: 'A store cannot be reached or read and no backup could answer (`Retry-After` says when to retry), or the expression sandbox is down.',
};

export const requestIdHeader = {
  'X-Request-Id': { type: 'string', description: 'The request id (echoed from the request, or generated).' },
};

/** A documented problem response for the given status. */
export function problemResponse(status: number) {
  // Each header is a plain JSON schema: @fastify/swagger wraps it in `schema` and lifts `description` out itself.
  const headers: Record<string, unknown> = { ...requestIdHeader };
  if (status === 401) headers['WWW-Authenticate'] = { type: 'string', description: 'The scheme to authenticate with.', examples: [unauthorizedReply().headers['www-authenticate']] };
  if (status === 405) headers['Allow'] = { type: 'string', description: 'The methods the route allows.', examples: ['POST'] };
  if (status === 503 || status === 429) headers['Retry-After'] = { type: 'integer', minimum: 0, description: 'Seconds to wait before retrying.', examples: [5] };
  return {
    description: `${STATUS_TITLES[status] ?? 'Error'}: ${problemDescriptions[status] ?? ''}`,
    headers,
    content: {
      'application/problem+json': {
        schema: { $ref: 'Problem#' },
        examples: Object.fromEntries(
          Object.entries(problemExamples[status] ?? {}).map(([name, [summary, value]]) => [name, { summary, value }]),
        ),
      },
    },
  };
}

/** The documented problem responses of a route, by status: `{ 400: problemResponse(400), 401: ... }`. */
export function problemResponses(...statuses: number[]): Record<number, ReturnType<typeof problemResponse>> {
  return Object.fromEntries(statuses.map((status) => [status, problemResponse(status)]));
}

export const exportRouteSchema = {
  summary: 'Evaluate a pipeline and export the result',
  description:
    'Runs the commands in order (each gets the previous result as its pipe) and returns the last result: every key that is not `hidden`, each value coerced to a string, number, boolean, object or array.',
  tags: ['configuration'],
  operationId: 'export',
  body: exportBodySchema,
  response: {
    200: {
      description:
        'The exported configuration: key -> coerced value. With `Accept: text/event-stream`, a stream of Server-Sent Events instead: the current answer, then one event per change (`id:` = its ETag), `error` events with a problem body, `: heartbeat` comments. With `If-None-Match` and `Prefer: wait=N`, held until the answer differs from that tag (or 304 after N seconds).',
      headers: {
        ...requestIdHeader,
        ETag: { type: 'string', description: 'A strong tag of the exact answer (equal answers, equal tags).' },
        'X-Configu-Backup': {
          type: 'string',
          description: 'Present when some stores were answered from the backup: their names, comma-separated.',
        },
      },
      content: {
        'application/json': {
          schema: {
            type: 'object',
            additionalProperties: true,
            examples: [exportResponseExample],
          },
        },
        'text/event-stream': { schema: { type: 'string' } },
      },
    },
    304: {
      description: '`If-None-Match` names the current answer\'s tag (at once, or after the `Prefer: wait=N` of a long poll): no body.',
      headers: { ...requestIdHeader, ETag: { type: 'string', description: 'The tag of the current answer.' } },
    },
    ...problemResponses(400, 401, 403, 405, 413, 415, 422, 429, 500, 503),
  },
} as const;

export const liveRouteSchema = {
  summary: 'Liveness',
  description: 'Always answers while the process runs. Never needs a key.',
  tags: ['health'],
  operationId: 'live',
  security: [],
  response: {
    200: {
      description: 'The process is alive.',
      type: 'object',
      required: ['uptime'],
      properties: { uptime: { type: 'number', description: 'Seconds since the server process started.' } },
      examples: [{ uptime: 42.318 }],
    },
  },
} as const;

export const readyRouteSchema = {
  summary: 'Readiness',
  description:
    'Ready once the configuration is loaded and every store is initialised; 503 with an empty body while starting and from the moment shutdown begins. Never needs a key.',
  tags: ['health'],
  operationId: 'ready',
  security: [],
  response: {
    200: {
      description: 'Ready to serve.',
      type: 'object',
      required: ['status'],
      properties: { status: { type: 'string', enum: ['ready'] } },
      examples: [{ status: 'ready' }],
    },
    503: { description: 'Not ready (starting or shutting down). Empty body.', type: 'null' },
  },
} as const;
