/**
 * Every environment variable the issue names maps to its setting, and beats the same setting under
 * `interface.proxy` in `.configu` (the audit found CONFIGU_DOCS_ENABLED, CONFIGU_DOCS_PUBLIC, CONFIGU_HTTP_HOST and
 * the limit/grace variables untested as variables). One table, one assertion per variable.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigurationError } from '../../src/core/errors.js';
import { resolveSettings } from '../../src/server/process/resolve-settings.js';

const FILE = '/srv/app/.configu';
const fileSettings = {
  http: {
    port: 7000,
    host: '127.0.0.1',
    allowedOrigins: ['https://file.example.com'],
    trustProxy: false,
    headersTimeoutMs: 5000,
    requestTimeoutMs: 20_000,
    idleTimeoutMs: 9000,
    maxConnectionsPerClient: 50,
  },
  auth: { enabled: false },
  log: { enabled: true, probes: false },
  metrics: { enabled: true, key: 'file-metrics-key-123' },
  docs: { enabled: true, public: false },
  console: { enabled: true },
  limits: { bodyBytes: 4096, commands: 2, keys: 3, setDepth: 4, lookups: 5, templateBytes: 6, templateExpressions: 7, valueBytes: 8, outputBytes: 9, matrixSets: 10, matrixCells: 20 },
  shutdown: { gracePeriodSeconds: 4, drainSeconds: 8 },
  workers: 5,
};

describe('environment variables beat interface.proxy in .configu', () => {
  const cases: Array<[string, string, (s: ReturnType<typeof resolveSettings>) => unknown, unknown]> = [
    ['CONFIGU_HTTP_PORT', '7100', (s) => s.http.port, 7100],
    ['CONFIGU_HTTP_HOST', '::1', (s) => s.http.host, '::1'],
    ['CONFIGU_HTTP_ALLOWED_ORIGINS', 'https://env.example.com', (s) => s.http.allowedOrigins, ['https://env.example.com']],
    ['CONFIGU_HTTP_TRUST_PROXY', 'true', (s) => s.http.trustProxy, true],
    ['CONFIGU_HTTP_HEADERS_TIMEOUT_MS', '2500', (s) => s.http.headersTimeoutMs, 2500],
    ['CONFIGU_HTTP_REQUEST_TIMEOUT_MS', '45000', (s) => s.http.requestTimeoutMs, 45_000],
    ['CONFIGU_HTTP_IDLE_TIMEOUT_MS', '65000', (s) => s.http.idleTimeoutMs, 65_000],
    ['CONFIGU_HTTP_MAX_CONNECTIONS_PER_CLIENT', '0', (s) => s.http.maxConnectionsPerClient, 0],
    ['CONFIGU_LOG_ENABLED', 'false', (s) => s.log.enabled, false],
    ['CONFIGU_METRICS_ENABLED', 'false', (s) => s.metrics.enabled, false],
    ['CONFIGU_METRICS_KEY', 'env-metrics-key-456', (s) => s.metrics.key, 'env-metrics-key-456'],
    ['CONFIGU_DOCS_ENABLED', 'false', (s) => s.docs.enabled, false],
    ['CONFIGU_DOCS_PUBLIC', 'true', (s) => s.docs.public, true],
    ['CONFIGU_CONSOLE_ENABLED', 'false', (s) => s.console.enabled, false],
    ['CONFIGU_LIMIT_BODY_BYTES', '2048', (s) => s.limits.bodyBytes, 2048],
    ['CONFIGU_LIMIT_COMMANDS', '9', (s) => s.limits.commands, 9],
    ['CONFIGU_LIMIT_KEYS', '11', (s) => s.limits.keys, 11],
    ['CONFIGU_LIMIT_SET_DEPTH', '12', (s) => s.limits.setDepth, 12],
    ['CONFIGU_LIMIT_LOOKUPS', '13', (s) => s.limits.lookups, 13],
    ['CONFIGU_LIMIT_TEMPLATE_BYTES', '14', (s) => s.limits.templateBytes, 14],
    ['CONFIGU_LIMIT_TEMPLATE_EXPRESSIONS', '15', (s) => s.limits.templateExpressions, 15],
    ['CONFIGU_LIMIT_VALUE_BYTES', '16', (s) => s.limits.valueBytes, 16],
    ['CONFIGU_LIMIT_OUTPUT_BYTES', '17', (s) => s.limits.outputBytes, 17],
    ['CONFIGU_LIMIT_MATRIX_SETS', '18', (s) => s.limits.matrixSets, 18],
    ['CONFIGU_LIMIT_MATRIX_CELLS', '19', (s) => s.limits.matrixCells, 19],
    ['CONFIGU_SHUTDOWN_GRACE_SECONDS', '3', (s) => s.shutdown.gracePeriodSeconds, 3],
    ['CONFIGU_SHUTDOWN_DRAIN_SECONDS', '0', (s) => s.shutdown.drainSeconds, 0],
    ['CONFIGU_WORKERS', '1', (s) => s.workers, 1],
    ['CONFIGU_WATCH_MAX_WATCHERS', '7', (s) => s.watch.maxWatchers, 7],
    ['CONFIGU_WATCH_MAX_WATCHERS_PER_CLIENT', '3', (s) => s.watch.maxWatchersPerClient, 3],
    ['CONFIGU_WATCH_MAX_WAIT_SECONDS', '30', (s) => s.watch.maxWaitSeconds, 30],
    ['CONFIGU_WATCH_HEARTBEAT_MS', '500', (s) => s.watch.heartbeatMs, 500],
    ['CONFIGU_WATCH_DEBOUNCE_MS', '5', (s) => s.watch.debounceMs, 5],
    ['CONFIGU_WATCH_POLL_MS', '900', (s) => s.watch.pollMs, 900],
  ];
  for (const [name, value, pick, expected] of cases) {
    test(name, () => {
      assert.notDeepEqual(pick(resolveSettings({ fileSettings, file: FILE })), expected, 'the file says otherwise');
      assert.deepEqual(pick(resolveSettings({ fileSettings, file: FILE, env: { [name]: value } })), expected);
    });
  }

  test('CONFIGU_AUTH_ENABLED with CONFIGU_AUTH_PRESHARED_KEYS (comma-separated)', () => {
    const s = resolveSettings({ fileSettings, file: FILE, env: { CONFIGU_AUTH_ENABLED: 'true', CONFIGU_AUTH_PRESHARED_KEYS: 'first-key-123,second-key-456' } });
    assert.equal(s.auth.enabled, true);
    assert.deepEqual(s.auth.presharedKeys, ['first-key-123', 'second-key-456']);
  });

  test('flags beat the environment: --port, --host, --workers', () => {
    const s = resolveSettings({ fileSettings, file: FILE, env: { CONFIGU_HTTP_PORT: '7100', CONFIGU_HTTP_HOST: '::1', CONFIGU_WORKERS: '3' }, flags: { port: '7200', host: '0.0.0.0', workers: '2' } });
    assert.deepEqual([s.http.port, s.http.host, s.workers], [7200, '0.0.0.0', 2]);
  });
});

describe('the timeouts', () => {
  test('the file sets them (as numbers or as rendered strings)', () => {
    const s = resolveSettings({ fileSettings: { http: { headersTimeoutMs: '3000', requestTimeoutMs: 4000, idleTimeoutMs: 5000 } }, file: FILE });
    assert.deepEqual([s.http.headersTimeoutMs, s.http.requestTimeoutMs, s.http.idleTimeoutMs], [3000, 4000, 5000]);
  });

  test('a headers timeout above the default request timeout raises the request timeout with it', () => {
    const s = resolveSettings({ env: { CONFIGU_HTTP_HEADERS_TIMEOUT_MS: '40000' } });
    assert.deepEqual([s.http.headersTimeoutMs, s.http.requestTimeoutMs], [40_000, 40_000]);
  });

  const refused: Array<[Record<string, string>, string, RegExp]> = [
    [{ CONFIGU_HTTP_HEADERS_TIMEOUT_MS: '0' }, 'CONFIGU_HTTP_HEADERS_TIMEOUT_MS', /^environment variable CONFIGU_HTTP_HEADERS_TIMEOUT_MS: must be a whole number from 10 to 3600000, got "0"$/],
    [{ CONFIGU_HTTP_IDLE_TIMEOUT_MS: 'soon' }, 'CONFIGU_HTTP_IDLE_TIMEOUT_MS', /^environment variable CONFIGU_HTTP_IDLE_TIMEOUT_MS: must be a whole number from 10 to 3600000, got "soon"$/],
    [
      { CONFIGU_HTTP_HEADERS_TIMEOUT_MS: '5000', CONFIGU_HTTP_REQUEST_TIMEOUT_MS: '1000' },
      'CONFIGU_HTTP_REQUEST_TIMEOUT_MS',
      /^environment variable CONFIGU_HTTP_REQUEST_TIMEOUT_MS: must be at least the headers timeout \(5000 ms\): the request timeout covers the headers too$/,
    ],
  ];
  for (const [env, property, message] of refused) {
    test(`refused: ${JSON.stringify(env)}`, () => {
      assert.throws(
        () => resolveSettings({ env }),
        (e: unknown) => {
          assert.ok(e instanceof ConfigurationError);
          assert.equal(e.property, property);
          assert.match(e.message, message);
          return true;
        },
      );
    });
  }
});
