/**
 * `cfgu upsert`, in-process through the command runner (runCli) and, for a first write, through the built binary: --kv, -k/-v pairing and deletion, the change summary, validation failures
 * (exit 1, every failure listed, nothing written), usage errors (exit 2), a json-file and a sqlite store.
 */
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { sqliteDriver } from '../../src/stores/drivers.js';
import { cfgu, closeSandbox, killChildren, project, removeTempDirs, runCli, tempDir, write } from './helpers.js';
import { failingOnHidden, failingOnHiddenErrors, planted } from '../helpers/capture.js';

after(async () => {
  killChildren();
  removeTempDirs();
  await closeSandbox();
});


const SCHEMA = {
  keys: {
    HOST: { required: true },
    PORT: { default: 8080, test: '$.value > 1000 && $.value < 65536' },
    MODE: { enum: ['dev', 'prod'] },
    NOTE: {},
    URL: { const: 'http://{{ $.configs.HOST.value }}:{{ $.configs.PORT.value }}' },
  },
};

const stored = (dir: string) => JSON.parse(readFileSync(join(dir, 'data.json'), 'utf8')) as Array<{ set: string; key: string; value: string }>;

describe('cfgu upsert', { concurrency: true }, () => {
  test('--kv writes values and prints what changed', async () => {
    const dir = project({ 'app.cfgu.json': SCHEMA });
    const r = await cfgu(['upsert', '--store', 'main', '--set', 'prod', '--schema', 'app.cfgu.json', '--kv', 'HOST=db.local', '--kv', 'PORT=9090'], { cwd: dir });
    assert.equal(r.stderr, '');
    assert.equal(r.code, 0);
    assert.equal(r.stdout, '2 changes in store "main", set "prod":\n+ HOST = "db.local"\n+ PORT = "9090"\n');
    assert.deepEqual(
      stored(dir).sort((a, b) => a.key.localeCompare(b.key)),
      [
        { set: 'prod', key: 'HOST', value: 'db.local' },
        { set: 'prod', key: 'PORT', value: '9090' },
      ],
    );
    // Again, one value changed, one the same: only the change is reported; the default store is used without --store.
    const again = await runCli(['upsert', '--set', '/prod/', '--schema', 'app.cfgu.json', '--kv', 'HOST=db.local', '--kv', 'PORT=9191'], { cwd: dir });
    assert.equal(again.code, 0, again.stderr);
    assert.equal(again.stdout, '1 change in store "main", set "prod":\n~ PORT = "9191" (was "9090")\n');
    const none = await runCli(['upsert', '--schema', 'app.cfgu.json', '--set', 'prod', '--kv', 'PORT=9191'], { cwd: dir });
    assert.equal(none.stdout, 'no changes in store "main", set "prod"\n');
  });

  test('-k/-v pair by order of appearance; a -k without its -v deletes; --kv KEY= deletes', async () => {
    const dir = project({
      'app.cfgu.json': SCHEMA,
      'data.json': [
        { set: '', key: 'NOTE', value: 'old note' },
        { set: '', key: 'MODE', value: 'dev' },
      ],
    });
    const r = await runCli(
      ['upsert', '--schema', 'app.cfgu.json', '-k', 'NOTE', '-k', 'HOST', '-v', 'h1', '--key', 'PORT', '--value', '2000', '--kv', 'MODE='],
      { cwd: dir },
    );
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, '4 changes in store "main", root set:\n- NOTE (was "old note")\n+ HOST = "h1"\n+ PORT = "2000"\n- MODE (was "dev")\n');
    assert.deepEqual(
      stored(dir).map((c) => `${c.key}=${c.value}`).sort(),
      ['HOST=h1', 'PORT=2000'],
    );
    // A trailing -k deletes too; a value with spaces and quotes is stored exactly as given.
    const r2 = await runCli(['upsert', '--schema', 'app.cfgu.json', '-k', 'NOTE', '-v', 'say "hi", it\'s me', '-k', 'PORT'], { cwd: dir });
    assert.equal(r2.code, 0, r2.stderr);
    assert.equal(r2.stdout, '2 changes in store "main", root set:\n+ NOTE = "say \\"hi\\", it\'s me"\n- PORT (was "2000")\n');
    assert.deepEqual(stored(dir).find((c) => c.key === 'NOTE'), { set: '', key: 'NOTE', value: 'say "hi", it\'s me' });
  });

  test('validation failures: exit 1, one line per failure, nothing written', async () => {
    const dir = project({ 'app.cfgu.json': SCHEMA, 'data.json': [{ set: '', key: 'HOST', value: 'kept' }] });
    const r = await runCli(
      ['upsert', '--schema', 'app.cfgu.json', '--kv', 'PORT=80', '--kv', 'MODE=staging', '--kv', 'URL=x', '--kv', 'EXTRA=1', '--kv', 'HOST=new'],
      { cwd: dir },
    );
    assert.equal(r.code, 1);
    assert.equal(r.stdout, '');
    assert.equal(
      r.stderr,
      [
        'cfgu upsert: 4 keys failed validation:',
        'command 0, key EXTRA, rule undeclared: key "EXTRA" is not declared by the schema',
        'command 0, key PORT, rule test: the value of key "PORT" failed the test $.value > 1000 && $.value < 65536',
        'command 0, key MODE, rule enum: the value of key "MODE" is not one of the allowed values: "dev", "prod"',
        'command 0, key URL, rule const: key "URL" is computed by `const` and cannot be stored',
        '',
      ].join('\n'),
    );
    assert.deepEqual(stored(dir), [{ set: '', key: 'HOST', value: 'kept' }]);
  });

  test('a hidden key holding a planted secret: upsert prints it masked; failing tests and consts of eval and upsert never show it; export omits it', async () => {
    const secret = planted('upsert');
    // The built binary with a generous expression time limit: the first chai and zod calls compile on a loaded machine.
    const run = (args: string[], cwd: string, input?: string) => cfgu(args, { cwd, input, env: { CONFIGU_EXPRESSION_TIMEOUT_MS: '20000' } });
    const dir = project({ 'app.cfgu.json': { keys: failingOnHidden('TOKEN') }, 'plain.cfgu.json': { keys: { TOKEN: { hidden: true }, NOTE: {} } } });
    const add = await run(['upsert', '--set', 'prod', '--schema', 'plain.cfgu.json', '--kv', `TOKEN=${secret}`, '--kv', 'NOTE=hi'], dir);
    assert.deepEqual(add, { code: 0, stdout: '2 changes in store "main", set "prod":\n+ TOKEN = [hidden]\n+ NOTE = "hi"\n', stderr: '' });
    const lines = (command: string, errors: ReturnType<typeof failingOnHiddenErrors>) =>
      `cfgu ${command}: ${errors.length} keys failed validation:\n${errors.map((e) => `command ${e.command}, key ${e.key}, rule ${e.rule}: ${e.message}\n`).join('')}`;
    const evaluated = await run(['eval', '--set', 'prod', '--schema', 'app.cfgu.json'], dir);
    assert.deepEqual(evaluated, { code: 1, stdout: '', stderr: lines('eval', failingOnHiddenErrors('TOKEN')) });
    const bad = await run(['upsert', '--set', 'prod', '--schema', 'app.cfgu.json', '--kv', `TOKEN=${planted('upsert-bad')}`], dir);
    assert.deepEqual(bad, { code: 1, stdout: '', stderr: lines('upsert', failingOnHiddenErrors('TOKEN').filter((e) => e.key !== 'TOKEN_URL')) });
    const piped = await run(['eval', '--set', 'prod', '--schema', 'plain.cfgu.json'], dir);
    assert.equal(piped.code, 0, piped.stderr);
    assert.deepEqual(await run(['export'], dir, piped.stdout), { code: 0, stdout: '{\n  "NOTE": "hi"\n}\n', stderr: '' });
  });

  test('a sqlite store', async () => {
    const dir = project(
      { 'app.cfgu.json': SCHEMA },
      { stores: { db: { type: 'sqlite', configuration: { database: 'configs.sqlite' } } } },
    );
    const r = await runCli(['upsert', '--store', 'db', '--set', 'prod/eu', '--schema', 'app.cfgu.json', '--kv', 'HOST=eu.local', '--kv', 'MODE=prod'], { cwd: dir });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, '2 changes in store "db", set "prod/eu":\n+ HOST = "eu.local"\n+ MODE = "prod"\n');
    const Database = sqliteDriver();
    const db = new Database(join(dir, 'configs.sqlite'), { readonly: true });
    try {
      const rows = db.prepare('SELECT id, "set", key, value FROM config ORDER BY key').all() as Array<Record<string, string>>;
      assert.deepEqual(rows.map((x) => [x.set, x.key, x.value]), [
        ['prod/eu', 'HOST', 'eu.local'],
        ['prod/eu', 'MODE', 'prod'],
      ]);
      for (const row of rows) assert.match(row.id!, /^[0-9a-f]{32}$/);
    } finally {
      db.close();
    }
    // Read back through eval at a deeper set (the hierarchy reaches prod/eu).
    const e = await runCli(['eval', '--store', 'db', '--set', 'prod/eu/x', '--schema', 'app.cfgu.json'], { cwd: dir });
    assert.equal(e.code, 0, e.stderr);
    const result = JSON.parse(e.stdout);
    assert.deepEqual(result.HOST, { key: 'HOST', value: 'eu.local', origin: 'store', cfgu: { required: true }, set: 'prod/eu' });
    assert.equal(result.URL.value, 'http://eu.local:8080');
  });
});

describe('cfgu upsert usage errors: exit 2, exact messages', { concurrency: true }, () => {
  const cases: Array<{ name: string; args: string[]; stderr: string; configu?: Record<string, unknown> | null }> = [
    {
      name: '--import was removed',
      args: ['--schema', 'app.cfgu.json', '--import', 'values.env'],
      stderr: 'cfgu upsert: --import was removed in v1: write the values with --kv KEY=VALUE or -k KEY -v VALUE\nRun "cfgu upsert --help" for usage.\n',
    },
    {
      name: 'v0 -c KEY=VALUE',
      args: ['--schema', 'app.cfgu.json', '-c', 'HOST=x'],
      stderr: 'cfgu upsert: `-c KEY=VALUE` was removed in v1: use `--kv KEY=VALUE` (`--config PATH` now selects the .configu file)\nRun "cfgu upsert --help" for usage.\n',
    },
    {
      name: 'v0 --config KEY=VALUE',
      args: ['--schema', 'app.cfgu.json', '--config', 'HOST=x'],
      stderr:
        'cfgu upsert: --config "HOST=x" looks like KEY=VALUE: in v1 `--kv KEY=VALUE` replaced `--config KEY=VALUE`; `--config PATH` selects the .configu file\nRun "cfgu upsert --help" for usage.\n',
    },
    {
      name: 'unknown store',
      args: ['--store', 'nope', '--schema', 'app.cfgu.json', '--kv', 'HOST=x'],
      stderr: 'cfgu upsert: unknown store "nope"; known stores: "main"\n',
    },
    {
      name: 'no values',
      args: ['--schema', 'app.cfgu.json'],
      stderr: 'cfgu upsert: nothing to upsert: give values with --kv KEY=VALUE or -k KEY -v VALUE\nRun "cfgu upsert --help" for usage.\n',
    },
    {
      name: '-v without -k',
      args: ['--schema', 'app.cfgu.json', '-v', 'x'],
      stderr: 'cfgu upsert: a -v/--value has no -k/--key before it\nRun "cfgu upsert --help" for usage.\n',
    },
    {
      name: 'a key given twice',
      args: ['--schema', 'app.cfgu.json', '--kv', 'HOST=a', '-k', 'HOST', '-v', 'b'],
      stderr: 'cfgu upsert: key "HOST" is given twice (-k)\nRun "cfgu upsert --help" for usage.\n',
    },
    {
      name: '--kv without =',
      args: ['--schema', 'app.cfgu.json', '--kv', 'HOST'],
      stderr: 'cfgu upsert: --kv "HOST" must be KEY=VALUE\nRun "cfgu upsert --help" for usage.\n',
    },
    {
      name: '--kv without a key: the value is not echoed',
      args: ['--schema', 'app.cfgu.json', '--kv', '=hunter2-not-echoed'],
      stderr: 'cfgu upsert: --kv has a value but no key: it must be KEY=VALUE\nRun "cfgu upsert --help" for usage.\n',
    },
    {
      name: 'unknown flag',
      args: ['--schema', 'app.cfgu.json', '--kv', 'HOST=a', '--yes'],
      stderr: 'cfgu upsert: unknown option --yes\nRun "cfgu upsert --help" for usage.\n',
    },
    {
      name: 'no .configu',
      args: ['--schema', 'app.cfgu.json', '--kv', 'HOST=a'],
      configu: null,
      stderr: 'cfgu upsert: no .configu file found: pass --config PATH, set CONFIGU_CONFIG, or create a .configu in this folder or a parent\n',
    },
    {
      name: '--config names a missing file',
      args: ['--config', 'missing.configu', '--schema', 'app.cfgu.json', '--kv', 'HOST=a'],
      stderr: 'cfgu upsert: missing.configu: no such file (given by --config)\n',
    },
    {
      name: 'bad set path',
      args: ['--set', 'prod//eu', '--schema', 'app.cfgu.json', '--kv', 'HOST=a'],
      stderr: 'cfgu upsert: set path "prod//eu" has an empty segment\n',
    },
  ];
  for (const c of cases) {
    test(c.name, async () => {
      // `configu: null`: a folder with no .configu in it or above it (the system's temporary folder has none).
      const dir = c.configu === null ? tempDir() : project({ 'app.cfgu.json': SCHEMA });
      if (c.configu === null) write(join(dir, 'app.cfgu.json'), SCHEMA);
      const r = await runCli(['upsert', ...c.args], { cwd: dir });
      assert.equal(r.stderr, c.stderr);
      assert.equal(r.code, 2);
      assert.equal(r.stdout, '');
    });
  }
});
