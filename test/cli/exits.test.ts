/**
 * Exit codes and messages not covered elsewhere, through the built binary (no command, an unknown one) and in-process
 * through the command runner: `cfgu` without a command or with an
 * unknown one (2), `-h` (0), CONFIGU_CONFIGURATION picking the .configu, and an unreadable store for `upsert` (1).
 */
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { cfgu, closeSandbox, killChildren, project, removeTempDirs, runCli, tempDir, write } from './helpers.js';

after(async () => {
  killChildren();
  removeTempDirs();
  await closeSandbox();
});

const USAGE = /^Usage: cfgu <command> \[options\]\n\nCommands:\n {2}serve +\S.*\n {2}upsert +\S.*\n {2}history +\S.*\n {2}rollback +\S.*\n {2}eval +\S.*\n {2}matrix +\S.*\n {2}diff +\S.*\n {2}export +\S.*\n {2}health +\S.*\n {2}generate +\S.*\n {2}token +\S.*\n\nOptions:\n {2}-V, --version +\S.*\n {2}-h, --help +\S.*\n\nRun "cfgu <command> --help" for a command's options\.\n$/;

describe('cfgu: exit codes', { concurrency: true }, () => {
  test('no command: the usage, exit 2', async () => {
    const r = await cfgu([], { cwd: tempDir() });
    assert.equal(r.code, 2);
    assert.match(r.stdout, USAGE);
  });

  test('an unknown command: exit 2 naming it, then the usage', async () => {
    const r = await cfgu(['frob'], { cwd: tempDir() });
    assert.equal(r.code, 2);
    assert.equal(r.stdout, '');
    assert.ok(r.stderr.startsWith('cfgu: unknown command "frob"\n\nUsage: cfgu <command> [options]\n'), r.stderr);
  });

  test('-h on every command: its help, exit 0', async () => {
    for (const command of ['upsert', 'eval', 'export', 'serve']) {
      const r = await runCli([command, '-h'], { cwd: tempDir() });
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, new RegExp(`^Usage: cfgu ${command} `));
    }
  });

  test('CONFIGU_CONFIGURATION picks the .configu when --config and CONFIGU_CONFIG are absent', async () => {
    const dir = project({ 'a.cfgu.json': { keys: { A: {} } } });
    write(join(dir, 'alt', 'x.configu'), { stores: { alt: { type: 'json-file', configuration: { path: 'alt.json' } } } });
    write(join(dir, 'alt', 'alt.json'), [{ set: '', key: 'A', value: 'from-alt' }]);
    const r = await runCli(['eval', '--schema', 'a.cfgu.json'], { cwd: dir, env: { CONFIGU_CONFIGURATION: join(dir, 'alt', 'x.configu') } });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(JSON.parse(r.stdout).A.value, 'from-alt');
    const missing = await runCli(['eval', '--schema', 'a.cfgu.json'], { cwd: dir, env: { CONFIGU_CONFIGURATION: 'nope.configu' } });
    assert.equal(missing.code, 2);
    assert.equal(missing.stderr, 'cfgu eval: nope.configu: no such file (given by CONFIGU_CONFIGURATION)\n');
  });

  test('upsert to a store that cannot be read: exit 1, one line naming the store, nothing written', async () => {
    const dir = project({ 'a.cfgu.json': { keys: { A: {} } }, 'data.json': '{ broken' });
    const r = await runCli(['upsert', '--schema', 'a.cfgu.json', '--kv', 'A=1'], { cwd: dir });
    assert.equal(r.code, 1);
    assert.equal(r.stdout, '');
    assert.equal(r.stderr, 'cfgu upsert: store "main" is unavailable: the file is not valid JSON\n');
    assert.equal(readFileSync(join(dir, 'data.json'), 'utf8'), '{ broken', 'the corrupt file is left as it was');
  });
});

test('a command run in-process returns its exit code and leaves the process exit code alone', async () => {
  const r = await runCli(['eval', '--schema', 'missing.cfgu.json'], { cwd: project() });
  assert.deepEqual(r, { code: 2, stdout: '', stderr: 'cfgu eval: --schema "missing.cfgu.json": missing.cfgu.json: no such file\n' });
  assert.equal(process.exitCode, undefined);
});
