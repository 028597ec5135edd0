/**
 * OpenAPI schemas of the write routes: POST /upsert, GET /history, POST /rollback (../writes/, docs/server.md).
 */
import { problemResponses, requestIdHeader } from './schemas.js';

const schemaRef = {
  type: ['object', 'string'],
  minLength: 1,
  additionalProperties: false,
  required: ['keys'],
  description: 'The schema the values are validated by: an object with `keys`, or the name of one of the server\'s schemas.',
  properties: { keys: { type: 'object', additionalProperties: { $ref: 'Cfgu#' } } },
} as const;

const writeOptions = {
  store: { type: 'string', minLength: 1, description: 'A store declared in the server\'s `.configu`; the default store when absent.' },
  set: { type: 'string', description: 'The set written, e.g. `production/eu`; the root when absent.' },
  schema: schemaRef,
  expectedRevision: { type: 'integer', minimum: 0, description: 'Refuse the write (409) unless the set is at this revision.' },
  message: { type: 'string', maxLength: 500, description: 'Why: recorded with the revision.' },
  dryRun: { type: 'boolean', description: 'Validate and show the changes and their impact; write nothing.' },
  allowBreaking: { type: 'boolean', description: 'Write even when a named schema fails after the write where it passed before (needs a grant with `breaking: true`).' },
} as const;

// Three types rather than `oneOf` (which the response serializer checks with a validator on every answer).
const shownValue = {
  description: 'The value; null when absent; `{"hidden": true}` when the caller may not see it.',
  type: ['string', 'null', 'object'],
  properties: { hidden: { type: 'boolean', enum: [true] } },
} as const;

const shownChange = {
  type: 'object',
  required: ['key', 'before', 'after'],
  properties: { key: { type: 'string' }, before: shownValue, after: shownValue },
} as const;

export const impactItemSchema = {
  type: 'object',
  required: ['schema', 'set', 'status', 'changed', 'failures'],
  properties: {
    schema: { type: 'string', description: 'A named schema of the server that declares a changed key.' },
    set: { type: 'string', description: 'A set at or under the written one.' },
    status: { type: 'string', enum: ['unchanged', 'changes', 'breaks', 'fixes'] },
    changed: { type: 'array', items: { type: 'string' }, description: 'The keys whose evaluated value differs.' },
    failures: {
      type: 'array',
      description: 'The schema\'s failures at the set after the write.',
      items: { type: 'object', required: ['key', 'rule', 'message'], properties: { key: { type: 'string' }, rule: { type: 'string' }, message: { type: 'string' } } },
    },
  },
} as const;

const writeAnswer = {
  description: 'What changed (or, on a dry run, would change), the set\'s revision and the impact on the server\'s named schemas.',
  headers: { ...requestIdHeader },
  content: {
    'application/json': {
      schema: {
        type: 'object',
        required: ['store', 'set', 'dryRun', 'revision', 'changes', 'impact', 'impactTruncated'],
        properties: {
          store: { type: 'string' },
          set: { type: 'string' },
          dryRun: { type: 'boolean' },
          revision: { type: ['integer', 'null'], description: 'The new revision; the current one on a dry run or when nothing changed.' },
          changes: { type: 'array', items: shownChange },
          impact: { type: 'array', items: impactItemSchema },
          impactTruncated: { type: 'boolean', description: 'The store holds more sets under the written one than the impact looked at.' },
        },
        examples: [
          {
            store: 'main',
            set: 'prod',
            dryRun: false,
            revision: 8,
            changes: [{ key: 'LOG_LEVEL', before: 'info', after: 'debug' }],
            impact: [{ schema: 'app', set: 'prod', status: 'changes', changed: ['LOG_LEVEL'], failures: [] }],
            impactTruncated: false,
          },
        ],
      },
    },
  },
} as const;

const writeErrors = problemResponses(400, 401, 403, 405, 409, 413, 415, 422, 429, 500, 503);

export const upsertRouteSchema = {
  summary: 'Validate and write values into one set',
  description:
    'Validates the values by the schema exactly as `cfgu upsert` does, checks what the write does to the server\'s named schemas at the set and the sets under it, and writes the changed values as one new revision (a `null` or `""` value removes the key).',
  tags: ['writes'],
  operationId: 'upsert',
  body: {
    type: 'object',
    additionalProperties: false,
    required: ['schema', 'values'],
    properties: {
      ...writeOptions,
      values: {
        type: 'object',
        description: 'Key -> new value (`null` or `""` removes it).',
        additionalProperties: { type: ['string', 'number', 'boolean', 'null'] },
      },
    },
  },
  response: { 200: writeAnswer, ...writeErrors },
} as const;

export const rollbackRouteSchema = {
  summary: 'Restore a set\'s values as of a revision',
  description:
    'Writes, as a new revision, the values the set had right after `toRevision`, for every key its history changed since (or only `keys`); the same checks as POST /upsert.',
  tags: ['writes'],
  operationId: 'rollback',
  body: {
    type: 'object',
    additionalProperties: false,
    required: ['schema', 'toRevision'],
    properties: {
      ...writeOptions,
      toRevision: { type: 'integer', minimum: 0, description: 'The revision whose values are restored.' },
      keys: { type: 'array', items: { type: 'string', minLength: 1 }, description: 'Only these keys.' },
    },
  },
  response: { 200: writeAnswer, ...writeErrors },
} as const;

export const historyRouteSchema = {
  summary: 'The history of one set',
  description: 'The revisions of a set, newest first, each with who wrote it, when, why and what changed; one page at a time.',
  tags: ['writes'],
  operationId: 'history',
  querystring: {
    type: 'object',
    additionalProperties: false,
    properties: {
      store: { type: 'string', minLength: 1, description: 'The store; the default store when absent.' },
      set: { type: 'string', description: 'The set; the root when absent.' },
      key: { type: 'string', minLength: 1, description: 'Only revisions that change this key.' },
      since: { type: 'string', description: 'Only revisions written at or after this time (ISO 8601).' },
      until: { type: 'string', description: 'Only revisions written before this time (ISO 8601).' },
      before: { type: 'string', pattern: '^[1-9][0-9]{0,14}$', description: 'Only revisions below this one (a positive integer): the `next` of the previous page.' },
      limit: { type: 'string', pattern: '^([1-9][0-9]{0,2}|1000)$', description: 'At most this many records, 1 to 1000 (default 100).' },
    },
  },
  response: {
    200: {
      description: 'One page of the set\'s history.',
      headers: { ...requestIdHeader },
      content: {
        'application/json': {
          schema: {
            type: 'object',
            required: ['store', 'set', 'records'],
            properties: {
              store: { type: 'string' },
              set: { type: 'string' },
              records: {
                type: 'array',
                items: {
                  type: 'object',
                  required: ['revision', 'time', 'subject', 'requestId', 'message', 'recorded', 'changes'],
                  properties: {
                    revision: { type: 'integer' },
                    time: { type: 'string' },
                    subject: { type: ['string', 'null'] },
                    requestId: { type: ['string', 'null'] },
                    message: { type: ['string', 'null'] },
                    recorded: { type: 'boolean', description: 'False: a change made outside cfgu, found by a later write.' },
                    changes: { type: 'array', items: shownChange },
                  },
                },
              },
              next: { type: 'integer', description: 'Pass as `before` for the next (older) page.' },
            },
          },
        },
      },
    },
    ...problemResponses(400, 401, 403, 405, 429, 500, 503),
  },
} as const;
