/**
 * Watchers and SIGTERM through the real binary (`cfgu serve`): the stream ends cleanly (a finished response, every
 * event whole), a held long poll is answered 304 at once, and the process exits 0.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { call, killChildren, postJson, removeTempDirs, serveOnFreePort, tempDir, waitForStatus, writeJson } from './helpers.js';
import { openStream } from './sse-client.js';
import { waitFor } from '../helpers/wait.js';

after(async () => {
  await killChildren();
  removeTempDirs();
});

test('SIGTERM: streams end cleanly, held long polls answer 304, exit 0', async () => {
  const dir = tempDir();
  writeJson(join(dir, 'data.json'), [{ set: '', key: 'GREETING', value: 'hello' }]);
  writeJson(join(dir, '.configu'), { stores: { main: { type: 'json-file', configuration: { path: 'data.json' } } } });
  // A long grace period: an answer that only came when it ran out would not be "at once".
  const { p, base } = await serveOnFreePort(['--config', join(dir, '.configu')], { CONFIGU_SHUTDOWN_GRACE_SECONDS: '600' }, dir);
  await waitForStatus(`${base}/ready`, 200);
  const body = [{ schema: { keys: { GREETING: {} } } }];
  const stream = await openStream(`${base}/export`, body);
  await waitFor('the first event', () => stream.events.length === 1);
  const tag = stream.events[0]!.id!;
  const poll = postJson(`${base}/export`, body, { 'if-none-match': tag, prefer: 'wait=300' }, { timeoutMs: 400_000 });
  // SIGTERM only once the server holds both (the stream and the poll): cfgu_watchers on /metrics says so.
  await waitFor('the stream and the long poll held', async () => /^cfgu_watchers 2$/m.test((await call(`${base}/metrics`)).body) || undefined);
  p.child.kill('SIGTERM');
  await stream.ended;
  assert.ok(stream.body.endsWith('\n\n'), 'the stream ends after a whole event');
  assert.deepEqual(stream.events, [{ event: 'message', id: tag, data: '{"GREETING":"hello"}' }]);
  const answer = await poll;
  assert.equal(answer.status, 304);
  assert.equal(answer.headers.etag, tag);
  assert.equal(await p.exited, 0);
  const messages = p.logs().map((l) => l.msg);
  assert.ok(messages.indexOf('shutting down: not ready') < messages.indexOf('stopped'));
  assert.equal(p.logs().find((l) => l.msg === 'stopped')?.forced, false);
});
