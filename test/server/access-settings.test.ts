/**
 * The access-control settings (docs/security.md): credentials, JWT verification, audit and rate limits are validated
 * at start-up with messages that name the property (with a suggestion for a misspelt one), and the CONFIGU_*
 * variables beat the file.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigurationError } from '../../src/core/errors.js';
import { resolveSettings, SETTINGS_ENV_VARS } from '../../src/server/process/resolve-settings.js';

const FILE = '/srv/app/.configu';
const SHA = 'a'.repeat(64);
const jwt = { jwksUrl: 'https://idp.example/jwks.json', issuer: 'https://idp.example', audience: 'cfgu' };

function fails(fileSettings: unknown, property: string, message: string, env: Record<string, string> = {}): void {
  assert.throws(
    () => resolveSettings({ fileSettings, file: FILE, env }),
    (e: unknown) => {
      assert.ok(e instanceof ConfigurationError, String(e));
      assert.equal(e.property, property);
      assert.equal(e.message, message);
      return true;
    },
  );
}

describe('credentials', () => {
  test('a valid list loads; auth needs no preshared key when credentials exist', () => {
    const s = resolveSettings({
      fileSettings: { auth: { enabled: true, credentials: [{ name: 'ci', sha256: SHA.toUpperCase(), stores: ['main'], sets: ['staging/**', ''], keys: ['PUBLIC_*'] }] } },
      file: FILE,
      env: {},
    });
    assert.deepEqual(s.auth.credentials, [{ name: 'ci', sha256: SHA, stores: ['main'], sets: ['staging/**', ''], keys: ['PUBLIC_*'] }]);
    assert.deepEqual(s.auth.presharedKeys, []);
  });

  test('mistakes name the property', () => {
    const cred = { name: 'ci', sha256: SHA, stores: ['main'], sets: ['staging'] };
    fails({ auth: { credentials: [{ ...cred, sha265: SHA }] } }, 'interface.proxy.auth.credentials[0].sha265',
      'interface.proxy.auth.credentials[0].sha265: unknown property "sha265" (did you mean "sha256"? allowed here: name, sha256, stores, sets, labels, keys, metrics, write, breaking)');
    fails({ auth: { credentials: [{ ...cred, sha256: 'secret-token' }] } }, 'interface.proxy.auth.credentials[0].sha256',
      'interface.proxy.auth.credentials[0].sha256: must be the SHA-256 of the token as 64 hex digits (cfgu token create prints it)');
    fails({ auth: { credentials: [cred, { ...cred, sha256: 'b'.repeat(64) }] } }, 'interface.proxy.auth.credentials[1].name',
      'interface.proxy.auth.credentials[1].name: "ci" is used by another credential');
    fails({ auth: { credentials: [{ ...cred, sets: ['prod//eu'] }] } }, 'interface.proxy.auth.credentials[0].sets',
      'interface.proxy.auth.credentials[0].sets: "prod//eu" is not a set pattern (it has an empty segment)');
    fails({ auth: { credentials: [{ ...cred, stores: [] }] } }, 'interface.proxy.auth.credentials[0].stores',
      'interface.proxy.auth.credentials[0].stores: must list at least one entry');
    fails({ auth: { credentials: [{ ...cred, metrics: 'always' }] } }, 'interface.proxy.auth.credentials[0].metrics',
      'interface.proxy.auth.credentials[0].metrics: must be true or false, got "always"');
    fails({ auth: { enabled: true } }, 'interface.proxy.auth.enabled',
      'interface.proxy.auth.enabled: authentication is enabled but no preshared key is set (CONFIGU_AUTH_PRESHARED_KEYS or interface.proxy.auth.presharedKeys), and no credential (interface.proxy.auth.credentials) or JWT issuer (interface.proxy.auth.jwt) either');
  });
});

describe('JWT', () => {
  test('defaults: asymmetric algorithms, 30 s skew, 30 s JWKS cooldown, 10 min JWKS age, 1 MiB and 100 keys of JWKS, 10000 cached tokens', () => {
    const s = resolveSettings({ fileSettings: { auth: { jwt } }, file: FILE, env: {} });
    assert.deepEqual(s.auth.jwt, {
      jwksUrl: 'https://idp.example/jwks.json',
      jwksFile: undefined,
      issuer: ['https://idp.example'],
      audience: ['cfgu'],
      algorithms: ['RS256', 'PS256', 'ES256', 'EdDSA'],
      clockSkewSeconds: 30,
      jwksCooldownSeconds: 30,
      jwksMaxAgeSeconds: 600,
      jwksMaxBytes: 1_048_576,
      jwksMaxKeys: 100,
      cacheSize: 10_000,
      grants: [],
    });
  });

  test('never HMAC, never none; https only off loopback; issuer and audience required', () => {
    fails({ auth: { jwt: { ...jwt, algorithms: ['RS256', 'HS256'] } } }, 'interface.proxy.auth.jwt.algorithms',
      'interface.proxy.auth.jwt.algorithms: HS256 is not accepted: an HMAC secret could be confused with a public key; use an asymmetric algorithm');
    fails({ auth: { jwt: { ...jwt, algorithms: ['none'] } } }, 'interface.proxy.auth.jwt.algorithms',
      'interface.proxy.auth.jwt.algorithms: "none" is not an accepted algorithm (accepted: RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA)');
    fails({ auth: { jwt: { ...jwt, jwksUrl: 'http://idp.example/jwks.json' } } }, 'interface.proxy.auth.jwt.jwksUrl',
      'interface.proxy.auth.jwt.jwksUrl: must be an https URL (plain http only for a loopback address)');
    fails({ auth: { jwt: { jwksUrl: jwt.jwksUrl, issuer: jwt.issuer } } }, 'interface.proxy.auth.jwt.jwksUrl',
      'interface.proxy.auth.jwt.jwksUrl: JWT verification needs the expected audience: CONFIGU_AUTH_JWT_AUDIENCE or interface.proxy.auth.jwt.audience');
    fails({ auth: { jwt: { ...jwt, grants: [{ claim: 'scope', valeu: 'x', stores: ['*'], sets: ['**'] }] } } }, 'interface.proxy.auth.jwt.grants[0].valeu',
      'interface.proxy.auth.jwt.grants[0].valeu: unknown property "valeu" (did you mean "value"? allowed here: claim, value, stores, sets, labels, keys, metrics, write, breaking)');
    fails({ auth: { jwt: { ...jwt, jwksMaxBytes: 100 } } }, 'interface.proxy.auth.jwt.jwksMaxBytes',
      'interface.proxy.auth.jwt.jwksMaxBytes: must be a whole number from 1024 to 67108864, got 100');
    fails({ auth: { jwt: { ...jwt, jwksMaxKeys: 0 } } }, 'interface.proxy.auth.jwt.jwksMaxKeys',
      'interface.proxy.auth.jwt.jwksMaxKeys: must be a whole number from 1 to 10000, got 0');
  });

  test('the CONFIGU_AUTH_JWT_* variables beat the file', () => {
    const env = {
      CONFIGU_AUTH_JWT_JWKS_URL: 'http://127.0.0.1:9/keys',
      CONFIGU_AUTH_JWT_ISSUER: 'https://a.example,https://b.example',
      CONFIGU_AUTH_JWT_AUDIENCE: 'proxy',
      CONFIGU_AUTH_JWT_ALGORITHMS: 'ES256',
      CONFIGU_AUTH_JWT_CLOCK_SKEW_SECONDS: '5',
      CONFIGU_AUTH_JWT_JWKS_COOLDOWN_SECONDS: '7',
      CONFIGU_AUTH_JWT_JWKS_MAX_AGE_SECONDS: '8',
      CONFIGU_AUTH_JWT_JWKS_MAX_BYTES: '4096',
      CONFIGU_AUTH_JWT_JWKS_MAX_KEYS: '3',
      CONFIGU_AUTH_JWT_CACHE_SIZE: '9',
    };
    const s = resolveSettings({ fileSettings: { auth: { jwt } }, file: FILE, env });
    const { grants: _g, jwksFile: _f, ...rest } = s.auth.jwt!;
    assert.deepEqual(rest, {
      jwksUrl: 'http://127.0.0.1:9/keys',
      issuer: ['https://a.example', 'https://b.example'],
      audience: ['proxy'],
      algorithms: ['ES256'],
      clockSkewSeconds: 5,
      jwksCooldownSeconds: 7,
      jwksMaxAgeSeconds: 8,
      jwksMaxBytes: 4096,
      jwksMaxKeys: 3,
      cacheSize: 9,
    });
  });
});

describe('audit and rate limits', () => {
  test('defaults: audit on (server log), rate limits off', () => {
    const s = resolveSettings({ env: {} });
    assert.deepEqual(s.audit, { enabled: true, file: undefined });
    assert.deepEqual(s.rateLimit, { enabled: false, max: 600, windowSeconds: 60, redisUrl: undefined, redisPrefix: 'cfgu:rate-limit:' });
  });

  test('the variables beat the file; relative audit files resolve against the .configu folder or the working folder', () => {
    const fileSettings = { audit: { enabled: true, file: 'logs/audit.log' }, rateLimit: { enabled: false, max: 5 } };
    const fromFile = resolveSettings({ fileSettings, file: FILE, env: {} });
    assert.equal(fromFile.audit.file, '/srv/app/logs/audit.log');
    const s = resolveSettings({
      fileSettings,
      file: FILE,
      cwd: '/work',
      env: {
        CONFIGU_AUDIT_ENABLED: 'false',
        CONFIGU_AUDIT_FILE: 'audit.log',
        CONFIGU_RATE_LIMIT_ENABLED: 'true',
        CONFIGU_RATE_LIMIT_MAX: '50',
        CONFIGU_RATE_LIMIT_WINDOW_SECONDS: '10',
        CONFIGU_RATE_LIMIT_REDIS_URL: 'redis://cache:6379/2',
        CONFIGU_RATE_LIMIT_REDIS_PREFIX: 'proxy-a:',
      },
    });
    assert.deepEqual(s.audit, { enabled: false, file: '/work/audit.log' });
    assert.deepEqual(s.rateLimit, { enabled: true, max: 50, windowSeconds: 10, redisUrl: 'redis://cache:6379/2', redisPrefix: 'proxy-a:' });
    fails({ rateLimit: { redisUrl: 'cache:6379' } }, 'interface.proxy.rateLimit.redisUrl', 'interface.proxy.rateLimit.redisUrl: must be a redis:// or rediss:// URL');
  });

  test('every new variable is one of the documented settings variables', () => {
    for (const name of ['CONFIGU_AUTH_JWT_JWKS_URL', 'CONFIGU_AUDIT_FILE', 'CONFIGU_RATE_LIMIT_REDIS_URL']) assert.ok(SETTINGS_ENV_VARS.includes(name), name);
  });
});

describe('write grants', () => {
  test('write and breaking load on credentials and JWT grants; breaking needs write; both must be booleans', () => {
    const cred = { name: 'ci', sha256: SHA, stores: ['main'], sets: ['prod/**'] };
    const s = resolveSettings({
      fileSettings: { auth: { enabled: true, credentials: [{ ...cred, write: true, breaking: true }, { ...cred, name: 'ro', sha256: 'b'.repeat(64), write: false }], jwt: { ...jwt, grants: [{ claim: 'scope', value: 'cfgu:write', stores: ['main'], sets: ['**'], write: true }] } } },
      file: FILE,
      env: {},
    });
    assert.deepEqual(s.auth.credentials, [{ ...cred, write: true, breaking: true }, { ...cred, name: 'ro', sha256: 'b'.repeat(64) }]);
    assert.deepEqual(s.auth.jwt!.grants, [{ claim: 'scope', value: 'cfgu:write', stores: ['main'], sets: ['**'], write: true }]);
    fails({ auth: { credentials: [{ ...cred, breaking: true }] } }, 'interface.proxy.auth.credentials[0].breaking', 'interface.proxy.auth.credentials[0].breaking: needs write: true in the same grant');
    fails({ auth: { credentials: [{ ...cred, write: 'yes please' }] } }, 'interface.proxy.auth.credentials[0].write', 'interface.proxy.auth.credentials[0].write: must be true or false, got "yes please"');
  });
});
