/**
 * The OpenAPI description of POST /explain: the same request body as POST /export (./schemas.ts), and the
 * explanation it answers (version 1 of the shape of core/explain.ts, docs/explain.md). The route sends its answer as
 * JSON text it made itself, so this schema documents the answer and is never compiled into a serializer. Its example
 * (./explain-example.ts) is added to the document by ./docs-ui.ts.
 */
import { exportBodySchema, problemResponse, problemResponses, requestIdHeader } from './schemas.js';

const ORIGINS = ['empty', 'store', 'override', 'default', 'const'];
const RULES = ['required', 'pattern', 'enum', 'schema', 'test', 'const', 'override'];

const withheld = {
  type: 'string',
  enum: ['hidden', 'scope'],
  description: 'Why `value` is absent: the key is hidden, or the credential may not read the set that holds the value.',
};

const candidate = {
  type: 'object',
  required: ['set', 'status'],
  properties: {
    set: { type: 'string', description: 'The set that holds the value (`""` is the root).' },
    status: {
      type: 'string',
      enum: ['won', 'shadowed', 'overridden'],
      description: '`won`: the value came from here; `shadowed`: a set nearer the command\'s set holds one too; `overridden`: the nearest value, replaced by the override.',
    },
    value: { type: 'string' },
    withheld,
  },
};

const given = {
  type: 'object',
  properties: { value: { type: 'string', description: 'As text (a non-string as JSON text).' }, withheld },
};

const read = {
  type: 'object',
  required: ['key', 'origin'],
  properties: { key: { type: 'string' }, origin: { type: 'string', enum: ORIGINS }, value: { type: 'string' }, withheld },
};

const keyExplanation = {
  type: 'object',
  required: ['key', 'declared', 'hidden', 'origin', 'set', 'candidates', 'tests', 'failures'],
  properties: {
    key: { type: 'string' },
    declared: { type: 'boolean', description: 'Whether this command\'s schema declares the key (false: carried through the pipe).' },
    hidden: { type: 'boolean', description: 'Whether the key\'s Cfgu says `hidden: true`.' },
    value: { type: 'string', description: 'The value as the pipe carries it (the stored text). Absent when withheld.' },
    withheld: { type: 'string', enum: ['hidden'], description: 'The value is not shown: the key is hidden.' },
    exported: { description: 'The value as the export gives it (any JSON value). Absent for a hidden key.' },
    origin: { type: 'string', enum: ORIGINS },
    set: { type: 'string', description: 'The set that supplied the value.' },
    piped: {
      type: 'object',
      required: ['command'],
      properties: { command: { type: ['integer', 'null'], description: 'The command the value came from (null: the pipeline\'s input).' } },
    },
    lazy: { type: 'boolean', enum: [true] },
    derivedFromHidden: { type: 'boolean', enum: [true], description: 'A `const` whose template reads a hidden key.' },
    candidates: { type: 'array', items: candidate, description: 'Every value the store holds for the key down the hierarchy, root first.' },
    override: given,
    default: given,
    const: {
      type: 'object',
      required: ['template', 'computed', 'reads'],
      properties: { template: { type: 'string' }, computed: { type: 'boolean' }, reads: { type: 'array', items: read } },
    },
    tests: {
      type: 'array',
      items: {
        type: 'object',
        required: ['index', 'expression', 'passed'],
        properties: {
          index: { type: 'integer' },
          expression: { type: 'string' },
          passed: { type: ['boolean', 'null'], description: 'null: not run (see `skipped`).' },
          message: { type: 'string' },
          skipped: { type: 'string' },
        },
      },
    },
    failures: {
      type: 'array',
      items: { type: 'object', required: ['rule', 'message'], properties: { rule: { type: 'string', enum: RULES }, message: { type: 'string' } } },
    },
  },
};

/** The explanation (docs/explain.md, "The shape"). */
export const explanationSchema = {
  type: 'object',
  required: ['version', 'ok', 'values', 'failures', 'explanations', 'backupStores'],
  properties: {
    version: { type: 'integer', enum: [1], description: 'The version of this shape.' },
    ok: { type: 'boolean', description: 'False when the pipeline failed validation: `failures` says how, the explanations say why.' },
    values: { type: ['object', 'null'], additionalProperties: true, description: 'What POST /export answers for the same body; null when not `ok`.' },
    failures: {
      type: 'array',
      description: 'Every failure of the pipeline, as the `errors` of POST /export\'s 422 list them.',
      items: {
        type: 'object',
        required: ['command', 'key', 'rule', 'message'],
        properties: { command: { type: 'integer' }, key: { type: 'string' }, rule: { type: 'string', enum: RULES }, message: { type: 'string' } },
      },
    },
    explanations: {
      type: 'array',
      description: 'One per command of the pipeline, in order.',
      items: {
        type: 'object',
        required: ['command', 'store', 'set', 'hierarchy', 'evaluated', 'keys'],
        properties: {
          command: { type: 'integer' },
          store: { type: ['string', 'null'] },
          set: { type: 'string' },
          hierarchy: { type: 'array', items: { type: 'string' }, description: 'The sets the command reads, root first.' },
          evaluated: { type: 'boolean', description: 'False for a command the pipeline stopped before (an output limit).' },
          keys: { type: 'array', items: keyExplanation },
        },
      },
    },
    backupStores: { type: 'array', items: { type: 'string' }, description: 'Stores answered from their backup.' },
  },
} as const;

export const explainRouteSchema = {
  summary: 'Explain why each value of a pipeline is what it is',
  description:
    'Evaluates the pipeline as POST /export does (the same body, limits, scope check and rate limit) and answers, for every key of every command, where its value came from and what else was offered: the store\'s values down the set hierarchy, the override, the default, a const\'s reads, each test. Hidden values are withheld, and so are shadowed values at sets the credential may not read. A pipeline that fails validation is answered 200 with `ok: false`, its `failures` and the explanations.',
  tags: ['configuration'],
  operationId: 'explain',
  body: exportBodySchema,
  response: {
    200: {
      description:
        'The explanation, whether or not the pipeline passed validation: `ok` tells which (false: `failures` lists every failure, as the 422 of POST /export does). Never conditional (no ETag) and never cached.',
      headers: {
        ...requestIdHeader,
        'X-Configu-Backup': {
          type: 'string',
          description: 'Present when some stores were answered from the backup: their names, comma-separated.',
        },
      },
      content: { 'application/json': { schema: explanationSchema } },
    },
    ...problemResponses(400, 401, 403, 405, 413, 415, 429, 500, 503),
    422: {
      ...problemResponse(422),
      description: 'Unprocessable Content: the request\'s expression budget was exceeded (`rule` names it). A failed validation is not a 422 here: see 200.',
      content: { 'application/problem+json': { schema: { $ref: 'Problem#' } } },
    },
  },
} as const;
