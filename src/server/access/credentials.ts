/**
 * Bearer-key authentication. The configured keys are hashed once at start-up; a presented key is hashed with the
 * same function and compared with every configured digest using crypto.timingSafeEqual, without stopping at the
 * first match, so neither the key's length nor which key matched shows in the timing.
 */
import { createHash, timingSafeEqual } from 'node:crypto';

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
