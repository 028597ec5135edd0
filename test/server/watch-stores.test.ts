/**
 * Watching POST /export end to end, for every store kind: cfgu's HTTP server runs in this process over a real store;
 * an SSE stream and a long poll watch a pipeline; another program (a file renamed into place, sqlite3, psql, mariadb,
 * redis-cli, etcdctl) writes a change; both clients get the new answer. A write that leaves the answer as it was
 * gives no event and keeps the ETag (304 on If-None-Match). On PRIVATE servers, stopping the server during a watch
 * gives an `error` event with the 503 problem body, and after a restart a write reaches the stream again, with the
 * same cfgu server. The machine's shared servers are only written under names this file owns, removed at the end.
 */
import { after, describe, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { buildServer, settingsWith } from '../../src/server/index.js';
import { loadConfiguration } from '../../src/config/index.js';
import { createStoreRegistry } from '../../src/stores/index.js';
import { dropMariadbTables, dropPostgresTables, etcdPut, mariadb, myUpsert, pgUpsert, psql, redisCli, requireTool, sqlite3 } from '../helpers/plain-clients.js';
import { startPrivate, type PrivateServer } from '../helpers/private.js';
import { probeTcp, requireService } from '../helpers/services.js';
import { waitFor } from '../helpers/wait.js';
import { MY, PG, RUN } from '../stores/kinds.js';
import { isProblem, postJson, removeTempDirs, tempDir, writeJson } from './helpers.js';
import { openStream, type SseStream } from './sse-client.js';
import { planted } from '../helpers/capture.js';

after(() => removeTempDirs());

/**
 * What a test opened, closed in reverse order when that test ends: before a describe's after() drops its tables, so
 * no store of this file still reads a table being dropped (a feed would recreate it; and the shared MariaDB 11 once
 * crashed with signal 11 when a checksum query met a concurrent DROP TABLE).
 */
function closer(t: TestContext): (c: () => unknown) => void {
  const all: Array<() => unknown> = [];
  t.after(async () => {
    for (const c of all.reverse()) await Promise.resolve(c()).catch(() => undefined);
  });
  return (c) => void all.push(c);
}

/** The key the pipeline reads (unique per run: on the shared Redis a root config is stored under its key name). */
const KEY = `LIVE_${RUN.toUpperCase()}`;
/** The set the pipeline reads, and a key of that set outside the pipeline's schema. */
const SET = `live_${RUN}/app`;
const OTHER = 'NOT_IN_SCHEMA';
/**
 * A hidden key of the pipeline, written with every change: its planted secret (test/helpers/capture.ts) must reach no
 * answer, event or problem; the answers below are the same without it. (These servers run without the expression
 * sandbox: no test or const here; the routes, binary and CLI suites fail tests and consts on hidden keys.)
 */
const HIDDEN = 'API_SECRET';
const SECRET = planted('watch');
const withSecret = (write: Writer): Writer => (values) => write({ ...values, [HIDDEN]: SECRET });
const pipeline = [{ set: SET, schema: { keys: { [KEY]: {}, [HIDDEN]: { hidden: true } } } }];
const answer = (value: string) => JSON.stringify({ [KEY]: value });

/** How another program writes the values of SET (every key given, as one change). */
type Writer = (values: Record<string, string>) => Promise<unknown>;

interface Kind {
  type: string;
  configuration: Record<string, unknown>;
  write: Writer;
}

/** cfgu's server in process over one store named `live` (the default store), listening on a free port. */
async function serve(t: TestContext, kind: Kind): Promise<{ app: FastifyInstance; base: string; onEnd: (c: () => unknown) => void }> {
  const onEnd = closer(t);
  const dir = tempDir('cfgu-watch-stores-');
  writeJson(join(dir, '.configu'), { stores: { live: { type: kind.type, configuration: kind.configuration, default: true } } });
  const registry = createStoreRegistry(await loadConfiguration({ file: join(dir, '.configu') }), { logger: { warn: () => undefined } });
  onEnd(() => registry.close());
  await registry.init();
  const app = await buildServer({ registry, settings: settingsWith({}), logger: false, ready: true });
  await app.listen({ port: 0, host: '127.0.0.1' });
  onEnd(() => app.close());
  return { onEnd, app, base: `http://127.0.0.1:${(app.server.address() as { port: number }).port}` };
}

const messages = (s: SseStream) => s.events.filter((e) => e.event === 'message');

async function exportNow(base: string): Promise<{ data: string; tag: string }> {
  const r = await postJson(`${base}/export`, pipeline);
  assert.equal(r.status, 200, r.body);
  return { data: r.body, tag: String(r.headers.etag) };
}

interface Watched {
  app: FastifyInstance;
  base: string;
  stream: SseStream;
}

/**
 * The shared check: first value, a stream and a long poll, another program's change reaching both, then a write that
 * leaves the answer unchanged (no event, the same ETag, 304). Returns the live stream for the outage check.
 */
async function watchEndToEnd(t: TestContext, plain: Kind): Promise<Watched> {
  const kind = { ...plain, write: withSecret(plain.write) };
  const { app, base, onEnd } = await serve(t, kind); // the store creates its table here
  await kind.write({ [KEY]: 'one' });
  const hub = app.cfgu.watch;

  const first = await exportNow(base);
  assert.equal(first.data, answer('one'));
  const again = await postJson(`${base}/export`, pipeline, { 'if-none-match': first.tag });
  assert.equal(again.status, 304);
  assert.equal(again.body, '');
  assert.equal(again.headers.etag, first.tag);

  const stream = await openStream(`${base}/export`, pipeline);
  onEnd(() => stream.close());
  assert.equal(stream.status, 200);
  await waitFor('the first event', () => messages(stream).length === 1);
  assert.deepEqual(messages(stream)[0], { event: 'message', id: first.tag, data: answer('one') });
  const held = postJson(`${base}/export`, pipeline, { 'if-none-match': first.tag, prefer: 'wait=120' }, { timeoutMs: 150_000 });
  await waitFor('the stream and the long poll are watching', () => hub.watchers === 2);

  await kind.write({ [KEY]: 'two' });
  const polled = await held;
  assert.equal(polled.status, 200, polled.body);
  assert.equal(polled.body, answer('two'));
  await waitFor('the change event', () => messages(stream).length === 2);
  const second = await exportNow(base);
  assert.equal(second.data, answer('two'));
  assert.notEqual(second.tag, first.tag);
  assert.equal(polled.headers.etag, second.tag);
  assert.deepEqual(messages(stream)[1], { event: 'message', id: second.tag, data: answer('two') });

  // Another key of the same set, outside the schema: the set changed, the answer did not.
  const evaluations = hub.stats.evaluations;
  await kind.write({ [KEY]: 'two', [OTHER]: 'x' });
  await waitFor('the unchanged answer is re-evaluated', () => hub.stats.evaluations > evaluations && !hub.pending);
  const third = await exportNow(base);
  assert.equal(third.tag, second.tag);
  const same = await postJson(`${base}/export`, pipeline, { 'if-none-match': second.tag });
  assert.equal(same.status, 304);
  assert.equal(same.headers.etag, second.tag);
  assert.equal(messages(stream).length, 2, 'no duplicate event');
  assert.deepEqual(stream.events.map((e) => e.event), ['message', 'message']);
  return { app, base, stream };
}

/** Stop the private server during the watch: an error event with the 503 problem; restarted, a write reaches the stream. */
async function outage(server: PrivateServer, w: Watched, plainWrite: Writer): Promise<void> {
  const write = withSecret(plainWrite);
  const marks = w.stream.events.length;
  await server.stop();
  const problem = {
    type: 'urn:cfgu:problem:store-unavailable',
    title: 'Store Unavailable',
    status: 503,
    detail: 'store "live" cannot be reached or read; retry later',
  };
  const errorAt = await waitFor('the error event', () => {
    const i = w.stream.events.findIndex((e, j) => j >= marks && e.event === 'error');
    return i >= 0 ? i : undefined;
  });
  assert.equal(errorAt, marks, 'the error is the first event after the stop');
  const error = w.stream.events[errorAt]!;
  assert.equal(error.id, undefined);
  assert.deepEqual(JSON.parse(error.data), problem);
  assert.deepEqual(isProblem(await postJson(`${w.base}/export`, pipeline), 503), problem);

  await server.start();
  await write({ [KEY]: 'three' });
  const at = await waitFor('the new answer after the restart', () => {
    const i = w.stream.events.findIndex((e, j) => j > errorAt && e.event === 'message' && e.data === answer('three'));
    return i >= 0 ? i : undefined;
  });
  const now = await exportNow(w.base);
  assert.equal(now.data, answer('three'));
  assert.equal(w.stream.events[at]!.id, now.tag);
  // Between the error and the new answer: at most the answer as it was before the stop, sent again once it is back.
  for (const e of w.stream.events.slice(errorAt + 1, at)) {
    assert.ok(e.event === 'error' || e.data === answer('two'), `unexpected event ${JSON.stringify(e)}`);
  }
}

// ------------------------------------------------------------------------------------------------ files

describe('json-file and sqlite', () => {
  test('json-file: a file renamed into place (an editor save) reaches the stream and the long poll', async (t) => {
    const path = join(tempDir('cfgu-watch-file-'), 'config.json');
    const write: Writer = async (values) => {
      writeFileSync(`${path}.new`, JSON.stringify(Object.entries(values).map(([key, value]) => ({ set: SET, key, value }))));
      renameSync(`${path}.new`, path);
    };
    await watchEndToEnd(t, { type: 'json-file', configuration: { path }, write });
  });

  test('sqlite: a commit by the sqlite3 command-line client reaches the stream and the long poll', async (t) => {
    if (!requireTool(t, 'sqlite3')) return;
    const database = join(tempDir('cfgu-watch-sqlite-'), 'config.db');
    const write: Writer = (values) =>
      sqlite3(database, Object.entries(values).map(([k, v]) => `${sqliteUpsert(k, v)};`).join(' '));
    await watchEndToEnd(t, { type: 'sqlite', configuration: { database, tableName: 'config', feedIntervalMs: 50 }, write });
  });
});

/** SQLite has PostgreSQL's upsert syntax. */
const sqliteUpsert = (key: string, value: string) => pgUpsert('config', SET, key, value);

// ------------------------------------------------------------------------------------------------ PostgreSQL

describe('postgresql', () => {
  const tables: string[] = [];
  after(() => dropPostgresTables(PG, tables));
  const pgWriter = (port: number, database: string, table: string): Writer => (values) =>
    psql(port, database, Object.entries(values).map(([k, v]) => pgUpsert(table, SET, k, v)).join('; '));

  for (const notify of [true, false]) {
    test(`shared server, ${notify ? 'notify: true' : 'without notify'}: psql's write reaches the stream and the long poll`, async (t) => {
      if (!(await requireService(t, 'postgresql', probeTcp(PG.port)))) return;
      if (!requireTool(t, 'psql')) return;
      const tableName = `cfgu_live_${RUN}_${notify ? 'n' : 'p'}`;
      tables.push(tableName);
      await watchEndToEnd(t, { type: 'postgresql', configuration: { ...PG, tableName, notify, feedIntervalMs: 50 }, write: pgWriter(PG.port, PG.database, tableName) });
    });
  }

  test('private server, notify: true: stopped during a watch, an error event; restarted, a new answer', async (t) => {
    if (!requireTool(t, 'psql')) return;
    const server = await startPrivate(t, 'postgresql');
    if (!server) return;
    const write = pgWriter(server.port, 'postgres', 'config');
    const configuration = { host: server.host, port: server.port, username: 'postgres', database: 'postgres', notify: true, timeout: 1000, feedIntervalMs: 50 };
    await outage(server, await watchEndToEnd(t, { type: 'postgresql', configuration, write }), write);
  });
});

// ------------------------------------------------------------------------------------------------ MariaDB

describe('mariadb', () => {
  const tables: string[] = [];
  after(() => dropMariadbTables(MY, tables));
  const myWriter = (port: number, database: string, table: string): Writer => (values) =>
    mariadb(port, database, Object.entries(values).map(([k, v]) => myUpsert(table, SET, k, v)).join('; '));

  test("shared server: the mariadb client's write reaches the stream and the long poll", async (t) => {
    if (!(await requireService(t, 'mariadb', probeTcp(MY.port)))) return;
    if (!requireTool(t, 'mariadb')) return;
    const tableName = `cfgu_live_${RUN}`;
    tables.push(tableName);
    await watchEndToEnd(t, { type: 'mariadb', configuration: { ...MY, tableName, feedIntervalMs: 50 }, write: myWriter(MY.port, MY.database, tableName) });
  });

  test('private server: stopped during a watch, an error event; restarted, a new answer', async (t) => {
    if (!requireTool(t, 'mariadb')) return;
    const server = await startPrivate(t, 'mariadb');
    if (!server) return;
    await mariadb(server.port, 'mysql', 'CREATE DATABASE IF NOT EXISTS live');
    const write = myWriter(server.port, 'live', 'config');
    const configuration = { host: server.host, port: server.port, username: 'root', database: 'live', timeout: 1000, feedIntervalMs: 50 };
    await outage(server, await watchEndToEnd(t, { type: 'mariadb', configuration, write }), write);
  });
});

// ------------------------------------------------------------------------------------------------ Redis and etcd

/** The key-value layout: a set's configs are one JSON object under the set's name. */
const asObject = (values: Record<string, string>) => JSON.stringify(values);

describe('redis', () => {
  test("shared server (no keyspace notifications: the periodic check): redis-cli's write reaches the stream and the long poll", async (t) => {
    if (!(await requireService(t, 'redis', probeTcp(6379)))) return;
    if (!requireTool(t, 'redisCli')) return;
    t.after(() => redisCli(6379, 'DEL', SET));
    const write: Writer = (values) => redisCli(6379, 'SET', SET, asObject(values));
    await watchEndToEnd(t, { type: 'redis', configuration: { host: '127.0.0.1', port: 6379, feedIntervalMs: 50 }, write });
  });

  test('private server with keyspace notifications: redis-cli\'s write is seen; stopped, an error event; restarted, a new answer', async (t) => {
    if (!requireTool(t, 'redisCli')) return;
    const server = await startPrivate(t, 'redis', ['--notify-keyspace-events', 'KA']);
    if (!server) return;
    const write: Writer = (values) => redisCli(server.port, 'SET', SET, asObject(values));
    // No periodic check within the test's life: only the keyspace events can deliver the change.
    const configuration = { host: server.host, port: server.port, timeout: 1000, feedIntervalMs: 3_600_000 };
    await outage(server, await watchEndToEnd(t, { type: 'redis', configuration, write }), write);
  });
});

describe('etcd', () => {
  test("private server: etcdctl's put reaches the stream and the long poll; stopped, an error event; restarted, a new answer", async (t) => {
    if (!requireTool(t, 'etcdctl')) return;
    const server = await startPrivate(t, 'etcd');
    if (!server) return;
    const write: Writer = (values) => etcdPut(server.url, SET, asObject(values));
    await outage(server, await watchEndToEnd(t, { type: 'etcd', configuration: { hosts: server.url, timeout: 1000 }, write }), write);
  });
});
