/**
 * cfgu's evaluation engine: a library with no file system, network or HTTP in it.
 *
 *   const { configs } = await exportPipeline([{ store: 'main', set: 'prod', schema: { keys: { PORT: { default: 8080 } } } }],
 *                                            { stores, expressions });
 */
export { exportJson, exportPipeline, exportPipelineJson, exportResult } from './export.js';
export {
  explainPipeline,
  EXPLANATION_VERSION,
  type ExplainOptions,
  type ExplainOutcome,
  type CommandExplanation,
  type KeyExplanation,
  type ExplainedCandidate,
  type ExplainedConst,
  type ExplainedInput,
  type ExplainedRead,
  type ExplainedTest,
  type Withheld,
} from './explain.js';
export {
  matrixOf,
  MATRIX_VERSION,
  DEFAULT_MATRIX_LIMITS,
  type Matrix,
  type MatrixCell,
  type MatrixFailure,
  type MatrixLimits,
  type MatrixOptions,
  type MatrixRequest,
  type CellState,
} from './matrix.js';
export { evaluatePipeline, DEFAULT_ENGINE_LIMITS, type EngineDeps, type EngineLimits, type PipelineOptions } from './eval.js';
export { pipeWinner } from './eval-values.js';
export { upsert, type UpsertInput, type UpsertChange, type UpsertResult } from './upsert.js';
export { impactOf, overlayStore, DEFAULT_IMPACT_SETS, type ImpactInput, type ImpactReport, type ImpactSchema } from './impact.js';
export { prepareSchema, validateSchema, stringifyValue, configureSchemaCache, schemaCacheStats, EnumRule, type PreparedSchema, type PreparedKey } from './schema.js';
export { parseSet, keyProblem, normaliseName, truncate, type ParsedSet } from './names.js';
export { coerceValue, declaredTypeOf } from './coerce.js';
export { labelsOf, viewOf } from './view.js';
export { HIDDEN_MARK, MIN_RUN, SHORT_VALUE_MESSAGE, LARGE_VALUES_MESSAGE, Redactor, redactorFor, redactorForResult, secretKeys, hiddenNames, constReadsHidden, type RedactionEntry } from './redact.js';
export { freezeDeep, isDeepFrozen, keyCount } from './frozen.js';
export * from './errors.js';
export * from './error-catalogue.js';
export type * from './types.js';
export * from './ports.js';
export { setsRead, noticeConcerns, Debouncer } from './watch.js';
export { planRollback, type RollbackPlan } from './rollback.js';
