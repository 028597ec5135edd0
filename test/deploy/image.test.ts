// The container image, built the way this machine can (scripts/image-local.mjs: buildah with local Debian minbase
// bases and Node 24 from the npm registry) and run with `buildah run --isolation chroot`: its configuration
// (entrypoint, default .configu path, non-root user, labels, health check), its size (under 300 MB), files read-only
// to that user, a SQLite query with the shipped native module, `cfgu --version` naming Node 24's sandbox build, a
// sandbox child using the build's start-up aids, /ready, a POST /export against a mounted .configu (an isolate
// computes a key), the health check command, and SIGTERM ending the server with exit 0.
//
// `npm test` starts the image build in the background when the run begins (scripts/test.mjs) and runs this file last,
// so the build overlaps the rest of the suite; run alone, this file builds the image itself. Base images are cached
// outside the repository (docs/deploy.md), so only the first build on a machine pays for debootstrap.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { ROOT, freePort, postJson, removeTempDirs, tempDir, waitForStatus, writeJson } from '../server/helpers.js';
import { requireOrSkip } from '../helpers/services.js';
import { waitFor } from '../helpers/wait.js';

const has = (cmd: string) => spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;
const cleanEnv = () => Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k)));
const buildah = (args: string[]) => execFileSync('buildah', args, { encoding: 'utf8', env: cleanEnv(), maxBuffer: 64 << 20 });
const containers: string[] = [];
let builtHere: string | undefined;
/** A process's environment block ('' when it is gone or not ours to read). */
const environOf = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/environ`, 'utf8');
  } catch {
    return '';
  }
};

/** `buildah images` size text ("287 MB", "1.02 GB") in megabytes (10^6 bytes, the unit buildah prints). */
function imageMegabytes(text: string): number {
  const m = /^([\d.]+)\s*(B|kB|KB|MB|GB)$/.exec(text);
  assert.ok(m, `unexpected size text from buildah: ${text}`);
  const scale: Record<string, number> = { B: 1e-6, kB: 1e-3, KB: 1e-3, MB: 1, GB: 1e3 };
  return Number(m[1]) * scale[m[2]!]!;
}

after(() => {
  for (const c of containers) spawnSync('buildah', ['rm', c], { stdio: 'ignore' });
  if (builtHere) spawnSync('buildah', ['rmi', builtHere], { stdio: 'ignore' });
  removeTempDirs();
});

/** The image tag: from the build scripts/test.mjs started in the background, else built now. */
async function image(): Promise<string> {
  const log = process.env.CFGU_IMAGE_BUILD_LOG;
  if (log) {
    const rc = await waitFor('the background image build', () => (existsSync(`${log}.rc`) ? readFileSync(`${log}.rc`, 'utf8').trim() : false), 60 * 60_000);
    const out = readFileSync(log, 'utf8');
    if (rc !== '0') throw new Error(`the image build failed (exit ${rc}):\n${out.slice(-4000)}`);
    builtHere = out.trim().split('\n').pop()!;
    return builtHere;
  }
  const tag = `localhost/cfgu-test:${randomBytes(4).toString('hex')}`;
  const child = spawn(process.execPath, [join(ROOT, 'scripts/image-local.mjs'), tag], { env: cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const code = await new Promise<number | null>((r) => child.on('exit', r));
  if (code !== 0) throw new Error(`the image build failed (exit ${code}):\n${out.slice(-4000)}`);
  builtHere = tag;
  return tag;
}

test('the image: configuration, read-only files, --version, /ready, POST /export on a mounted .configu, health, SIGTERM exit 0', async (t) => {
  if (!has('buildah') || !has('debootstrap')) {
    requireOrSkip(t, 'buildah and debootstrap', 'scripts/test-setup-buildah.sh installs them');
    return;
  }
  const tag = await image();

  const info = JSON.parse(buildah(['inspect', '--type', 'image', tag])) as {
    Docker: { config: Record<string, any> };
    OCIv1: { config: Record<string, any> };
  };
  const config = info.Docker.config;
  assert.deepEqual(config.Entrypoint, ['node', '/app/bin/cfgu.js']);
  assert.deepEqual(config.Cmd, ['serve']);
  assert.equal(config.User, '65532:65532');
  assert.ok((config.Env as string[]).includes('CONFIGU_CONFIGURATION=/config/.configu'), config.Env);
  assert.deepEqual(config.Healthcheck?.Test, ['CMD', 'cfgu', 'health']);
  assert.equal(config.Labels['org.opencontainers.image.title'], 'cfgu');
  assert.equal(config.Labels['org.opencontainers.image.licenses'], 'Apache-2.0');
  // The size buildah reports (all layers, uncompressed; decimal units): under 300 MB (docs/deploy.md has the figures).
  // One line per name of the image: an identical image left by an interrupted run (same layers, another tag) is the
  // same image, listed again.
  const size = buildah(['images', '--format', '{{.Size}}', tag]).trim().split('\n')[0]!.trim();
  process.stderr.write(`image ${tag}: ${size}\n`);
  assert.ok(imageMegabytes(size) < 300, `the image is ${size}, the goal is under 300 MB`);

  const ctr = buildah(['from', '--pull-never', tag]).trim();
  containers.push(ctr);
  const runIn = (args: string[], extra: string[] = []) =>
    spawnSync('buildah', ['run', '--isolation', 'chroot', ...extra, ctr, '--', ...args], { encoding: 'utf8', env: cleanEnv() });

  // The application belongs to root and the runtime user cannot change it.
  const owners = runIn(['node', '-e', "const fs=require('fs');for(const p of ['/app','/app/dist/cli.js','/app/node_modules'])console.log(p,fs.statSync(p).uid,(fs.statSync(p).mode&0o022).toString(8))"], ['--user', '65532:65532']);
  assert.equal(owners.stdout, '/app 0 0\n/app/dist/cli.js 0 0\n/app/node_modules 0 0\n', owners.stderr);
  const write = runIn(['node', '-e', "require('fs').writeFileSync('/app/dist/cli.js','x')"], ['--user', '65532:65532']);
  assert.notEqual(write.status, 0);
  assert.match(write.stderr, /EACCES/);

  // The native modules as shipped (pruned, stripped) on the image's own Node (stripped too): a SQLite query.
  const sqlite = runIn(
    ['node', '--input-type=module', '-e', "const {sqliteDriver,describeSqliteBuild}=await import('/app/dist/sqlite-build.js');const D=sqliteDriver();const db=new D(':memory:');console.log(db.prepare('SELECT 6*7 AS n').get().n, describeSqliteBuild())"],
    ['--user', '65532:65532'],
  );
  assert.deepEqual([sqlite.status, sqlite.stdout.replace(/13\.\d+\.\d+/, '13.x')], [0, '42 better-sqlite3 13.x (better-sqlite3-node22)\n'], sqlite.stderr);
  const lines = runIn(['sh', '-c', 'ls -d /app/node_modules/better-sqlite3*']);
  assert.equal(lines.stdout, '/app/node_modules/better-sqlite3-node22\n', 'the image keeps only the SQLite line its Node loads');

  const version = runIn([...config.Entrypoint, '--version'], ['--user', '65532:65532']);
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
  assert.match(version.stdout, new RegExp(`^${pkg.version.replace(/\./g, '\\.')}\\nnode 24\\.\\d+\\.\\d+, sandbox isolated-vm 7\\.\\d+\\.\\d+ \\(isolated-vm-node24\\)\\n$`), version.stderr);

  // The sandbox's start-up aids were made in the builder stage with the image's Node and ship in dist/sandbox: a
  // sandbox child in the image warms up by the plan and V8 takes the code cache (the runtime's Node is stripped, not
  // another build).
  const child = runIn(
    ['node', '--no-node-snapshot', '/app/dist/sandbox-child.js', JSON.stringify({ bundle: '/app/dist/sandbox/libraries.js', timeoutMs: 1000, memoryMb: 64, retireHeapMb: 32 })],
    ['--user', '65532:65532'],
  );
  const ready = JSON.parse(child.stdout.split('\n')[0] || '{}') as { t?: string; codeCache?: string; seal?: { warm?: string; unsealed?: unknown[] } };
  assert.deepEqual([ready.t, ready.seal?.warm, ready.codeCache, ready.seal?.unsealed], ['ready', 'plan', 'accepted', []], `${child.stdout.slice(0, 500)}\n${child.stderr}`);

  // A project mounted read-only at /config: a json-file store and a key computed in the expression sandbox.
  const dir = tempDir('cfgu-image-');
  writeJson(join(dir, 'data.json'), [{ set: '', key: 'GREETING', value: 'hello' }]);
  writeJson(join(dir, '.configu'), { stores: { main: { type: 'json-file', configuration: { path: 'data.json' } } } });
  // Temporary folders are private to their owner; the image's user must be able to read the mount.
  chmodSync(dir, 0o755);
  for (const f of ['data.json', '.configu']) chmodSync(join(dir, f), 0o644);
  const port = await freePort();
  const env = ['--env', `CONFIGU_HTTP_PORT=${port}`, '--env', 'CONFIGU_HTTP_HOST=127.0.0.1'];
  const server = spawn('buildah', ['run', '--isolation', 'chroot', '--user', '65532:65532', ...env, '-v', `${dir}:/config:ro`, ctr, '--', ...config.Entrypoint, ...config.Cmd], {
    env: cleanEnv(),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  server.stdout.on('data', (d) => (out += d));
  server.stderr.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((r) => server.on('exit', (code) => r(code)));
  try {
    const base = `http://127.0.0.1:${port}`;
    await waitForStatus(`${base}/ready`, 200, 5 * 60_000).catch((e: Error) => {
      throw new Error(`${e.message}\n${out}`);
    });
    const r = await postJson(`${base}/export`, [{ schema: { keys: { GREETING: {}, SHOUT: { const: '{{ $.configs.GREETING.value.toUpperCase() }}' } } } }]);
    assert.equal(r.status, 200, r.body);
    assert.deepEqual(r.json(), { GREETING: 'hello', SHOUT: 'HELLO' });
    const health = runIn(['cfgu', 'health'], ['--user', '65532:65532', ...env]);
    assert.deepEqual([health.status, health.stdout], [0, `http://127.0.0.1:${port}/live: 200\n`], health.stderr);

    // SIGTERM to the server process (the one listening; with chroot isolation it is a child of buildah).
    const pid = execFileSync('sh', ['-c', `ps -eo pid,args | awk '/[c]fgu.js serve/ && /node/ {print $1}'`], { encoding: 'utf8' })
      .split('\n')
      .map(Number)
      .find((p) => p > 0 && environOf(p).includes(`CONFIGU_HTTP_PORT=${port}`));
    assert.ok(pid, `the server process on port ${port}`);
    process.kill(pid, 'SIGTERM');
    assert.equal(await exited, 0, out);
  } finally {
    if (server.exitCode === null) server.kill('SIGKILL');
  }
});
