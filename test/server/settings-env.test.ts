/**
 * Every environment variable the issue names maps to its setting, and beats the same setting under
 * `interface.proxy` in `.configu` (the audit found CONFIGU_DOCS_ENABLED, CONFIGU_DOCS_PUBLIC, CONFIGU_HTTP_HOST and
 * the limit/grace variables untested as variables). One table, one assertion per variable.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { resolveSettings } from '../../src/server/settings.js';

const FILE = '/srv/app/.configu';
const fileSettings = {
  http: { port: 7000, host: '127.0.0.1', allowedOrigins: ['https://file.example.com'], trustProxy: false },
  auth: { enabled: false },
  log: { enabled: true },
  docs: { enabled: true, public: false },
  limits: { bodyBytes: 4096, commands: 2, keys: 3 },
  shutdown: { gracePeriodSeconds: 4 },
  workers: 5,
};

describe('environment variables beat interface.proxy in .configu', () => {
  const cases: Array<[string, string, (s: ReturnType<typeof resolveSettings>) => unknown, unknown]> = [
    ['CONFIGU_HTTP_PORT', '7100', (s) => s.http.port, 7100],
    ['CONFIGU_HTTP_HOST', '::1', (s) => s.http.host, '::1'],
    ['CONFIGU_HTTP_ALLOWED_ORIGINS', 'https://env.example.com', (s) => s.http.allowedOrigins, ['https://env.example.com']],
    ['CONFIGU_HTTP_TRUST_PROXY', 'true', (s) => s.http.trustProxy, true],
    ['CONFIGU_LOG_ENABLED', 'false', (s) => s.log.enabled, false],
    ['CONFIGU_DOCS_ENABLED', 'false', (s) => s.docs.enabled, false],
    ['CONFIGU_DOCS_PUBLIC', 'true', (s) => s.docs.public, true],
    ['CONFIGU_LIMIT_BODY_BYTES', '2048', (s) => s.limits.bodyBytes, 2048],
    ['CONFIGU_LIMIT_COMMANDS', '9', (s) => s.limits.commands, 9],
    ['CONFIGU_LIMIT_KEYS', '11', (s) => s.limits.keys, 11],
    ['CONFIGU_SHUTDOWN_GRACE_SECONDS', '3', (s) => s.shutdown.gracePeriodSeconds, 3],
    ['CONFIGU_WORKERS', '1', (s) => s.workers, 1],
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
