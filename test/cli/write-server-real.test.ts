/**
 * `--server URL` end to end: `cfgu upsert`, `cfgu history` and `cfgu rollback` against a real cfgu server (served in
 * this process over HTTP, its json-file store and named schema on disk), from a folder with no `.configu` of its own:
 * the person holds a URL, not the store. What lands in the store and its history is read back from the files the
 * server writes; a stale revision is the server's 409, printed as the local command prints it.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { serveInProcess, stopAfter } from '../helpers/in-process.js';
import { closeSandbox, killChildren, removeTempDirs, runCli, tempDir, write } from './helpers.js';

after(async () => {
  killChildren();
  await closeSandbox();
  removeTempDirs();
});

test('upsert, history and rollback through a running server change its store and record who and why', async (t) => {
  const serverDir = tempDir('cfgu-write-server-');
  write(join(serverDir, 'data.json'), [
    { set: '', key: 'HOST', value: 'a' },
    { set: 'prod', key: 'PORT', value: '2000' },
  ]);
  write(join(serverDir, 'app.cfgu.json'), { keys: { HOST: { required: true }, PORT: { test: 'Number($.value) > 1000' } } });
  const config = write(join(serverDir, '.configu'), {
    stores: { main: { type: 'json-file', configuration: { path: 'data.json' }, default: true } },
    schemas: { app: 'app.cfgu.json' },
  });
  const server = stopAfter(t, await serveInProcess(config, { cwd: serverDir }));
  const client = tempDir('cfgu-write-client-');
  const cli = (args: string[]) => runCli(args, { cwd: client, env: { CFGU_SUBJECT: 'ana' } });
  const stored = () => JSON.parse(readFileSync(join(serverDir, 'data.json'), 'utf8')) as unknown[];

  const wrote = await cli(['upsert', '--server', server.base, '--set', 'prod', '--schema', 'app', '--kv', 'PORT=6000', '-m', 'more room']);
  assert.equal(wrote.code, 0, wrote.stderr);
  assert.equal(wrote.stderr, '');
  assert.deepEqual(stored(), [
    { set: '', key: 'HOST', value: 'a' },
    { set: 'prod', key: 'PORT', value: '6000' },
  ]);

  // A value the schema refuses: the server's 422, nothing written.
  const refused = await cli(['upsert', '--server', server.base, '--set', 'prod', '--schema', 'app', '--kv', 'PORT=5']);
  assert.equal(refused.code, 1);
  assert.equal(refused.stdout, '');
  assert.equal(
    refused.stderr,
    'cfgu upsert: 1 key failed validation:\ncommand 0, key PORT, rule test: the value of key "PORT" failed the test Number($.value) > 1000\n',
  );
  assert.deepEqual(stored(), [
    { set: '', key: 'HOST', value: 'a' },
    { set: 'prod', key: 'PORT', value: '6000' },
  ]);

  // The history over HTTP: the write, with its subject (the server records the caller, anonymous without auth) and
  // message.
  const history = await cli(['history', '--server', server.base, '--set', 'prod', '--format', 'json']);
  assert.equal(history.code, 0, history.stderr);
  const records = (JSON.parse(history.stdout) as { records: Array<Record<string, unknown>> }).records;
  const recorded = records.filter((r) => r.recorded === true);
  assert.equal(recorded.length, 1);
  assert.equal(recorded[0]!.message, 'more room');
  assert.deepEqual(recorded[0]!.changes, [{ key: 'PORT', before: '2000', after: '6000' }]);
  const revision = recorded[0]!.revision as number;

  // A stale revision: 409 from the server, exit 1, nothing written.
  const stale = await cli(['upsert', '--server', server.base, '--set', 'prod', '--schema', 'app', '--kv', 'PORT=7000', '--expect-revision', String(revision - 1)]);
  assert.equal(stale.code, 1);
  assert.equal(
    stale.stderr,
    `cfgu upsert: set "prod" of store "main" is at revision ${revision}, not ${revision - 1}: it changed since it was read; nothing was written\n`,
  );
  assert.deepEqual(stored(), [
    { set: '', key: 'HOST', value: 'a' },
    { set: 'prod', key: 'PORT', value: '6000' },
  ]);

  // Rollback to the revision before the write: the old value back, as a new revision.
  const back = await cli(['rollback', '--server', server.base, '--set', 'prod', '--schema', 'app', '--to', String(revision - 1)]);
  assert.equal(back.code, 0, back.stderr);
  assert.deepEqual(stored(), [
    { set: '', key: 'HOST', value: 'a' },
    { set: 'prod', key: 'PORT', value: '2000' },
  ]);
  const after = JSON.parse((await cli(['history', '--server', server.base, '--set', 'prod', '--format', 'json'])).stdout) as { records: Array<Record<string, unknown>> };
  assert.equal(after.records[0]!.revision, revision + 1);
  assert.deepEqual(after.records[0]!.changes, [{ key: 'PORT', before: '6000', after: '2000' }]);
});
