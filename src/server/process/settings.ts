/**
 * Proxy settings: one typed object resolved once at start-up from three sources, highest first:
 *   1. command-line flags (`--port`, `--host`, `--workers`),
 *   2. environment variables (`CONFIGU_HTTP_PORT`, ...),
 *   3. the `interface.proxy` section of `.configu`,
 * then the built-in defaults. Every value is validated here; a bad one throws a ConfigurationError that names where
 * it came from (the environment variable, the flag, or the file and its property), so start-up stops with one
 * clear line instead of failing later on the request path.
 */
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { dirname, isAbsolute, resolve as resolvePath } from 'node:path';
import { ConfigurationError } from '../../core/errors.js';
import { defaultCacheMemoryMb } from '../../core/cache-budget.js';
import { DEFAULT_ENGINE_LIMITS, type EngineLimits } from '../../core/eval.js';
import { getHeapStatistics } from 'node:v8';
import {
  ACCESS_ENV,
  DEFAULT_AUDIT,
  DEFAULT_RATE_LIMIT,
  resolveAccessSettings,
  type AccessSettings,
  type AuditSettings,
  type RateLimitSettings,
} from '../access/access-settings.js';
import { PROXY_SETTINGS, shapeProblem } from './setting-rules.js';

export type TrustProxy = boolean | number | string[];

export interface ServerSettings {
  http: {
    port: number;
    host: string;
    tls: {
      enabled: boolean;
      /** Absolute path of the PEM certificate (chain). */
      cert: string | undefined;
      /** Absolute path of the PEM private key. */
      key: string | undefined;
    };
    /** CORS origins; empty: no CORS headers at all; `["*"]`: any origin. */
    allowedOrigins: string[];
    /** Fastify `trustProxy`: false, true, a hop count, or a list of addresses/CIDRs. */
    trustProxy: TrustProxy;
    /** Longest time from a connection's first byte (or its opening) to the end of the request headers. */
    headersTimeoutMs: number;
    /** Longest time to receive a whole request, headers and body; at least `headersTimeoutMs`. */
    requestTimeoutMs: number;
    /** How long a keep-alive connection may sit idle between requests. */
    idleTimeoutMs: number;
    /**
     * Most connections one client address may hold open at once (per server process); 0: no cap. Undefined: a quarter
     * of what the open-file limit leaves for connections (src/server/connections.ts).
     */
    maxConnectionsPerClient: number | undefined;
  };
  auth: {
    enabled: boolean;
    /** Full access, as before scoped credentials existed. */
    presharedKeys: string[];
  } & AccessSettings;
  /** One line per /export (docs/security.md). */
  audit: AuditSettings;
  /** Requests per subject (off by default). */
  rateLimit: RateLimitSettings;
  /**
   * Request log lines; `probes`: also for the orchestrator's successful health checks (`GET /live`, `GET /ready`
   * answered 2xx), which are left out by default (they come every few seconds and say only "still up"; a failed
   * `/ready` is logged either way, and metrics count every probe).
   */
  log: { enabled: boolean; probes: boolean };
  /** GET /metrics (docs/operations.md). `key`: the bearer key a scraper must present (its own, not an API key). */
  metrics: { enabled: boolean; key: string | undefined };
  docs: {
    enabled: boolean;
    /** When auth is on, serve /docs and /openapi.json without a key. */
    public: boolean;
  };
  limits: {
    /** Largest accepted request body, in bytes. */
    bodyBytes: number;
    /** Most commands in one pipeline. */
    commands: number;
    /** Most keys in one command's schema. */
    keys: number;
    /**
     * Ceiling of the estimated memory of every cache of one server process, in MiB (core/cache-budget.ts). Default: a
     * quarter of the V8 heap limit, at most 128 (defaultCacheMemoryMb).
     */
    cacheMemoryMb: number;
  } & EngineLimits;
  shutdown: {
    /** Longest time between the end of the drain and exit. */
    gracePeriodSeconds: number;
    /**
     * After SIGTERM: how long the server keeps listening and serving, not ready, before it stops accepting connections
     * (load balancers take a few seconds to stop routing to a replica that turned unready). SIGINT skips it.
     */
    drainSeconds: number;
  };
  /** Processes serving the port (node:cluster); 1 runs in-process. */
  workers: number;
  /** Watching for changes (SSE streams and long polls on POST /export; src/server/watch.ts). */
  watch: WatchSettings;
}

export interface WatchSettings {
  /** Most SSE streams plus held long polls one process serves at once; beyond it, 503 with Retry-After. */
  maxWatchers: number;
  /**
   * Most SSE streams plus held long polls one client (credential, JWT subject, preshared key, or address without
   * authentication) holds at once on one process; beyond it, 429 with Retry-After. Never more than `maxWatchers`.
   */
  maxWatchersPerClient: number;
  /** Longest `Prefer: wait=N` honoured, in seconds (a larger N is cut to this). */
  maxWaitSeconds: number;
  /** Interval of the SSE heartbeat comments, in ms. */
  heartbeatMs: number;
  /** Changes arriving within this many ms of the first are evaluated once, together. */
  debounceMs: number;
  /** For a store kind without a change feed, how often a watched pipeline is evaluated again, in ms. */
  pollMs: number;
}

export const DEFAULT_SETTINGS: Readonly<ServerSettings> = Object.freeze({
  http: {
    port: 8080,
    host: '0.0.0.0',
    tls: { enabled: false, cert: undefined, key: undefined },
    allowedOrigins: [],
    trustProxy: false,
    headersTimeoutMs: 10_000,
    requestTimeoutMs: 30_000,
    // Above the 60 s idle timeout of common load balancers, so they never reuse a connection this server is closing.
    idleTimeoutMs: 72_000,
    maxConnectionsPerClient: undefined,
  },
  auth: { enabled: false, presharedKeys: [], credentials: [], jwt: undefined },
  audit: DEFAULT_AUDIT,
  rateLimit: DEFAULT_RATE_LIMIT,
  log: { enabled: true, probes: false },
  metrics: { enabled: true, key: undefined },
  docs: { enabled: true, public: false },
  limits: { bodyBytes: 1024 * 1024, commands: 50, keys: 10_000, cacheMemoryMb: defaultCacheMemoryMb(), ...DEFAULT_ENGINE_LIMITS },
  shutdown: { gracePeriodSeconds: 10, drainSeconds: 5 },
  workers: 0, // 0 = os.availableParallelism(), filled in by resolveSettings
  watch: { maxWatchers: 10_000, maxWatchersPerClient: 100, maxWaitSeconds: 300, heartbeatMs: 15_000, debounceMs: 20, pollMs: 5000 },
}) as ServerSettings;

/** Flags of `cfgu serve` that map to settings (strings as typed; validated here). */
export interface SettingsFlags {
  port?: string;
  host?: string;
  workers?: string;
}

export interface ResolveSettingsInput {
  flags?: SettingsFlags;
  env?: NodeJS.ProcessEnv;
  /** `interface.proxy` of the loaded `.configu` (may be undefined). */
  fileSettings?: unknown;
  /** Path of the `.configu` (for messages and to resolve relative TLS paths). */
  file?: string | undefined;
  /** Folder that relative paths given in the environment resolve against. */
  cwd?: string;
}

/** One place a value came from, for messages. */
export interface Source {
  /** e.g. `CONFIGU_HTTP_PORT`, `--port`, `interface.proxy.http.port` */
  name: string;
  /** the .configu path when the value came from the file */
  file?: string;
  kind: 'flag' | 'env' | 'file';
}

const ENV = {
  port: 'CONFIGU_HTTP_PORT',
  host: 'CONFIGU_HTTP_HOST',
  tlsEnabled: 'CONFIGU_HTTP_TLS_ENABLED',
  tlsCert: 'CONFIGU_HTTP_TLS_CERT',
  tlsKey: 'CONFIGU_HTTP_TLS_KEY',
  allowedOrigins: 'CONFIGU_HTTP_ALLOWED_ORIGINS',
  trustProxy: 'CONFIGU_HTTP_TRUST_PROXY',
  headersTimeout: 'CONFIGU_HTTP_HEADERS_TIMEOUT_MS',
  requestTimeout: 'CONFIGU_HTTP_REQUEST_TIMEOUT_MS',
  idleTimeout: 'CONFIGU_HTTP_IDLE_TIMEOUT_MS',
  maxConnectionsPerClient: 'CONFIGU_HTTP_MAX_CONNECTIONS_PER_CLIENT',
  authEnabled: 'CONFIGU_AUTH_ENABLED',
  presharedKeys: 'CONFIGU_AUTH_PRESHARED_KEYS',
  logEnabled: 'CONFIGU_LOG_ENABLED',
  logProbes: 'CONFIGU_LOG_PROBES',
  metricsEnabled: 'CONFIGU_METRICS_ENABLED',
  metricsKey: 'CONFIGU_METRICS_KEY',
  docsEnabled: 'CONFIGU_DOCS_ENABLED',
  docsPublic: 'CONFIGU_DOCS_PUBLIC',
  bodyBytes: 'CONFIGU_LIMIT_BODY_BYTES',
  commands: 'CONFIGU_LIMIT_COMMANDS',
  keys: 'CONFIGU_LIMIT_KEYS',
  cacheMemoryMb: 'CONFIGU_CACHE_MEMORY_MB',
  setDepth: 'CONFIGU_LIMIT_SET_DEPTH',
  lookups: 'CONFIGU_LIMIT_LOOKUPS',
  templateBytes: 'CONFIGU_LIMIT_TEMPLATE_BYTES',
  templateExpressions: 'CONFIGU_LIMIT_TEMPLATE_EXPRESSIONS',
  valueBytes: 'CONFIGU_LIMIT_VALUE_BYTES',
  outputBytes: 'CONFIGU_LIMIT_OUTPUT_BYTES',
  grace: 'CONFIGU_SHUTDOWN_GRACE_SECONDS',
  drain: 'CONFIGU_SHUTDOWN_DRAIN_SECONDS',
  workers: 'CONFIGU_WORKERS',
  maxWatchers: 'CONFIGU_WATCH_MAX_WATCHERS',
  maxWatchersPerClient: 'CONFIGU_WATCH_MAX_WATCHERS_PER_CLIENT',
  maxWaitSeconds: 'CONFIGU_WATCH_MAX_WAIT_SECONDS',
  heartbeatMs: 'CONFIGU_WATCH_HEARTBEAT_MS',
  debounceMs: 'CONFIGU_WATCH_DEBOUNCE_MS',
  pollMs: 'CONFIGU_WATCH_POLL_MS',
} as const;

/** The environment variables this module reads (documented in docs/server.md). */
export const SETTINGS_ENV_VARS: readonly string[] = [...Object.values(ENV), ...Object.values(ACCESS_ENV)];

export function fail(source: Source, message: string): never {
  if (source.kind === 'file') throw new ConfigurationError(`${source.name}: ${message}`, source.file, source.name);
  if (source.kind === 'env') throw new ConfigurationError(`environment variable ${source.name}: ${message}`, undefined, source.name);
  throw new ConfigurationError(`flag ${source.name}: ${message}`, undefined, source.name);
}

export const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

const TRUE = new Set(['true', '1', 'yes', 'on']);
const FALSE = new Set(['false', '0', 'no', 'off']);

export function toBoolean(raw: unknown, source: Source): boolean {
  if (typeof raw === 'boolean') return raw;
  if (typeof raw === 'string') {
    const s = raw.trim().toLowerCase();
    if (TRUE.has(s)) return true;
    if (FALSE.has(s)) return false;
  }
  return fail(source, `must be true or false, got ${describe(raw)}`);
}

export function toInteger(raw: unknown, source: Source, min: number, max: number): number {
  let n: number | undefined;
  if (typeof raw === 'number') n = raw;
  else if (typeof raw === 'string' && /^\s*\d+\s*$/.test(raw)) n = Number(raw.trim());
  if (n === undefined || !Number.isInteger(n) || n < min || n > max) {
    return fail(source, `must be a whole number from ${min} to ${max}, got ${describe(raw)}`);
  }
  return n;
}

export function toText(raw: unknown, source: Source): string {
  if (typeof raw !== 'string' || raw.trim() === '') return fail(source, `must be a non-empty string, got ${describe(raw)}`);
  return raw.trim();
}

/** A list given as an array (file) or a comma-separated string (env, or file). Empty items are dropped. */
export function toList(raw: unknown, source: Source): string[] {
  if (typeof raw === 'string') return raw.split(',').map((s) => s.trim()).filter(Boolean);
  if (Array.isArray(raw) && raw.every((s) => typeof s === 'string')) return raw.map((s) => s.trim()).filter(Boolean);
  return fail(source, `must be a list of strings or a comma-separated string, got ${describe(raw)}`);
}

/** Describe a bad value without echoing secrets or long text. */
export function describe(raw: unknown): string {
  if (raw === null) return 'null';
  if (Array.isArray(raw)) return 'a list';
  if (typeof raw === 'string') return raw.length > 40 ? `a ${raw.length}-character string` : JSON.stringify(raw);
  if (typeof raw === 'object') return 'an object';
  return String(raw);
}

function toTrustProxy(raw: unknown, source: Source): TrustProxy {
  if (typeof raw === 'boolean') return raw;
  if (typeof raw === 'number') return toInteger(raw, source, 0, 100);
  if (typeof raw === 'string') {
    const s = raw.trim().toLowerCase();
    if (TRUE.has(s) && s !== '1') return true;
    if (FALSE.has(s) && s !== '0') return false;
    if (/^\d+$/.test(s)) return toInteger(s, source, 0, 100);
  }
  const list = toList(raw, source);
  if (!list.length) return false;
  for (const item of list) {
    if (!/^[0-9A-Fa-f:.]+(\/\d{1,3})?$/.test(item) && !['loopback', 'linklocal', 'uniquelocal'].includes(item)) {
      fail(source, `"${item}" is not an address, a CIDR range, or one of loopback, linklocal, uniquelocal`);
    }
  }
  return list;
}

function toOrigins(raw: unknown, source: Source): string[] {
  const list = toList(raw, source);
  for (const origin of list) {
    if (origin === '*') continue;
    let ok = false;
    try {
      const u = new URL(origin);
      ok = (u.protocol === 'http:' || u.protocol === 'https:') && u.origin === origin.replace(/\/$/, '');
    } catch {
      ok = false;
    }
    if (!ok) fail(source, `"${origin}" is not an origin such as https://app.example.com (or *)`);
  }
  if (list.includes('*') && list.length > 1) fail(source, '"*" cannot be combined with other origins');
  return list.map((o) => o.replace(/\/$/, ''));
}

function get(obj: unknown, path: string[]): unknown {
  let cur = obj;
  for (const p of path) {
    if (!isPlainObject(cur)) return undefined;
    cur = cur[p];
  }
  return cur;
}

/**
 * Resolve and validate the settings. Throws ConfigurationError with `.file` (for file settings) and `.property`
 * (the env var, flag or file property) set.
 */
export function resolveSettings(input: ResolveSettingsInput = {}): ServerSettings {
  const flags = input.flags ?? {};
  const env = input.env ?? {};
  const file = input.file;
  const fileSettings = input.fileSettings ?? undefined;
  const cwd = input.cwd ?? process.cwd();
  const fileDir = file ? dirname(file) : cwd;

  if (fileSettings !== undefined && fileSettings !== null) {
    const problem = shapeProblem(PROXY_SETTINGS, fileSettings, 'interface.proxy');
    if (problem) fail({ kind: 'file', name: problem.path, file }, problem.message);
  }

  /** The value of one setting from the first source that has it, with its source. */
  const pick = (flag: keyof SettingsFlags | undefined, envName: string, filePath: string[]): [unknown, Source] | undefined => {
    if (flag && flags[flag] !== undefined) return [flags[flag], { kind: 'flag', name: `--${flag}` }];
    const e = env[envName];
    if (e !== undefined && e !== '') return [e, { kind: 'env', name: envName }];
    const f = get(fileSettings, filePath);
    if (f !== undefined && f !== null) return [f, { kind: 'file', name: `interface.proxy.${filePath.join('.')}`, file }];
    return undefined;
  };
  const read = <T>(
    flag: keyof SettingsFlags | undefined,
    envName: string,
    filePath: string[],
    parse: (raw: unknown, source: Source) => T,
    fallback: T,
  ): T => {
    const hit = pick(flag, envName, filePath);
    return hit ? parse(hit[0], hit[1]) : fallback;
  };
  const d = DEFAULT_SETTINGS;

  const port = read('port', ENV.port, ['http', 'port'], (r, s) => toInteger(r, s, 0, 65535), d.http.port);
  const host = read('host', ENV.host, ['http', 'host'], toText, d.http.host);
  const tlsEnabled = read(undefined, ENV.tlsEnabled, ['http', 'tls', 'enabled'], toBoolean, false);

  /** A TLS file path, resolved against the cwd (env) or the .configu folder (file), and checked readable now. */
  const tlsFile = (envName: string, prop: 'cert' | 'key'): string | undefined => {
    const hit = pick(undefined, envName, ['http', 'tls', prop]);
    if (!hit) return undefined;
    const [raw, source] = hit;
    const text = toText(raw, source);
    const abs = isAbsolute(text) ? text : resolvePath(source.kind === 'file' ? fileDir : cwd, text);
    if (!tlsEnabled) return abs;
    try {
      const pem = readFileSync(abs, 'utf8');
      const marker = prop === 'cert' ? /-----BEGIN CERTIFICATE-----/ : /-----BEGIN [A-Z ]*PRIVATE KEY-----/;
      if (!marker.test(pem)) fail(source, `the file is not a PEM ${prop === 'cert' ? 'certificate' : 'private key'}`);
    } catch (e) {
      if (e instanceof ConfigurationError) throw e;
      fail(source, `cannot read the ${prop === 'cert' ? 'certificate' : 'key'} file (${(e as NodeJS.ErrnoException).code ?? 'error'})`);
    }
    return abs;
  };
  const cert = tlsFile(ENV.tlsCert, 'cert');
  const key = tlsFile(ENV.tlsKey, 'key');
  if (tlsEnabled && (!cert || !key)) {
    const missing = !cert ? 'cert' : 'key';
    const src = pick(undefined, ENV.tlsEnabled, ['http', 'tls', 'enabled'])![1];
    fail(src, `TLS is enabled but no ${missing} file is set (${missing === 'cert' ? ENV.tlsCert : ENV.tlsKey} or interface.proxy.http.tls.${missing})`);
  }

  const allowedOrigins = read(undefined, ENV.allowedOrigins, ['http', 'allowedOrigins'], toOrigins, [] as string[]);
  const trustProxy = read(undefined, ENV.trustProxy, ['http', 'trustProxy'], toTrustProxy, false as TrustProxy);

  // Timeouts cannot be switched off: a client that never finishes its request would hold its connection for ever.
  const timeout = (r: unknown, s: Source) => toInteger(r, s, 10, 3_600_000);
  const headersTimeoutMs = read(undefined, ENV.headersTimeout, ['http', 'headersTimeoutMs'], timeout, d.http.headersTimeoutMs);
  const requestHit = pick(undefined, ENV.requestTimeout, ['http', 'requestTimeoutMs']);
  const requestTimeoutMs = requestHit ? timeout(requestHit[0], requestHit[1]) : Math.max(d.http.requestTimeoutMs, headersTimeoutMs);
  if (requestTimeoutMs < headersTimeoutMs) {
    fail(requestHit![1], `must be at least the headers timeout (${headersTimeoutMs} ms): the request timeout covers the headers too`);
  }
  const idleTimeoutMs = read(undefined, ENV.idleTimeout, ['http', 'idleTimeoutMs'], timeout, d.http.idleTimeoutMs);
  const maxConnectionsPerClient = read(
    undefined,
    ENV.maxConnectionsPerClient,
    ['http', 'maxConnectionsPerClient'],
    (r, s) => toInteger(r, s, 0, 10_000_000),
    d.http.maxConnectionsPerClient as number,
  ) as number | undefined;

  const authEnabled = read(undefined, ENV.authEnabled, ['auth', 'enabled'], toBoolean, false);
  const keysHit = pick(undefined, ENV.presharedKeys, ['auth', 'presharedKeys']);
  const presharedKeys = keysHit ? toList(keysHit[0], keysHit[1]) : [];
  const { access, audit, rateLimit } = resolveAccessSettings(
    (envName, filePath) => pick(undefined, envName, filePath),
    (source) => (source.kind === 'file' ? fileDir : cwd),
  );
  if (authEnabled && presharedKeys.length === 0 && access.credentials.length === 0 && !access.jwt) {
    const src = keysHit?.[1] ?? pick(undefined, ENV.authEnabled, ['auth', 'enabled'])![1];
    fail(
      src,
      `authentication is enabled but no preshared key is set (${ENV.presharedKeys} or interface.proxy.auth.presharedKeys), ` +
        'and no credential (interface.proxy.auth.credentials) or JWT issuer (interface.proxy.auth.jwt) either',
    );
  }
  if (authEnabled) {
    for (const k of presharedKeys) {
      if (/\s/.test(k) || k.length < 8) fail(keysHit![1], 'every preshared key must be at least 8 characters without spaces');
    }
  }

  const logEnabled = read(undefined, ENV.logEnabled, ['log', 'enabled'], toBoolean, true);
  const logProbes = read(undefined, ENV.logProbes, ['log', 'probes'], toBoolean, false);
  const metricsEnabled = read(undefined, ENV.metricsEnabled, ['metrics', 'enabled'], toBoolean, true);
  const metricsKeyHit = pick(undefined, ENV.metricsKey, ['metrics', 'key']);
  let metricsKey: string | undefined;
  if (metricsKeyHit) {
    metricsKey = String(metricsKeyHit[0]);
    if (typeof metricsKeyHit[0] !== 'string' || /\s/.test(metricsKey) || metricsKey.length < 8) {
      fail(metricsKeyHit[1], 'the metrics key must be at least 8 characters without spaces');
    }
  }
  const docsEnabled = read(undefined, ENV.docsEnabled, ['docs', 'enabled'], toBoolean, true);
  const docsPublic = read(undefined, ENV.docsPublic, ['docs', 'public'], toBoolean, false);

  const bodyBytes = read(undefined, ENV.bodyBytes, ['limits', 'bodyBytes'], (r, s) => toInteger(r, s, 1024, 1024 * 1024 * 1024), d.limits.bodyBytes);
  const commands = read(undefined, ENV.commands, ['limits', 'commands'], (r, s) => toInteger(r, s, 1, 100_000), d.limits.commands);
  const keys = read(undefined, ENV.keys, ['limits', 'keys'], (r, s) => toInteger(r, s, 1, 10_000_000), d.limits.keys);
  // The caches' ceiling: above the heap limit it could never hold (the process would die first).
  const heapMb = Math.floor(getHeapStatistics().heap_size_limit / (1024 * 1024));
  const cacheMemoryMb = read(undefined, ENV.cacheMemoryMb, ['limits', 'cacheMemoryMb'], (r, s) => {
    const mb = toInteger(r, s, 1, 1024 * 1024);
    if (mb > heapMb) fail(s, `must be at most the heap limit of this process (${heapMb} MiB; raise it with --max-old-space-size), got ${mb}`);
    return mb;
  }, defaultCacheMemoryMb());
  const limit = (name: keyof EngineLimits, max: number) =>
    read(undefined, ENV[name], ['limits', name], (r, s) => toInteger(r, s, 1, max), d.limits[name]);
  const engineLimits: EngineLimits = {
    setDepth: limit('setDepth', 10_000),
    lookups: limit('lookups', 100_000_000),
    templateBytes: limit('templateBytes', 1024 * 1024 * 1024),
    templateExpressions: limit('templateExpressions', 1_000_000),
    valueBytes: limit('valueBytes', 1024 * 1024 * 1024),
    outputBytes: limit('outputBytes', 1024 * 1024 * 1024),
  };
  const gracePeriodSeconds = read(undefined, ENV.grace, ['shutdown', 'gracePeriodSeconds'], (r, s) => toInteger(r, s, 0, 3600), d.shutdown.gracePeriodSeconds);
  const drainSeconds = read(undefined, ENV.drain, ['shutdown', 'drainSeconds'], (r, s) => toInteger(r, s, 0, 3600), d.shutdown.drainSeconds);
  const workers = read('workers', ENV.workers, ['workers'], (r, s) => toInteger(r, s, 1, 1024), availableParallelism());
  const watchSetting = (name: keyof WatchSettings, min: number, max: number) =>
    read(undefined, ENV[name], ['watch', name], (r, s) => toInteger(r, s, min, max), d.watch[name]);
  const watch: WatchSettings = {
    maxWatchers: watchSetting('maxWatchers', 0, 10_000_000),
    maxWatchersPerClient: watchSetting('maxWatchersPerClient', 1, 10_000_000),
    maxWaitSeconds: watchSetting('maxWaitSeconds', 1, 86_400),
    heartbeatMs: watchSetting('heartbeatMs', 10, 3_600_000),
    debounceMs: watchSetting('debounceMs', 0, 60_000),
    pollMs: watchSetting('pollMs', 10, 3_600_000),
  };

  return {
    http: { port, host, tls: { enabled: tlsEnabled, cert, key }, allowedOrigins, trustProxy, headersTimeoutMs, requestTimeoutMs, idleTimeoutMs, maxConnectionsPerClient },
    auth: { enabled: authEnabled, presharedKeys, ...access },
    audit,
    rateLimit,
    log: { enabled: logEnabled, probes: logProbes },
    metrics: { enabled: metricsEnabled, key: metricsKey },
    docs: { enabled: docsEnabled, public: docsPublic },
    limits: { bodyBytes, commands, keys, cacheMemoryMb, ...engineLimits },
    shutdown: { gracePeriodSeconds, drainSeconds },
    workers,
    watch,
  };
}

type DeepPartial<T> = { [K in keyof T]?: T[K] extends object ? (T[K] extends unknown[] ? T[K] : DeepPartial<T[K]>) : T[K] };
export type SettingsOverrides = DeepPartial<ServerSettings>;

/** Defaults with some values replaced (for tests, the benchmark and embedding); not validated beyond types. */
export function settingsWith(overrides: SettingsOverrides = {}): ServerSettings {
  const d = DEFAULT_SETTINGS;
  const o = overrides;
  return {
    http: {
      port: o.http?.port ?? d.http.port,
      host: o.http?.host ?? d.http.host,
      tls: { ...d.http.tls, ...o.http?.tls },
      allowedOrigins: o.http?.allowedOrigins ?? [],
      trustProxy: o.http?.trustProxy ?? false,
      headersTimeoutMs: o.http?.headersTimeoutMs ?? d.http.headersTimeoutMs,
      requestTimeoutMs: o.http?.requestTimeoutMs ?? Math.max(d.http.requestTimeoutMs, o.http?.headersTimeoutMs ?? 0),
      idleTimeoutMs: o.http?.idleTimeoutMs ?? d.http.idleTimeoutMs,
      maxConnectionsPerClient: o.http?.maxConnectionsPerClient ?? d.http.maxConnectionsPerClient,
    },
    auth: {
      enabled: o.auth?.enabled ?? false,
      presharedKeys: o.auth?.presharedKeys ?? [],
      credentials: (o.auth?.credentials as ServerSettings['auth']['credentials'] | undefined) ?? [],
      jwt: o.auth?.jwt as ServerSettings['auth']['jwt'],
    },
    audit: { ...d.audit, ...o.audit },
    rateLimit: { ...d.rateLimit, ...o.rateLimit },
    log: { ...d.log, ...o.log },
    metrics: { ...d.metrics, ...o.metrics },
    docs: { ...d.docs, ...o.docs },
    limits: { ...d.limits, ...o.limits },
    shutdown: { ...d.shutdown, ...o.shutdown },
    workers: o.workers ?? 1,
    watch: { ...d.watch, ...o.watch },
  };
}
