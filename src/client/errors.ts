/**
 * The client's one error class (docs/clients.md, "Errors"). A refusal by the server carries its problem body
 * (RFC 9457, `application/problem+json`) as sent; a failure on the client's side (no answer at all, an answer that
 * is not what the API promises) carries a problem of the same shape made by the client, with a `urn:cfgu:client:`
 * type and status 0 when no HTTP answer came.
 */

/** A problem body: `type`, `title`, `status`, `detail`, and whatever other members the server added (`refused`, ...). */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  [member: string]: unknown;
}

/** The client's own problem types. */
export const CLIENT_PROBLEMS = {
  /** No HTTP answer: the connection failed, was cut, or timed out (status 0). */
  unreachable: 'urn:cfgu:client:unreachable',
  /** An answer that is not what the API promises (not JSON, no tag, a stream that breaks the event format). */
  invalidAnswer: 'urn:cfgu:client:invalid-answer',
  /** The answer is JSON but the caller's validator refused it. */
  validation: 'urn:cfgu:client:validation',
  /** The caller's `getToken` failed (threw or rejected). */
  token: 'urn:cfgu:client:token',
} as const;

export class CfguClientError extends Error {
  /** The HTTP status of the answer; 0 when there was none. */
  readonly status: number;
  /** The problem type (a URI): the server's, or one of CLIENT_PROBLEMS. */
  readonly type: string;
  readonly title: string;
  readonly detail: string;
  /** The whole problem body, with every member the server sent. */
  readonly problem: Problem;

  constructor(problem: Problem, options: { cause?: unknown } = {}) {
    super(`${problem.status ? `${problem.status} ` : ''}${problem.title}: ${problem.detail}`, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'CfguClientError';
    this.status = problem.status;
    this.type = problem.type;
    this.title = problem.title;
    this.detail = problem.detail;
    this.problem = problem;
  }
}

/** Whether `value` has the members every problem body has. */
export function isProblem(value: unknown): value is Problem {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const p = value as Record<string, unknown>;
  return typeof p.type === 'string' && typeof p.title === 'string' && typeof p.status === 'number' && typeof p.detail === 'string';
}

/** A problem made by the client. */
export function clientError(type: string, title: string, status: number, detail: string, cause?: unknown): CfguClientError {
  return new CfguClientError({ type, title, status, detail }, { cause });
}

/** The error for a request that got no answer (the cause's code, such as ECONNREFUSED, in the detail). */
export function unreachable(url: string, cause: unknown): CfguClientError {
  const code = codeOf(cause);
  return clientError(CLIENT_PROBLEMS.unreachable, 'Server Unreachable', 0, `no answer from ${url}${code ? ` (${code})` : ''}`, cause);
}

/** The system error code of a failed fetch (undici wraps it in `cause`), or the error's name for a timeout. */
function codeOf(e: unknown): string | undefined {
  for (let c: unknown = e, depth = 0; c && depth < 4; c = (c as { cause?: unknown }).cause, depth++) {
    const code = (c as { code?: unknown }).code;
    if (typeof code === 'string' && /^[A-Z_]+$/.test(code)) return code;
    const name = (c as { name?: unknown }).name;
    if (name === 'TimeoutError' || name === 'AbortError') return name;
  }
  return undefined;
}

/**
 * The error for a refused request: its problem body when it has one, else a problem naming only the status (a body
 * that is not a problem, such as a proxy's page, is not copied).
 */
export async function errorOf(res: Response): Promise<CfguClientError> {
  const text = await res.text().catch(() => '');
  if (/^application\/(problem\+)?json\b/i.test(res.headers.get('content-type') ?? '')) {
    try {
      const body: unknown = JSON.parse(text);
      if (isProblem(body)) return new CfguClientError(body);
    } catch {
      /* not JSON: described below */
    }
  }
  return clientError('about:blank', res.statusText || `HTTP ${res.status}`, res.status, `the server answered ${res.status} without a problem body`);
}
