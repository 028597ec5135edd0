/** Settings: precedence (flags > env > .configu > defaults) and validation with messages naming the source. */
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { ConfigurationError } from '../../src/core/errors.js';
import { resolveSettings } from '../../src/server/process/resolve-settings.js';
import { removeTempDirs, tempDir } from './helpers.js';
import { defaultCacheMemoryMb } from '../../src/core/cache-budget.js';

after(removeTempDirs);

const FILE = '/srv/app/.configu';

function fails(input: Parameters<typeof resolveSettings>[0], property: string, message: RegExp, file?: string): void {
  assert.throws(
    () => resolveSettings(input),
    (e: unknown) => {
      assert.ok(e instanceof ConfigurationError, String(e));
      assert.equal(e.property, property);
      assert.equal(e.file, file);
      assert.match(e.message, message);
      assert.doesNotMatch(e.message, /\n/);
      return true;
    },
  );
}

describe('resolveSettings', () => {
  test('defaults', () => {
    const s = resolveSettings({});
    assert.deepEqual(s, {
      http: {
        port: 8080,
        host: '0.0.0.0',
        tls: { enabled: false, cert: undefined, key: undefined },
        allowedOrigins: [],
        trustProxy: false,
        headersTimeoutMs: 10_000,
        requestTimeoutMs: 30_000,
        idleTimeoutMs: 72_000,
        maxConnectionsPerClient: undefined,
      },
      auth: { enabled: false, presharedKeys: [], credentials: [], jwt: undefined },
      audit: { enabled: true, file: undefined },
      rateLimit: { enabled: false, max: 600, windowSeconds: 60, redisUrl: undefined, redisPrefix: 'cfgu:rate-limit:' },
      log: { enabled: true, probes: false },
      metrics: { enabled: true, key: undefined },
      docs: { enabled: true, public: false },
      console: { enabled: true },
      limits: {
        bodyBytes: 1048576,
        commands: 50,
        keys: 10000,
        // A quarter of this process's heap limit, at most 256 MiB (test/server/cache-memory.test.ts).
        cacheMemoryMb: defaultCacheMemoryMb(),
        matrixSets: 1000,
        matrixCells: 100000,
        setDepth: 32,
        lookups: 250000,
        templateBytes: 65536,
        templateExpressions: 256,
        valueBytes: 1048576,
        outputBytes: 4194304,
      },
      shutdown: { gracePeriodSeconds: 10, drainSeconds: 5 },
      workers: availableParallelism(),
      watch: { maxWatchers: 10_000, maxWatchersPerClient: 100, maxWaitSeconds: 300, heartbeatMs: 15_000, debounceMs: 20, pollMs: 5000 },
    });
  });

  test('flags beat env, env beats the file, the file beats defaults', () => {
    const fileSettings = { http: { port: 7000, host: '127.0.0.1' }, workers: 3, limits: { commands: 5, keys: 7 }, log: { enabled: false } };
    let s = resolveSettings({ fileSettings, file: FILE });
    assert.equal(s.http.port, 7000);
    assert.equal(s.http.host, '127.0.0.1');
    assert.equal(s.workers, 3);
    assert.equal(s.limits.commands, 5);
    assert.equal(s.log.enabled, false);
    s = resolveSettings({ fileSettings, file: FILE, env: { CONFIGU_HTTP_PORT: '7100', CONFIGU_WORKERS: '2', CONFIGU_LIMIT_COMMANDS: '6', CONFIGU_LOG_ENABLED: 'true' } });
    assert.equal(s.http.port, 7100);
    assert.equal(s.workers, 2);
    assert.equal(s.limits.commands, 6);
    assert.equal(s.limits.keys, 7);
    assert.equal(s.log.enabled, true);
    assert.equal(s.log.probes, false);
    assert.equal(resolveSettings({ fileSettings: { log: { probes: true } }, file: FILE }).log.probes, true);
    assert.equal(resolveSettings({ fileSettings: { log: { probes: true } }, file: FILE, env: { CONFIGU_LOG_PROBES: 'false' } }).log.probes, false);
    assert.equal(resolveSettings({ file: FILE, env: { CONFIGU_LOG_PROBES: 'true' } }).log.probes, true);
    s = resolveSettings({ fileSettings, file: FILE, env: { CONFIGU_HTTP_PORT: '7100', CONFIGU_WORKERS: '2' }, flags: { port: '7200', workers: '1', host: '::' } });
    assert.equal(s.http.port, 7200);
    assert.equal(s.workers, 1);
    assert.equal(s.http.host, '::');
  });

  test('file values rendered from the environment may be strings', () => {
    const s = resolveSettings({
      file: FILE,
      fileSettings: { http: { port: '9000', trustProxy: 'true' }, auth: { enabled: 'true', presharedKeys: 'key-one-12345,key-two-12345' } },
    });
    assert.equal(s.http.port, 9000);
    assert.equal(s.http.trustProxy, true);
    assert.deepEqual(s.auth.presharedKeys, ['key-one-12345', 'key-two-12345']);
  });

  test('lists: keys, origins, trust proxy', () => {
    const s = resolveSettings({
      env: {
        CONFIGU_AUTH_ENABLED: 'yes',
        CONFIGU_AUTH_PRESHARED_KEYS: ' first-key-1234 , second-key-1234 ,',
        CONFIGU_HTTP_ALLOWED_ORIGINS: 'https://a.example.com, http://localhost:3000',
        CONFIGU_HTTP_TRUST_PROXY: '10.0.0.0/8,loopback',
      },
    });
    assert.deepEqual(s.auth, { enabled: true, presharedKeys: ['first-key-1234', 'second-key-1234'], credentials: [], jwt: undefined });
    assert.deepEqual(s.http.allowedOrigins, ['https://a.example.com', 'http://localhost:3000']);
    assert.deepEqual(s.http.trustProxy, ['10.0.0.0/8', 'loopback']);
    assert.equal(resolveSettings({ env: { CONFIGU_HTTP_TRUST_PROXY: '2' } }).http.trustProxy, 2);
    assert.deepEqual(resolveSettings({ env: { CONFIGU_HTTP_ALLOWED_ORIGINS: '*' } }).http.allowedOrigins, ['*']);
  });

  test('an unknown property anywhere under interface.proxy names itself, the closest known name and what is allowed there', () => {
    const hash = 'a'.repeat(64);
    const cases: Array<[unknown, string, string]> = [
      [{ http: { tls: { enabeld: true } } }, 'interface.proxy.http.tls.enabeld', 'unknown property "enabeld" (did you mean "enabled"? allowed here: enabled, cert, key)'],
      [{ auth: { jwt: { isuer: 'x' } } }, 'interface.proxy.auth.jwt.isuer', 'unknown property "isuer" (did you mean "issuer"? allowed here: jwksUrl, jwksFile, issuer, audience, algorithms, clockSkewSeconds, jwksCooldownSeconds, jwksMaxAgeSeconds, jwksMaxBytes, jwksMaxKeys, cacheSize, grants)'],
      [
        { auth: { credentials: [{ name: 'a', sha256: hash, stores: ['s'], sets: [''] }, { name: 'b', sha256: hash, stores: ['s'], sets: [''], lables: ['x'] }] } },
        'interface.proxy.auth.credentials[1].lables',
        'unknown property "lables" (did you mean "labels"? allowed here: name, sha256, stores, sets, labels, keys, metrics, write, breaking)',
      ],
      [{ watch: { extra: 1 } }, 'interface.proxy.watch.extra', 'unknown property "extra" (allowed here: maxWatchers, maxWatchersPerClient, maxWaitSeconds, heartbeatMs, debounceMs, pollMs)'],
      [{ limits: 5 }, 'interface.proxy.limits', 'must be an object'],
      [{ auth: { credentials: 'x' } }, 'interface.proxy.auth.credentials', 'must be a list of credentials ({ name, sha256, stores, sets })'],
      [{ auth: { jwt: { grants: ['x'] } } }, 'interface.proxy.auth.jwt.grants[0]', 'must be an object with claim, value, stores and sets'],
    ];
    for (const [fileSettings, property, message] of cases) {
      fails({ file: FILE, fileSettings }, property, new RegExp(`^${(property + ': ' + message).replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`), FILE);
    }
    // Absent or null sections are all defaults.
    assert.equal(resolveSettings({ file: FILE, fileSettings: { http: null, auth: { jwt: null, credentials: null } } }).http.port, 8080);
  });

  test('bad values stop start-up naming the variable, flag or file property', () => {
    fails({ env: { CONFIGU_HTTP_PORT: '99999' } }, 'CONFIGU_HTTP_PORT', /^environment variable CONFIGU_HTTP_PORT: must be a whole number from 0 to 65535, got "99999"$/);
    fails({ env: { CONFIGU_HTTP_PORT: 'http' } }, 'CONFIGU_HTTP_PORT', /got "http"/);
    fails({ flags: { port: '-1' } }, '--port', /^flag --port: must be a whole number/);
    fails({ flags: { workers: '0' } }, '--workers', /from 1 to 1024/);
    fails({ file: FILE, fileSettings: { http: { port: 'abc' } } }, 'interface.proxy.http.port', /^interface\.proxy\.http\.port: must be a whole number/, FILE);
    fails({ file: FILE, fileSettings: { http: { prot: 1 } } }, 'interface.proxy.http.prot', /^interface\.proxy\.http\.prot: unknown property "prot" \(did you mean "port"\? allowed here: port, host, tls, allowedOrigins, trustProxy, headersTimeoutMs, requestTimeoutMs, idleTimeoutMs, maxConnectionsPerClient\)$/, FILE);
    fails({ file: FILE, fileSettings: { htttp: {} } }, 'interface.proxy.htttp', /^interface\.proxy\.htttp: unknown property "htttp" \(did you mean "http"\? allowed here: http, auth, audit, rateLimit, log, metrics, docs, console, limits, shutdown, workers, watch\)$/, FILE);
    fails({ file: FILE, fileSettings: 'x' }, 'interface.proxy', /must be an object/, FILE);
    fails({ env: { CONFIGU_AUTH_ENABLED: 'maybe' } }, 'CONFIGU_AUTH_ENABLED', /must be true or false/);
    fails({ env: { CONFIGU_AUTH_ENABLED: 'true' } }, 'CONFIGU_AUTH_ENABLED', /no preshared key is set/);
    fails({ env: { CONFIGU_AUTH_ENABLED: 'true', CONFIGU_AUTH_PRESHARED_KEYS: 'short' } }, 'CONFIGU_AUTH_PRESHARED_KEYS', /at least 8 characters/);
    fails({ env: { CONFIGU_HTTP_TLS_ENABLED: 'true' } }, 'CONFIGU_HTTP_TLS_ENABLED', /no cert file is set/);
    fails({ env: { CONFIGU_HTTP_ALLOWED_ORIGINS: 'example.com' } }, 'CONFIGU_HTTP_ALLOWED_ORIGINS', /is not an origin/);
    fails({ env: { CONFIGU_LIMIT_BODY_BYTES: '10' } }, 'CONFIGU_LIMIT_BODY_BYTES', /from 1024/);
    fails({ env: { CONFIGU_LIMIT_COMMANDS: '0' } }, 'CONFIGU_LIMIT_COMMANDS', /from 1/);
    fails({ env: { CONFIGU_HTTP_HOST: '   ' } }, 'CONFIGU_HTTP_HOST', /non-empty/);
  });

  test('a long bad value is not echoed (it may be a secret)', () => {
    fails({ env: { CONFIGU_HTTP_PORT: 'x'.repeat(64) } }, 'CONFIGU_HTTP_PORT', /got a 64-character string/);
  });

  test('TLS files: relative paths resolve against the .configu folder; unreadable or non-PEM files are start-up errors', () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'cert.pem'), '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n');
    writeFileSync(join(dir, 'key.pem'), '-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n');
    const file = join(dir, '.configu');
    const s = resolveSettings({ file, fileSettings: { http: { tls: { enabled: true, cert: 'cert.pem', key: 'key.pem' } } } });
    assert.deepEqual(s.http.tls, { enabled: true, cert: join(dir, 'cert.pem'), key: join(dir, 'key.pem') });
    fails({ file, fileSettings: { http: { tls: { enabled: true, cert: 'missing.pem', key: 'key.pem' } } } }, 'interface.proxy.http.tls.cert', /cannot read the certificate file \(ENOENT\)/, file);
    fails({ file, fileSettings: { http: { tls: { enabled: true, cert: 'key.pem', key: 'key.pem' } } } }, 'interface.proxy.http.tls.cert', /not a PEM certificate/, file);
    fails(
      { cwd: dir, env: { CONFIGU_HTTP_TLS_ENABLED: 'true', CONFIGU_HTTP_TLS_CERT: 'cert.pem', CONFIGU_HTTP_TLS_KEY: 'cert.pem' } },
      'CONFIGU_HTTP_TLS_KEY',
      /not a PEM private key/,
    );
  });
});
