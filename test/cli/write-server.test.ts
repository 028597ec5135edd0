/**
 * `--server URL` on `cfgu upsert`, `cfgu history` and `cfgu rollback`, in-process (runCli).
 *
 * These tests talk to a small HTTP server defined below, which records each request and answers what each test sets,
 * as the write routes' contract says (POST /upsert, GET /history, POST /rollback; problem+json refusals): that is how
 * every refusal and odd answer is reached on purpose. What is asserted: the exact requests the CLI sends (method,
 * path, query, body, bearer token), the exact output for each answer, and the error lines and exit codes for each
 * refusal. The real routes are exercised end to end, against a running cfgu server, by write-server-real.test.ts.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { closeSandbox, killChildren, removeTempDirs, runCli, tempDir, write } from './helpers.js';

interface Seen {
  method: string;
  url: string;
  authorization: string | undefined;
  contentType: string | undefined;
  body: unknown;
}

/** The next answer per route, set by each test: status and JSON body. */
type Answer = { status: number; body: unknown };
const answers = new Map<string, Answer>();
const seen: Seen[] = [];
let server: Server;
let base: string;

async function readBody(req: IncomingMessage): Promise<unknown> {
  let text = '';
  for await (const chunk of req) text += chunk;
  return text ? JSON.parse(text) : undefined;
}

before(async () => {
  server = createServer(async (req, res) => {
    const body = await readBody(req);
    seen.push({ method: req.method!, url: req.url!, authorization: req.headers.authorization, contentType: req.headers['content-type'], body });
    const route = `${req.method} ${req.url!.split('?')[0]}`;
    const answer = answers.get(route) ?? { status: 404, body: { type: 'about:blank', title: 'Not Found', status: 404, detail: `no route ${route}` } };
    const problem = answer.status >= 400;
    res.writeHead(answer.status, { 'content-type': problem ? 'application/problem+json' : 'application/json' });
    res.end(JSON.stringify(answer.body));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(async () => {
  await new Promise((resolve) => server.close(resolve));
  killChildren();
  removeTempDirs();
  await closeSandbox();
});

const SCHEMA = { keys: { PORT: { test: '$.value > 1000' }, TOKEN: { hidden: true }, OLD: {} } };
/** A folder without .configu: a client of the server holds a token and schema files, no store. */
function client(): string {
  const dir = tempDir();
  write(join(dir, 'app.cfgu.json'), SCHEMA);
  return dir;
}
const run = (args: string[], env: Record<string, string | undefined> = {}) => runCli(args, { cwd: client(), env: { CFGU_TOKEN: undefined, ...env } });
const last = () => seen[seen.length - 1]!;

describe('--server: the write commands over HTTP (fake server)', { concurrency: false }, () => {
  test('upsert sends the values, schema, message and expected revision with the token; prints the answer', async () => {
    answers.set('POST /upsert', {
      status: 200,
      body: {
        store: 'main',
        set: 'prod',
        dryRun: false,
        revision: 8,
        changes: [
          { key: 'OLD', before: 'x', after: null },
          { key: 'PORT', before: '2000', after: '3000' },
          { key: 'TOKEN', before: null, after: { hidden: true } },
        ],
        impact: [],
      },
    });
    const args = ['upsert', '--server', base, '--token', 'tok-1', '--store', 'main', '--set', 'prod', '--schema', 'app.cfgu.json'];
    const r = await run([...args, '--kv', 'PORT=3000', '--kv', 'TOKEN=s', '-k', 'OLD', '-m', 'why', '--expect-revision', '7']);
    assert.deepEqual(r, { code: 0, stdout: '3 changes in store "main", set "prod":\n- OLD (was "x")\n~ PORT = "3000" (was "2000")\n+ TOKEN = [hidden]\n', stderr: '' });
    assert.deepEqual(last(), {
      method: 'POST',
      url: '/upsert',
      authorization: 'Bearer tok-1',
      contentType: 'application/json',
      body: { set: 'prod', schema: SCHEMA, store: 'main', expectedRevision: 7, message: 'why', values: { PORT: '3000', TOKEN: 's', OLD: null } },
    });
  });

  test('upsert --preview: dryRun, a schema name of the server sent as a name, the token from CFGU_TOKEN; the impact printed', async () => {
    answers.set('POST /upsert', {
      status: 200,
      body: {
        store: 'main',
        set: 'prod',
        dryRun: true,
        revision: 8,
        changes: [{ key: 'PORT', before: '2000', after: '6000' }],
        impact: [
          { schema: 'app', set: 'prod', status: 'changes', changed: ['PORT'], failures: [] },
          { schema: 'worker', set: 'prod/eu', status: 'breaks', changed: [], failures: [{ key: 'PORT', rule: 'test', message: 'the value of key "PORT" failed the test $.value < 5000' }] },
        ],
      },
    });
    const r = await run(['upsert', '--server', `${base}/`, '--set', 'prod', '--schema', 'app', '--kv', 'PORT=6000', '--preview', '--allow-breaking'], { CFGU_TOKEN: 'tok-env' });
    assert.deepEqual(r, {
      code: 0,
      stdout: [
        'preview, nothing written: 1 change in store "main", set "prod" at revision 8:',
        '~ PORT = "6000" (was "2000")',
        'impact:',
        '  schema "app", set "prod": changes (PORT)',
        '  schema "worker", set "prod/eu": breaks',
        '    key PORT, rule test: the value of key "PORT" failed the test $.value < 5000',
        '',
      ].join('\n'),
      stderr: '',
    });
    assert.deepEqual(last(), {
      method: 'POST',
      url: '/upsert',
      authorization: 'Bearer tok-env',
      contentType: 'application/json',
      body: { set: 'prod', schema: 'app', dryRun: true, allowBreaking: true, values: { PORT: '6000' } },
    });
  });

  test('history: the query string; the table with masked values; --format json as the server answered', async () => {
    const page = {
      store: 'main',
      set: 'prod',
      records: [
        { revision: 8, time: '2026-05-01T10:00:00.000Z', subject: 'ci', requestId: 'r-8', message: 'why', recorded: true, changes: [{ key: 'TOKEN', before: { hidden: true }, after: { hidden: true } }] },
        { revision: 7, time: '2026-05-01T09:00:00.000Z', subject: null, requestId: null, message: null, recorded: false, changes: [{ key: 'PORT', before: '1', after: '2000' }] },
      ],
      next: 7,
    };
    answers.set('GET /history', { status: 200, body: page });
    const r = await run(['history', '--server', base, '--token', 't', '--store', 'main', '--set', '/prod/', '--key', 'PORT', '--since', '2026-05-01', '--limit', '2', '--before', '9']);
    assert.deepEqual(r, {
      code: 0,
      stdout: [
        'history of store "main", set "prod", newest first:',
        'revision 8  2026-05-01T10:00:00.000Z  ci  "why"',
        '  ~ TOKEN = [hidden] (was [hidden])',
        'revision 7  2026-05-01T09:00:00.000Z  outside cfgu (not recorded)',
        '  ~ PORT = "2000" (was "1")',
        'older records: add --before 7',
        '',
      ].join('\n'),
      stderr: '',
    });
    assert.deepEqual(last(), {
      method: 'GET',
      url: '/history?store=main&set=prod&key=PORT&since=2026-05-01T00%3A00%3A00.000Z&before=9&limit=2',
      authorization: 'Bearer t',
      contentType: undefined,
      body: undefined,
    });
    const json = await run(['history', '--server', base, '--set', 'prod', '--format', 'json']);
    assert.equal(json.code, 0, json.stderr);
    assert.deepEqual(JSON.parse(json.stdout), page);
    assert.equal(last().url, '/history?set=prod&limit=20');
    assert.equal(last().authorization, undefined);
  });

  test('rollback sends toRevision, keys and the default message; prints the answer', async () => {
    answers.set('POST /rollback', {
      status: 200,
      body: { store: 'main', set: 'prod', dryRun: false, revision: 9, changes: [{ key: 'PORT', before: '3000', after: '2000' }], impact: [] },
    });
    const r = await run(['rollback', '--server', base, '--token', 'tok', '--set', 'prod', '--to', '6', '--key', 'PORT', '--schema', 'app.cfgu.json']);
    assert.deepEqual(r, { code: 0, stdout: '1 change in store "main", set "prod" (back to revision 6, now revision 9):\n~ PORT = "2000" (was "3000")\n', stderr: '' });
    assert.deepEqual(last().body, { set: 'prod', schema: SCHEMA, toRevision: 6, message: 'rollback to revision 6', keys: ['PORT'] });
  });

  test('refusals: the same lines and exit codes as the local command where the body carries the error', async () => {
    const cases: Array<{ name: string; status: number; body: Record<string, unknown>; code: number; stderr: string }> = [
      {
        name: 'validation failed',
        status: 422,
        body: { type: 'urn:cfgu:problem:validation-failed', title: 'Validation Failed', status: 422, detail: '1 key failed validation', errors: [{ command: 0, key: 'PORT', rule: 'test', message: 'the value of key "PORT" failed the test $.value > 1000' }] },
        code: 1,
        stderr: 'cfgu upsert: 1 key failed validation:\ncommand 0, key PORT, rule test: the value of key "PORT" failed the test $.value > 1000\n',
      },
      {
        name: 'revision conflict',
        status: 409,
        body: { type: 'urn:cfgu:problem:revision-conflict', title: 'Revision Conflict', status: 409, detail: 'x', store: 'main', set: 'prod', expectedRevision: 3, currentRevision: 5 },
        code: 1,
        stderr: 'cfgu upsert: set "prod" of store "main" is at revision 5, not 3: it changed since it was read; nothing was written\n',
      },
      {
        name: 'breaking write',
        status: 422,
        body: {
          type: 'urn:cfgu:problem:write-breaks',
          title: 'Write Breaks',
          status: 422,
          detail: 'the write makes 1 named schema fail',
          impact: [{ schema: 'worker', set: 'prod', status: 'breaks', changed: [], failures: [{ key: 'PORT', rule: 'test', message: 'm' }] }],
        },
        code: 1,
        stderr: 'cfgu upsert: the server refused (422 Write Breaks): the write makes 1 named schema fail\nimpact:\n  schema "worker", set "prod": breaks\n    key PORT, rule test: m\n',
      },
      {
        name: 'no write right',
        status: 403,
        body: { type: 'urn:cfgu:problem:forbidden', title: 'Forbidden', status: 403, detail: 'this token may not write key PORT of set "prod" of store "main"' },
        code: 2,
        stderr: 'cfgu upsert: the server refused (403 Forbidden): this token may not write key PORT of set "prod" of store "main"\n',
      },
      {
        name: 'read-only store',
        status: 403,
        body: { type: 'urn:cfgu:problem:read-only-store', title: 'Read-only Store', status: 403, detail: 'store "main" is read-only' },
        code: 2,
        stderr: 'cfgu upsert: the server refused (403 Read-only Store): store "main" is read-only\n',
      },
      {
        name: 'unauthenticated',
        status: 401,
        body: { type: 'urn:cfgu:problem:unauthorized', title: 'Unauthorized', status: 401, detail: 'a valid bearer token is required' },
        code: 2,
        stderr: 'cfgu upsert: the server refused (401 Unauthorized): a valid bearer token is required\n',
      },
      {
        name: 'undeclared key',
        status: 400,
        body: { type: 'urn:cfgu:problem:invalid-request', title: 'Invalid Request', status: 400, detail: 'invalid request', issues: [{ path: '/values/NOPE', message: 'key "NOPE" is not declared by the schema' }] },
        code: 2,
        stderr: 'cfgu upsert: the server refused (400 Invalid Request): invalid request\n  /values/NOPE: key "NOPE" is not declared by the schema\n',
      },
      {
        name: 'store unavailable',
        status: 503,
        body: { type: 'urn:cfgu:problem:store-unavailable', title: 'Store Unavailable', status: 503, detail: 'store "main" cannot be reached or read; retry later' },
        code: 1,
        stderr: 'cfgu upsert: the server refused (503 Store Unavailable): store "main" cannot be reached or read; retry later\n',
      },
    ];
    for (const c of cases) {
      answers.set('POST /upsert', { status: c.status, body: c.body });
      const r = await run(['upsert', '--server', base, '--set', 'prod', '--schema', 'app.cfgu.json', '--kv', 'PORT=5']);
      assert.deepEqual(r, { code: c.code, stdout: '', stderr: c.stderr }, c.name);
    }
    // No server listening there: exit 1, one line.
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const down = await run(['history', '--server', `http://127.0.0.1:${port}`, '--set', 'prod']);
    assert.deepEqual(down, { code: 1, stdout: '', stderr: `cfgu history: cannot reach the server at http://127.0.0.1:${port}: ECONNREFUSED\n` });
  });
});
