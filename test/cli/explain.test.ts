/**
 * `cfgu eval --explain` (docs/cli.md, docs/explain.md): the tree on standard output, exactly; `--format json`; hidden
 * values shown as `(hidden)` unless `--reveal-hidden`; a key piped from standard input; exit 1 with the explanation
 * when validation fails; the flag checks.
 */
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { closeSandbox, killChildren, project, removeTempDirs, runCli } from './helpers.js';
import { planted } from '../helpers/capture.js';

after(async () => {
  killChildren();
  removeTempDirs();
  await closeSandbox();
});

const SCHEMA = {
  keys: {
    HOST: { required: true },
    PORT: { default: 8080, test: ['$.value > 0', '$.value > 1000', '$.value < 65536'] },
    MODE: { enum: ['dev', 'prod'], default: 'dev' },
    TOKEN: { hidden: true },
    URL: { const: 'http://{{ $.configs.HOST.value }}:{{ $.configs.PORT.value }}/{{ $.configs.TOKEN.value.length }}' },
  },
};

function data(token: string) {
  return [
    { set: '', key: 'HOST', value: 'root.local' },
    { set: 'prod', key: 'HOST', value: 'prod.local' },
    { set: 'prod/eu', key: 'HOST', value: 'eu.local' },
    { set: '', key: 'PORT', value: '80' },
    { set: 'prod', key: 'TOKEN', value: token },
  ];
}

const tree = (tokenLength: number) => `command 0: store main, set prod/eu (reads (root) > prod > prod/eu)
├─ HOST = "eu.local"
│  ├─ origin: store, set prod/eu
│  └─ candidates (root first)
│     ├─ (root)   "root.local"  shadowed
│     ├─ prod     "prod.local"  shadowed
│     └─ prod/eu  "eu.local"    won
├─ PORT = 80
│  ├─ origin: store, set (root)
│  ├─ candidates (root first)
│  │  └─ (root)  "80"  won
│  ├─ default: "8080"
│  └─ tests
│     ├─ ✔ $.value > 0
│     ├─ ✘ $.value > 1000 — the value of key "PORT" failed the test $.value > 1000
│     └─ ✔ $.value < 65536
├─ MODE = "prod"
│  ├─ origin: override
│  ├─ override: "prod"
│  └─ default: "dev"
├─ TOKEN = (hidden)
│  ├─ origin: store, set prod
│  ├─ hidden: the export leaves it out
│  └─ candidates (root first)
│     └─ prod  (hidden)  won
└─ URL = "http://eu.local:80/${tokenLength}"
   ├─ origin: const
   ├─ computed from a hidden key (exported all the same)
   └─ const: http://{{ $.configs.HOST.value }}:{{ $.configs.PORT.value }}/{{ $.configs.TOKEN.value.length }}
      ├─ reads HOST = "eu.local" (store)
      ├─ reads PORT = "80" (store)
      └─ reads TOKEN = (hidden) (store)
✘ validation failed: 1 failure
`;

const ARGS = ['eval', '--store', 'main', '--set', 'prod/eu', '--schema', 'app.cfgu.json', '--override', 'MODE=prod', '--explain'];

describe('cfgu eval --explain', { concurrency: true }, () => {
  test('prints the tree: origins, candidates down the hierarchy, override, default, const reads, tests; exit 1 on a failed test', async () => {
    // A planted secret: the whole-suite scan fails the run if any output carries it.
    const token = planted('explain-token');
    const dir = project({ 'app.cfgu.json': SCHEMA, 'data.json': data(token) });
    const r = await runCli(ARGS, { cwd: dir });
    assert.equal(r.stdout, tree(token.length));
    assert.equal(r.stderr, 'cfgu eval: validation failed: 1 failure (explained on standard output)\n');
    assert.equal(r.code, 1);
  });

  test('--format json: the explanation\'s shape (docs/explain.md), hidden values withheld', async () => {
    const token = planted('explain-json');
    const dir = project({ 'app.cfgu.json': SCHEMA, 'data.json': data(token) });
    const r = await runCli([...ARGS, '--format', 'json'], { cwd: dir });
    assert.equal(r.code, 1);
    const out = JSON.parse(r.stdout);
    assert.deepEqual(Object.keys(out), ['version', 'ok', 'values', 'failures', 'explanations', 'backupStores']);
    assert.deepEqual([out.version, out.ok, out.values, out.backupStores], [1, false, null, []]);
    assert.deepEqual(out.failures, [{ command: 0, key: 'PORT', rule: 'test', message: 'the value of key "PORT" failed the test $.value > 1000' }]);
    const [c] = out.explanations;
    assert.deepEqual([c.command, c.store, c.set, c.hierarchy, c.evaluated], [0, 'main', 'prod/eu', ['', 'prod', 'prod/eu'], true]);
    assert.deepEqual(c.keys[3], {
      key: 'TOKEN',
      declared: true,
      hidden: true,
      withheld: 'hidden',
      origin: 'store',
      set: 'prod',
      candidates: [{ set: 'prod', status: 'won', withheld: 'hidden' }],
      tests: [],
      failures: [],
    });
    assert.deepEqual(c.keys[1].tests, [
      { index: 0, expression: '$.value > 0', passed: true },
      { index: 1, expression: '$.value > 1000', passed: false, message: 'the value of key "PORT" failed the test $.value > 1000' },
      { index: 2, expression: '$.value < 65536', passed: true },
    ]);
  });

  test('--reveal-hidden shows hidden values', async () => {
    const dir = project({ 'app.cfgu.json': SCHEMA, 'data.json': data('not-a-planted-token-value1') });
    const r = await runCli([...ARGS, '--reveal-hidden'], { cwd: dir });
    assert.equal(r.code, 1);
    assert.ok(r.stdout.includes('├─ TOKEN = "not-a-planted-token-value1"\n'), r.stdout);
    assert.ok(r.stdout.includes('│     └─ prod  "not-a-planted-token-value1"  won\n'), r.stdout);
    assert.ok(r.stdout.includes('      └─ reads TOKEN = "not-a-planted-token-value1" (store)\n'), r.stdout);
    assert.equal(r.stdout.includes('(hidden)'), false);
  });

  test('a valid evaluation exits 0; a key piped from standard input says so', async () => {
    const dir = project({ 'app.cfgu.json': { keys: { A: { default: 1 } } }, 'data.json': [] });
    const piped = JSON.stringify({ P: { key: 'P', value: 'from-pipe', origin: 'override', cfgu: {}, set: 'dev' } });
    const r = await runCli(['eval', '--schema', 'app.cfgu.json', '--explain'], { cwd: dir, stdin: piped });
    assert.equal(r.stderr, '');
    assert.equal(r.code, 0);
    assert.equal(
      r.stdout,
      `command 0: store main, set (root) (reads (root))
├─ P = "from-pipe"
│  ├─ origin: override, piped from standard input (set dev)
│  └─ not declared by this command: carried through the pipe
└─ A = 1
   ├─ origin: default
   └─ default: "1"
✔ valid
`,
    );
  });

  test('--defaults with --explain reads no store', async () => {
    const dir = project({ 'app.cfgu.json': { keys: { A: { default: 'x' }, B: {} } } });
    const r = await runCli(['eval', '--schema', 'app.cfgu.json', '--defaults', '--explain', '--no-stdin'], { cwd: dir });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(
      r.stdout,
      `command 0: no store, set (root) (reads (root))
├─ A = "x"
│  ├─ origin: default
│  └─ default: "x"
└─ B = (empty)
   └─ origin: empty
✔ valid
`,
    );
  });

  test('flag checks: --format and --reveal-hidden need --explain; --format is tree or json; --explain is not for --watch', async () => {
    const dir = project({ 'app.cfgu.json': { keys: { A: {} } }, 'data.json': [] });
    const cases: Array<[string[], string]> = [
      [['--format', 'json'], 'cfgu eval: --format chooses how --explain prints: give --explain too'],
      [['--reveal-hidden'], 'cfgu eval: --reveal-hidden shows hidden values in --explain: give --explain too'],
      [['--explain', '--format', 'yaml'], 'cfgu eval: --format must be tree or json, not "yaml"'],
      [['--explain', '--watch'], 'cfgu eval: --explain prints one explanation: it cannot be combined with --watch'],
    ];
    for (const [flags, message] of cases) {
      const r = await runCli(['eval', '--schema', 'app.cfgu.json', ...flags], { cwd: dir });
      assert.equal(r.code, 2, flags.join(' '));
      assert.equal(r.stdout, '');
      assert.equal(r.stderr, `${message}\nRun "cfgu eval --help" for usage.\n`);
    }
  });
});
