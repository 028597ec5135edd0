/**
 * The package that installs (README, "Install"; docs/clients.md): `npm pack` of the repository, the tarball
 * installed with `npm install ./cfgu-<version>.tgz` into an empty folder with an npm cache of its own, on the Node
 * that runs this test (the machine's; Node 24, or 22, in the pass of scripts/ci-node24.sh). Then, in that folder:
 * `npx cfgu --version`, `npx cfgu serve` on a copy of the package's examples until /live answers, and the example
 * application importing `cfgu/client`. No development dependency is installed and no source is shipped: dist/ comes
 * built in the tarball. The native addons (isolated-vm, better-sqlite3) install as npm installs them for this Node
 * (a prebuilt binary, or a build with node-gyp: this takes minutes).
 *
 * The tarball is packed from a copy of the checkout (its files, tracked or not, but for what .gitignore leaves out),
 * so `prepack` rebuilds the copy's dist/, never the one the other test files are running.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, type SpawnOptions } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { call, removeTempDirs, ROOT, tempDir, waitForStatus } from '../server/helpers.js';
import { killGroups, signalGroup, spawnGroup } from '../helpers/process-groups.js';
import { waitFor } from '../helpers/wait.js';

after(() => {
  killGroups();
  removeTempDirs();
});

const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { name: string; version: string };

/** The environment of the npm commands: this Node first on the PATH, and nothing of the npm that runs the suite. */
function npmEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!/^npm_/i.test(k) && !k.startsWith('CONFIGU_')) env[k] = v;
  env.PATH = `${dirname(process.execPath)}:${process.env.PATH ?? ''}`;
  return env;
}

/** Run a command to its end; its output, or a failure with it. */
function run(command: string, args: string[], options: SpawnOptions & { cwd: string }): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawnGroup(command, args, { ...options, env: npmEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
    child.stderr!.setEncoding('utf8').on('data', (d: string) => (out += d));
    child.once('exit', (code) => {
      signalGroup(child.pid!, 'SIGKILL');
      if (code === 0) resolve(out);
      else reject(new Error(`${command} ${args.join(' ')} exited ${code}:\n${out}`));
    });
  });
}

/**
 * The checkout's files: as git sees them (tracked and new, without what .gitignore leaves out); in a copy without git
 * (scripts/ci-node24.sh copies the tracked files to a folder of their own), every file but what a build or an install
 * made there (node_modules, dist, .cache and the .tmp folders of tests and benchmarks).
 */
function checkoutFiles(): string[] {
  if (existsSync(join(ROOT, '.git'))) {
    return execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: ROOT, encoding: 'utf8' }).split('\0').filter(Boolean);
  }
  const made = new Set(['node_modules', 'dist', '.cache', '.git']);
  const walk = (dir: string): string[] =>
    readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((e) => {
      const path = dir ? `${dir}/${e.name}` : e.name;
      if ((dir === '' && made.has(e.name)) || e.name === '.tmp') return [];
      return e.isDirectory() ? walk(path) : e.isFile() ? [path] : [];
    });
  return walk('');
}

test('npm pack, npm install of the tarball into an empty folder, then npx cfgu and cfgu/client', { timeout: 60 * 60_000 }, async () => {
  const work = tempDir('cfgu-package-');
  // The checkout's files, as git sees them (tracked and new, without what .gitignore leaves out), in a copy.
  const copy = join(work, 'checkout');
  const files = checkoutFiles();
  for (const f of files) {
    if (!existsSync(join(ROOT, f))) continue; // deleted in the working tree
    mkdirSync(dirname(join(copy, f)), { recursive: true });
    cpSync(join(ROOT, f), join(copy, f));
  }
  symlinkSync(join(ROOT, 'node_modules'), join(copy, 'node_modules'));
  const packed = join(work, 'packed');
  mkdirSync(packed);
  await run('npm', ['pack', '--pack-destination', packed, '--cache', join(work, 'pack-cache')], { cwd: copy });
  const tarball = `${pkg.name}-${pkg.version}.tgz`;
  assert.deepEqual(readdirSync(packed), [tarball]);

  // An empty folder, a cache of its own: everything comes from the tarball and the registry.
  const app = join(work, 'app');
  mkdirSync(app);
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'cfgu-install-check', private: true }));
  await run('npm', ['install', '--cache', join(work, 'install-cache'), '--no-audit', '--no-fund', join(packed, tarball)], { cwd: app });
  const installed = join(app, 'node_modules', pkg.name);
  for (const shipped of ['dist/cli.js', 'dist/client.js', 'dist/client-types/index.d.ts', 'bin/cfgu.js', 'examples/client-app/app.mjs', 'LICENSE', 'README.md']) {
    assert.ok(existsSync(join(installed, shipped)), `${shipped} is in the package`);
  }
  for (const absent of [join(installed, 'src'), join(installed, 'test'), join(app, 'node_modules/esbuild'), join(app, 'node_modules/typescript')]) {
    assert.ok(!existsSync(absent), `${absent} is not installed`);
  }

  // npx cfgu --version: the package's version and this Node.
  const version = await run('npx', ['cfgu', '--version'], { cwd: app });
  assert.equal(version.split('\n')[0], pkg.version);
  assert.match(version.split('\n')[1]!, new RegExp(`^node ${process.versions.node.replace(/\./g, '\\.')}, sandbox isolated-vm `));

  // npx cfgu serve on a copy of the package's examples, until /live answers; then an export.
  const site = join(app, 'site');
  cpSync(join(installed, 'examples'), site, { recursive: true });
  const serve = spawnGroup('npx', ['cfgu', 'serve', '--config', join(site, '.configu'), '--port', '0', '--host', '127.0.0.1', '--workers', '1'], {
    cwd: app,
    env: npmEnv(),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  serve.stdout!.setEncoding('utf8').on('data', (d: string) => (log += d));
  serve.stderr!.setEncoding('utf8').on('data', (d: string) => (log += d));
  try {
    const port = await waitFor('the server listening', () => {
      const line = log.split('\n').find((l) => l.includes('"listening; initialising stores"'));
      return line ? (JSON.parse(line) as { port: number }).port : undefined;
    });
    const base = `http://127.0.0.1:${port}`;
    await waitForStatus(`${base}/live`, 200);
    await waitForStatus(`${base}/ready`, 200);
    const body = JSON.stringify([{ store: 'example', set: 'production/eu', schema: { keys: { API_HOST: {}, REGION: {} } } }]);
    const answer = await call(`${base}/export`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    assert.deepEqual([answer.status, answer.body], [200, '{"API_HOST":"eu.api.example.com","REGION":"eu-west-1"}']);

    // A script of the application's own, importing cfgu/client from the installed package: the example application.
    cpSync(join(installed, 'examples/client-app/app.mjs'), join(app, 'app.mjs'));
    const client = spawnGroup(process.execPath, ['app.mjs'], { cwd: app, env: { ...npmEnv(), CFGU_URL: base }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    client.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
    client.stderr!.setEncoding('utf8').on('data', (d: string) => (out += d));
    const exited = new Promise<number | null>((r) => client.once('exit', (code) => r(code)));
    await waitFor('the application started', () => out.includes('\n'));
    signalGroup(client.pid!, 'SIGTERM');
    assert.equal(await exited, 0, out);
    assert.equal(out, 'started: api eu.api.example.com, region eu-west-1, log level warn\nstopped\n');
  } finally {
    signalGroup(serve.pid!, 'SIGTERM');
  }
});
