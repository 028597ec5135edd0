/**
 * `--server URL`: `cfgu upsert`, `rollback` and `history` sent to a running cfgu server (POST /upsert, POST /rollback,
 * GET /history) with a bearer token, instead of opening the store here, so that people hold tokens, not database
 * passwords. A refusal (a problem+json body) becomes the error the same command would raise locally where the body
 * carries it whole (validation failures, a revision conflict), else a message with the exit code of the catalogue's
 * row of the problem's type.
 */
import {
  ERROR_CATALOGUE,
  EXIT_FAILED,
  EXIT_USAGE,
  failureLines,
  oneLine,
  RevisionConflictError,
  ValidationError,
  type EvalFailure,
  type ImpactEntry,
} from '../core/index.js';
import { ExitError, UsageError } from './errors.js';
import { impactLines, type HistoryAnswer, type WriteAnswer } from './write-output.js';

export interface ServerTarget {
  /** The server's base URL, e.g. http://127.0.0.1:8080 (a path prefix is kept). */
  url: URL;
  token: string | undefined;
}

/** The `--server` and `--token` flags (the token also from CFGU_TOKEN); undefined without `--server`. */
export function serverTarget(server: string | undefined, token: string | undefined, env: NodeJS.ProcessEnv): ServerTarget | undefined {
  if (server === undefined) return undefined;
  let url: URL;
  try {
    url = new URL(server);
  } catch {
    throw new UsageError(`--server "${server}" is not a URL (e.g. http://127.0.0.1:8080)`, [], true);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new UsageError(`--server "${server}" must be an http:// or https:// URL`, [], true);
  if (!url.pathname.endsWith('/')) url.pathname += '/';
  return { url, token: token ?? (env.CFGU_TOKEN || undefined) };
}

/** The exit code of a refusal: its catalogue row's (by problem type); else 1 for 409, 422, 429 and 5xx, 2 otherwise. */
export function exitCodeOfProblem(type: unknown, status: number): number {
  const row = Object.values(ERROR_CATALOGUE).find((r) => r.http?.type === type && r.http?.status === status);
  if (row) return row.exit;
  return status === 409 || status === 422 || status === 429 || status >= 500 ? EXIT_FAILED : EXIT_USAGE;
}

interface ProblemBody {
  type?: string;
  title?: string;
  status?: number;
  detail?: string;
  errors?: EvalFailure[];
  issues?: Array<{ path?: string; message: string }>;
  store?: string;
  set?: string;
  expectedRevision?: number;
  currentRevision?: number;
  impact?: ImpactEntry[];
  refused?: unknown[];
}

/** The error a refusal stands for. */
export function errorOfProblem(status: number, body: unknown): Error {
  const p = (body && typeof body === 'object' ? body : {}) as ProblemBody;
  if (p.type === 'urn:cfgu:problem:validation-failed' && Array.isArray(p.errors)) return new ValidationError(p.errors);
  if (p.type === 'urn:cfgu:problem:revision-conflict' && typeof p.currentRevision === 'number' && typeof p.expectedRevision === 'number') {
    return new RevisionConflictError(p.store ?? '', p.set ?? '', p.expectedRevision, p.currentRevision);
  }
  const message = `the server refused (${status}${p.title ? ` ${p.title}` : ''}): ${oneLine(p.detail ?? 'no detail given')}`;
  const lines: string[] = [];
  for (const i of p.issues ?? []) lines.push(`  ${i.path ? `${i.path}: ` : ''}${i.message}`);
  if (Array.isArray(p.errors)) lines.push(...failureLines(new ValidationError(p.errors)));
  if (Array.isArray(p.impact)) lines.push(...impactLines(p.impact, false, p.set ?? ''));
  return new ExitError(exitCodeOfProblem(p.type, status), message, lines);
}

async function call<T>(target: ServerTarget, method: 'GET' | 'POST', path: string, body?: unknown): Promise<T> {
  const url = new URL(path, target.url);
  const headers: Record<string, string> = { accept: 'application/json, application/problem+json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (target.token) headers.authorization = `Bearer ${target.token}`;
  let res: Response;
  try {
    res = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (e) {
    const cause = (e as { cause?: { code?: string; message?: string } }).cause;
    throw new ExitError(EXIT_FAILED, `cannot reach the server at ${target.url.origin}: ${cause?.code ?? cause?.message ?? (e as Error).message}`);
  }
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  if (!res.ok) throw errorOfProblem(res.status, parsed);
  if (parsed === undefined) throw new ExitError(EXIT_FAILED, `the server answered ${method} /${path} with a body that is not JSON`);
  return parsed as T;
}

/** POST /upsert or /rollback: the answer as a WriteAnswer. */
export async function serverWrite(target: ServerTarget, route: 'upsert' | 'rollback', body: Record<string, unknown>): Promise<WriteAnswer> {
  const a = await call<WriteAnswer & { impactTruncated?: boolean }>(target, 'POST', route, body);
  return { store: a.store, set: a.set, dryRun: !!a.dryRun, revision: a.revision, changes: a.changes ?? [], impact: a.dryRun ? a.impact : undefined, impactTruncated: a.impactTruncated };
}

/** GET /history. */
export function serverHistory(target: ServerTarget, query: Record<string, string | number | undefined>): Promise<HistoryAnswer> {
  const search = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined) search.set(k, String(v));
  return call<HistoryAnswer>(target, 'GET', `history?${search}`);
}
