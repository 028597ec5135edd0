/**
 * JWT bearer credentials (./credentials.ts tries them after the preshared keys and scoped tokens): verified with
 * `jose` against the issuer's JWKS (signature, allowed algorithms, iss, aud, exp, nbf with the configured clock skew),
 * then mapped to grants by its claims. Verified tokens are remembered by their hash until they expire (a bounded
 * LRU), so a client that sends the same token again costs a hash and a lookup, not a signature check.
 *
 * The JWKS is fetched by jose with a fetch of our own (jose's `customFetch`): the answer is read as a stream and
 * dropped as soon as it passes `jwksMaxBytes`, and a set of more than `jwksMaxKeys` keys is refused before jose sees
 * it. Either is a verification failure logged at error level, and the set fetched before (if any) stays in use.
 */
import { readFileSync } from 'node:fs';
import { LRUCache } from 'lru-cache';
import { createLocalJWKSet, createRemoteJWKSet, customFetch, jwtVerify, type FetchImplementation, type JWTPayload, type JWTVerifyGetKey } from 'jose';
import { ConfigurationError } from '../../core/errors.js';
import { compileGrant, type AuthResult, type CompiledGrant, type Principal } from './scopes.js';
import type { KeyLabels } from './key-labels.js';
import type { JwtGrant, JwtSettings } from './access-settings.js';

/** The value(s) a claim holds, by dotted path; a string holds each of its space-separated words (OAuth `scope`). */
function claimValues(payload: JWTPayload, path: string): string[] {
  let cur: unknown = payload;
  for (const part of path.split('.')) {
    if (typeof cur !== 'object' || cur === null || Array.isArray(cur)) return [];
    cur = (cur as Record<string, unknown>)[part];
  }
  if (typeof cur === 'string') return cur.split(/\s+/).filter(Boolean);
  if (Array.isArray(cur)) return cur.filter((v): v is string => typeof v === 'string');
  return [];
}

/** The reason of a jose failure, for the log (never the token, never a claim's value). */
function joseReason(e: unknown): { reason: string; level?: 'warn' | 'error' } {
  const err = e as { code?: string; claim?: string; reason?: string };
  switch (err.code) {
    case 'ERR_JWT_EXPIRED':
      return { reason: 'token expired' };
    case 'ERR_JWT_CLAIM_VALIDATION_FAILED':
      if (err.claim === 'nbf') return { reason: 'token not yet valid (nbf)' };
      if (err.claim === 'iss') return { reason: 'wrong issuer' };
      if (err.claim === 'aud') return { reason: 'wrong audience' };
      return { reason: `claim ${err.claim ?? '?'} ${err.reason === 'missing' ? 'missing' : 'invalid'}` };
    case 'ERR_JOSE_ALG_NOT_ALLOWED':
      return { reason: 'algorithm not allowed' };
    case 'ERR_JOSE_NOT_SUPPORTED':
      return { reason: 'algorithm not supported' };
    case 'ERR_JWKS_NO_MATCHING_KEY':
      return { reason: 'no key of the JWKS matches the token (unknown kid or algorithm)' };
    case 'ERR_JWKS_MULTIPLE_MATCHING_KEYS':
      return { reason: 'several keys of the JWKS match the token and none verified it' };
    case 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED':
      return { reason: 'bad signature' };
    case 'ERR_JWS_INVALID':
    case 'ERR_JWT_INVALID':
      return { reason: 'malformed token' };
    case JWKS_TOO_LARGE:
      return { reason: (e as Error).message, level: 'error' };
    case 'ERR_JWKS_TIMEOUT':
    case 'ERR_JWKS_INVALID':
      return { reason: `the JWKS could not be fetched (${err.code})`, level: 'error' };
    default:
      return { reason: `the JWKS could not be fetched or the token could not be verified (${err.code ?? (e as Error)?.name ?? 'error'})`, level: 'error' };
  }
}

/** Code of the error a JWKS answer over the limits fails with (the message says which limit, for the log). */
const JWKS_TOO_LARGE = 'CFGU_JWKS_TOO_LARGE';
const tooLarge = (message: string): Error => Object.assign(new Error(message), { code: JWKS_TOO_LARGE });

/**
 * The fetch jose fetches the JWKS with: at most `maxBytes` of body are read (the rest is never downloaded), and a set
 * of more than `maxKeys` keys is refused. A refused answer rejects jose's reload, so jose keeps the set it had.
 */
export function cappedJwksFetch(maxBytes: number, maxKeys: number): FetchImplementation {
  return async (url, init) => {
    const response = await fetch(url, init);
    if (response.status !== 200) {
      // jose refuses anything but 200 without reading it; neither is the body read here.
      await response.body?.cancel().catch(() => undefined);
      return new Response(null, { status: response.status });
    }
    const declared = response.headers.has('content-encoding') ? NaN : Number(response.headers.get('content-length'));
    if (declared > maxBytes) {
      await response.body?.cancel().catch(() => undefined);
      throw tooLarge(`the JWKS answer is ${declared} bytes; the limit is ${maxBytes} (auth.jwt.jwksMaxBytes)`);
    }
    const chunks: Uint8Array[] = [];
    let size = 0;
    if (response.body) {
      const reader = response.body.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        size += value.byteLength;
        if (size > maxBytes) {
          await reader.cancel().catch(() => undefined);
          throw tooLarge(`the JWKS answer is larger than ${maxBytes} bytes (auth.jwt.jwksMaxBytes); it was not read further`);
        }
        chunks.push(value);
      }
    }
    const text = Buffer.concat(chunks, size).toString('utf8');
    let keys: unknown;
    try {
      keys = (JSON.parse(text) as { keys?: unknown } | null)?.keys;
    } catch {
      // Not JSON: jose says so.
    }
    if (Array.isArray(keys) && keys.length > maxKeys) {
      throw tooLarge(`the JWKS holds ${keys.length} keys; the limit is ${maxKeys} (auth.jwt.jwksMaxKeys)`);
    }
    return new Response(text, { status: 200, headers: { 'content-type': 'application/json' } });
  };
}

export interface JwtVerifier {
  verify(token: string, key: string): AuthResult | Promise<AuthResult>;
}

export function createJwtVerifier(jwt: JwtSettings, keyLabels: KeyLabels): JwtVerifier {
  let keys: JWTVerifyGetKey;
  if (jwt.jwksUrl) {
    keys = createRemoteJWKSet(new URL(jwt.jwksUrl), {
      cooldownDuration: jwt.jwksCooldownSeconds * 1000,
      cacheMaxAge: jwt.jwksMaxAgeSeconds * 1000,
      timeoutDuration: 5000,
      [customFetch]: cappedJwksFetch(jwt.jwksMaxBytes, jwt.jwksMaxKeys),
    });
  } else {
    let parsed: unknown;
    try {
      parsed = JSON.parse(readFileSync(jwt.jwksFile!, 'utf8'));
    } catch (e) {
      throw new ConfigurationError(`cannot read the JWKS file (${(e as NodeJS.ErrnoException).code ?? 'not JSON'})`, undefined, 'auth.jwt.jwksFile');
    }
    try {
      keys = createLocalJWKSet(parsed as Parameters<typeof createLocalJWKSet>[0]);
    } catch {
      throw new ConfigurationError('the JWKS file is not a JSON Web Key Set ({"keys": [...]})', undefined, 'auth.jwt.jwksFile');
    }
  }
  const grants: Array<{ grant: JwtGrant; compiled: CompiledGrant }> = jwt.grants.map((g) => ({ grant: g, compiled: compileGrant(g, keyLabels) }));
  const cache = jwt.cacheSize > 0 ? new LRUCache<string, Principal>({ max: jwt.cacheSize }) : undefined;
  const expiries = new Map<string, number>();
  const options = {
    issuer: jwt.issuer,
    audience: jwt.audience,
    algorithms: jwt.algorithms,
    clockTolerance: jwt.clockSkewSeconds,
    requiredClaims: ['exp', 'sub'],
  };

  const principalOf = (payload: JWTPayload): Principal => {
    const granted = grants.filter(({ grant }) => claimValues(payload, grant.claim).includes(grant.value)).map((g) => g.compiled);
    return { kind: 'jwt', subject: payload.sub!, identity: `jwt:${payload.sub}`, grants: granted, metrics: granted.some((g) => g.metrics), expiresAt: payload.exp! };
  };

  return {
    verify(token, key) {
      if (cache) {
        const hit = cache.get(key);
        if (hit) {
          if (Date.now() < expiries.get(key)!) return { principal: hit };
          cache.delete(key);
          expiries.delete(key);
        }
      }
      return jwtVerify(token, keys, options).then(
        ({ payload }) => {
          if (typeof payload.sub !== 'string' || payload.sub === '') return { reason: 'the token has no subject (sub)' };
          const principal = principalOf(payload);
          if (cache) {
            // Remembered until the token expires (with the skew the verifier allows), never longer.
            const until = (payload.exp! + jwt.clockSkewSeconds) * 1000;
            const ttl = until - Date.now();
            if (ttl > 0) {
              cache.set(key, principal, { ttl: Math.ceil(ttl) });
              expiries.set(key, until);
              if (expiries.size > jwt.cacheSize * 2) {
                for (const k of expiries.keys()) if (!cache.has(k)) expiries.delete(k);
              }
            }
          }
          return { principal };
        },
        (e: unknown) => joseReason(e),
      );
    },
  };
}
