/**
 * The error catalogue: one row per error code, holding everything about that error outside the place that raises it:
 * the class that carries the code, the HTTP answer (status, problem `type`, `title`, the body's `detail` and extra
 * members, the response headers, the log level) and the CLI's answer (exit code, lines on standard error).
 * The server (src/server/problem.ts) and the CLI (src/cli/errors.ts) look their answers up here and decide none of
 * them on their own; docs/engine.md ("Errors") shows the same table, and a test keeps the two equal.
 */
import {
  BodyRefusedError,
  BudgetExceededError,
  CfguError,
  ConfigurationError,
  ConsoleLoopbackOnlyError,
  ErrorCodes,
  ForbiddenError,
  InputError,
  isCfguError,
  LimitError,
  RateLimitedError,
  ReadOnlyStoreError,
  RevisionConflictError,
  SandboxBusyError,
  SandboxUnavailableError,
  StoreUnavailableError,
  UnauthorizedError,
  UnknownSchemaError,
  UnknownStoreError,
  ValidationError,
  WriteBreaksError,
  WriteForbiddenError,
  type ErrorCode,
  type EvalFailure,
  type ImpactEntry,
  type InputIssue,
  type RefusedCommand,
} from './errors.js';

/** CLI exit codes (docs/cli.md, "Exit codes"). */
export const EXIT_OK = 0;
/** The run failed: validation, or a store or the sandbox could not answer. Running again may help. */
export const EXIT_FAILED = 1;
/** The input is wrong: flags, schema, set, store name, `.configu`, a limit. Running again as is will not help. */
export const EXIT_USAGE = 2;

/** The exit code of a failed run. */
export type ExitCode = typeof EXIT_FAILED | typeof EXIT_USAGE;

/** Problem `type` URIs of cfgu's own errors; plain HTTP errors use `about:blank` (RFC 9457 §4.2.1). */
export const PROBLEM_TYPES = {
  invalidRequest: 'urn:cfgu:problem:invalid-request',
  invalidSchema: 'urn:cfgu:problem:invalid-schema',
  invalidKey: 'urn:cfgu:problem:invalid-key',
  invalidSet: 'urn:cfgu:problem:invalid-set',
  unknownStore: 'urn:cfgu:problem:unknown-store',
  unknownSchema: 'urn:cfgu:problem:unknown-schema',
  validationFailed: 'urn:cfgu:problem:validation-failed',
  storeUnavailable: 'urn:cfgu:problem:store-unavailable',
  sandboxUnavailable: 'urn:cfgu:problem:sandbox-unavailable',
  sandboxBusy: 'urn:cfgu:problem:sandbox-busy',
  budgetExceeded: 'urn:cfgu:problem:budget-exceeded',
  limitExceeded: 'urn:cfgu:problem:limit-exceeded',
  unauthorized: 'urn:cfgu:problem:unauthorized',
  forbidden: 'urn:cfgu:problem:forbidden',
  rateLimited: 'urn:cfgu:problem:rate-limited',
  revisionConflict: 'urn:cfgu:problem:revision-conflict',
  writeBreaks: 'urn:cfgu:problem:write-breaks',
  readOnlyStore: 'urn:cfgu:problem:read-only-store',
  consoleLoopbackOnly: 'urn:cfgu:problem:console-loopback-only',
  blank: 'about:blank',
} as const;

/** A problem details body (RFC 9457): the one shape of every error response of the server. */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  /** Evaluation failures (422). */
  errors?: EvalFailure[];
  /** Where a request is malformed (400). */
  issues?: InputIssue[];
  /** 400 unknown store: the name asked for (absent when none was given). */
  store?: string;
  /** 400 unknown store: the names the server knows. */
  knownStores?: string[];
  /** 400 unknown schema: the name asked for. */
  schema?: string;
  /** 400 unknown schema: the names the server holds that are close to it (at most three). */
  closestSchemas?: string[];
  /** 500: the request id to quote to the operator. */
  requestId?: string;
  /** 422 budget exceeded: which budget (`cpu-budget`, `restart-budget`). */
  rule?: string;
  /** 403: the commands the credential may not run (index, store, set). */
  refused?: RefusedCommand[];
  /** 409 revision conflict: the set, the revision the write expected and the set's current one. */
  set?: string;
  expectedRevision?: number;
  currentRevision?: number;
  /** 422 write breaks: what the write does to each named schema at each set. */
  impact?: ImpactEntry[];
  /** 403 write forbidden: the right missing (`write`, `break`). */
  right?: string;
  /** 403 write forbidden: the keys the credential may not write. */
  keys?: string[];
}

/** The members of a problem body beyond `type`, `title`, `status` and `detail`. */
export type ProblemMembers = Omit<Partial<Problem>, 'type' | 'title' | 'status' | 'detail'>;

/** The level at which the server logs an error it answers with; absent: it is not logged. */
export type LogLevel = 'warn' | 'error';

/** How the server answers a request that fails with an error of one code. */
export interface HttpAnswer<E extends CfguError = CfguError> {
  status: number;
  type: string;
  title: string;
  /** The body's `detail`; absent: the error's message. */
  detail?: (e: E) => string;
  /** The body's members beyond type, title, status and detail. */
  members?: (e: E) => ProblemMembers;
  /** The response's headers (`Retry-After`, `WWW-Authenticate`). */
  headers?: (e: E) => Record<string, string>;
  /** Log the error at this level (with the request id); absent: don't log it. */
  log?: LogLevel;
}

/** How an error's path is shown to the person at the command line (relative to the working folder, or as is). */
export type ShowPath = (file: string) => string;

export interface CatalogueEntry<E extends CfguError = CfguError> {
  /** The name of the class that carries the code (src/core/errors.ts). */
  errorClass: string;
  /** That class: an error of the code that is not one of its instances gets none of the derived parts below. */
  raisedAs: abstract new (...args: never[]) => E;
  /**
   * The answer to a request that fails with this error. Absent: the error never answers a request (it stops the
   * server's start-up); met during a request anyway, it is answered as an unexpected error (500).
   */
  http?: HttpAnswer<E>;
  exit: ExitCode;
  /**
   * The lines the CLI prints on standard error, the first without its `cfgu <command>: ` prefix. Absent: the message
   * on one line.
   */
  cli?: (e: E, showPath: ShowPath) => string[];
}

/** A row whose derived parts read the fields of its own class. */
const row = <E extends CfguError>(raisedAs: abstract new (...args: never[]) => E, errorClass: string, entry: Omit<CatalogueEntry<E>, 'raisedAs' | 'errorClass'>) =>
  ({ raisedAs, errorClass, ...entry }) as unknown as CatalogueEntry;

const T = PROBLEM_TYPES;

/** A message on one line (the CLI prints one line per error). */
export const oneLine = (s: string): string => s.replace(/\s*\n\s*/g, '; ');

/** `Retry-After` of the errors that carry a `retryAfter`: whole seconds, at least 1. */
const retryAfterAtLeast1 = (e: { retryAfter: number }) => ({ 'retry-after': String(Math.max(1, Math.ceil(e.retryAfter))) });

/** One line per validation failure: `command N, key K, rule R: message`. */
export function failureLines(e: ValidationError): string[] {
  return e.failures.map((f) => `command ${f.command}, key ${f.key}, rule ${f.rule}: ${f.message}`);
}

/** At most this many `issues` in a 400 body. */
export const MAX_ISSUES = 20;

const inputError = (status: number, type: string, title: string) =>
  row(InputError, 'InputError', {
    http: { status, type, title, members: (e) => ({ issues: e.issues.slice(0, MAX_ISSUES) }) },
    exit: EXIT_USAGE,
    cli: (e) => {
      const lines = [oneLine(e.message)];
      // The issues follow when they say more than the message.
      if (e.issues.length > 1 || (e.issues.length === 1 && e.issues[0]!.path && e.issues[0]!.message !== e.message)) {
        for (const i of e.issues) lines.push(`  ${i.path ? `${i.path}: ` : ''}${i.message}`);
      }
      return lines;
    },
  });

/** The header of every 401 answer of the API (the metrics endpoint names its own realm). */
export const API_AUTH_CHALLENGE = 'Bearer realm="cfgu"';

export const ERROR_CATALOGUE: Readonly<Record<ErrorCode, Readonly<CatalogueEntry>>> = {
  [ErrorCodes.INVALID_INPUT]: inputError(400, T.invalidRequest, 'Invalid Request'),
  [ErrorCodes.INVALID_SCHEMA]: inputError(400, T.invalidSchema, 'Invalid Schema'),
  [ErrorCodes.INVALID_KEY]: inputError(400, T.invalidKey, 'Invalid Key'),
  [ErrorCodes.INVALID_SET]: inputError(400, T.invalidSet, 'Invalid Set'),
  [ErrorCodes.UNKNOWN_STORE]: row(UnknownStoreError, 'UnknownStoreError', {
    http: {
      status: 400,
      type: T.unknownStore,
      title: 'Unknown Store',
      members: (e) => (e.store === undefined ? { knownStores: e.known } : { knownStores: e.known, store: e.store }),
    },
    exit: EXIT_USAGE,
  }),
  [ErrorCodes.UNKNOWN_SCHEMA]: row(UnknownSchemaError, 'UnknownSchemaError', {
    http: { status: 400, type: T.unknownSchema, title: 'Unknown Schema', members: (e) => ({ schema: e.schema, closestSchemas: e.closest }) },
    exit: EXIT_USAGE,
  }),
  [ErrorCodes.LIMIT_EXCEEDED]: row(LimitError, 'LimitError', { http: { status: 413, type: T.limitExceeded, title: 'Limit Exceeded' }, exit: EXIT_USAGE }),
  [ErrorCodes.VALIDATION_FAILED]: row(ValidationError, 'ValidationError', {
    http: { status: 422, type: T.validationFailed, title: 'Validation Failed', members: (e) => ({ errors: e.failures }) },
    exit: EXIT_FAILED,
    cli: (e) => [`${e.message}:`, ...failureLines(e)],
  }),
  [ErrorCodes.BUDGET_EXCEEDED]: row(BudgetExceededError, 'BudgetExceededError', {
    http: { status: 422, type: T.budgetExceeded, title: 'Budget Exceeded', members: (e) => ({ rule: e.rule }) },
    exit: EXIT_FAILED,
  }),
  [ErrorCodes.STORE_UNAVAILABLE]: row(StoreUnavailableError, 'StoreUnavailableError', {
    http: {
      status: 503,
      type: T.storeUnavailable,
      title: 'Store Unavailable',
      // The message holds the driver's reason, for the log only.
      detail: (e) => `store "${e.store}" cannot be reached or read; retry later`,
      headers: (e) => ({ 'retry-after': String(Number.isFinite(e.retryAfter) && e.retryAfter > 0 ? Math.ceil(e.retryAfter) : 5) }),
      log: 'warn',
    },
    exit: EXIT_FAILED,
  }),
  [ErrorCodes.SANDBOX_UNAVAILABLE]: row(SandboxUnavailableError, 'SandboxUnavailableError', {
    http: {
      status: 503,
      type: T.sandboxUnavailable,
      title: 'Expressions Unavailable',
      detail: () => 'the expression sandbox is not available; retry later',
      headers: () => ({ 'retry-after': '5' }),
      log: 'error',
    },
    exit: EXIT_FAILED,
  }),
  [ErrorCodes.SANDBOX_BUSY]: row(SandboxBusyError, 'SandboxBusyError', {
    http: { status: 503, type: T.sandboxBusy, title: 'Expressions Busy', headers: retryAfterAtLeast1 },
    exit: EXIT_FAILED,
  }),
  [ErrorCodes.UNAUTHORIZED]: row(UnauthorizedError, 'UnauthorizedError', {
    http: { status: 401, type: T.unauthorized, title: 'Unauthorized', headers: () => ({ 'www-authenticate': API_AUTH_CHALLENGE }) },
    exit: EXIT_USAGE,
  }),
  [ErrorCodes.FORBIDDEN]: row(ForbiddenError, 'ForbiddenError', {
    http: { status: 403, type: T.forbidden, title: 'Forbidden', members: (e) => ({ refused: e.refused }) },
    exit: EXIT_USAGE,
  }),
  [ErrorCodes.RATE_LIMITED]: row(RateLimitedError, 'RateLimitedError', {
    http: { status: 429, type: T.rateLimited, title: 'Too Many Requests', headers: retryAfterAtLeast1 },
    exit: EXIT_FAILED,
  }),
  [ErrorCodes.UNSUPPORTED_CHARSET]: row(BodyRefusedError, 'BodyRefusedError', {
    http: { status: 415, type: T.blank, title: 'Unsupported Media Type' },
    exit: EXIT_USAGE,
  }),
  [ErrorCodes.FORBIDDEN_PROPERTY]: row(BodyRefusedError, 'BodyRefusedError', {
    http: { status: 400, type: T.invalidRequest, title: 'Invalid Request' },
    exit: EXIT_USAGE,
  }),
  [ErrorCodes.REVISION_CONFLICT]: row(RevisionConflictError, 'RevisionConflictError', {
    http: {
      status: 409,
      type: T.revisionConflict,
      title: 'Revision Conflict',
      members: (e) => ({ store: e.store, set: e.set, expectedRevision: e.expected, currentRevision: e.current }),
    },
    exit: EXIT_FAILED,
  }),
  [ErrorCodes.WRITE_BREAKS]: row(WriteBreaksError, 'WriteBreaksError', {
    http: { status: 422, type: T.writeBreaks, title: 'Write Breaks a Schema', members: (e) => ({ impact: e.impact }) },
    exit: EXIT_FAILED,
  }),
  [ErrorCodes.READ_ONLY_STORE]: row(ReadOnlyStoreError, 'ReadOnlyStoreError', {
    http: { status: 403, type: T.readOnlyStore, title: 'Read-Only Store', members: (e) => ({ store: e.store }) },
    exit: EXIT_USAGE,
  }),
  [ErrorCodes.WRITE_FORBIDDEN]: row(WriteForbiddenError, 'WriteForbiddenError', {
    http: { status: 403, type: T.forbidden, title: 'Forbidden', members: (e) => ({ store: e.store, set: e.set, right: e.right, keys: e.keys }) },
    exit: EXIT_USAGE,
  }),
  [ErrorCodes.CONSOLE_LOOPBACK_ONLY]: row(ConsoleLoopbackOnlyError, 'ConsoleLoopbackOnlyError', {
    http: { status: 403, type: T.consoleLoopbackOnly, title: 'Console on Loopback Only' },
    exit: EXIT_USAGE,
  }),
  [ErrorCodes.INVALID_CONFIGURATION]: row(ConfigurationError, 'ConfigurationError', {
    exit: EXIT_USAGE,
    cli: (e, showPath) => {
      let msg = oneLine(e.message);
      if (e.property && !msg.includes(e.property)) msg = `${e.property}: ${msg}`;
      if (e.file && !msg.includes(e.file)) msg = `${showPath(e.file)}: ${msg}`;
      return [msg];
    },
  }),
};

/** The catalogue entry of a CfguError; undefined for anything else. */
export function catalogueEntryOf(e: unknown): Readonly<CatalogueEntry> | undefined {
  return isCfguError(e) ? ERROR_CATALOGUE[e.code] : undefined;
}

/** The exit code for an error: the catalogue's for a CfguError, else EXIT_FAILED (something unexpected). */
export function exitCodeFor(e: unknown): number {
  return catalogueEntryOf(e)?.exit ?? EXIT_FAILED;
}

/** The HTTP answer to a CfguError: its row's, with the parts derived from the error. */
export interface CatalogueAnswer {
  problem: Problem;
  headers?: Record<string, string>;
  log?: LogLevel;
}

/**
 * The HTTP answer of a CfguError from its row; undefined for anything else and for a code that never answers a
 * request. An error whose code belongs to another class than its own gets the row's status, type and title with its
 * message, and nothing derived.
 */
export function httpAnswerOf(e: unknown): CatalogueAnswer | undefined {
  const entry = catalogueEntryOf(e);
  const http = entry?.http;
  if (!http) return undefined;
  const err = e as CfguError;
  const own = err instanceof entry.raisedAs;
  const problem: Problem = { type: http.type, title: http.title, status: http.status, detail: own && http.detail ? http.detail(err) : err.message };
  if (own && http.members) Object.assign(problem, http.members(err));
  const answer: CatalogueAnswer = { problem };
  if (own && http.headers) answer.headers = http.headers(err);
  if (own && http.log) answer.log = http.log;
  return answer;
}

/** The CLI's lines for a CfguError (the first without its `cfgu <command>: ` prefix); undefined for anything else. */
export function cliLinesOf(e: unknown, showPath: ShowPath): string[] | undefined {
  const entry = catalogueEntryOf(e);
  if (!entry) return undefined;
  const err = e as CfguError;
  return entry.cli && err instanceof entry.raisedAs ? entry.cli(err, showPath) : [oneLine(err.message)];
}

/** The problem of code `code` (its row's status, type and title) with this detail, raised by the HTTP layer itself. */
export function problemOf(code: ErrorCode, detail: string, members?: ProblemMembers): Problem {
  const http = ERROR_CATALOGUE[code].http!;
  return { type: http.type, title: http.title, status: http.status, detail, ...members };
}

/** The answer to a request without a credential the server accepts: the same body and header whatever the reason. */
export function unauthorizedAnswer(): { problem: Problem; headers: Record<string, string> } {
  const answer = httpAnswerOf(new UnauthorizedError('unauthenticated'))!;
  return { problem: answer.problem, headers: answer.headers! };
}
