/**
 * Problem details (RFC 9457): the one shape of every error response, and the one mapping from errors to it.
 * Bodies never carry a stack, a server file-system path or a secret: store failures and unexpected errors get a
 * fixed detail here and their real message goes to the log only.
 */
import type { FastifyError } from 'fastify';
import {
  ErrorCodes,
  httpAnswerOf,
  MAX_ISSUES,
  PROBLEM_TYPES,
  problemOf,
  unauthorizedAnswer,
  type ErrorCode,
  type InputIssue,
  type LogLevel,
  type Problem,
  type ProblemMembers,
} from '../../core/index.js';

export const PROBLEM_CONTENT_TYPE = 'application/problem+json; charset=utf-8';

export type { Problem };

/** What the HTTP layer needs to answer: the body plus any headers the status implies. */
export interface ProblemReply {
  problem: Problem;
  headers?: Record<string, string>;
  /** Log the underlying error at this level (with the request id); undefined: don't log. */
  log?: LogLevel;
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
export function cfguProblem(code: ErrorCode, detail: string, extra?: ProblemMembers): Problem {
  return problemOf(code, detail, extra);
}

/**
 * The answer to a request without a credential the server accepts (the catalogue's CFGU_UNAUTHORIZED row): the body
 * and the `WWW-Authenticate` header, the same whatever the reason (which goes to the log only).
 */
export function unauthorizedReply(): { problem: Problem; headers: Record<string, string> } {
  return unauthorizedAnswer();
}

/** Plain HTTP errors (404, 405, 415, ...) with `about:blank`. */
export function httpProblem(status: number, detail: string): Problem {
  return problem(status, T.blank, STATUS_TITLES[status] ?? 'Error', detail);
}

/** Ajv error objects as fastify hands them over in `error.validation`. */
interface AjvLikeError {
  instancePath?: string;
  keyword?: string;
  message?: string;
  params?: Record<string, unknown>;
}

/** What a command's `schema` may be, said where a request gets it wrong (a name where an object belongs, and back). */
const SCHEMA_SHAPES: Array<[RegExp, string, string]> = [
  [/^\/\d+\/schema$/, 'type', 'must be an object (the schema) or a string (the name of one of the server\'s schemas)'],
  [/^\/\d+\/schema$/, 'minLength', 'must be the name of one of the server\'s schemas, not an empty string'],
  [/^\/\d+\/schema\/keys$/, 'type', 'must be an object (key name -> declaration); to use one of the server\'s schemas, give its name as `schema` itself ("schema": "app")'],
];

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
    } else if (e.keyword === 'type' || e.keyword === 'minLength') {
      message = SCHEMA_SHAPES.find(([at, keyword]) => keyword === e.keyword && at.test(path))?.[2] ?? message;
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

/** Fastify's own body errors: the catalogue code (or plain HTTP status) and the detail of each. */
const FASTIFY_BODY_ERRORS: Record<string, [ErrorCode | number, string]> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: [415, 'the request body must be JSON (Content-Type: application/json)'],
  FST_ERR_CTP_BODY_TOO_LARGE: [ErrorCodes.LIMIT_EXCEEDED, 'the request body is larger than the configured limit'],
  FST_ERR_CTP_EMPTY_JSON_BODY: [ErrorCodes.INVALID_INPUT, 'the request body is empty; send a JSON array of commands'],
  FST_ERR_CTP_INVALID_JSON_BODY: [ErrorCodes.INVALID_INPUT, 'the request body is not valid JSON'],
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: [ErrorCodes.INVALID_INPUT, 'the request body does not match its Content-Length'],
};

/** Map any thrown value to the problem the client sees. */
export function toProblem(err: unknown, requestId: string): ProblemReply {
  // cfgu's own errors: everything from the catalogue's row of the code.
  const own = httpAnswerOf(err);
  if (own) return own;

  const fe = err as Partial<FastifyError> & { validation?: AjvLikeError[] };
  if (fe && typeof fe === 'object') {
    if (Array.isArray(fe.validation)) {
      const issues = issuesFromValidation(fe.validation);
      return { problem: cfguProblem(ErrorCodes.INVALID_INPUT, describeIssues(issues), { issues }) };
    }
    const known = typeof fe.code === 'string' && Object.hasOwn(FASTIFY_BODY_ERRORS, fe.code) ? FASTIFY_BODY_ERRORS[fe.code] : undefined;
    if (known) {
      const [code, detail] = known;
      return { problem: typeof code === 'number' ? httpProblem(code, detail) : cfguProblem(code, detail) };
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
