/**
 * Problem details (RFC 9457): the one shape of every error response, and the one mapping from errors to it.
 * Bodies never carry a stack, a server file-system path or a secret: store failures and unexpected errors get a
 * fixed detail here and their real message goes to the log only.
 */
import type { FastifyError } from 'fastify';
import {
  BudgetExceededError,
  catalogueEntryOf,
  ERROR_CATALOGUE,
  ErrorCodes,
  ForbiddenError,
  InputError,
  RateLimitedError,
  PROBLEM_TYPES,
  SandboxBusyError,
  SandboxUnavailableError,
  StoreUnavailableError,
  UnknownStoreError,
  ValidationError,
  type ErrorCode,
  type EvalFailure,
  type InputIssue,
  type RefusedCommand,
} from '../../core/index.js';

export const PROBLEM_CONTENT_TYPE = 'application/problem+json; charset=utf-8';

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
  /** 500: the request id to quote to the operator. */
  requestId?: string;
  /** 422 budget exceeded: which budget (`cpu-budget`, `restart-budget`). */
  rule?: string;
  /** 403: the commands the credential may not run (index, store, set). */
  refused?: RefusedCommand[];
}

/** What the HTTP layer needs to answer: the body plus any headers the status implies. */
export interface ProblemReply {
  problem: Problem;
  headers?: Record<string, string>;
  /** Log the underlying error at this level (with the request id); undefined: don't log. */
  log?: 'warn' | 'error';
}

/** Problem `type` URIs (the error catalogue's, src/core/error-catalogue.ts). */
const T = PROBLEM_TYPES;
export { PROBLEM_TYPES };

export const STATUS_TITLES: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  413: 'Content Too Large',
  415: 'Unsupported Media Type',
  422: 'Unprocessable Content',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
};

export function problem(status: number, type: string, title: string, detail: string, extra?: Partial<Problem>): Problem {
  return { type, title, status, detail, ...extra };
}

/** A problem of the catalogue's kind `code` (its status, type and title) raised by the HTTP layer itself. */
export function cfguProblem(code: ErrorCode, detail: string, extra?: Partial<Problem>): Problem {
  const http = ERROR_CATALOGUE[code].http!;
  return problem(http.status, http.type, http.title, detail, extra);
}

/** Plain HTTP errors (404, 405, 415, ...) with `about:blank`. */
export function httpProblem(status: number, detail: string): Problem {
  return problem(status, T.blank, STATUS_TITLES[status] ?? 'Error', detail);
}

const MAX_ISSUES = 20;

/** Ajv error objects as fastify hands them over in `error.validation`. */
interface AjvLikeError {
  instancePath?: string;
  keyword?: string;
  message?: string;
  params?: Record<string, unknown>;
}

/** Turn request-body schema violations into issues with JSON-pointer paths. */
export function issuesFromValidation(errors: readonly AjvLikeError[]): InputIssue[] {
  const out: InputIssue[] = [];
  for (const e of errors.slice(0, MAX_ISSUES)) {
    let path = e.instancePath ?? '';
    let message = e.message ?? 'is invalid';
    if (e.keyword === 'additionalProperties' && typeof e.params?.additionalProperty === 'string') {
      path = `${path}/${escapePointer(e.params.additionalProperty)}`;
      message = 'is not an allowed property';
    } else if (e.keyword === 'required' && typeof e.params?.missingProperty === 'string') {
      path = `${path}/${escapePointer(e.params.missingProperty)}`;
      message = 'is required';
    }
    out.push({ path: path || '/', message });
  }
  return out;
}

const escapePointer = (s: string): string => s.replace(/~/g, '~0').replace(/\//g, '~1');

function describeIssues(issues: InputIssue[]): string {
  if (!issues.length) return 'the request body is not a valid pipeline';
  const first = issues[0]!;
  const more = issues.length > 1 ? ` (and ${issues.length - 1} more)` : '';
  return `the request body is not a valid pipeline: ${first.path} ${first.message}${more}`;
}

/** Map any thrown value to the problem the client sees. */
export function toProblem(err: unknown, requestId: string): ProblemReply {
  // cfgu's own errors: status, type and title from the catalogue; the class adds its own members and headers.
  const entry = catalogueEntryOf(err)?.http;
  if (entry) {
    const answer = (detail: string, extra?: Partial<Problem>): Problem => problem(entry.status, entry.type, entry.title, detail, extra);
    const e = err as Error;
    if (e instanceof ValidationError) return { problem: answer(e.message, { errors: e.failures }) };
    if (e instanceof InputError) return { problem: answer(e.message, { issues: e.issues.slice(0, MAX_ISSUES) }) };
    if (e instanceof UnknownStoreError) {
      const extra: Partial<Problem> = { knownStores: e.known };
      if (e.store !== undefined) extra.store = e.store;
      return { problem: answer(e.message, extra) };
    }
    if (e instanceof StoreUnavailableError) {
      const retry = Number.isFinite(e.retryAfter) && e.retryAfter > 0 ? Math.ceil(e.retryAfter) : 5;
      // The message holds the driver's reason, for the log only.
      return {
        problem: answer(`store "${e.store}" cannot be reached or read; retry later`),
        headers: { 'retry-after': String(retry) },
        log: 'warn',
      };
    }
    if (e instanceof SandboxBusyError) {
      return { problem: answer(e.message), headers: { 'retry-after': String(Math.max(1, Math.ceil(e.retryAfter))) } };
    }
    if (e instanceof ForbiddenError) return { problem: answer(e.message, { refused: e.refused }) };
    if (e instanceof RateLimitedError) {
      return { problem: answer(e.message), headers: { 'retry-after': String(Math.max(1, Math.ceil(e.retryAfter))) } };
    }
    if (e instanceof BudgetExceededError) return { problem: answer(e.message, { rule: e.rule }) };
    if (e instanceof SandboxUnavailableError) {
      return { problem: answer('the expression sandbox is not available; retry later'), headers: { 'retry-after': '5' }, log: 'error' };
    }
    return { problem: answer(e.message) };
  }

  const fe = err as Partial<FastifyError> & { validation?: AjvLikeError[] };
  if (fe && typeof fe === 'object') {
    if (Array.isArray(fe.validation)) {
      const issues = issuesFromValidation(fe.validation);
      return { problem: cfguProblem(ErrorCodes.INVALID_INPUT, describeIssues(issues), { issues }) };
    }
    switch (fe.code) {
      case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
        return { problem: httpProblem(415, 'the request body must be JSON (Content-Type: application/json)') };
      case 'FST_ERR_CTP_BODY_TOO_LARGE':
        return { problem: cfguProblem(ErrorCodes.LIMIT_EXCEEDED, 'the request body is larger than the configured limit') };
      case 'FST_ERR_CTP_EMPTY_JSON_BODY':
        return { problem: cfguProblem(ErrorCodes.INVALID_INPUT, 'the request body is empty; send a JSON array of commands') };
      case 'FST_ERR_CTP_INVALID_JSON_BODY':
        return { problem: cfguProblem(ErrorCodes.INVALID_INPUT, 'the request body is not valid JSON') };
      case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
        return { problem: cfguProblem(ErrorCodes.INVALID_INPUT, 'the request body does not match its Content-Length') };
      default:
        break;
    }
    // Prototype-poisoning protection of the JSON parser: a `__proto__` property (or `constructor.prototype`) is
    // refused, even though `__proto__` matches the ConfigKey pattern.
    if (fe.code === UNSUPPORTED_CHARSET) {
      return { problem: httpProblem(415, 'the request body must be JSON in UTF-8 (Content-Type: application/json; charset=utf-8)') };
    }
    if (fe.code === FORBIDDEN_PROPERTY) {
      return {
        problem: cfguProblem(ErrorCodes.INVALID_INPUT, 'the request body contains a `__proto__` or `constructor.prototype` property, which the server refuses'),
      };
    }
    // Other errors of the JSON parser (SyntaxError) carry a 400 status; their messages may quote the body, so none of
    // it is echoed.
    if (fe.statusCode === 400 || (err instanceof SyntaxError)) {
      return { problem: cfguProblem(ErrorCodes.INVALID_INPUT, 'the request body is not valid JSON') };
    }
    if (fe.statusCode === 413) {
      return { problem: cfguProblem(ErrorCodes.LIMIT_EXCEEDED, 'the request is larger than the configured limit') };
    }
    if (fe.statusCode === 415) {
      return { problem: httpProblem(415, 'the request body must be JSON (Content-Type: application/json)') };
    }
  }

  return {
    problem: problem(500, T.blank, 'Internal Server Error', 'the server could not process the request; quote the request id to the operator', {
      requestId,
    }),
    log: 'error',
  };
}

/** Error code of a JSON body refused by the prototype-poisoning guard (set by the JSON parser in app.ts). */
export const FORBIDDEN_PROPERTY = 'CFGU_FORBIDDEN_PROPERTY';

/** Error code of a JSON body declared in a charset other than UTF-8 (set by the JSON parser in app.ts). */
export const UNSUPPORTED_CHARSET = 'CFGU_UNSUPPORTED_CHARSET';
