/**
 * Named schemas through `cfgu serve`: a schema file that is missing or invalid stops start-up (exact stderr line, exit
 * 2; the cluster primary and `--workers 1` alike); under a running server, the files are watched: a valid rewrite is
 * used without a restart (an SSE stream of a pipeline naming the schema gets a new event), an invalid one leaves the
 * previous version serving, logged and counted; with `--workers 2` every worker reloads on its own. Every wait is on
 * a condition (a log line, an answer), never a sleep.
 */
import { after, afterEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { call, killChildren, postJson, removeTempDirs, spawnCfgu, tempDir, waitForStatus, writeJson } from './helpers.js';
import { openStream } from './sse-client.js';
import { serveInProcess, stopAfter } from '../helpers/in-process.js';
import { waitFor } from '../helpers/wait.js';
import { closeSandbox, runCli } from '../cli/helpers.js';

after(async () => {
  await closeSandbox();
  await killChildren();
  removeTempDirs();
});
afterEach(killChildren);

/** Write `text` to `file` at once (a rename), as an editor's save does. */
function replaceFile(file: string, text: string): void {
  writeFileSync(`${file}.tmp`, text);
  renameSync(`${file}.tmp`, file);
}

/** A project: a json-file store and the schema `app` (app.cfgu.json with `keys`). */
function project(keys: Record<string, unknown> = { GREETING: {} }, schemas: Record<string, string> = { app: 'app.cfgu.json' }): { dir: string; configu: string; schema: string } {
  const dir = tempDir();
  writeJson(join(dir, 'data.json'), [
    { set: '', key: 'GREETING', value: 'hello' },
    { set: '', key: 'PORT', value: '3000' },
  ]);
  const schema = join(dir, 'app.cfgu.json');
  writeJson(schema, { keys });
  const configu = writeJson(join(dir, '.configu'), { stores: { main: { type: 'json-file', configuration: { path: 'data.json' }, default: true } }, schemas });
  return { dir, configu, schema };
}

describe('start-up: a named schema that is missing or invalid stops `cfgu serve` (one line, exit 2)', () => {
  const cases: Array<{ name: string; write: (dir: string) => Record<string, string>; line: (dir: string, configu: string) => string }> = [
    {
      name: 'a missing file',
      write: () => ({ app: 'app.cfgu.json', gone: 'gone.cfgu.yaml' }),
      line: (dir, configu) => `cfgu serve: ${configu}: schemas.gone: schema "gone" cannot be read: ${join(dir, 'gone.cfgu.yaml')}: no such file`,
    },
    {
      name: 'invalid JSON',
      write: (dir) => {
        writeFileSync(join(dir, 'bad.cfgu.json'), '{ "keys": { "A": {}, } }');
        return { app: 'app.cfgu.json', bad: 'bad.cfgu.json' };
      },
      line: (dir, configu) => `cfgu serve: ${configu}: schemas.bad: schema "bad" cannot be read: ${join(dir, 'bad.cfgu.json')}: line 1, column 22: not valid JSON: expected double-quoted property name`,
    },
    {
      name: 'not a valid schema (a v0 property)',
      write: (dir) => {
        writeFileSync(join(dir, 'old.cfgu.yaml'), 'keys:\n  PORT:\n    type: Number\n');
        return { old: 'old.cfgu.yaml' };
      },
      line: (dir, configu) =>
        `cfgu serve: ${configu}: schemas.old: schema "old" cannot be read: ${join(dir, 'old.cfgu.yaml')}: /keys/PORT/type: \`type\` of key "PORT" was removed in Cfgu v1: write a \`test\` expression instead (e.g. "typeof $.value === 'number'")`,
    },
    {
      name: 'a glob whose files declare one key twice',
      write: (dir) => {
        writeJson(join(dir, 'one.cfgu.json'), { keys: { A: {} } });
        writeJson(join(dir, 'two.cfgu.json'), { keys: { A: {} } });
        return { both: '{one,two}.cfgu.json' };
      },
      line: (dir, configu) => `cfgu serve: ${configu}: schemas.both: schema "both" cannot be read: key "A" is declared in both ${join(dir, 'one.cfgu.json')} and ${join(dir, 'two.cfgu.json')}`,
    },
  ];
  for (const c of cases) {
    for (const workers of [[], ['--workers', '1']]) {
      test(`${c.name} (${workers.length ? '--workers 1' : 'default --workers: the cluster primary'})`, async () => {
        const { dir, configu } = project();
        writeJson(configu, { stores: { main: { type: 'json-file', configuration: { path: 'data.json' } } }, schemas: c.write(dir) });
        const r = await runCli(['serve', '--config', configu, '--port', '0', ...workers], { cwd: dir, env: {}, stdin: null });
        assert.equal(r.code, 2, r.stderr);
        assert.equal(r.stdout, '');
        assert.equal(r.stderr, `${c.line(dir, configu)}\n`);
      });
    }
  }
});

describe('watched schema files under a running server', { timeout: 300_000 }, () => {
  test('a valid rewrite is used without a restart, and an SSE stream naming the schema gets a new event; an invalid one keeps the last good version, logged and counted', async (t) => {
    const { configu, schema } = project({ GREETING: {} });
    const server = stopAfter(t, await serveInProcess(configu, { flags: { port: '0', host: '127.0.0.1' } }));
    const body = [{ schema: 'app' }];
    assert.deepEqual((await postJson(`${server.base}/export`, body)).json(), { GREETING: 'hello' });
    const stream = await openStream(`${server.base}/export`, body);
    t.after(() => stream.close());
    assert.equal(stream.status, 200);
    await waitFor('the first event', () => stream.events.length >= 1 || undefined);
    assert.deepEqual(JSON.parse(stream.events[0]!.data), { GREETING: 'hello' });

    replaceFile(schema, JSON.stringify({ keys: { GREETING: {}, PORT: {} } }));
    await waitFor('the second event', () => stream.events.length >= 2 || undefined);
    assert.deepEqual(JSON.parse(stream.events[1]!.data), { GREETING: 'hello', PORT: 3000 });
    assert.deepEqual((await postJson(`${server.base}/export`, body)).json(), { GREETING: 'hello', PORT: 3000 });
    assert.ok(server.logs().some((l) => l.msg === 'schema reloaded' && l.schema === 'app'));

    replaceFile(schema, '{ "keys": { "GREETING": ');
    const warned = await waitFor('the warning', () => server.logs().find((l) => l.level === 40 && l.schema === 'app'));
    assert.equal(warned.msg, `schema "app" not reloaded: ${schema}: line 1, column 25: not valid JSON: unexpected end of the file; the last good version stays in use`);
    assert.equal(warned.problem, `${schema}: line 1, column 25: not valid JSON: unexpected end of the file`);
    assert.deepEqual((await postJson(`${server.base}/export`, body)).json(), { GREETING: 'hello', PORT: 3000 });
    const metrics = (await call(`${server.base}/metrics`)).body;
    assert.match(metrics, /^cfgu_schema_reload_failures_total\{schema="app"\} 1$/m);
    assert.match(metrics, /^cfgu_schemas\{state="stale"\} 1$/m);
    assert.equal(stream.events.length, 2, 'no event for a change that was not used');

    replaceFile(schema, JSON.stringify({ keys: { PORT: {} } }));
    await waitFor('the third event', () => stream.events.length >= 3 || undefined);
    assert.deepEqual(JSON.parse(stream.events[2]!.data), { PORT: 3000 });
    assert.match((await call(`${server.base}/metrics`)).body, /^cfgu_schemas\{state="current"\} 1$/m);
  });

  test('a scoped stream naming a schema ends (`end`, 403) when the schema changes to declare a key outside its scope', async (t) => {
    const token = 'public-token-0123456789';
    const { configu, schema } = project({ GREETING: { label: 'public' } });
    writeJson(configu, {
      stores: { main: { type: 'json-file', configuration: { path: 'data.json' }, default: true } },
      schemas: { app: 'app.cfgu.json' },
      interface: {
        proxy: {
          auth: {
            enabled: true,
            presharedKeys: ['preshared-key-0123456789'],
            credentials: [{ name: 'public-reader', sha256: createHash('sha256').update(token).digest('hex'), stores: ['main'], sets: [''], labels: ['public'] }],
          },
        },
      },
    });
    const server = stopAfter(t, await serveInProcess(configu, { flags: { port: '0', host: '127.0.0.1' } }));
    const stream = await openStream(`${server.base}/export`, [{ schema: 'app' }], { authorization: `Bearer ${token}` });
    t.after(() => stream.close());
    assert.equal(stream.status, 200, stream.body);
    await waitFor('the first event', () => stream.events.length >= 1 || undefined);
    assert.deepEqual(JSON.parse(stream.events[0]!.data), { GREETING: 'hello' });

    // PORT carries no label: the scope may no longer use `app`.
    replaceFile(schema, JSON.stringify({ keys: { GREETING: { label: 'public' }, PORT: {} } }));
    await stream.ended;
    const last = stream.events.at(-1)!;
    assert.equal(last.event, 'end');
    assert.deepEqual(JSON.parse(last.data), {
      type: 'urn:cfgu:problem:forbidden',
      title: 'Forbidden',
      status: 403,
      detail: '1 of 1 command is outside the scope of this credential: command 0 (store "main", set "")',
      refused: [{ command: 0, store: 'main', set: '' }],
    });
    assert.ok(!stream.events.some((e) => e.event !== 'end' && 'PORT' in JSON.parse(e.data)), 'no answer of the new schema reached the stream');
    // A new request with that scope: the schema is unknown to it now.
    const r = await postJson(`${server.base}/export`, [{ schema: 'app' }], { authorization: `Bearer ${token}` });
    assert.equal(r.status, 400);
    assert.equal(r.json().detail, 'unknown schema "app": no schema of the server has a close name');
  });

  test('--workers 2: each worker watches the file itself; after a rewrite, both workers answer with the new schema', async () => {
    const { configu, schema } = project({ GREETING: {} });
    const p = spawnCfgu(['serve', '--config', configu, '--workers', '2', '--port', '0', '--host', '127.0.0.1']);
    const ready = await p.waitForLog('ready', (l) => l.role === 'primary' && l.workers === 2, Infinity);
    const base = `http://127.0.0.1:${ready.port}`;
    await waitForStatus(`${base}/ready`, 200, 90_000);
    const workers = new Set(p.logs().filter((l) => l.role === 'worker' && l.msg === 'ready').map((l) => l.pid as number));
    assert.equal(workers.size, 2);

    replaceFile(schema, JSON.stringify({ keys: { GREETING: {}, PORT: {} } }));
    // Each worker logs its own reload.
    await waitFor('both workers reloaded', () => {
      const pids = new Set(p.logs().filter((l) => l.msg === 'schema reloaded' && l.schema === 'app').map((l) => l.pid as number));
      return [...workers].every((w) => pids.has(w)) || undefined;
    });
    // Then every answer, from whichever worker, is the new shape; asked until both workers have answered (the
    // request log line of each request id names the worker's pid).
    const answered = new Set<number>();
    await waitFor('both workers answered', async () => {
      const id = randomUUID();
      const r = await postJson(`${base}/export`, [{ schema: 'app' }], { 'x-request-id': id });
      assert.equal(r.status, 200, r.body);
      assert.deepEqual(r.json(), { GREETING: 'hello', PORT: 3000 });
      const line = await p.waitForLog('request', (l) => l.reqId === id);
      answered.add(line.pid as number);
      return [...workers].every((w) => answered.has(w)) || undefined;
    });
    p.child.kill('SIGTERM');
    assert.equal(await p.exited, 0);
  });
});
