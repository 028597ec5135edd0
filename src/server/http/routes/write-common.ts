/**
 * What the write routes (./upsert.ts, ./rollback.ts, ./history.ts) share: the caller of a request, its audit fields,
 * and the 400 answer to a body or query string that does not match the route's schema (named for the route, not as
 * a pipeline).
 */
import type { FastifyRequest } from 'fastify';
import { ErrorCodes, InputError } from '../../../core/index.js';
import { requestContext } from '../../../core/ports.js';
import { ANONYMOUS, clientIdentity } from '../../access/credentials.js';
import type { Caller, WriteAnswer, WriteContext } from '../../writes/write-service.js';
import { issuesFromValidation } from '../problem.js';
import type { WriteAudit } from '../request-state.js';
import type { ServerSettings } from '../../process/settings.js';

export interface WriteRouteOptions {
  settings: ServerSettings;
  context: WriteContext;
  defaultStore: string | undefined;
}

export function callerOf(request: FastifyRequest): Caller {
  const principal = request.cfguPrincipal ?? ANONYMOUS;
  const client = principal.kind === 'anonymous' ? clientIdentity(undefined, request.ip, false) : principal.identity;
  return { principal, requestId: request.id, context: requestContext(client) };
}

export const outcomeOf = (answer: WriteAnswer): string => (answer.dryRun ? 'dry-run' : answer.changes.length ? 'written' : 'unchanged');

/** The request's audit fields (outcome `refused` until the handler answers). */
export function auditWrite(
  request: FastifyRequest,
  defaultStore: string | undefined,
  fields: { route: WriteAudit['route']; store: unknown; set: unknown; keys: number; dryRun: unknown },
): WriteAudit {
  const store = typeof fields.store === 'string' ? fields.store.slice(0, 200) : defaultStore ?? null;
  const set = typeof fields.set === 'string' ? fields.set.trim().replace(/^\/|\/$/g, '').slice(0, 500) : '';
  return (request.cfguWrite = { route: fields.route, store, set, keys: fields.keys, dryRun: fields.dryRun === true, outcome: 'refused' });
}

/** Throw the 400 of a request whose body (or query string) failed the route's schema (`attachValidation`). */
export function refuseInvalid(request: FastifyRequest, what: string): void {
  const error = request.validationError as (Error & { validation?: Parameters<typeof issuesFromValidation>[0] }) | undefined;
  if (!error) return;
  const issues = issuesFromValidation(error.validation ?? []);
  const first = issues[0];
  const more = issues.length > 1 ? ` (and ${issues.length - 1} more)` : '';
  throw new InputError(ErrorCodes.INVALID_INPUT, `${what}${first ? `: ${first.path} ${first.message}${more}` : ''}`, issues);
}

/** The number of keys a body names, for the audit line (0 when it names none or is not an object). */
export const keyCount = (values: unknown): number => (values && typeof values === 'object' ? Object.keys(values).length : 0);
