/**
 * Proxy settings: one typed object resolved once at start-up from three sources, highest first:
 *   1. command-line flags (`--port`, `--host`, `--workers`),
 *   2. environment variables (`CONFIGU_HTTP_PORT`, ...),
 *   3. the `interface.proxy` section of `.configu`,
 * then the built-in defaults. Every value is validated at start-up; a bad one throws a ConfigurationError that names
 * where it came from (the environment variable, the flag, or the file and its property), so start-up stops with one
 * clear line instead of failing later on the request path.
 *
 * This module holds the settings' shape, their defaults and `settingsWith`; ./resolve-settings.ts reads and checks
 * them, with the parsers of ./setting-values.ts.
 */
import { defaultCacheMemoryMb } from '../../core/cache-budget.js';
import { DEFAULT_ENGINE_LIMITS, type EngineLimits } from '../../core/eval.js';
import { DEFAULT_AUDIT, DEFAULT_RATE_LIMIT, type AccessSettings, type AuditSettings, type RateLimitSettings } from '../access/access-settings.js';

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
     * of what the open-file limit leaves for connections (src/server/process/connections.ts).
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
  /**
   * The browser console at /console (its files from dist/console; docs/server.md, "The console"). Without
   * authentication it is served to loopback clients only.
   */
  console: { enabled: boolean };
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
    /** Most sets (columns) of one POST /matrix. */
    matrixSets: number;
    /** Most cells (sets times keys) of one POST /matrix. */
    matrixCells: number;
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
  /** Watching for changes (SSE streams and long polls on POST /export; src/server/watch/). */
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
  console: { enabled: true },
  limits: { bodyBytes: 1024 * 1024, commands: 50, keys: 10_000, cacheMemoryMb: defaultCacheMemoryMb(), matrixSets: 1000, matrixCells: 100_000, ...DEFAULT_ENGINE_LIMITS },
  shutdown: { gracePeriodSeconds: 10, drainSeconds: 5 },
  workers: 0, // 0 = os.availableParallelism(), filled in by resolveSettings
  watch: { maxWatchers: 10_000, maxWatchersPerClient: 100, maxWaitSeconds: 300, heartbeatMs: 15_000, debounceMs: 20, pollMs: 5000 },
}) as ServerSettings;

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
    console: { ...d.console, ...o.console },
    limits: { ...d.limits, ...o.limits },
    shutdown: { ...d.shutdown, ...o.shutdown },
    workers: o.workers ?? 1,
    watch: { ...d.watch, ...o.watch },
  };
}
