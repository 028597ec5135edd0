/**
 * Credentials: who a request is for. Three kinds of bearer credential, tried in this order:
 *   1. preshared keys (full access, as before scopes existed) and scoped tokens whose SHA-256 is in `.configu`: the
 *      presented token is hashed once and compared with every configured digest with crypto.timingSafeEqual, never
 *      stopping at the first match, so neither the key's length nor which key matched shows in the timing;
 *   2. a JWT (three base64url parts) when an issuer is configured: verified by ./jwt.ts.
 * A failure never says why to the client (one fixed 401); the reason goes to the log.
 *
 * Also here: the single-key checker of the metrics key (`createKeyChecker`), and the client identity the sandbox
 * queues by (`clientIdentity`).
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { createJwtVerifier } from './jwt.js';
import { compileGrant, type AuthResult, type Principal } from './scopes.js';
import { NO_KEY_LABELS, type KeyLabels } from './key-labels.js';
import type { ServerSettings } from '../process/settings.js';

export type { AuthResult } from './scopes.js';

export const digest = (text: string): Buffer => createHash('sha256').update(text, 'utf8').digest();

export interface KeyChecker {
  /** True when `authorization` (the raw header) is `Bearer <key>` with a configured key. */
  check(authorization: string | undefined): boolean;
}

export const BEARER = /^bearer[ \t]+(\S+)[ \t]*$/i;

export function createKeyChecker(keys: readonly string[]): KeyChecker {
  const digests = keys.map(digest);
  return {
    check(authorization) {
      if (typeof authorization !== 'string' || authorization.length > 4096) return false;
      const m = BEARER.exec(authorization);
      if (!m) return false;
      const presented = digest(m[1]!);
      let ok = false;
      for (const d of digests) {
        // No early exit: every key is compared.
        if (timingSafeEqual(presented, d)) ok = true;
      }
      return ok;
    },
  };
}

/**
 * Who a request is for, for the sandbox's per-client queues: the bearer key's digest when authentication is on (the
 * key was checked before the handler ran; the digest, never the key, is kept), else the client address.
 */
export function clientIdentity(authorization: string | undefined, address: string, authEnabled: boolean): string {
  const m = authEnabled && typeof authorization === 'string' ? BEARER.exec(authorization) : null;
  return m ? `key:${digest(m[1]!).toString('base64url').slice(0, 22)}` : `ip:${address}`;
}

const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

export interface Authenticator {
  /** The principal for a raw Authorization header, or why there is none. Synchronous unless a JWT is verified. */
  authenticate(authorization: string | undefined): AuthResult | Promise<AuthResult>;
}

interface Entry {
  digest: Buffer;
  principal: Principal;
}

export const ANONYMOUS: Principal = Object.freeze({ kind: 'anonymous', subject: null, identity: '', grants: 'all' }) as Principal;

/**
 * The authenticator for the settings, or undefined when authentication is off. `keyLabels`: which labels the server's
 * own schemas give each key (key-labels.ts); without it, `labels` of a grant allow no key.
 */
export function createAuthenticator(settings: ServerSettings, keyLabels: KeyLabels = NO_KEY_LABELS): Authenticator | undefined {
  if (!settings.auth.enabled) return undefined;
  const entries: Entry[] = [
    ...settings.auth.presharedKeys.map((k, i): Entry => {
      const d = digest(k);
      // The identity keeps the sandbox's per-client queue name of before (a prefix of the key's digest).
      return { digest: d, principal: { kind: 'preshared', subject: `preshared:${i + 1}`, identity: `key:${d.toString('base64url').slice(0, 22)}`, grants: 'all' } };
    }),
    ...settings.auth.credentials.map(
      (c): Entry => ({
        digest: Buffer.from(c.sha256, 'hex'),
        principal: { kind: 'credential', subject: c.name, identity: `cred:${c.name}`, grants: [compileGrant(c, keyLabels)], metrics: c.metrics === true },
      }),
    ),
  ];
  const jwt = settings.auth.jwt ? createJwtVerifier(settings.auth.jwt, keyLabels) : undefined;

  return {
    authenticate(authorization) {
      if (typeof authorization !== 'string') return { reason: 'no Authorization header' };
      if (authorization.length > 8192) return { reason: 'Authorization header too long' };
      const m = BEARER.exec(authorization);
      if (!m) return { reason: 'not a bearer credential' };
      const token = m[1]!;
      const presented = digest(token);
      let found: Principal | undefined;
      for (const e of entries) {
        // No early exit: every digest is compared.
        if (timingSafeEqual(presented, e.digest)) found = e.principal;
      }
      if (found) return { principal: found };
      if (jwt && JWT_SHAPE.test(token)) return jwt.verify(token, presented.toString('base64url'));
      return { reason: 'unknown key or token' };
    },
  };
}

