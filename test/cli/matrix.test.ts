/**
 * `cfgu matrix` and `cfgu diff` (docs/cli.md; docs/explain.md, "Comparing sets"): the tables on standard output,
 * exactly; `--format json`; hidden values compared but shown as `(hidden)` unless `--reveal-hidden`; a prefix; the
 * flag checks (exit 2).
 */
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { closeSandbox, killChildren, project, removeTempDirs, runCli } from './helpers.js';

after(async () => {
  killChildren();
  removeTempDirs();
  await closeSandbox();
});

const SCHEMA = {
  keys: {
    HOST: { required: true },
    PORT: { default: 8080, test: ['$.value > 0', '$.value > 1000'] },
    MODE: { enum: ['dev', 'prod'], default: 'dev' },
    TOKEN: { hidden: true },
    REGION: {},
    URL: { const: 'https://{{ $.configs.HOST.value }}' },
  },
};

const DATA = [
  { set: '', key: 'REGION', value: 'any' },
  { set: 'prod', key: 'HOST', value: 'prod.local' },
  { set: 'prod', key: 'PORT', value: '443' },
  { set: 'prod', key: 'TOKEN', value: 'tok-prod-1234' },
  { set: 'prod/eu', key: 'HOST', value: 'eu.local' },
  { set: 'prod/eu', key: 'MODE', value: 'prod' },
  { set: 'staging', key: 'MODE', value: 'qa' },
  { set: 'staging', key: 'TOKEN', value: 'tok-staging-99' },
];

const dir = () => project({ 'app.cfgu.json': SCHEMA, 'data.json': DATA });

describe('cfgu matrix', { concurrency: true }, () => {
  test('a prefix: a row per key, a column per set, where each value came from, ✘ and the rule; exit 0', async () => {
    const r = await runCli(['matrix', '--store', 'main', '--schema', 'app.cfgu.json', '--prefix', ''], { cwd: dir() });
    assert.equal(r.stderr, '');
    assert.equal(r.code, 0);
    assert.equal(
      r.stdout,
      `KEY     (root)                prod                        prod/eu                   staging
HOST    (no value) ✘ missing  prod.local                  eu.local                  (no value) ✘ missing
PORT    8080 (default)        443 ✘ test 1                443 (from prod) ✘ test 1  8080 (default)
MODE    dev (default)         dev (default)               prod                      qa ✘ enum
TOKEN   (hidden)              (hidden)                    (hidden) (from prod)      (hidden)
REGION  any                   any (from /)                any (from /)              any (from /)
URL     https:// (const)      https://prod.local (const)  https://eu.local (const)  https:// (const)

6 keys at 4 sets; 5 cells not ok ((root) 1, prod 1, prod/eu 1, staging 2)
`,
    );
  });

  test('--set, --format json: the shape of POST /matrix; --reveal-hidden shows hidden values', async () => {
    const d = dir();
    const r = await runCli(['matrix', '--schema', 'app.cfgu.json', '--set', 'staging', '--set', 'prod', '--format', 'json'], { cwd: d });
    assert.equal(r.code, 0);
    const m = JSON.parse(r.stdout);
    assert.deepEqual([m.version, m.store, m.sets, m.keys, m.failed, m.fromBackup], [1, 'main', ['staging', 'prod'], ['HOST', 'PORT', 'MODE', 'TOKEN', 'REGION', 'URL'], [2, 1], false]);
    assert.deepEqual(m.cells[1], [
      { state: 'ok', origin: 'default', value: '8080' },
      { state: 'test', origin: 'store', set: 'prod', value: '443', failures: [{ rule: 'test', message: 'the value of key "PORT" failed the test $.value > 1000', test: 1 }] },
    ]);
    assert.deepEqual(m.cells[3], [
      { state: 'ok', origin: 'store', set: 'staging', hidden: true, withheld: 'hidden' },
      { state: 'ok', origin: 'store', set: 'prod', hidden: true, withheld: 'hidden' },
    ]);
    assert.ok(!r.stdout.includes('tok-'));
    const revealed = await runCli(['matrix', '--schema', 'app.cfgu.json', '--set', 'staging', '--reveal-hidden'], { cwd: d });
    assert.ok(revealed.stdout.includes('TOKEN   tok-staging-99\n'), revealed.stdout);
  });

  test('flag mistakes: exit 2 with the reason', async () => {
    const d = dir();
    const cases: Array<[string[], string]> = [
      [['matrix', '--schema', 'app.cfgu.json'], 'cfgu matrix: give --prefix PATH or at least one --set PATH'],
      [['matrix', '--schema', 'app.cfgu.json', '--prefix', 'prod', '--set', 'a'], 'cfgu matrix: --prefix and --set cannot be combined: give one or the other'],
      [['matrix', '--schema', 'app.cfgu.json', '--prefix', 'prod', '--format', 'yaml'], 'cfgu matrix: --format must be table or json, not "yaml"'],
    ];
    for (const [args, message] of cases) {
      const r = await runCli(args, { cwd: d });
      assert.deepEqual([r.code, r.stdout, r.stderr], [2, '', `${message}\nRun "cfgu matrix --help" for usage.\n`]);
    }
  });
});

describe('cfgu diff', { concurrency: true }, () => {
  test('only the keys that differ, side by side', async () => {
    const r = await runCli(['diff', 'prod', 'prod/eu', '--schema', 'app.cfgu.json'], { cwd: dir() });
    assert.deepEqual([r.code, r.stderr], [0, '']);
    assert.equal(
      r.stdout,
      `KEY   prod                        prod/eu
HOST  prod.local                  eu.local
MODE  dev (default)               prod
URL   https://prod.local (const)  https://eu.local (const)

3 of 6 keys differ
`,
    );
  });

  test('a changed state is a difference; a hidden value that differs is listed but not shown', async () => {
    const r = await runCli(['diff', 'prod', 'staging', '--schema', 'app.cfgu.json'], { cwd: dir() });
    assert.equal(r.code, 0);
    assert.equal(
      r.stdout,
      `KEY    prod                        staging
HOST   prod.local                  (no value) ✘ missing
PORT   443 ✘ test 1                8080 (default)
MODE   dev (default)               qa ✘ enum
TOKEN  (hidden)                    (hidden)
URL    https://prod.local (const)  https:// (const)

5 of 6 keys differ
`,
    );
  });

  test('--format json: the matrix of the keys that differ and how many are the same; --reveal-hidden', async () => {
    const d = dir();
    const r = await runCli(['diff', 'prod', 'staging', '--schema', 'app.cfgu.json', '--format', 'json'], { cwd: d });
    const out = JSON.parse(r.stdout);
    assert.deepEqual([out.sets, out.keys, out.same], [['prod', 'staging'], ['HOST', 'PORT', 'MODE', 'TOKEN', 'URL'], 1]);
    assert.deepEqual(out.cells[3], [
      { state: 'ok', origin: 'store', set: 'prod', hidden: true, withheld: 'hidden' },
      { state: 'ok', origin: 'store', set: 'staging', hidden: true, withheld: 'hidden' },
    ]);
    assert.ok(!r.stdout.includes('tok-'));
    const revealed = await runCli(['diff', 'prod', 'staging', '--schema', 'app.cfgu.json', '--reveal-hidden'], { cwd: d });
    assert.ok(revealed.stdout.includes('TOKEN  tok-prod-1234               tok-staging-99\n'), revealed.stdout);
  });

  test('no differences; flag mistakes exit 2', async () => {
    const d = dir();
    const same = await runCli(['diff', 'prod/eu', 'prod/eu/x', '--schema', 'app.cfgu.json'], { cwd: d });
    assert.deepEqual([same.code, same.stdout], [0, 'no differences: the 6 keys are the same at prod/eu and prod/eu/x\n']);
    const cases: Array<[string[], string]> = [
      [['diff', 'prod', '--schema', 'app.cfgu.json'], 'cfgu diff: give two sets to compare, e.g. `cfgu diff prod prod/eu` (got 1)'],
      [['diff', 'prod', '/prod/', '--schema', 'app.cfgu.json'], 'cfgu diff: the two sets are the same set ("prod"): give two different sets'],
    ];
    for (const [args, message] of cases) {
      const r = await runCli(args, { cwd: d });
      assert.deepEqual([r.code, r.stdout, r.stderr], [2, '', `${message}\nRun "cfgu diff --help" for usage.\n`]);
    }
  });
});
