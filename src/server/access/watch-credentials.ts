/**
 * A watch request's credential for the whole life of the watch (docs/security.md, "Streams, long polls and
 * credentials"). A stream or a held long poll was authenticated once, when it arrived; it then obeys its credential
 * as every later plain request would:
 *   - a JWT ends at its `exp` plus the configured clock skew, the instant a plain request with it starts getting 401
 *     (a timer per watcher, set from the token's own `exp`);
 *   - before each delivery and at each heartbeat, the watcher's original Authorization header goes through the app's
 *     current authenticator again: a credential no longer accepted (removed by a reload of the credentials, or mapped
 *     to another identity) ends the watch, and so does a principal whose scope no longer covers the pipeline (the
 *     scope check of the route, run again), or, for a change stream of GET /changes, no longer names its store.
 * The app owns the authenticator through an `AuthenticatorHolder`, so a reload replaces it for new requests and
 * watchers alike.
 */
import { decodeJwt } from 'jose';
import { ForbiddenError } from '../../core/errors.js';
import type { EvalCommandInput } from '../../core/types.js';
import { BEARER } from './credentials.js';
import { refusedCommands, type Principal, type ServerSchemaOf } from './scopes.js';
import type { AuthResult, Authenticator } from './credentials.js';
import { toProblem, unauthorizedReply } from '../http/problem.js';

/** The headers of a 401 (the error catalogue's). */
const UNAUTHORIZED_HEADERS = unauthorizedReply().headers;

/** The app's authenticator, replaceable (a reload of the credentials); undefined when authentication is off. */
export interface AuthenticatorHolder {
  authenticator: Authenticator | undefined;
  /** The JWT clock skew the authenticator allows, in seconds (a token is accepted until `exp` plus this). */
  jwtClockSkewSeconds: number;
}

/** Why a watch ended because of its credential: the token expired, it is no longer accepted, or out of scope. */
export type CredentialEnd = 'expired' | 'revoked' | 'scope';

/** The answer a watcher gets when its credential ends it: the problem a plain request would get now. */
export interface CredentialVerdict {
  reason: CredentialEnd;
  status: number;
  /** The problem body (JSON text), exactly as a plain request gets it. */
  text: string;
  headers: Record<string, string>;
}

/** A watcher's credential: checked again on demand; `expiresAt` (ms since the epoch) when it has an expiry. */
export interface WatchCredential {
  readonly expiresAt: number | undefined;
  /** Who the watch is for as of the last check that admitted it (its grants may have changed by a reload). */
  readonly principal: Principal;
  /** `true` while the credential still admits the watch, else the verdict; never rejects. */
  check(): true | CredentialVerdict | Promise<true | CredentialVerdict>;
  /** The verdict for an expired credential (the expiry timer fired). */
  expired(): CredentialVerdict;
}

export interface WatchCredentialInput {
  holder: AuthenticatorHolder;
  /** The request's Authorization header, as it came. */
  authorization: string | undefined;
  /** Who the request was for when it arrived. */
  principal: Principal;
  /** The pipeline as the request carried it (schema names included); none for a change stream (GET /changes). */
  commands: readonly WireCommandLike[];
  /**
   * The scope check of a watch that is no pipeline (a change stream of GET /changes: a grant on its store), run
   * instead of the pipeline's: the error a plain request of the principal would get, or undefined when admitted.
   */
  refusal?: (principal: Principal) => Error | undefined;
  /** The pipeline with its schema names replaced by the server's schemas of the moment (../schemas/resolve.ts). */
  resolve?: (commands: readonly WireCommandLike[]) => EvalCommandInput[];
  /** Which schema objects are the server's own (their keys are judged by their own labels). */
  serverSchema?: ServerSchemaOf;
  defaultStore: string | undefined;
  /** The app's 401 problem body (the same text as for a plain request). */
  unauthorized: string;
}

/** A command as a request carried it: its schema may be the name of one of the server's (../schemas/resolve.ts). */
type WireCommandLike = Omit<EvalCommandInput, 'schema'> & { schema: EvalCommandInput['schema'] | string };

/** When a JWT principal's token stops being accepted: (`exp` + skew) seconds, in ms; undefined for other kinds. */
export function expiryOf(principal: Principal, authorization: string | undefined, skewSeconds: number): number | undefined {
  if (principal.kind !== 'jwt' || typeof authorization !== 'string') return undefined;
  const token = BEARER.exec(authorization)?.[1];
  if (!token) return undefined;
  try {
    // The token was verified by the authenticator already: this only reads its `exp`.
    const exp = decodeJwt(token).exp;
    return typeof exp === 'number' && Number.isFinite(exp) ? (exp + skewSeconds) * 1000 : undefined;
  } catch {
    return undefined;
  }
}

/** The credential of a watch request; undefined when authentication is off (nothing to re-check). */
export function watchCredential(input: WatchCredentialInput): WatchCredential | undefined {
  const { holder, authorization, principal, commands, resolve, serverSchema, defaultStore, unauthorized, refusal } = input;
  if (!holder.authenticator || principal.kind === 'anonymous') return undefined;
  const expiresAt = expiryOf(principal, authorization, holder.jwtClockSkewSeconds);
  const denied = (reason: 'expired' | 'revoked'): CredentialVerdict => ({ reason, status: 401, text: unauthorized, headers: { ...UNAUTHORIZED_HEADERS } });
  const judge = (result: AuthResult): true | CredentialVerdict => {
    if (expiresAt !== undefined && Date.now() >= expiresAt) return denied('expired');
    // Not accepted any more, or accepted as someone else (the watch belongs to the identity it was opened for).
    if (!('principal' in result) || result.principal.identity !== principal.identity) return denied('revoked');
    const refused = refusal ? refusal(result.principal) : pipelineRefusal(result.principal);
    if (!refused) {
      latest = result.principal;
      return true;
    }
    const { problem } = toProblem(refused, 'watch');
    return { reason: 'scope', status: 403, text: JSON.stringify(problem), headers: {} };
  };
  // Named schemas as they are now: a schema that changed to declare a key outside the scope ends the watch.
  const pipelineRefusal = (p: Principal): Error | undefined => {
    const current = resolve ? resolve(commands) : (commands as readonly EvalCommandInput[]);
    const refused = refusedCommands(p, current, defaultStore, serverSchema);
    return refused.length ? new ForbiddenError(refused, commands.length) : undefined;
  };
  let latest = principal;
  return {
    expiresAt,
    get principal() {
      return latest;
    },
    expired: () => denied('expired'),
    check() {
      const authenticator = holder.authenticator;
      // Authentication turned off by a reload cannot happen (a reload keeps it on); be safe: nothing to check.
      if (!authenticator) return true;
      let result: AuthResult | Promise<AuthResult>;
      try {
        result = authenticator.authenticate(authorization);
      } catch {
        return denied('revoked');
      }
      if (result instanceof Promise) return result.then(judge, () => denied('revoked'));
      return judge(result);
    },
  };
}
