/**
 * `cfgu eval`, in-process through the command runner (runCli) and, for the output and the stack of `--debug`, through
 * the built binary: the eval format, origins, --override, --defaults (no store read), the pipe on
 * standard input, schema files (several, globs, `.configu` names, errors naming the file), validation failures
 * (exit 1), usage errors (exit 2), an unavailable store (exit 1), --help and --debug.
 */
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { cfgu, closeSandbox, killChildren, project, removeTempDirs, runCli, tempDir, write } from './helpers.js';

after(async () => {
  killChildren();
  removeTempDirs();
  await closeSandbox();
});

const SCHEMA = {
  keys: {
    HOST: { required: true, label: ['db', 'net'] },
    PORT: { default: 8080, test: '$.value > 1000' },
    MODE: { enum: ['dev', 'prod'], default: 'dev' },
    TOKEN: { hidden: true },
    NOTE: {},
    URL: { const: 'http://{{ $.configs.HOST.value }}:{{ $.configs.PORT.value }}' },
  },
};

const DATA = [
  { set: '', key: 'HOST', value: 'root.local' },
  { set: 'prod', key: 'HOST', value: 'prod.local' },
  { set: 'prod', key: 'TOKEN', value: 's3cret' },
];

describe('cfgu eval', { concurrency: true }, () => {
  test('prints the eval format: key -> { key, value, origin, cfgu, set }', async () => {
    const dir = project({ 'app.cfgu.json': SCHEMA, 'data.json': DATA });
    const r = await cfgu(['eval', '--store', 'main', '--set', 'prod/eu', '--schema', 'app.cfgu.json', '--override', 'MODE=prod'], { cwd: dir });
    assert.equal(r.stderr, '');
    assert.equal(r.code, 0);
    assert.deepEqual(JSON.parse(r.stdout), {
      HOST: { key: 'HOST', value: 'prod.local', origin: 'store', cfgu: SCHEMA.keys.HOST, set: 'prod' },
      PORT: { key: 'PORT', value: '8080', origin: 'default', cfgu: SCHEMA.keys.PORT, set: 'prod/eu' },
      MODE: { key: 'MODE', value: 'prod', origin: 'override', cfgu: SCHEMA.keys.MODE, set: 'prod/eu' },
      TOKEN: { key: 'TOKEN', value: 's3cret', origin: 'store', cfgu: SCHEMA.keys.TOKEN, set: 'prod' },
      NOTE: { key: 'NOTE', value: '', origin: 'empty', cfgu: {}, set: 'prod/eu' },
      URL: { key: 'URL', value: 'http://prod.local:8080', origin: 'const', cfgu: SCHEMA.keys.URL, set: 'prod/eu' },
    });
    assert.ok(r.stdout.endsWith('}\n'));
  });

  test('a .configu with Configu\'s `register` loads: one warning on standard error, the evaluation as usual (issue 31)', async () => {
    const dir = project(
      { 'app.cfgu.json': { keys: { HOST: { default: 'localhost' } } }, 'data.json': [] },
      { stores: { main: { type: 'json-file', configuration: { path: 'data.json' } } }, register: ['@acme/configu-vault-store'], scripts: { x: 'echo' } },
    );
    const r = await runCli(['eval', '--schema', 'app.cfgu.json'], { cwd: dir });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(JSON.parse(r.stdout).HOST.value, 'localhost');
    assert.equal(
      r.stderr,
      'cfgu eval: warning: .configu: register: 1 store module ignored ("@acme/configu-vault-store"): cfgu never loads code named in .configu; its stores are built in\n',
    );
  });

  test('--defaults reads no store and needs no .configu', async () => {
    const dir = tempDir();
    write(join(dir, 'app.cfgu.yaml'), 'keys:\n  PORT:\n    default: 8080\n  HOST:\n    default: localhost\n  FLAG:\n    default: false\n');
    const r = await runCli(['eval', '--defaults', '--schema', 'app.cfgu.yaml', '--override', 'HOST=example.org'], { cwd: dir });
    assert.equal(r.code, 0, r.stderr);
    const result = JSON.parse(r.stdout);
    assert.deepEqual(
      Object.values(result).map((e: any) => [e.key, e.value, e.origin]),
      [
        ['PORT', '8080', 'default'],
        ['HOST', 'example.org', 'override'],
        ['FLAG', 'false', 'default'],
      ],
    );
    // With a .configu whose store is broken, --defaults still works (the store is never touched)...
    const broken = project({ 'app.cfgu.json': SCHEMA, 'data.json': '{ not json' });
    const d = await runCli(['eval', '--defaults', '--schema', 'app.cfgu.json', '--override', 'HOST=h'], { cwd: broken });
    assert.equal(d.code, 0, d.stderr);
    assert.equal(JSON.parse(d.stdout).URL.value, 'http://h:8080');
    // ...while reading it fails with exit 1 and a clear message.
    const s = await runCli(['eval', '--schema', 'app.cfgu.json'], { cwd: broken });
    assert.equal(s.code, 1);
    assert.match(s.stderr, /^cfgu eval: store "main" is unavailable: .*not valid JSON.*\n$/);
    const both = await runCli(['eval', '--defaults', '--store', 'main', '--schema', 'app.cfgu.json'], { cwd: broken });
    assert.equal(both.code, 2);
    assert.equal(both.stderr, 'cfgu eval: --defaults reads no store: leave out --store\nRun "cfgu eval --help" for usage.\n');
  });

  test('standard input carrying an eval result is the pipe', async () => {
    const dir = project({
      'base.cfgu.json': { keys: { HOST: {}, PORT: { default: 1 } } },
      'eu.cfgu.json': { keys: { PORT: { default: 2 }, REGION: { default: 'eu' }, URL: { const: '{{ $.configs.HOST.value }}:{{ $.configs.PORT.value }}' } } },
      'data.json': [{ set: '', key: 'HOST', value: 'h' }, { set: 'prod', key: 'PORT', value: '4000' }],
    });
    const first = await runCli(['eval', '--set', 'prod', '--schema', 'base.cfgu.json'], { cwd: dir });
    assert.equal(first.code, 0, first.stderr);
    const second = await runCli(['eval', '--schema', 'eu.cfgu.json'], { cwd: dir, stdin: first.stdout });
    assert.equal(second.code, 0, second.stderr);
    const result = JSON.parse(second.stdout);
    // A piped store value beats the current default; the pipe's own keys are carried.
    assert.deepEqual(result.PORT, { key: 'PORT', value: '4000', origin: 'store', cfgu: { default: 1 }, set: 'prod' });
    assert.equal(result.HOST.value, 'h');
    assert.equal(result.REGION.value, 'eu');
    assert.equal(result.URL.value, 'h:4000');
    // --no-stdin ignores the pipe.
    // (without the pipe, HOST is unknown to URL's const)
    const ignored = await runCli(['eval', '--no-stdin', '--schema', 'eu.cfgu.json'], { cwd: dir, stdin: first.stdout });
    assert.equal(ignored.code, 1);
    assert.match(ignored.stderr, /^cfgu eval: 1 key failed validation:\ncommand 0, key URL, rule const: /);
    // Not an eval result: exit 2.
    const bad = await runCli(['eval', '--schema', 'eu.cfgu.json'], { cwd: dir, stdin: '{"PORT": 1}' });
    assert.equal(bad.code, 2);
    assert.equal(bad.stderr, 'cfgu eval: standard input (the pipe) is not the JSON output of `cfgu eval`: "PORT" is not an object\n');
    const notJson = await runCli(['eval', '--schema', 'eu.cfgu.json'], { cwd: dir, stdin: 'PORT=1\n' });
    assert.equal(notJson.stderr, 'cfgu eval: standard input (the pipe) is not the JSON output of `cfgu eval` (not valid JSON)\n');
  });

  test('several schema files, globs and .configu schema names are merged into one keys map', async () => {
    const dir = project(
      {
        'schemas/a.cfgu.json': { keys: { A: { default: 'a' } } },
        'schemas/nested/b.cfgu.yaml': 'keys:\n  B:\n    default: b\n',
        'schemas/nested/deeper/c.cfgu.yml': 'keys:\n  C:\n    default: c\n',
        'schemas/nested/notes.txt': 'not a schema',
        'other/d.cfgu.json': { keys: { D: { default: 'd' } } },
      },
      { stores: { main: { type: 'json-file', configuration: { path: 'data.json' } } }, schemas: { extra: 'other/d.cfgu.json', all: 'schemas/**/*.cfgu.*' } },
    );
    const keysOf = (stdout: string) => Object.keys(JSON.parse(stdout));
    const glob = await runCli(['eval', '--schema', 'schemas/**/*.cfgu.{json,yaml,yml}', '--schema', 'extra'], { cwd: dir });
    assert.equal(glob.code, 0, glob.stderr);
    assert.deepEqual(keysOf(glob.stdout), ['A', 'B', 'C', 'D']);
    const named = await runCli(['eval', '--schema', 'all'], { cwd: join(dir, 'other') });
    assert.equal(named.code, 0, named.stderr);
    assert.deepEqual(keysOf(named.stdout), ['A', 'B', 'C']);
    const files = await runCli(['eval', '--schema', 'other/d.cfgu.json', '--schema', 'schemas/?.cfgu.json'], { cwd: dir });
    assert.deepEqual(keysOf(files.stdout), ['D', 'A']);
  });
});

describe('cfgu eval: schema problems are usage errors (exit 2) naming the file', { concurrency: true }, () => {
  const cases: Array<{ name: string; files: Record<string, unknown>; args: string[]; stderr: string }> = [
    {
      name: 'a key declared twice',
      files: { 'a.cfgu.json': { keys: { X: {} } }, 'b.cfgu.yaml': 'keys:\n  X: {}\n' },
      args: ['--schema', 'a.cfgu.json', '--schema', 'b.cfgu.yaml'],
      stderr: 'cfgu eval: key "X" is declared in both a.cfgu.json and b.cfgu.yaml\n',
    },
    {
      name: 'a v0 schema',
      files: { 'old.cfgu.json': { PORT: { type: 'Number', default: 1 } } },
      args: ['--schema', 'old.cfgu.json'],
      stderr: 'cfgu eval: schema file old.cfgu.json: this is a Cfgu v0 schema: in v1 the declarations move under a top-level `keys` object\n',
    },
    {
      name: 'v0 properties',
      files: { 'old.cfgu.json': { keys: { PORT: { type: 'Number', options: ['1'] } } } },
      args: ['--schema', 'old.cfgu.json'],
      stderr:
        'cfgu eval: schema file old.cfgu.json: 2 problems:\n' +
        '  /keys/PORT/type: `type` of key "PORT" was removed in Cfgu v1: write a `test` expression instead (e.g. "typeof $.value === \'number\'")\n' +
        '  /keys/PORT/options: `options` of key "PORT" was renamed `enum` in Cfgu v1\n',
    },
    {
      name: 'invalid YAML',
      files: { 'bad.cfgu.yaml': 'keys:\n  A: [1\n' },
      args: ['--schema', 'bad.cfgu.yaml'],
      stderr: /^cfgu eval: schema file bad\.cfgu\.yaml: line \d+, column \d+: not valid YAML: .+\n$/ as unknown as string,
    },
    {
      name: 'YAML aliases past the bound',
      files: {
        'bomb.cfgu.yaml':
          'keys:\n  A: {}\nx:\n  a: &a [1,1,1,1,1,1,1,1,1,1]\n  b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\n  c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\n  d: [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n',
      },
      args: ['--schema', 'bomb.cfgu.yaml'],
      stderr: 'cfgu eval: schema file bomb.cfgu.yaml: not valid YAML: Excessive alias count indicates a resource exhaustion attack\n',
    },
    {
      name: 'no file matches a glob',
      files: {},
      args: ['--schema', 'nothing/*.cfgu.json'],
      stderr: 'cfgu eval: --schema "nothing/*.cfgu.json": no *.cfgu.json|yaml|yml file matches\n',
    },
    {
      name: 'a missing file',
      files: {},
      args: ['--schema', 'missing.cfgu.json'],
      stderr: 'cfgu eval: --schema "missing.cfgu.json": missing.cfgu.json: no such file\n',
    },
    {
      name: 'an unknown schema name',
      files: {},
      args: ['--schema', 'app'],
      stderr: 'cfgu eval: --schema "app": no such file, and .configu declares no schema named "app" (declared: none)\n',
    },
    {
      name: 'the schema itself where its file or name belongs',
      files: {},
      args: ['--schema', '{"keys": {"A": {}}}'],
      stderr:
        "cfgu eval: --schema takes a *.cfgu.json|yaml|yml file, a glob or a name from .configu's `schemas`, not the schema itself: save it as a *.cfgu.json file and give that file\n",
    },
    {
      name: 'a file not named *.cfgu.*',
      files: { 'schema.json': { keys: { A: {} } } },
      args: ['--schema', 'schema.json'],
      stderr: 'cfgu eval: --schema "schema.json": schema files are named *.cfgu.json, *.cfgu.yaml or *.cfgu.yml\n',
    },
    {
      name: 'no --schema',
      files: {},
      args: [],
      stderr: "cfgu eval: --schema is required: a *.cfgu.json|yaml|yml file, a glob, or a name from .configu's `schemas`\nRun \"cfgu eval --help\" for usage.\n",
    },
    {
      name: 'a glob expanded by the shell',
      files: { 'a.cfgu.json': { keys: { A: {} } }, 'b.cfgu.json': { keys: { B: {} } } },
      args: ['--schema', 'a.cfgu.json', 'b.cfgu.json'],
      stderr:
        'cfgu eval: unexpected argument "b.cfgu.json" (did the shell expand a glob? quote it: --schema \'*.cfgu.json\', or repeat --schema)\nRun "cfgu eval --help" for usage.\n',
    },
    {
      name: 'an unknown store',
      files: { 'a.cfgu.json': { keys: { A: {} } } },
      args: ['--store', 'other', '--schema', 'a.cfgu.json'],
      stderr: 'cfgu eval: unknown store "other"; known stores: "main"\n',
    },
    {
      name: '--override without =',
      files: { 'a.cfgu.json': { keys: { A: {} } } },
      args: ['--schema', 'a.cfgu.json', '--override', 'A'],
      stderr: 'cfgu eval: --override "A" must be KEY=VALUE\nRun "cfgu eval --help" for usage.\n',
    },
    {
      name: 'a bad .configu',
      files: { '.configu': { cache: 'x.db', stores: { main: { type: 'in-memory' } } }, 'a.cfgu.json': { keys: { A: {} } } },
      args: ['--schema', 'a.cfgu.json'],
      stderr: /^cfgu eval: .*\.configu.*cache.*backup.*\n$/ as unknown as string,
    },
  ];
  for (const c of cases) {
    test(c.name, async () => {
      const dir = project(c.files);
      const r = await runCli(['eval', ...c.args], { cwd: dir });
      if (typeof c.stderr === 'string') assert.equal(r.stderr, c.stderr);
      else assert.match(r.stderr, c.stderr as unknown as RegExp);
      assert.equal(r.code, 2);
      assert.equal(r.stdout, '');
    });
  }
});

describe('cfgu eval: failures and diagnostics', { concurrency: true }, () => {
  test('validation failures: exit 1, one line per failure', async () => {
    const dir = project({ 'app.cfgu.json': SCHEMA, 'data.json': [{ set: '', key: 'PORT', value: '80' }, { set: '', key: 'MODE', value: 'qa' }] });
    const r = await runCli(['eval', '--schema', 'app.cfgu.json', '--override', 'NOPE=1'], { cwd: dir });
    assert.equal(r.code, 1);
    assert.equal(r.stdout, '');
    assert.equal(
      r.stderr,
      [
        'cfgu eval: 4 keys failed validation:',
        'command 0, key NOPE, rule override: override for key "NOPE", which the command\'s schema does not declare',
        'command 0, key HOST, rule required: key "HOST" is required but has no value',
        'command 0, key PORT, rule test: the value of key "PORT" failed the test $.value > 1000',
        'command 0, key MODE, rule enum: the value of key "MODE" is not one of the allowed values: "dev", "prod"',
        '',
      ].join('\n'),
    );
  });

  test('--debug prints the stack; without it, never', async () => {
    const dir = project({ 'a.cfgu.json': { keys: { A: {} } } });
    const plain = await runCli(['eval', '--store', 'x', '--schema', 'a.cfgu.json'], { cwd: dir });
    assert.doesNotMatch(plain.stderr, /\n\s+at /);
    const debug = await cfgu(['eval', '--debug', '--store', 'x', '--schema', 'a.cfgu.json'], { cwd: dir });
    assert.equal(debug.code, 2);
    assert.match(debug.stderr, /^cfgu eval: unknown store "x"; known stores: "main"\nUnknownStoreError: unknown store "x".*\n\s+at /);
  });

  test('--help of every command, with examples, exit 0', async () => {
    const dir = tempDir();
    for (const command of ['eval', 'upsert', 'export']) {
      const r = await runCli([command, '--help'], { cwd: dir });
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, new RegExp(`^Usage: cfgu ${command} `));
      assert.match(r.stdout, /\nExamples:\n {2}cfgu /);
      assert.match(r.stdout, /--config PATH/);
      assert.match(r.stdout, /--debug/);
    }
    const top = await runCli(['--help'], { cwd: dir });
    for (const command of ['eval', 'upsert', 'export']) assert.match(top.stdout, new RegExp(`\\n {2}${command} +\\S`));
  });

  test('.configu is rendered with the environment: bare names on the host, expressions in the sandbox', async () => {
    const dir = project({ 'a.cfgu.json': { keys: { A: {} } }, 'd.json': [{ set: '', key: 'A', value: 'rendered' }] });
    write(join(dir, '.configu'), { stores: { main: { type: 'json-file', configuration: { path: '{{ DATA_FILE }}' } } } });
    const bare = await runCli(['eval', '--schema', 'a.cfgu.json'], { cwd: dir, env: { DATA_FILE: 'd.json' } });
    assert.equal(bare.code, 0, bare.stderr);
    assert.equal(JSON.parse(bare.stdout).A.value, 'rendered');
    write(join(dir, '.configu'), { stores: { main: { type: 'json-file', configuration: { path: "{{ (DATA_FILE || 'x').toLowerCase() }}" } } } });
    const expr = await runCli(['eval', '--schema', 'a.cfgu.json'], { cwd: dir, env: { DATA_FILE: 'D.JSON' } });
    assert.equal(expr.code, 0, expr.stderr);
    assert.equal(JSON.parse(expr.stdout).A.value, 'rendered');
  });

  test('--config PATH and CONFIGU_CONFIG pick the .configu; otherwise it is found walking up', async () => {
    const dir = project({ 'a.cfgu.json': { keys: { A: {} } }, 'data.json': [{ set: '', key: 'A', value: 'from-main' }] });
    write(join(dir, 'alt', 'alt.configu'), { stores: { alt: { type: 'json-file', configuration: { path: 'alt.json' } } } });
    write(join(dir, 'alt', 'alt.json'), [{ set: '', key: 'A', value: 'from-alt' }]);
    write(join(dir, 'deep', 'er', 'keep'), '');
    const walk = await runCli(['eval', '--schema', '../../a.cfgu.json'], { cwd: join(dir, 'deep', 'er') });
    assert.equal(JSON.parse(walk.stdout).A.value, 'from-main', walk.stderr);
    const flag = await runCli(['eval', '--config', 'alt/alt.configu', '--schema', 'a.cfgu.json'], { cwd: dir });
    assert.equal(JSON.parse(flag.stdout).A.value, 'from-alt', flag.stderr);
    const env = await runCli(['eval', '--schema', 'a.cfgu.json'], { cwd: dir, env: { CONFIGU_CONFIG: join(dir, 'alt', 'alt.configu') } });
    assert.equal(JSON.parse(env.stdout).A.value, 'from-alt', env.stderr);
  });
});
