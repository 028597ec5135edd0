// `cfgu health` (the image's HEALTHCHECK, no curl needed): it finds the server's port and TLS where `cfgu serve`
// finds them (the .configu's interface.proxy, the environment, flags) and exits 0 only on a 200 answer.
// The first check runs the built binary against the binary's server (as the image does); the other checks run the
// command in this process (runCli) against a server started in this process: what they test is the command's logic.
import { after, afterEach, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { cfgu, closeSandbox, runCli } from '../cli/helpers.js';
import { freePort, killChildren, removeTempDirs, serveOnFreePort, tempDir, waitForStatus, writeJson } from '../server/helpers.js';
import { serveInProcess, stopAfter } from '../helpers/in-process.js';

after(async () => {
  await closeSandbox();
  await killChildren();
  removeTempDirs();
});
afterEach(killChildren);

function project(proxy: Record<string, unknown> | undefined): { dir: string; file: string } {
  const dir = tempDir();
  writeJson(join(dir, 'data.json'), [{ set: '', key: 'GREETING', value: 'hello' }]);
  const file = writeJson(join(dir, '.configu'), {
    stores: { main: { type: 'json-file', configuration: { path: 'data.json' } } },
    ...(proxy ? { interface: { proxy } } : {}),
  });
  return { dir, file };
}

test('plain HTTP: the port from the environment, /live and /ready answer 200, exit 0', async (t) => {
  const { dir, file } = project(undefined);
  const { p, port, base } = await serveOnFreePort(['--config', file, '--workers', '1']);
  stopAfter(t, p);
  await waitForStatus(`${base}/ready`, 200, Infinity);
  const env = { CONFIGU_HTTP_PORT: String(port), CONFIGU_CONFIGURATION: file };
  assert.deepEqual(await cfgu(['health'], { cwd: dir, env }), { code: 0, stdout: `http://127.0.0.1:${port}/live: 200\n`, stderr: '' });
  assert.deepEqual(await runCli(['health', '--path', '/ready'], { cwd: dir, env }), {
    code: 0,
    stdout: `http://127.0.0.1:${port}/ready: 200\n`,
    stderr: '',
  });
});

test('TLS and the port from the .configu: the check uses HTTPS on that port', async (t) => {
  const dir = tempDir();
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=localhost', '-days', '1', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')], {
    stdio: 'ignore',
  });
  const port = await freePort();
  const { file } = project({ http: { port, host: '127.0.0.1', tls: { enabled: true, cert: join(dir, 'cert.pem'), key: join(dir, 'key.pem') } } });
  stopAfter(t, await serveInProcess(file, { flags: {} }));
  assert.deepEqual(await runCli(['health', '--config', file], { cwd: dir }), { code: 0, stdout: `https://127.0.0.1:${port}/live: 200\n`, stderr: '' });
});

test('nothing listening: exit 1 and one line naming the address and the reason', async () => {
  const { dir, file } = project(undefined);
  const port = await freePort();
  const r = await runCli(['health', '--config', file, '--port', String(port)], { cwd: dir });
  assert.deepEqual(r, { code: 1, stdout: '', stderr: `cfgu health: http://127.0.0.1:${port}/live: ECONNREFUSED\n` });
});

test('a server that answers something else than 200 fails the check with its status', async () => {
  const { dir, file } = project(undefined);
  const { createServer } = await import('node:http');
  const server = createServer((_req, res) => res.writeHead(503).end());
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  try {
    const r = await runCli(['health', '--config', file, '--port', String(port), '--path', '/ready'], { cwd: dir });
    assert.deepEqual(r, { code: 1, stdout: '', stderr: `cfgu health: http://127.0.0.1:${port}/ready: status 503\n` });
  } finally {
    server.close();
  }
});

test('usage errors exit 2', async () => {
  const r = await runCli(['health', '--path', '/docs'], { cwd: tempDir() });
  assert.deepEqual(r, { code: 2, stdout: '', stderr: 'cfgu health: --path must be one of /live, /ready\nRun "cfgu health --help" for usage.\n' });
});
