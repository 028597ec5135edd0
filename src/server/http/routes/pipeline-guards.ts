/**
 * What the routes that take a pipeline (POST /export, ./export.ts, and POST /explain, ./explain.ts) do alike before
 * the engine runs: the pipeline's size checked before its shape (413 before 400), the scope check before anything is
 * read (403), the client a sandbox job is queued and budgeted for, and the unknown-store answer narrowed to the store
 * names the credential may name. One copy, so the two routes cannot drift apart on who may read what.
 */
import type { FastifyRequest, preValidationHookHandler } from 'fastify';
import { keyCount } from '../../../core/index.js';
import { ForbiddenError, LimitError, UnknownStoreError } from '../../../core/errors.js';
import type { EvalCommandInput } from '../../../core/types.js';
import { ANONYMOUS, clientIdentity } from '../../access/credentials.js';
import { refusedCommands, visibleStores, type Principal } from '../../access/scopes.js';
import type { ServerSettings } from '../../process/settings.js';
import type { NamedSchemas } from '../../schemas/registry.js';
import { resolveCommands, type WireCommand } from '../../schemas/resolve.js';

/** Limits first, so an oversized pipeline is 413 and never walked by the validator. */
export function pipelineLimits(limits: ServerSettings['limits']): preValidationHookHandler {
  return (request, _reply, done) => {
    const body = request.body;
    if (Array.isArray(body)) {
      if (body.length > limits.commands) {
        done(new LimitError(`the pipeline has ${body.length} commands; the limit is ${limits.commands}`));
        return;
      }
      for (let i = 0; i < body.length; i++) {
        const keys = (body[i] as { schema?: { keys?: unknown } } | null)?.schema?.keys;
        if (keys && typeof keys === 'object') {
          const n = keyCount(keys);
          if (n > limits.keys) {
            done(new LimitError(`command ${i} declares ${n} keys; the limit is ${limits.keys}`));
            return;
          }
        }
      }
    }
    done();
  };
}

/** A scoped credential learns only the store names it may name (plain and watch requests alike). */
export const errorScope = (principal: Principal) =>
  principal.grants === 'all' ? undefined : (e: unknown) => (e instanceof UnknownStoreError ? new UnknownStoreError(e.store, visibleStores(principal, e.known)) : e);

/** A pipeline request that passed the scope check. */
export interface AdmittedPipeline {
  /** The pipeline as sent: a command's schema an object, or the name of one of the server's schemas. */
  wire: WireCommand[];
  /** The pipeline with names resolved to the server's schema objects (the same object until the file changes). */
  commands: EvalCommandInput[];
  principal: Principal;
  /** Who the sandbox queues and budgets the request for: the credential's identity, else the client address. */
  client: string;
  /** Narrows an error for a scoped credential (see `errorScope`); undefined with full access. */
  scope: ((e: unknown) => unknown) | undefined;
}

/**
 * The request's pipeline, once its principal may run every command of it. Schema names are resolved first (an
 * unknown name, or one the principal may not use: 400), then, before anything is read, a pipeline with one command out
 * of scope is refused whole (ForbiddenError, 403, naming each refused command). A command naming a server schema is
 * judged by that schema's labels.
 */
export function admitPipeline(request: FastifyRequest, defaultStore: string | undefined, schemas: NamedSchemas): AdmittedPipeline {
  const wire = request.body as WireCommand[];
  const principal = request.cfguPrincipal ?? ANONYMOUS;
  const commands = resolveCommands(wire, schemas, principal);
  if (principal.grants !== 'all') {
    const refused = refusedCommands(principal, commands, defaultStore, (schema) => schemas.versionOf(schema));
    if (refused.length) throw new ForbiddenError(refused, commands.length);
  }
  const client = principal.kind === 'anonymous' ? clientIdentity(undefined, request.ip, false) : principal.identity;
  return { wire, commands, principal, client, scope: errorScope(principal) };
}
