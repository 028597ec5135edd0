/**
 * The access-control part of the proxy settings: scoped credentials, JWT verification, the audit log and rate
 * limits. Read by resolveSettings (../process/resolve-settings.ts) from `interface.proxy` of `.configu` and
 * `CONFIGU_*` variables; every value is validated here, at start-up (the section's shape, unknown properties
 * included, is checked before by ../process/setting-rules.ts). Only ../process/resolve-settings.ts and the defaults of ../process/settings.ts
 * import this module's values (others import types).
 */
import { isAbsolute, resolve as resolvePath } from 'node:path';
import { compileSetPattern, type Grant } from './scopes.js';
import { fail, toBoolean, toInteger, toList, toText, type Source } from '../process/setting-values.js';

export interface Credential extends Grant {
  /** Shown in the audit log as the subject. */
  name: string;
  /** Lower-case hex SHA-256 of the token (the token itself is never in the file). */
  sha256: string;
}

export interface JwtGrant extends Grant {
  /** The claim to look in (`scope`, `groups`, or a dotted path such as `realm_access.roles`). */
  claim: string;
  /** The value the claim must hold (a space-separated string claim holds each of its words). */
  value: string;
}

export interface JwtSettings {
  jwksUrl: string | undefined;
  /** Absolute path of a JWKS file (read once at start-up). */
  jwksFile: string | undefined;
  issuer: string[];
  audience: string[];
  algorithms: string[];
  clockSkewSeconds: number;
  /** Shortest time between two JWKS fetches (an unknown `kid` refetches no sooner). */
  jwksCooldownSeconds: number;
  /** Longest time a fetched JWKS is used before it is fetched again. */
  jwksMaxAgeSeconds: number;
  /** Largest JWKS answer read (bytes of JSON); a larger one is a verification failure and is not kept. */
  jwksMaxBytes: number;
  /** Most keys a fetched JWKS may hold; a set with more is a verification failure and is not kept. */
  jwksMaxKeys: number;
  /** Most verified tokens remembered (each until its `exp`). */
  cacheSize: number;
  grants: JwtGrant[];
}

export interface AccessSettings {
  credentials: Credential[];
  jwt: JwtSettings | undefined;
}

export interface AuditSettings {
  enabled: boolean;
  /** A file of its own for the audit lines (absolute path); undefined: the server's log. */
  file: string | undefined;
}

export interface RateLimitSettings {
  enabled: boolean;
  /** Requests to /export per subject and window. */
  max: number;
  windowSeconds: number;
  /** A Redis server shared by the replicas; undefined: counters in the process. */
  redisUrl: string | undefined;
  /** Prefix of the counters' Redis keys (proxies that share a Redis but not their limits need different ones). */
  redisPrefix: string;
}

export const ACCESS_ENV = {
  jwksUrl: 'CONFIGU_AUTH_JWT_JWKS_URL',
  jwksFile: 'CONFIGU_AUTH_JWT_JWKS_FILE',
  issuer: 'CONFIGU_AUTH_JWT_ISSUER',
  audience: 'CONFIGU_AUTH_JWT_AUDIENCE',
  algorithms: 'CONFIGU_AUTH_JWT_ALGORITHMS',
  clockSkew: 'CONFIGU_AUTH_JWT_CLOCK_SKEW_SECONDS',
  cooldown: 'CONFIGU_AUTH_JWT_JWKS_COOLDOWN_SECONDS',
  maxAge: 'CONFIGU_AUTH_JWT_JWKS_MAX_AGE_SECONDS',
  maxBytes: 'CONFIGU_AUTH_JWT_JWKS_MAX_BYTES',
  maxKeys: 'CONFIGU_AUTH_JWT_JWKS_MAX_KEYS',
  cacheSize: 'CONFIGU_AUTH_JWT_CACHE_SIZE',
  auditEnabled: 'CONFIGU_AUDIT_ENABLED',
  auditFile: 'CONFIGU_AUDIT_FILE',
  rateEnabled: 'CONFIGU_RATE_LIMIT_ENABLED',
  rateMax: 'CONFIGU_RATE_LIMIT_MAX',
  rateWindow: 'CONFIGU_RATE_LIMIT_WINDOW_SECONDS',
  rateRedis: 'CONFIGU_RATE_LIMIT_REDIS_URL',
  rateRedisPrefix: 'CONFIGU_RATE_LIMIT_REDIS_PREFIX',
} as const;

/** Asymmetric algorithms only: an HMAC secret could be confused with a public key, and `none` signs nothing. */
export const JWT_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA'] as const;
export const DEFAULT_JWT_ALGORITHMS = ['RS256', 'PS256', 'ES256', 'EdDSA'];

/** The JWKS limits: 1 MiB of JSON and 100 keys (a provider publishes a handful; rotation adds one or two). */
export const DEFAULT_JWKS_MAX_BYTES = 1024 * 1024;
export const DEFAULT_JWKS_MAX_KEYS = 100;

export const DEFAULT_AUDIT: AuditSettings = { enabled: true, file: undefined };
export const DEFAULT_RATE_LIMIT: RateLimitSettings = { enabled: false, max: 600, windowSeconds: 60, redisUrl: undefined, redisPrefix: 'cfgu:rate-limit:' };

/** Reads one setting: its raw value and source from the environment or the file (resolve-settings.ts's `pick`). */
export type Pick = (envName: string, filePath: string[]) => [unknown, Source] | undefined;

const NAME = /^[A-Za-z0-9._:@-]{1,64}$/;

function fileSource(base: Source, path: string): Source {
  return { ...base, name: `${base.name}${path}` };
}

function nonEmptyList(raw: unknown, source: Source): string[] {
  const list = toList(raw, source);
  if (!list.length) fail(source, 'must list at least one entry');
  return list;
}

function readGrant(obj: Record<string, unknown>, source: Source): Grant {
  const stores = nonEmptyList(obj.stores, fileSource(source, '.stores'));
  if (obj.sets === undefined) fail(fileSource(source, '.sets'), 'is required (set patterns such as "staging/**"; "" for the root set)');
  // `sets` keeps empty strings: "" names the root set.
  const setsSource = fileSource(source, '.sets');
  if (!Array.isArray(obj.sets) || !obj.sets.every((s) => typeof s === 'string') || obj.sets.length === 0) {
    fail(setsSource, 'must be a non-empty list of set patterns');
  }
  const sets = (obj.sets as string[]).map((s) => s.trim());
  for (const s of sets) {
    const r = compileSetPattern(s);
    if (!(r instanceof RegExp)) fail(setsSource, r.problem);
  }
  const grant: Grant = { stores, sets };
  if (obj.labels !== undefined) grant.labels = nonEmptyList(obj.labels, fileSource(source, '.labels'));
  if (obj.keys !== undefined) grant.keys = nonEmptyList(obj.keys, fileSource(source, '.keys'));
  if (obj.metrics !== undefined && toBoolean(obj.metrics, fileSource(source, '.metrics'))) grant.metrics = true;
  if (obj.write !== undefined && toBoolean(obj.write, fileSource(source, '.write'))) grant.write = true;
  if (obj.breaking !== undefined && toBoolean(obj.breaking, fileSource(source, '.breaking'))) {
    if (!grant.write) fail(fileSource(source, '.breaking'), 'needs write: true in the same grant');
    grant.breaking = true;
  }
  return grant;
}

/** Credentials (their shape is already checked: a list of objects with known properties, see ../process/setting-rules.ts). */
function readCredentials(raw: unknown, source: Source): Credential[] {
  const names = new Set<string>();
  const hashes = new Set<string>();
  return (raw as Array<Record<string, unknown>>).map((item, i) => {
    const here = fileSource(source, `[${i}]`);
    const name = toText(item.name, fileSource(here, '.name'));
    if (!NAME.test(name)) fail(fileSource(here, '.name'), 'must be 1 to 64 letters, digits or ._:@-');
    if (names.has(name)) fail(fileSource(here, '.name'), `"${name}" is used by another credential`);
    names.add(name);
    const sha = toText(item.sha256, fileSource(here, '.sha256')).toLowerCase();
    if (!/^[0-9a-f]{64}$/.test(sha)) {
      fail(fileSource(here, '.sha256'), 'must be the SHA-256 of the token as 64 hex digits (cfgu token create prints it)');
    }
    if (hashes.has(sha)) fail(fileSource(here, '.sha256'), 'is the hash of another credential\'s token');
    hashes.add(sha);
    return { name, sha256: sha, ...readGrant(item, here) };
  });
}

/** JWT grants (shape already checked, as for credentials). */
function readJwtGrants(raw: unknown, source: Source): JwtGrant[] {
  return (raw as Array<Record<string, unknown>>).map((item, i) => {
    const here = fileSource(source, `[${i}]`);
    return {
      claim: toText(item.claim, fileSource(here, '.claim')),
      value: toText(item.value, fileSource(here, '.value')),
      ...readGrant(item, here),
    };
  });
}

const isLoopback = (host: string): boolean => host === 'localhost' || host === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(host);

function toJwksUrl(raw: unknown, source: Source): string {
  const text = toText(raw, source);
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return fail(source, 'must be an https URL');
  }
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && isLoopback(url.hostname))) {
    fail(source, 'must be an https URL (plain http only for a loopback address)');
  }
  return url.href;
}

function toAlgorithms(raw: unknown, source: Source): string[] {
  const list = nonEmptyList(raw, source);
  for (const alg of list) {
    if (/^hs\d+$/i.test(alg)) fail(source, `${alg} is not accepted: an HMAC secret could be confused with a public key; use an asymmetric algorithm`);
    if (!(JWT_ALGORITHMS as readonly string[]).includes(alg)) fail(source, `"${alg}" is not an accepted algorithm (accepted: ${JWT_ALGORITHMS.join(', ')})`);
  }
  return list;
}

export function resolveAccessSettings(pick: Pick, baseDir: (source: Source) => string): {
  access: AccessSettings;
  audit: AuditSettings;
  rateLimit: RateLimitSettings;
} {
  const read = <T>(envName: string, path: string[], parse: (raw: unknown, source: Source) => T, fallback: T): T => {
    const hit = pick(envName, path);
    return hit ? parse(hit[0], hit[1]) : fallback;
  };
  const path = (raw: unknown, source: Source): string => {
    const text = toText(raw, source);
    return isAbsolute(text) ? text : resolvePath(baseDir(source), text);
  };

  // Credentials and grants are structured: file only.
  const credHit = pick('', ['auth', 'credentials']);
  const credentials = credHit ? readCredentials(credHit[0], credHit[1]) : [];

  let jwt: JwtSettings | undefined;
  const jwksUrl = read(ACCESS_ENV.jwksUrl, ['auth', 'jwt', 'jwksUrl'], toJwksUrl, undefined);
  const jwksFile = read(ACCESS_ENV.jwksFile, ['auth', 'jwt', 'jwksFile'], path, undefined);
  const issuerHit = pick(ACCESS_ENV.issuer, ['auth', 'jwt', 'issuer']);
  const audienceHit = pick(ACCESS_ENV.audience, ['auth', 'jwt', 'audience']);
  const grantsHit = pick('', ['auth', 'jwt', 'grants']);
  if (jwksUrl || jwksFile || issuerHit || audienceHit || grantsHit) {
    const where = (jwksUrl !== undefined ? pick(ACCESS_ENV.jwksUrl, ['auth', 'jwt', 'jwksUrl']) : undefined) ??
      pick(ACCESS_ENV.jwksFile, ['auth', 'jwt', 'jwksFile']) ?? issuerHit ?? audienceHit ?? grantsHit!;
    if (jwksUrl && jwksFile) fail(where[1], `give either a JWKS URL or a JWKS file, not both (${ACCESS_ENV.jwksUrl}, ${ACCESS_ENV.jwksFile})`);
    if (!jwksUrl && !jwksFile) fail(where[1], `JWT verification needs a JWKS: ${ACCESS_ENV.jwksUrl} or interface.proxy.auth.jwt.jwksUrl (or jwksFile)`);
    if (!issuerHit) fail(where[1], `JWT verification needs the expected issuer: ${ACCESS_ENV.issuer} or interface.proxy.auth.jwt.issuer`);
    if (!audienceHit) fail(where[1], `JWT verification needs the expected audience: ${ACCESS_ENV.audience} or interface.proxy.auth.jwt.audience`);
    jwt = {
      jwksUrl,
      jwksFile,
      issuer: nonEmptyList(issuerHit[0], issuerHit[1]),
      audience: nonEmptyList(audienceHit[0], audienceHit[1]),
      algorithms: read(ACCESS_ENV.algorithms, ['auth', 'jwt', 'algorithms'], toAlgorithms, DEFAULT_JWT_ALGORITHMS),
      clockSkewSeconds: read(ACCESS_ENV.clockSkew, ['auth', 'jwt', 'clockSkewSeconds'], (r, s) => toInteger(r, s, 0, 300), 30),
      jwksCooldownSeconds: read(ACCESS_ENV.cooldown, ['auth', 'jwt', 'jwksCooldownSeconds'], (r, s) => toInteger(r, s, 0, 3600), 30),
      jwksMaxAgeSeconds: read(ACCESS_ENV.maxAge, ['auth', 'jwt', 'jwksMaxAgeSeconds'], (r, s) => toInteger(r, s, 1, 86_400), 600),
      jwksMaxBytes: read(ACCESS_ENV.maxBytes, ['auth', 'jwt', 'jwksMaxBytes'], (r, s) => toInteger(r, s, 1024, 64 * 1024 * 1024), DEFAULT_JWKS_MAX_BYTES),
      jwksMaxKeys: read(ACCESS_ENV.maxKeys, ['auth', 'jwt', 'jwksMaxKeys'], (r, s) => toInteger(r, s, 1, 10_000), DEFAULT_JWKS_MAX_KEYS),
      cacheSize: read(ACCESS_ENV.cacheSize, ['auth', 'jwt', 'cacheSize'], (r, s) => toInteger(r, s, 0, 1_000_000), 10_000),
      grants: grantsHit ? readJwtGrants(grantsHit[0], grantsHit[1]) : [],
    };
  }

  const audit: AuditSettings = {
    enabled: read(ACCESS_ENV.auditEnabled, ['audit', 'enabled'], toBoolean, DEFAULT_AUDIT.enabled),
    file: read(ACCESS_ENV.auditFile, ['audit', 'file'], path, undefined),
  };
  const rateLimit: RateLimitSettings = {
    enabled: read(ACCESS_ENV.rateEnabled, ['rateLimit', 'enabled'], toBoolean, DEFAULT_RATE_LIMIT.enabled),
    max: read(ACCESS_ENV.rateMax, ['rateLimit', 'max'], (r, s) => toInteger(r, s, 1, 10_000_000), DEFAULT_RATE_LIMIT.max),
    windowSeconds: read(ACCESS_ENV.rateWindow, ['rateLimit', 'windowSeconds'], (r, s) => toInteger(r, s, 1, 86_400), DEFAULT_RATE_LIMIT.windowSeconds),
    redisUrl: read(ACCESS_ENV.rateRedis, ['rateLimit', 'redisUrl'], (r, s) => {
      const text = toText(r, s);
      if (!/^rediss?:\/\//.test(text)) fail(s, 'must be a redis:// or rediss:// URL');
      return text;
    }, undefined),
    redisPrefix: read(ACCESS_ENV.rateRedisPrefix, ['rateLimit', 'redisPrefix'], toText, DEFAULT_RATE_LIMIT.redisPrefix),
  };
  return { access: { credentials, jwt }, audit, rateLimit };
}
