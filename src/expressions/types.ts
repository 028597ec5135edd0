/**
 * The expression evaluator's contract is a port of the engine (src/core/ports.ts): re-exported here for the
 * implementation, which runs every expression inside the sandbox.
 */
export {
  requestContext,
  type ConfigView,
  type InputView,
  type ExpressionJob,
  type ExpressionFailureKind,
  type ConstOutcome,
  type TestOutcome,
  type ExpressionResult,
  type RequestUsage,
  type RunContext,
  type ExpressionEvaluator,
} from '../core/ports.js';
