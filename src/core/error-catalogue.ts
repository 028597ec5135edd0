/**
 * The error catalogue: for every error code, the HTTP answer (status, problem `type`, `title`) and the CLI exit code.
 * The server (src/server/problem.ts) and the CLI read their answers here and nowhere else; docs/engine.md ("Errors")
 * shows the same table, and a test keeps the two equal.
 */
import { ErrorCodes, isCfguError, type ErrorCode } from './errors.js';

/** CLI exit codes (docs/cli.md, "Exit codes"). */
export const EXIT_OK = 0;
/** The run failed: validation, or a store or the sandbox could not answer. Running again may help. */
export const EXIT_FAILED = 1;
/** The input is wrong: flags, schema, set, store name, `.configu`, a limit. Running again as is will not help. */
export const EXIT_USAGE = 2;

/** Problem `type` URIs of cfgu's own errors; plain HTTP errors use `about:blank` (RFC 9457 §4.2.1). */
export const PROBLEM_TYPES = {
  invalidRequest: 'urn:cfgu:problem:invalid-request',
  invalidSchema: 'urn:cfgu:problem:invalid-schema',
  invalidKey: 'urn:cfgu:problem:invalid-key',
  invalidSet: 'urn:cfgu:problem:invalid-set',
  unknownStore: 'urn:cfgu:problem:unknown-store',
  validationFailed: 'urn:cfgu:problem:validation-failed',
  storeUnavailable: 'urn:cfgu:problem:store-unavailable',
  sandboxUnavailable: 'urn:cfgu:problem:sandbox-unavailable',
  sandboxBusy: 'urn:cfgu:problem:sandbox-busy',
  budgetExceeded: 'urn:cfgu:problem:budget-exceeded',
  limitExceeded: 'urn:cfgu:problem:limit-exceeded',
  unauthorized: 'urn:cfgu:problem:unauthorized',
  forbidden: 'urn:cfgu:problem:forbidden',
  rateLimited: 'urn:cfgu:problem:rate-limited',
  blank: 'about:blank',
} as const;

export interface CatalogueEntry {
  /** The error class that carries the code (src/core/errors.ts). */
  errorClass: string;
  /**
   * The answer to a request that fails with this error. Absent: the error never answers a request (it stops the
   * server's start-up); met during a request anyway, it is answered as an unexpected error (500).
   */
  http?: { status: number; type: string; title: string };
  exit: typeof EXIT_FAILED | typeof EXIT_USAGE;
}

const T = PROBLEM_TYPES;

export const ERROR_CATALOGUE: Readonly<Record<ErrorCode, Readonly<CatalogueEntry>>> = {
  [ErrorCodes.INVALID_INPUT]: { errorClass: 'InputError', http: { status: 400, type: T.invalidRequest, title: 'Invalid Request' }, exit: EXIT_USAGE },
  [ErrorCodes.INVALID_SCHEMA]: { errorClass: 'InputError', http: { status: 400, type: T.invalidSchema, title: 'Invalid Schema' }, exit: EXIT_USAGE },
  [ErrorCodes.INVALID_KEY]: { errorClass: 'InputError', http: { status: 400, type: T.invalidKey, title: 'Invalid Key' }, exit: EXIT_USAGE },
  [ErrorCodes.INVALID_SET]: { errorClass: 'InputError', http: { status: 400, type: T.invalidSet, title: 'Invalid Set' }, exit: EXIT_USAGE },
  [ErrorCodes.UNKNOWN_STORE]: { errorClass: 'UnknownStoreError', http: { status: 400, type: T.unknownStore, title: 'Unknown Store' }, exit: EXIT_USAGE },
  [ErrorCodes.LIMIT_EXCEEDED]: { errorClass: 'LimitError', http: { status: 413, type: T.limitExceeded, title: 'Limit Exceeded' }, exit: EXIT_USAGE },
  [ErrorCodes.VALIDATION_FAILED]: { errorClass: 'ValidationError', http: { status: 422, type: T.validationFailed, title: 'Validation Failed' }, exit: EXIT_FAILED },
  [ErrorCodes.BUDGET_EXCEEDED]: { errorClass: 'BudgetExceededError', http: { status: 422, type: T.budgetExceeded, title: 'Budget Exceeded' }, exit: EXIT_FAILED },
  [ErrorCodes.STORE_UNAVAILABLE]: { errorClass: 'StoreUnavailableError', http: { status: 503, type: T.storeUnavailable, title: 'Store Unavailable' }, exit: EXIT_FAILED },
  [ErrorCodes.SANDBOX_UNAVAILABLE]: { errorClass: 'SandboxUnavailableError', http: { status: 503, type: T.sandboxUnavailable, title: 'Expressions Unavailable' }, exit: EXIT_FAILED },
  [ErrorCodes.SANDBOX_BUSY]: { errorClass: 'SandboxBusyError', http: { status: 503, type: T.sandboxBusy, title: 'Expressions Busy' }, exit: EXIT_FAILED },
  [ErrorCodes.UNAUTHORIZED]: { errorClass: 'UnauthorizedError', http: { status: 401, type: T.unauthorized, title: 'Unauthorized' }, exit: EXIT_USAGE },
  [ErrorCodes.FORBIDDEN]: { errorClass: 'ForbiddenError', http: { status: 403, type: T.forbidden, title: 'Forbidden' }, exit: EXIT_USAGE },
  [ErrorCodes.RATE_LIMITED]: { errorClass: 'RateLimitedError', http: { status: 429, type: T.rateLimited, title: 'Too Many Requests' }, exit: EXIT_FAILED },
  [ErrorCodes.INVALID_CONFIGURATION]: { errorClass: 'ConfigurationError', exit: EXIT_USAGE },
};

/** The catalogue entry of a CfguError; undefined for anything else. */
export function catalogueEntryOf(e: unknown): Readonly<CatalogueEntry> | undefined {
  return isCfguError(e) ? ERROR_CATALOGUE[e.code] : undefined;
}

/** The exit code for an error: the catalogue's for a CfguError, else EXIT_FAILED (something unexpected). */
export function exitCodeFor(e: unknown): number {
  return catalogueEntryOf(e)?.exit ?? EXIT_FAILED;
}
