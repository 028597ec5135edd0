/**
 * A bad `.configu` stops `cfgu serve` with ONE line on stderr naming the file and the property, exit code 1, nothing
 * on stdout, never a stack trace: for each of unreadable (a folder; permission denied), invalid YAML, `cache`,
 * unknown store type and two defaults. Run the way users run it: without `--workers` (the default, the cluster
 * primary checks first), with the file found by walking up from the working folder, and through
 * CONFIGU_CONFIGURATION. Also the `serve` flags' own failures (exact messages and exit codes).
 *
 * The cases run `cfgu serve` in this process (runCli: the same dispatcher and start-up code as the binary, with its
 * output captured), since a bad file fails before anything is started. Two run the built binary itself: the exit code
 * and stderr of a real process (no .configu anywhere), and a file the user cannot read (as root: without the capabilities that bypass file modes).
 */
import { after, afterEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, cpSync, mkdirSync, realpathSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BIN, killChildren, removeTempDirs, ROOT, spawnCfgu, tempDir, writeJson } from './helpers.js';
import { within } from '../helpers/wait.js';
import { requireOrSkip } from '../helpers/services.js';
import { closeSandbox, runCli } from '../cli/helpers.js';

after(async () => {
  await closeSandbox();
  await killChildren();
  removeTempDirs();
});
afterEach(killChildren);


/** `cfgu serve ...args` in this process, from `cwd` (the repository by default, as spawnCfgu). */
const serve = (args: string[], env: Record<string, string | undefined> = {}, cwd = ROOT) => runCli(['serve', ...args], { cwd, env, stdin: null });

const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** Each bad file, written as `.configu` into `dir`; `line` is the exact stderr line (or a pattern) for that path. */
const CASES: Array<{ name: string; write: (file: string) => void; line: (file: string) => string | RegExp }> = [
  {
    name: 'unreadable: the path is a folder',
    write: (file) => mkdirSync(file),
    line: (file) => `cfgu serve: ${file}: cannot read the file: is a folder, not a file`,
  },
  {
    name: 'invalid YAML',
    write: (file) => writeFileSync(file, 'stores: [unclosed\n  - x: {'),
    line: (file) => new RegExp(`^cfgu serve: ${esc(file)}: invalid YAML/JSON at line \\d+, column \\d+: \\S.*$`),
  },
  {
    name: 'a cache property',
    write: (file) => writeJson(file, { cache: 'x.db', stores: { a: { type: 'in-memory' } } }),
    line: (file) => `cfgu serve: ${file}: property "cache" was renamed \`backup\` in v1: rename it to "backup"`,
  },
  {
    name: 'an unknown store type',
    write: (file) => writeJson(file, { stores: { a: { type: 'floppy' } } }),
    line: (file) =>
      `cfgu serve: ${file}: stores.a.type: unknown store type "floppy"; known types: json-file, in-memory, sqlite, postgresql, mysql, mariadb, redis, etcd`,
  },
  {
    name: 'two default stores',
    write: (file) => writeJson(file, { stores: { a: { type: 'in-memory', default: true }, b: { type: 'in-memory', default: true } } }),
    line: (file) => `cfgu serve: ${file}: stores "a" and "b" both have default: true; only one store can be the default`,
  },
];

function assertOneLine(code: number | string | null, stdout: string, stderr: string, line: string | RegExp): void {
  assert.equal(code, 2, `stdout: ${stdout}\nstderr: ${stderr}`);
  assert.equal(stdout, '', 'nothing on stdout');
  assert.ok(stderr.endsWith('\n'), stderr);
  const lines = stderr.slice(0, -1).split('\n');
  assert.equal(lines.length, 1, stderr);
  if (typeof line === 'string') assert.equal(lines[0], line);
  else assert.match(lines[0]!, line);
  assert.doesNotMatch(stderr, /\n\s+at |Error:/, 'no stack trace');
}

describe('a bad .configu: one line, exit 2, no stack (default --workers, i.e. the cluster primary)', () => {
  for (const c of CASES) {
    test(`${c.name} (--config)`, async () => {
      const file = join(tempDir(), '.configu');
      c.write(file);
      const r = await serve(['--config', file, '--port', '0']);
      assertOneLine(r.code, r.stdout, r.stderr, c.line(file));
    });
  }

  // Walking up looks for a *file* named .configu: a folder of that name is passed over (and, with none above it,
  // the result is the "no .configu file found" line, also exit 2).
  for (const c of CASES.filter((x) => !x.name.startsWith('unreadable'))) {
    test(`${c.name} (found by walking up from a subfolder)`, async () => {
      const dir = tempDir();
      const file = join(dir, '.configu');
      c.write(file);
      mkdirSync(join(dir, 'a', 'b'), { recursive: true });
      const r = await serve(['--port', '0'], {}, join(dir, 'a', 'b'));
      assertOneLine(r.code, r.stdout, r.stderr, c.line(file));
    });
  }

  test('walking up passes over a folder named .configu', async () => {
    const dir = tempDir();
    mkdirSync(join(dir, '.configu'));
    mkdirSync(join(dir, 'a'));
    const r = await serve(['--port', '0'], {}, join(dir, 'a'));
    assertOneLine(
      r.code,
      r.stdout,
      r.stderr,
      'cfgu serve: no .configu file found: pass --config PATH, set CONFIGU_CONFIG, or create a .configu in this folder or a parent',
    );
  });

  test('CONFIGU_CONFIGURATION names the file when --config and CONFIGU_CONFIG are absent', async () => {
    const file = join(tempDir(), 'custom.configu');
    writeJson(file, { cache: 'x.db', stores: { a: { type: 'in-memory' } } });
    const r = await serve(['--port', '0'], { CONFIGU_CONFIGURATION: file }, tempDir());
    assertOneLine(r.code, r.stdout, r.stderr, `cfgu serve: ${file}: property "cache" was renamed \`backup\` in v1: rename it to "backup"`);
  });

  test('unreadable: permission denied', async (t) => {
    const dir = tempDir();
    chmodSync(dir, 0o755);
    const file = join(dir, '.configu');
    writeJson(file, { stores: { a: { type: 'in-memory' } } });
    chmodSync(file, 0o000);
    const isRoot = process.getuid?.() === 0;
    if (process.platform !== 'linux') return void requireOrSkip(t, 'a Linux host', `platform is ${process.platform}`);
    // root reads any file through its capabilities: drop the two that bypass file modes (util-linux's setpriv; the
    // process stays root, so a checkout in a folder only root may enter still works). Without setpriv, run a copy of
    // bin/ and dist/ as `nobody` from a world-readable folder, with node_modules linked (needs it readable by nobody).
    let bin = BIN;
    let prefix: string[] = [];
    const setpriv = isRoot ? spawnSync('setpriv', ['--bounding-set', '-dac_override,-dac_read_search', 'true']).status === 0 : false;
    if (setpriv) prefix = ['--bounding-set', '-dac_override,-dac_read_search', process.execPath];
    else if (isRoot) {
      const copy = tempDir('cfgu-nobody-');
      chmodSync(copy, 0o755);
      for (const part of ['bin', 'dist', 'package.json']) cpSync(join(ROOT, part), join(copy, part), { recursive: true });
      const modules = realpathSync(join(ROOT, 'node_modules'));
      symlinkSync(modules, join(copy, 'node_modules'));
      const readable = spawnSync(process.execPath, ['-e', 'require("fs").accessSync(process.argv[1], 4)', join(modules, 'fastify', 'package.json')], {
        uid: 65534,
        gid: 65534,
      });
      if (readable.status !== 0) return void requireOrSkip(t, 'running the binary without root\'s file access', `no setpriv, and ${modules} is not readable by nobody`);
      bin = join(copy, 'bin', 'cfgu.js');
    }
    const asNobody = isRoot && !setpriv;
    const argv = [bin, 'serve', '--config', file, '--port', '0'];
    const child = spawn(setpriv ? 'setpriv' : process.execPath, setpriv ? [...prefix, ...argv] : argv, {
      cwd: dir,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir },
      ...(asNobody ? { uid: 65534, gid: 65534 } : {}),
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const code = await within(new Promise<number | string>((r) => child.on('exit', (c, s) => r(c ?? s ?? -1))), 60_000);
    assertOneLine(code, out, err, `cfgu serve: ${file}: cannot read the file: permission denied`);
  });
});

describe('cfgu serve: flags', () => {
  test('--help: the usage on stdout, exit 0', async () => {
    const r = await serve(['--help']);
    assert.equal(r.code, 0);
    assert.match(r.stdout, /^Usage: cfgu serve \[options\]\n/);
    for (const flag of ['--config PATH', '--port N', '--host ADDR', '--workers N', '-h, --help']) assert.ok(r.stdout.includes(flag), flag);
    assert.equal(r.stderr, '');
  });

  test('an unknown flag: exit 2 with the flag named and a pointer to --help, as the other commands', async () => {
    const r = await serve(['--bogus']);
    assert.equal(r.code, 2);
    assert.equal(r.stderr, 'cfgu serve: unknown option --bogus\nRun "cfgu serve --help" for usage.\n');
    assert.equal(r.stdout, '');
  });

  test('a bad --port and a bad --workers: exit 1, one line naming the flag', async () => {
    const file = writeJson(join(tempDir(), '.configu'), { stores: { a: { type: 'in-memory' } } });
    const port = await serve(['--config', file, '--port', '99999']);
    assertOneLine(port.code, port.stdout, port.stderr, 'cfgu serve: flag --port: must be a whole number from 0 to 65535, got "99999"');
    const workers = await serve(['--config', file, '--port', '0', '--workers', 'many']);
    assertOneLine(workers.code, workers.stdout, workers.stderr, /^cfgu serve: flag --workers: .*"many"/);
  });

  test('no .configu anywhere: exit 1 with the documented line (the built binary: its exit code and stderr)', async () => {
    const p = spawnCfgu(['serve', '--port', '0'], {}, tempDir());
    assertOneLine(
      await within(p.exited, 60_000),
      p.stdout(),
      p.stderr(),
      'cfgu serve: no .configu file found: pass --config PATH, set CONFIGU_CONFIG, or create a .configu in this folder or a parent',
    );
  });
});
