/**
 * Reading the proxy settings (./settings.ts) from their three sources, highest first: command-line flags, environment
 * variables, the `interface.proxy` section of `.configu`; then the defaults. Every value is checked here, by the
 * parsers of ./setting-values.ts, and a bad one stops start-up with a ConfigurationError naming its source. The
 * sections are read in a fixed order (http, auth, log, metrics, docs, console, limits, shutdown, workers, watch): with
 * several bad values, the first of them in that order is the one reported.
 */
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { dirname, isAbsolute, resolve as resolvePath } from 'node:path';
import { getHeapStatistics } from 'node:v8';
import { ConfigurationError } from '../../core/errors.js';
import { defaultCacheMemoryMb } from '../../core/cache-budget.js';
import type { EngineLimits } from '../../core/eval.js';
import { ACCESS_ENV, resolveAccessSettings } from '../access/access-settings.js';
import { PROXY_SETTINGS, shapeProblem } from './setting-rules.js';
import { DEFAULT_SETTINGS, type ServerSettings, type TrustProxy, type WatchSettings } from './settings.js';
import { fail, get, toBoolean, toInteger, toList, toOrigins, toText, toTrustProxy, type Source } from './setting-values.js';

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
  consoleEnabled: 'CONFIGU_CONSOLE_ENABLED',
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
  matrixSets: 'CONFIGU_LIMIT_MATRIX_SETS',
  matrixCells: 'CONFIGU_LIMIT_MATRIX_CELLS',
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

/** One setting's raw value and source, from the first source that has it. */
type Pick = (flag: keyof SettingsFlags | undefined, envName: string, filePath: string[]) => [unknown, Source] | undefined;

/** The sources of one resolution, and where relative paths resolve (the `.configu` folder, or the cwd). */
interface Reader {
  pick: Pick;
  read<T>(flag: keyof SettingsFlags | undefined, envName: string, filePath: string[], parse: (raw: unknown, source: Source) => T, fallback: T): T;
  fileDir: string;
  cwd: string;
}

function readerOf(input: ResolveSettingsInput): Reader {
  const flags = input.flags ?? {};
  const env = input.env ?? {};
  const file = input.file;
  const fileSettings = input.fileSettings ?? undefined;
  const cwd = input.cwd ?? process.cwd();
  const pick: Pick = (flag, envName, filePath) => {
    if (flag && flags[flag] !== undefined) return [flags[flag], { kind: 'flag', name: `--${flag}` }];
    const e = env[envName];
    if (e !== undefined && e !== '') return [e, { kind: 'env', name: envName }];
    const f = get(fileSettings, filePath);
    if (f !== undefined && f !== null) return [f, { kind: 'file', name: `interface.proxy.${filePath.join('.')}`, file }];
    return undefined;
  };
  return {
    pick,
    read(flag, envName, filePath, parse, fallback) {
      const hit = pick(flag, envName, filePath);
      return hit ? parse(hit[0], hit[1]) : fallback;
    },
    fileDir: file ? dirname(file) : cwd,
    cwd,
  };
}

/**
 * Resolve and validate the settings. Throws ConfigurationError with `.file` (for file settings) and `.property`
 * (the env var, flag or file property) set.
 */
export function resolveSettings(input: ResolveSettingsInput = {}): ServerSettings {
  const fileSettings = input.fileSettings ?? undefined;
  if (fileSettings !== undefined && fileSettings !== null) {
    const problem = shapeProblem(PROXY_SETTINGS, fileSettings, 'interface.proxy');
    if (problem) fail({ kind: 'file', name: problem.path, file: input.file }, problem.message);
  }
  const r = readerOf(input);
  const d = DEFAULT_SETTINGS;
  const http = readHttp(r);
  const { auth, audit, rateLimit } = readAuth(r);
  const { log, metrics, docs, console } = readOutputs(r);
  const limits = readLimits(r);
  const gracePeriodSeconds = r.read(undefined, ENV.grace, ['shutdown', 'gracePeriodSeconds'], (v, s) => toInteger(v, s, 0, 3600), d.shutdown.gracePeriodSeconds);
  const drainSeconds = r.read(undefined, ENV.drain, ['shutdown', 'drainSeconds'], (v, s) => toInteger(v, s, 0, 3600), d.shutdown.drainSeconds);
  const workers = r.read('workers', ENV.workers, ['workers'], (v, s) => toInteger(v, s, 1, 1024), availableParallelism());
  const watch = readWatch(r);
  return { http, auth, audit, rateLimit, log, metrics, docs, console, limits, shutdown: { gracePeriodSeconds, drainSeconds }, workers, watch };
}

function readHttp(r: Reader): ServerSettings['http'] {
  const d = DEFAULT_SETTINGS;
  const port = r.read('port', ENV.port, ['http', 'port'], (v, s) => toInteger(v, s, 0, 65535), d.http.port);
  const host = r.read('host', ENV.host, ['http', 'host'], toText, d.http.host);
  const tls = readTls(r);
  const allowedOrigins = r.read(undefined, ENV.allowedOrigins, ['http', 'allowedOrigins'], toOrigins, [] as string[]);
  const trustProxy = r.read(undefined, ENV.trustProxy, ['http', 'trustProxy'], toTrustProxy, false as TrustProxy);

  // Timeouts cannot be switched off: a client that never finishes its request would hold its connection for ever.
  const timeout = (v: unknown, s: Source) => toInteger(v, s, 10, 3_600_000);
  const headersTimeoutMs = r.read(undefined, ENV.headersTimeout, ['http', 'headersTimeoutMs'], timeout, d.http.headersTimeoutMs);
  const requestHit = r.pick(undefined, ENV.requestTimeout, ['http', 'requestTimeoutMs']);
  const requestTimeoutMs = requestHit ? timeout(requestHit[0], requestHit[1]) : Math.max(d.http.requestTimeoutMs, headersTimeoutMs);
  if (requestTimeoutMs < headersTimeoutMs) {
    fail(requestHit![1], `must be at least the headers timeout (${headersTimeoutMs} ms): the request timeout covers the headers too`);
  }
  const idleTimeoutMs = r.read(undefined, ENV.idleTimeout, ['http', 'idleTimeoutMs'], timeout, d.http.idleTimeoutMs);
  const maxConnectionsPerClient = r.read(
    undefined,
    ENV.maxConnectionsPerClient,
    ['http', 'maxConnectionsPerClient'],
    (v, s) => toInteger(v, s, 0, 10_000_000),
    d.http.maxConnectionsPerClient as number,
  ) as number | undefined;
  return { port, host, tls, allowedOrigins, trustProxy, headersTimeoutMs, requestTimeoutMs, idleTimeoutMs, maxConnectionsPerClient };
}

function readTls(r: Reader): ServerSettings['http']['tls'] {
  const enabled = r.read(undefined, ENV.tlsEnabled, ['http', 'tls', 'enabled'], toBoolean, false);

  /** A TLS file path, resolved against the cwd (env) or the .configu folder (file), and checked readable now. */
  const tlsFile = (envName: string, prop: 'cert' | 'key'): string | undefined => {
    const hit = r.pick(undefined, envName, ['http', 'tls', prop]);
    if (!hit) return undefined;
    const [raw, source] = hit;
    const text = toText(raw, source);
    const abs = isAbsolute(text) ? text : resolvePath(source.kind === 'file' ? r.fileDir : r.cwd, text);
    if (!enabled) return abs;
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
  if (enabled && (!cert || !key)) {
    const missing = !cert ? 'cert' : 'key';
    const src = r.pick(undefined, ENV.tlsEnabled, ['http', 'tls', 'enabled'])![1];
    fail(src, `TLS is enabled but no ${missing} file is set (${missing === 'cert' ? ENV.tlsCert : ENV.tlsKey} or interface.proxy.http.tls.${missing})`);
  }
  return { enabled, cert, key };
}

type Sections<K extends keyof ServerSettings> = { [P in K]: ServerSettings[P] };

function readAuth(r: Reader): Sections<'auth' | 'audit' | 'rateLimit'> {
  const authEnabled = r.read(undefined, ENV.authEnabled, ['auth', 'enabled'], toBoolean, false);
  const keysHit = r.pick(undefined, ENV.presharedKeys, ['auth', 'presharedKeys']);
  const presharedKeys = keysHit ? toList(keysHit[0], keysHit[1]) : [];
  const { access, audit, rateLimit } = resolveAccessSettings(
    (envName, filePath) => r.pick(undefined, envName, filePath),
    (source) => (source.kind === 'file' ? r.fileDir : r.cwd),
  );
  if (authEnabled && presharedKeys.length === 0 && access.credentials.length === 0 && !access.jwt) {
    const src = keysHit?.[1] ?? r.pick(undefined, ENV.authEnabled, ['auth', 'enabled'])![1];
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
  return { auth: { enabled: authEnabled, presharedKeys, ...access }, audit, rateLimit };
}

/** Request lines, metrics, the API docs and the console. */
function readOutputs(r: Reader): Sections<'log' | 'metrics' | 'docs' | 'console'> {
  const logEnabled = r.read(undefined, ENV.logEnabled, ['log', 'enabled'], toBoolean, true);
  const logProbes = r.read(undefined, ENV.logProbes, ['log', 'probes'], toBoolean, false);
  const metricsEnabled = r.read(undefined, ENV.metricsEnabled, ['metrics', 'enabled'], toBoolean, true);
  const metricsKeyHit = r.pick(undefined, ENV.metricsKey, ['metrics', 'key']);
  let metricsKey: string | undefined;
  if (metricsKeyHit) {
    metricsKey = String(metricsKeyHit[0]);
    if (typeof metricsKeyHit[0] !== 'string' || /\s/.test(metricsKey) || metricsKey.length < 8) {
      fail(metricsKeyHit[1], 'the metrics key must be at least 8 characters without spaces');
    }
  }
  const docsEnabled = r.read(undefined, ENV.docsEnabled, ['docs', 'enabled'], toBoolean, true);
  const docsPublic = r.read(undefined, ENV.docsPublic, ['docs', 'public'], toBoolean, false);
  const consoleEnabled = r.read(undefined, ENV.consoleEnabled, ['console', 'enabled'], toBoolean, true);
  return {
    log: { enabled: logEnabled, probes: logProbes },
    metrics: { enabled: metricsEnabled, key: metricsKey },
    docs: { enabled: docsEnabled, public: docsPublic },
    console: { enabled: consoleEnabled },
  };
}

function readLimits(r: Reader): ServerSettings['limits'] {
  const d = DEFAULT_SETTINGS;
  const bodyBytes = r.read(undefined, ENV.bodyBytes, ['limits', 'bodyBytes'], (v, s) => toInteger(v, s, 1024, 1024 * 1024 * 1024), d.limits.bodyBytes);
  const commands = r.read(undefined, ENV.commands, ['limits', 'commands'], (v, s) => toInteger(v, s, 1, 100_000), d.limits.commands);
  const keys = r.read(undefined, ENV.keys, ['limits', 'keys'], (v, s) => toInteger(v, s, 1, 10_000_000), d.limits.keys);
  // The caches' ceiling: above the heap limit it could never hold (the process would die first).
  const heapMb = Math.floor(getHeapStatistics().heap_size_limit / (1024 * 1024));
  const cacheMemoryMb = r.read(undefined, ENV.cacheMemoryMb, ['limits', 'cacheMemoryMb'], (v, s) => {
    const mb = toInteger(v, s, 1, 1024 * 1024);
    if (mb > heapMb) fail(s, `must be at most the heap limit of this process (${heapMb} MiB; raise it with --max-old-space-size), got ${mb}`);
    return mb;
  }, defaultCacheMemoryMb());
  const limit = (name: keyof EngineLimits, max: number) =>
    r.read(undefined, ENV[name], ['limits', name], (v, s) => toInteger(v, s, 1, max), d.limits[name]);
  const engineLimits: EngineLimits = {
    setDepth: limit('setDepth', 10_000),
    lookups: limit('lookups', 100_000_000),
    templateBytes: limit('templateBytes', 1024 * 1024 * 1024),
    templateExpressions: limit('templateExpressions', 1_000_000),
    valueBytes: limit('valueBytes', 1024 * 1024 * 1024),
    outputBytes: limit('outputBytes', 1024 * 1024 * 1024),
  };
  const matrixSets = r.read(undefined, ENV.matrixSets, ['limits', 'matrixSets'], (v, s) => toInteger(v, s, 1, 1_000_000), d.limits.matrixSets);
  const matrixCells = r.read(undefined, ENV.matrixCells, ['limits', 'matrixCells'], (v, s) => toInteger(v, s, 1, 100_000_000), d.limits.matrixCells);
  return { bodyBytes, commands, keys, cacheMemoryMb, matrixSets, matrixCells, ...engineLimits };
}

function readWatch(r: Reader): WatchSettings {
  const d = DEFAULT_SETTINGS;
  const watchSetting = (name: keyof WatchSettings, min: number, max: number) =>
    r.read(undefined, ENV[name], ['watch', name], (v, s) => toInteger(v, s, min, max), d.watch[name]);
  return {
    maxWatchers: watchSetting('maxWatchers', 0, 10_000_000),
    maxWatchersPerClient: watchSetting('maxWatchersPerClient', 1, 10_000_000),
    maxWaitSeconds: watchSetting('maxWaitSeconds', 1, 86_400),
    heartbeatMs: watchSetting('heartbeatMs', 10, 3_600_000),
    debounceMs: watchSetting('debounceMs', 0, 60_000),
    pollMs: watchSetting('pollMs', 10, 3_600_000),
  };
}
