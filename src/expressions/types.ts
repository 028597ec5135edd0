/**
 * The expression evaluator's public contract. The engine (src/core) talks to expressions only through this
 * interface; the implementation runs every expression inside the sandbox.
 */

/**
 * What `$.configs.<KEY>` (and `$` itself for the key under evaluation) holds. `value` and `labels` are functions of
 * `storedValue` and `cfgu` (coerceValue with the Cfgu's `schema.type`; `label` as an array): the sandbox derives
 * them again on its side rather than receiving them (see WireConfig in protocol.ts).
 */
export interface ConfigView {
  key: string;
  /** The stored (raw) string. Exposed as `$.storedValue`. */
  storedValue: string;
  /** The coerced value (coerceValue from src/core/coerce.ts). Exposed as `$.value`. */
  value: unknown;
  origin: 'empty' | 'store' | 'override' | 'default' | 'const';
  /** The Cfgu declaration (`{}` for a null declaration). */
  cfgu: Record<string, unknown>;
  /** Always an array. */
  labels: string[];
}

/** `$.input` */
export interface InputView {
  store: { type: string };
  set: { path: string; hierarchy: string[] };
  schema: { keys: Record<string, unknown> };
}

/**
 * Everything one command needs from the sandbox, sent in one round trip.
 * Consts are evaluated first in the given order (already dependency-ordered by the engine); after each const the
 * sandbox updates `$.configs[key]` (storedValue = rendered text, value = coerced with the key's `schema.type`,
 * origin = 'const') so later consts and every test see it. Then every test runs with `$` = the view of its key.
 */
export interface ExpressionJob {
  input: InputView;
  configs: Record<string, ConfigView>;
  consts: Array<{ key: string; template: string }>;
  tests: Array<{ key: string; expressions: string[] }>;
}

/** Why an expression failed: a thrown error / falsy result, or a sandbox limit. */
export type ExpressionFailureKind = 'error' | 'falsy' | 'time-limit' | 'memory-limit';

export type ConstOutcome =
  | { key: string; ok: true; value: string }
  | { key: string; ok: false; kind: ExpressionFailureKind; message: string };

export interface TestOutcome {
  key: string;
  /** Index of the expression in the key's `test` list (0 for a single expression). */
  index: number;
  ok: boolean;
  kind?: ExpressionFailureKind;
  /** For failures: a readable reason (the thrown message, or that the expression was falsy). */
  message?: string;
}

export interface ExpressionResult {
  consts: ConstOutcome[];
  /** Only the failed tests need be reported; passing ones may be omitted. */
  tests: TestOutcome[];
}

export interface ExpressionEvaluator {
  /** Evaluate one command's consts and tests. Never rejects for the expression's own faults (those are outcomes). */
  run(job: ExpressionJob): Promise<ExpressionResult>;
  /** Render a template (`{{ }}` / `<% %>`) with the given `$` (CLI `--template`). Throws ExpressionError. */
  renderTemplate(template: string, context: unknown): Promise<string>;
  /** Evaluate a boolean expression with the given `$` (CLI `--filter`). Throws ExpressionError. */
  evaluateBoolean(expression: string, context: unknown): Promise<boolean>;
  /**
   * Render a TRUSTED template (the server's own `.configu`): bare identifiers resolve to `variables` (a copy of the
   * process environment), an unknown identifier reads as "". Throws ExpressionError.
   */
  renderTrusted(template: string, variables: Record<string, string>): Promise<string>;
  /** Stop the sandbox processes. */
  close(): Promise<void>;
}
