/**
 * `cfgu token create`: the token is printed once with the `.configu` entry to paste; the entry's hash is the SHA-256
 * of the printed token, and the entry, pasted into a `.configu`, loads and lets the token read exactly its scope.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pino, type Logger } from 'pino';
import YAML from 'yaml';
import { buildServer } from '../../src/server/index.js';
import { resolveSettings } from '../../src/server/process/resolve-settings.js';
import { loadConfiguration } from '../../src/config/index.js';
import { createStoreRegistry } from '../../src/stores/index.js';
import { removeTempDirs, runCli, tempDir, write } from './helpers.js';

after(() => removeTempDirs());

test('the printed hash is the SHA-256 of the printed token, and the pasted entry loads and scopes the token', async () => {
  const dir = tempDir();
  const r = await runCli(['token', 'create', '--name', 'ci-staging', '--store', 'main', '--set', 'staging/**', '--set', ''], { cwd: dir });
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stderr, '');
  const lines = r.stdout.split('\n');
  assert.equal(lines[0], '# The token of "ci-staging" (shown only now; the server keeps only its SHA-256):');
  const token = lines[1]!;
  assert.match(token, /^cfgu_[A-Za-z0-9_-]{43}$/);
  assert.equal(lines[2], '# Paste under interface.proxy.auth.credentials in .configu:');
  const entry = lines.slice(3).join('\n');
  const sha = createHash('sha256').update(token, 'utf8').digest('hex');
  assert.equal(entry, `- name: ci-staging\n  sha256: ${sha}\n  stores:\n    - main\n  sets:\n    - staging/**\n    - ""\n`);

  // Paste it into a .configu (YAML), exactly as printed, indented under credentials.
  write(join(dir, 'data.json'), [
    { set: 'staging', key: 'HOST', value: 'staging.internal' },
    { set: 'prod', key: 'HOST', value: 'prod.internal' },
  ]);
  const pasted = entry.trimEnd().split('\n').map((l) => `        ${l}`).join('\n');
  writeFileSync(
    join(dir, '.configu'),
    `stores:\n  main: { type: json-file, configuration: { path: data.json } }\ninterface:\n  proxy:\n    auth:\n      enabled: true\n      credentials:\n${pasted}\n`,
  );
  const configuration = await loadConfiguration({ file: join(dir, '.configu') });
  const settings = resolveSettings({ fileSettings: configuration.interface.proxy, file: join(dir, '.configu'), env: {} });
  assert.deepEqual(settings.auth.credentials, [{ name: 'ci-staging', sha256: sha, stores: ['main'], sets: ['staging/**', ''] }]);
  const registry = createStoreRegistry(configuration, { logger: { warn: () => undefined } });
  await registry.init();
  const app = await buildServer({ registry, settings: { ...settings, workers: 1 }, logger: pino({ level: 'silent' }) as unknown as Logger, ready: true });
  try {
    const post = (set: string, bearer: string) =>
      app.inject({
        method: 'POST',
        url: '/export',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${bearer}` },
        payload: JSON.stringify([{ set, schema: { keys: { HOST: {} } } }]),
      });
    const ok = await post('staging', token);
    assert.equal(ok.statusCode, 200, ok.body);
    assert.deepEqual(ok.json(), { HOST: 'staging.internal' });
    assert.equal((await post('prod', token)).statusCode, 403);
    assert.equal((await post('staging', `${token}x`)).statusCode, 401);
  } finally {
    await app.close();
    await registry.close();
  }
});

test('--metrics adds metrics: true to the entry; the pasted entry reads GET /metrics, one without it gets 403', async () => {
  const dir = tempDir();
  const r = await runCli(['token', 'create', '--name', 'scraper', '--store', 'main', '--set', '', '--metrics'], { cwd: dir });
  assert.equal(r.code, 0, r.stderr);
  const [, token, , ...entryLines] = r.stdout.split('\n');
  const sha = createHash('sha256').update(token!, 'utf8').digest('hex');
  assert.equal(entryLines.join('\n'), `- name: scraper\n  sha256: ${sha}\n  stores:\n    - main\n  sets:\n    - ""\n  metrics: true\n`);
  const other = 'cfgu_without-metrics-0123456789';
  const credentials = [
    ...(YAML.parse(entryLines.join('\n')) as object[]),
    { name: 'plain', sha256: createHash('sha256').update(other, 'utf8').digest('hex'), stores: ['main'], sets: [''] },
  ];
  const settings = resolveSettings({ fileSettings: { auth: { enabled: true, credentials } }, env: {} });
  const registry = { resolve: () => { throw new Error('not read'); }, names: () => ['main'] } as never;
  const app = await buildServer({ registry, settings: { ...settings, workers: 1 }, logger: false, ready: true });
  try {
    const scrape = (bearer: string) => app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${bearer}` } });
    assert.equal((await scrape(token!)).statusCode, 200);
    const refused = await scrape(other);
    assert.equal(refused.statusCode, 403);
    assert.deepEqual(refused.json(), {
      type: 'urn:cfgu:problem:forbidden',
      title: 'Forbidden',
      status: 403,
      detail: 'reading /metrics needs the metrics key, a preshared key, or a scope with metrics: true',
    });
  } finally {
    await app.close();
  }
});

test('two runs give two different tokens', async () => {
  const dir = tempDir();
  const args = ['token', 'create', '--name', 'a', '--store', '*', '--set', 'prod'];
  const [one, two] = [await runCli(args, { cwd: dir }), await runCli(args, { cwd: dir })];
  assert.notEqual(one.stdout.split('\n')[1], two.stdout.split('\n')[1]);
});

test('usage errors: exit 2 with a message naming the flag, nothing printed on standard output', async () => {
  const dir = tempDir();
  const cases: Array<[string[], string]> = [
    [['token', 'create', '--store', 'main', '--set', 'x'], 'cfgu token: --name is required'],
    [['token', 'create', '--name', 'a', '--set', 'x'], 'cfgu token: give at least one --store (or --store "*" for every store)'],
    [['token', 'create', '--name', 'a', '--store', 'main'], 'cfgu token: give at least one --set pattern (e.g. --set "staging/**"; --set "" for the root set)'],
    [['token', 'create', '--name', 'a b', '--store', 'main', '--set', 'x'], 'cfgu token: --name: must be 1 to 64 letters, digits or ._:@-'],
    [['token', 'create', '--name', 'a', '--store', 'main', '--set', 'a//b'], 'cfgu token: --set: "a//b" is not a set pattern (it has an empty segment)'],
    [['token', 'create', '--name', 'a', '--store', 'main', '--set', 'a b'], 'cfgu token: --set: "a b" is not a set pattern (segments of letters, digits, _ and -, with * or **)'],
    [['token', 'revoke'], 'cfgu token: unknown action "revoke" (cfgu token create ...)'],
  ];
  for (const [args, message] of cases) {
    const r = await runCli(args, { cwd: dir });
    assert.equal(r.code, 2, args.join(' '));
    assert.equal(r.stdout, '');
    assert.equal(r.stderr.split('\n')[0], message);
  }
});
