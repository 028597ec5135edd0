/** Public types of the evaluation engine. */
import type { JsonValue } from './coerce.js';

export type { JsonValue };

/** A Cfgu v1 declaration as written (validated by validateSchema). */
export interface Cfgu {
  description?: string;
  label?: string | string[];
  hidden?: boolean;
  lazy?: boolean;
  const?: string;
  default?: JsonValue;
  required?: boolean;
  pattern?: string;
  enum?: JsonValue[];
  schema?: Record<string, unknown>;
  test?: string | string[];
}

/** `{ keys: { KEY: Cfgu | null } }` */
export interface ConfigSchema {
  keys: Record<string, Cfgu | null>;
}

export type Origin = 'empty' | 'store' | 'override' | 'default' | 'const';

/** One element of a pipeline (the body of POST /export is an array of these). */
export interface EvalCommandInput {
  /** Store name from `.configu`; the default store when absent. */
  store?: string;
  /** Set path; the root when absent. */
  set?: string;
  schema: ConfigSchema;
  /** Overrides: key -> value (non-strings are JSON-stringified). */
  configs?: Record<string, unknown>;
}

/** One evaluated key. */
export interface EvaluatedConfig {
  key: string;
  /** The value as a string (stored form). */
  value: string;
  origin: Origin;
  /** The Cfgu of the command that gave the value (normalised: `{}` for null). */
  cfgu: Cfgu;
  /** Set the value came from (for origin `store`), else the command's set. */
  set: string;
}

/** Result of a command or a whole pipeline: key -> evaluated config, in schema order. */
export type EvalResult = Record<string, EvaluatedConfig>;

export interface PipelineOutcome {
  result: EvalResult;
  /**
   * The result's entries in the order `Object.keys(result)` gives, when the engine knows it (no key is an array
   * index); the export walks it instead of the record (eval.ts, `Evaluated`).
   */
  ordered?: readonly EvaluatedConfig[];
  /** Store names that were answered from their backup during this evaluation. */
  backupStores: string[];
}

export type ExportedConfigs = Record<string, JsonValue>;

/** A value as a write's answer or a history record shows it: the text, null when absent, or a mark when the reader may not see it. */
export type ShownValue = string | null | { hidden: true };

/** One key of a write or of a history record, as shown to its reader. */
export interface ShownChange {
  key: string;
  before: ShownValue;
  after: ShownValue;
}
