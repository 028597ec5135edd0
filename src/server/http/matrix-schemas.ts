/**
 * JSON schemas of `POST /matrix` (./routes/matrix.ts): its body (the shape only; the sets, the schema's rules and the
 * limits are checked by the route and the engine, with better messages) and its answer, for the OpenAPI document.
 */
import { ErrorCodes } from '../../core/errors.js';
import { cfguProblem } from './problem.js';
import { problemResponse, problemResponses } from './schemas.js';

export const matrixBodySchema = {
  type: 'object',
  additionalProperties: false,
  required: ['schema'],
  properties: {
    store: { type: 'string', description: 'Name of a store declared in the server\'s `.configu`; the default store when absent.' },
    schema: {
      // An object (the schema itself) or a string (the name of one of the server's schemas), as in POST /export.
      type: ['object', 'string'],
      minLength: 1,
      additionalProperties: false,
      required: ['keys'],
      description:
        'The configuration schema evaluated at every set: `keys` maps each key name to its declaration. Or the name of a schema the server holds (`GET /schemas`), e.g. `"app"`.',
      properties: { keys: { type: 'object', additionalProperties: { $ref: 'Cfgu#' } } },
    },
    sets: { type: 'array', items: { type: 'string' }, description: 'The sets to compare (the columns). Exactly one of `sets` and `prefix`.' },
    prefix: {
      type: 'string',
      description: 'Compare every set the store holds under this set path (`prod`: `prod` and `prod/...`; `""`: every set). Exactly one of `sets` and `prefix`.',
    },
    configs: { type: 'object', description: 'Overrides applied at every set: key name -> value.' },
  },
} as const;

const matrixExample = {
  version: 1,
  store: 'example',
  prefix: 'production',
  sets: ['production', 'production/eu'],
  keys: ['API_HOST', 'LOG_LEVEL'],
  cells: [
    [
      { state: 'missing', origin: 'empty', failures: [{ rule: 'required', message: 'key "API_HOST" is required but has no value' }] },
      { state: 'ok', origin: 'store', set: 'production/eu', value: 'eu.api.example.com' },
    ],
    [
      { state: 'ok', origin: 'default', value: 'info' },
      { state: 'ok', origin: 'store', set: 'production', inherited: true, value: 'warn' },
    ],
  ],
  failed: [1, 0],
  fromBackup: false,
};

const cellSchema = {
  type: 'object',
  required: ['state', 'origin'],
  properties: {
    state: { type: 'string', enum: ['ok', 'missing', 'test', 'enum', 'pattern', 'schema', 'const', 'override'] },
    origin: { type: 'string', enum: ['empty', 'store', 'override', 'default', 'const'] },
    set: { type: 'string', description: 'For origin `store`: the set that holds the value.' },
    inherited: { type: 'boolean', description: 'For origin `store`: the value is held by an ancestor of the column\'s set.' },
    hidden: { type: 'boolean' },
    value: { type: 'string', description: 'The value as text; absent without a value and when withheld.' },
    withheld: { type: 'string', enum: ['hidden'] },
    failures: {
      type: 'array',
      items: {
        type: 'object',
        required: ['rule', 'message'],
        properties: { rule: { type: 'string' }, message: { type: 'string' }, test: { type: 'integer', description: 'For rule `test`: the index of the expression.' } },
      },
    },
  },
};

export const matrixRouteSchema = {
  summary: 'Evaluate one schema at many sets',
  description:
    'Evaluates the schema at each set (a list, or every set the store holds under a prefix) as `POST /export` would, and answers a cell per key and set: its state (`ok` or the rule it fails), where its value came from, and the value (hidden values withheld). A set whose keys fail is a cell state, not an error.',
  tags: ['configuration'],
  operationId: 'matrix',
  body: matrixBodySchema,
  response: {
    200: {
      description: 'The matrix: `cells[k][s]` is key `keys[k]` at set `sets[s]`; `failed[s]` counts the cells of set `sets[s]` that are not `ok`.',
      headers: {
        'X-Configu-Backup': { type: 'string', description: 'Present when the store was answered from the backup: its name.' },
      },
      content: {
        'application/json': {
          schema: {
            type: 'object',
            required: ['version', 'store', 'sets', 'keys', 'cells', 'failed', 'fromBackup'],
            properties: {
              version: { type: 'integer' },
              store: { type: 'string' },
              prefix: { type: 'string' },
              sets: { type: 'array', items: { type: 'string' } },
              keys: { type: 'array', items: { type: 'string' } },
              cells: { type: 'array', items: { type: 'array', items: cellSchema } },
              failed: { type: 'array', items: { type: 'integer' } },
              fromBackup: { type: 'boolean' },
            },
            examples: [matrixExample],
          },
        },
      },
    },
    ...problemResponses(400, 401, 405, 415, 422, 429, 500, 503),
    403: {
      ...problemResponse(403),
      description: 'Forbidden: the credential may not read some of the sets, or may not list the prefix (it needs a grant of the prefix\'s whole subtree); nothing was read.',
    },
    413: {
      ...problemResponse(413),
      description: 'Limit Exceeded: more sets than `limits.matrixSets`, more cells than `limits.matrixCells`, or another request limit.',
      content: {
        'application/problem+json': {
          schema: { $ref: 'Problem#' },
          examples: { sets: { summary: 'Too many sets', value: cfguProblem(ErrorCodes.LIMIT_EXCEEDED, 'the matrix has 1001 sets; the limit is 1000') } },
        },
      },
    },
  },
} as const;
