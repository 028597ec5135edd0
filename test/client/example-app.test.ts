/**
 * The complete example application of docs/clients.md (examples/client-app/app.mjs), run as written with node against
 * a real `cfgu serve` of a copy of the examples folder: it starts with the server's answer, prints a change written
 * to the store, stops on SIGTERM; started again while the server is down, it runs with the answer it kept (stale).
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { copyFileSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { killChildren, removeTempDirs, ROOT, serveOnFreePort, tempDir, waitForStatus } from '../server/helpers.js';
import { waitFor } from '../helpers/wait.js';

after(async () => {
  await killChildren();
  removeTempDirs();
});

/** Run the example; its output so far, and its exit. */
function runApp(env: Record<string, string>) {
  const child = spawn(process.execPath, [join(ROOT, 'examples/client-app/app.mjs')], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const out = { stdout: '', stderr: '' };
  child.stdout.setEncoding('utf8').on('data', (d: string) => (out.stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (out.stderr += d));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  after(() => void child.kill('SIGKILL'));
  return { child, out, exited };
}

test('the example application reads, follows, stops, and starts from its kept answer while the server is down', async () => {
  const dir = tempDir('cfgu-client-app-');
  for (const f of ['.configu', 'app.cfgu.yaml', 'config.json']) copyFileSync(join(ROOT, 'examples', f), join(dir, f));
  const { p, base } = await serveOnFreePort(['--config', join(dir, '.configu'), '--workers', '1']);
  await waitForStatus(`${base}/ready`, 200);
  const env = { CFGU_URL: base, APP_CACHE_FILE: join(dir, 'app-settings.json') };

  const app = runApp(env);
  await waitFor('the start line', () => app.out.stdout.includes('\n'));
  assert.equal(app.out.stdout, 'started: api eu.api.example.com, region eu-west-1, log level warn\n');
  // An editor saves the store with a new host for production/eu.
  const entries = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')) as Array<{ set: string; key: string; value: string }>;
  entries.find((e) => e.set === 'production/eu' && e.key === 'API_HOST')!.value = 'eu2.api.example.com';
  writeFileSync(join(dir, 'config.json.new'), JSON.stringify(entries));
  renameSync(join(dir, 'config.json.new'), join(dir, 'config.json'));
  await waitFor('the change line', () => app.out.stdout.split('\n').length > 2);
  app.child.kill('SIGTERM');
  assert.equal(await app.exited, 0, app.out.stderr);
  assert.equal(
    app.out.stdout,
    'started: api eu.api.example.com, region eu-west-1, log level warn\nchanged: api eu2.api.example.com, region eu-west-1, log level warn\nstopped\n',
  );
  assert.equal(app.out.stderr, '');

  // The server down: the application starts from the answer it kept.
  p.child.kill('SIGTERM');
  await p.exited;
  const offline = runApp(env);
  await waitFor('the start line', () => offline.out.stdout.includes('\n'));
  assert.equal(offline.out.stdout, 'started: api eu2.api.example.com, region eu-west-1, log level warn (stale: the server could not be reached)\n');
  await waitFor('a failed reconnection reported', () => offline.out.stderr.includes('\n'));
  assert.match(offline.out.stderr.split('\n')[0]!, /^cfgu: Server Unreachable \(0\): no answer from http:\/\/127\.0\.0\.1:\d+\/export \(ECONNREFUSED\)$/);
  offline.child.kill('SIGTERM');
  assert.equal(await offline.exited, 0);
  assert.match(offline.out.stdout, /\nstopped\n$/);
});
