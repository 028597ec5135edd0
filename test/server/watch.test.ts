/**
 * Watching POST /export (src/server/watch.ts): ETag and 304, long polls (`Prefer: wait=N`), SSE streams (first event,
 * change events, no duplicates, heartbeats, error events then recovery, Last-Event-ID), one shared evaluation per
 * change, unrelated sets left alone, the watcher limit, auth, hidden keys, and shutdown (in process).
 */
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { buildServer, settingsWith, type SettingsOverrides } from '../../src/server/index.js';
import { loadConfiguration } from '../../src/config/index.js';
import { createStoreRegistry, type StoreRegistryWithStatus } from '../../src/stores/index.js';
import { InMemoryConfigStore } from '../../src/stores/in-memory.js';
import { createStore } from '../../src/stores/index.js';
import { StoreUnavailableError } from '../../src/core/errors.js';
import type { ChangeFeed, ChangeListener, Config, ConfigQuery } from '../../src/core/ports.js';
import { call, isProblem, postJson, removeTempDirs, tempDir, writeJson, type HttpAnswer } from './helpers.js';
import { openStream, type SseStream } from './sse-client.js';
import { waitFor } from '../helpers/wait.js';

/** An in-memory store that can be taken down: reads fail and its feed reports the outage, then recovers. */
class FlakyStore extends InMemoryConfigStore {
  down = false;
  private outageListeners = new Set<ChangeListener>();
  override async get(queries: readonly ConfigQuery[]): Promise<Config[]> {
    if (this.down) throw new StoreUnavailableError(this.name, 'connection refused');
    return super.get(queries);
  }
  override watch(listener: ChangeListener): ChangeFeed {
    this.outageListeners.add(listener);
    const inner = super.watch(listener);
    return { close: async () => void (this.outageListeners.delete(listener), await inner.close()) };
  }
  goDown(): void {
    this.down = true;
    for (const l of this.outageListeners) l.error(new Error('connection refused by 10.0.0.7:5432'));
  }
  comeBack(): void {
    this.down = false;
    for (const l of this.outageListeners) l.change({});
  }
}

const cleanups: Array<() => Promise<unknown>> = [];
after(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
  removeTempDirs();
});

interface World {
  app: FastifyInstance;
  base: string;
  registry: StoreRegistryWithStatus;
  mem: InMemoryConfigStore;
  flaky: FlakyStore;
}

async function world(overrides: SettingsOverrides = {}, stores: Record<string, unknown> = {}): Promise<World> {
  const dir = tempDir();
  writeJson(join(dir, '.configu'), { stores: { mem: { type: 'in-memory', default: true }, flaky: { type: 'in-memory' }, ...stores } });
  let flaky!: FlakyStore;
  const registry = createStoreRegistry(await loadConfiguration({ file: join(dir, '.configu') }), {
    logger: { warn: () => undefined },
    createStore: (d) => {
      if (d.name === 'flaky') return (flaky = new FlakyStore('flaky'));
      return createStore(d.type, d.configuration, d.name);
    },
  });
  await registry.init();
  const app = await buildServer({ registry, settings: settingsWith(overrides), logger: false, ready: true });
  await app.listen({ port: 0, host: '127.0.0.1' });
  cleanups.push(() => registry.close(), () => app.close());
  const base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
  return { app, base, registry, mem: registry.store('mem') as InMemoryConfigStore, flaky };
}

const schema = { keys: { GREETING: {}, TOKEN: { hidden: true } } };
const pipeline = (set = 'prod/eu', store?: string) => [{ ...(store ? { store } : {}), set, schema }];
const streams: SseStream[] = [];
async function stream(base: string, body: unknown, headers: Record<string, string> = {}): Promise<SseStream> {
  const s = await openStream(`${base}/export`, body, headers);
  streams.push(s);
  cleanups.push(async () => s.close());
  return s;
}
const dataOf = (s: SseStream) => s.events.filter((e) => e.event === 'message');

describe('ETag and If-None-Match on POST /export', () => {
  test('a strong tag that stays equal while the answer does, changes with it, and 304 without a body', async () => {
    const w = await world();
    await w.mem.set([{ set: 'prod', key: 'GREETING', value: 'hello' }]);
    const a = await postJson(`${w.base}/export`, pipeline());
    const b = await postJson(`${w.base}/export`, pipeline());
    assert.equal(a.status, 200);
    assert.deepEqual(a.json(), { GREETING: 'hello' });
    const tag = String(a.headers.etag);
    assert.match(tag, /^"[A-Za-z0-9_-]{43}"$/);
    assert.equal(b.headers.etag, tag);

    const same = await postJson(`${w.base}/export`, pipeline(), { 'if-none-match': tag });
    assert.equal(same.status, 304);
    assert.equal(same.body, '');
    assert.equal(same.headers.etag, tag);
    const listed = await postJson(`${w.base}/export`, pipeline(), { 'if-none-match': `"other", W/${tag}` });
    assert.equal(listed.status, 304);

    await w.mem.set([{ set: 'prod/eu', key: 'GREETING', value: 'hallo' }]);
    const c = await postJson(`${w.base}/export`, pipeline(), { 'if-none-match': tag });
    assert.equal(c.status, 200);
    assert.deepEqual(c.json(), { GREETING: 'hallo' });
    assert.notEqual(c.headers.etag, tag);

    // A hidden key's value is not part of the answer: changing it leaves the answer, and so the tag, unchanged.
    await w.mem.set([{ set: 'prod/eu', key: 'TOKEN', value: 's3cr3t-a' }]);
    const d = await postJson(`${w.base}/export`, pipeline(), { 'if-none-match': String(c.headers.etag) });
    assert.equal(d.status, 304);
  });
});

describe('long polling: If-None-Match with Prefer: wait=N', () => {
  test('held until the answer changes, then 200 with the new answer and tag', async () => {
    const w = await world();
    await w.mem.set([{ set: '', key: 'GREETING', value: 'one' }]);
    const first = await postJson(`${w.base}/export`, pipeline());
    const tag = String(first.headers.etag);
    const held = postJson(`${w.base}/export`, pipeline(), { 'if-none-match': tag, prefer: 'wait=120' }, { timeoutMs: 150_000 });
    await waitFor('the long poll is held', () => w.app.cfgu.watch.watchers === 1);
    await w.mem.set([{ set: '', key: 'GREETING', value: 'two' }]);
    const r = await held;
    assert.equal(r.status, 200);
    assert.deepEqual(r.json(), { GREETING: 'two' });
    assert.notEqual(r.headers.etag, tag);
    await waitFor('the watcher is released', () => w.app.cfgu.watch.watchers === 0);
  });

  test('304 with the same tag once N seconds pass without a change', async () => {
    const w = await world();
    const first = await postJson(`${w.base}/export`, pipeline());
    const r = await postJson(`${w.base}/export`, pipeline(), { 'if-none-match': String(first.headers.etag), prefer: 'wait=1' });
    assert.equal(r.status, 304);
    assert.equal(r.body, '');
    assert.equal(r.headers.etag, first.headers.etag);
  });

  test('a stale tag is answered at once with the current answer', async () => {
    const w = await world();
    const r = await postJson(`${w.base}/export`, pipeline(), { 'if-none-match': '"stale"', prefer: 'wait=120' });
    assert.equal(r.status, 200);
    assert.deepEqual(r.json(), { GREETING: '' });
  });
});

describe('SSE: Accept: text/event-stream', () => {
  test('the first event is the current answer, each change one event with id = ETag, never a duplicate; heartbeats', async () => {
    const w = await world({ watch: { heartbeatMs: 50 } });
    await w.mem.set([
      { set: 'prod', key: 'GREETING', value: 'hello' },
      { set: 'prod', key: 'TOKEN', value: 'never-leaves' },
    ]);
    const plain = await postJson(`${w.base}/export`, pipeline());
    const s = await stream(w.base, pipeline());
    assert.equal(s.status, 200);
    assert.match(String(s.headers['content-type']), /^text\/event-stream/);
    await waitFor('the first event', () => dataOf(s).length === 1);
    assert.deepEqual(dataOf(s)[0], { event: 'message', id: plain.headers.etag, data: '{"GREETING":"hello"}' });

    await w.mem.set([{ set: 'prod/eu', key: 'GREETING', value: 'hallo' }]);
    await waitFor('the change event', () => dataOf(s).length === 2);
    const after = await postJson(`${w.base}/export`, pipeline());
    assert.deepEqual(dataOf(s)[1], { event: 'message', id: after.headers.etag, data: '{"GREETING":"hallo"}' });

    // The same value written again, and a hidden key changed: a notice, an evaluation, the same answer: no event.
    const evaluations = w.app.cfgu.watch.stats.evaluations;
    await w.mem.set([{ set: 'prod/eu', key: 'GREETING', value: 'hallo' }]);
    await w.mem.set([{ set: 'prod/eu', key: 'TOKEN', value: 'still-never-leaves' }]);
    await waitFor('re-evaluated', () => w.app.cfgu.watch.stats.evaluations > evaluations && !w.app.cfgu.watch.pending);
    await w.mem.set([{ set: 'prod/eu', key: 'GREETING', value: 'salut' }]);
    await waitFor('the third event', () => dataOf(s).length === 3);
    assert.deepEqual(dataOf(s).map((e) => e.data), ['{"GREETING":"hello"}', '{"GREETING":"hallo"}', '{"GREETING":"salut"}']);
    assert.ok(!s.body.includes('never-leaves'));

    await waitFor('heartbeat comments', () => s.comments.filter((c) => c === 'heartbeat').length >= 2);
  });

  test('watchers of one pipeline share one evaluation per change; a change to an unrelated set evaluates nothing', async () => {
    const w = await world();
    const hub = w.app.cfgu.watch;
    const a = await stream(w.base, pipeline());
    const b = await stream(w.base, pipeline());
    await waitFor('both first events', () => dataOf(a).length === 1 && dataOf(b).length === 1);
    assert.equal(hub.stats.evaluations, 1);

    const notices = hub.stats.notices;
    await w.mem.set([{ set: 'dev', key: 'GREETING', value: 'x' }, { set: 'prod/us', key: 'GREETING', value: 'y' }]);
    await waitFor('the notice arrived', () => hub.stats.notices > notices);
    assert.equal(hub.pending, false);
    assert.equal(hub.stats.evaluations, 1);

    await w.mem.set([{ set: '', key: 'GREETING', value: 'root' }]); // an ancestor of prod/eu
    await waitFor('both change events', () => dataOf(a).length === 2 && dataOf(b).length === 2);
    assert.equal(hub.stats.evaluations, 2);
    assert.equal(dataOf(a)[1]!.data, '{"GREETING":"root"}');
  });

  test('a store that goes down gives an error event with the problem body, then the answer when it is back', async () => {
    const w = await world();
    await w.flaky.set([{ set: '', key: 'GREETING', value: 'steady' }]);
    const s = await stream(w.base, pipeline('', 'flaky'));
    await waitFor('the first event', () => dataOf(s).length === 1);
    w.flaky.goDown();
    await waitFor('the error event', () => s.events.some((e) => e.event === 'error'));
    const plain = await postJson(`${w.base}/export`, pipeline('', 'flaky'));
    const expected = {
      type: 'urn:cfgu:problem:store-unavailable',
      title: 'Store Unavailable',
      status: 503,
      detail: 'store "flaky" cannot be reached or read; retry later',
    };
    assert.deepEqual(isProblem(plain, 503), expected);
    const error = s.events.find((e) => e.event === 'error')!;
    assert.deepEqual(JSON.parse(error.data), expected);
    assert.equal(error.id, undefined);
    assert.ok(!s.body.includes('10.0.0.7'));

    w.flaky.comeBack();
    await waitFor('the answer again', () => dataOf(s).length === 2);
    assert.deepEqual(dataOf(s)[1], dataOf(s)[0]);
    assert.deepEqual(s.events.map((e) => e.event), ['message', 'error', 'message']);
  });

  test('a json-file made corrupt: an error event from the failed re-evaluation, then the new answer once fixed', async () => {
    const dir = tempDir();
    const file = join(dir, 'data.json');
    writeJson(file, [{ set: '', key: 'GREETING', value: 'from-file' }]);
    const w = await world({}, { file: { type: 'json-file', configuration: { path: file, feedIntervalMs: 50 } } });
    const s = await stream(w.base, pipeline('', 'file'));
    await waitFor('the first event', () => dataOf(s).length === 1);
    writeFileSync(file, '[{"set": "", "key": ');
    await waitFor('the error event', () => s.events.some((e) => e.event === 'error'));
    const error = s.events.find((e) => e.event === 'error')!;
    assert.deepEqual(JSON.parse(error.data), {
      type: 'urn:cfgu:problem:store-unavailable',
      title: 'Store Unavailable',
      status: 503,
      detail: 'store "file" cannot be reached or read; retry later',
    });
    writeJson(file, [{ set: '', key: 'GREETING', value: 'fixed' }]);
    await waitFor('the new answer', () => dataOf(s).length === 2);
    assert.equal(dataOf(s)[1]!.data, '{"GREETING":"fixed"}');
    if (process.getuid?.() !== 0) {
      // Unreadable (a permission change) fails the same way; root reads through permissions, so only checked as a user.
      chmodSync(file, 0o000);
      await waitFor('a second error event', () => s.events.filter((e) => e.event === 'error').length === 2);
      chmodSync(file, 0o644);
      await waitFor('the answer again', () => dataOf(s).length === 3);
    }
  });

  test('a value that now fails its rule: an error event with the 422 body, a held long poll gets that 422, then the answer', async () => {
    const w = await world();
    const strict = [{ set: 'prod', schema: { keys: { GREETING: { required: true, enum: ['hello', 'hi'] } } } }];
    await w.mem.set([{ set: 'prod', key: 'GREETING', value: 'hello' }]);
    const s = await stream(w.base, strict);
    await waitFor('the first event', () => dataOf(s).length === 1);
    const held = postJson(`${w.base}/export`, strict, { 'if-none-match': String(dataOf(s)[0]!.id), prefer: 'wait=120' }, { timeoutMs: 150_000 });
    await waitFor('the long poll is held', () => w.app.cfgu.watch.watchers === 2);
    await w.mem.set([{ set: 'prod', key: 'GREETING', value: 'bonjour' }]);
    await waitFor('the error event', () => s.events.some((e) => e.event === 'error'));
    const plain = await postJson(`${w.base}/export`, strict);
    const expected = isProblem(plain, 422);
    assert.equal(expected.errors[0].rule, 'enum');
    assert.deepEqual(JSON.parse(s.events.find((e) => e.event === 'error')!.data), expected);
    assert.deepEqual(isProblem(await held, 422), expected);
    await w.mem.set([{ set: 'prod', key: 'GREETING', value: 'hi' }]);
    await waitFor('the new answer', () => dataOf(s).length === 2);
    assert.equal(dataOf(s)[1]!.data, '{"GREETING":"hi"}');
  });

  test('Last-Event-ID equal to the current tag skips the first event; a stale one does not', async () => {
    const w = await world();
    await w.mem.set([{ set: '', key: 'GREETING', value: 'a' }]);
    const tag = String((await postJson(`${w.base}/export`, pipeline())).headers.etag);
    const resumed = await stream(w.base, pipeline(), { 'last-event-id': tag });
    const fresh = await stream(w.base, pipeline(), { 'last-event-id': '"old"' });
    await waitFor('the fresh stream has its first event', () => dataOf(fresh).length === 1);
    await waitFor('the resumed stream is open', () => resumed.comments.includes('resumed'));
    assert.equal(dataOf(resumed).length, 0);
    await w.mem.set([{ set: '', key: 'GREETING', value: 'b' }]);
    await waitFor('both see the change', () => dataOf(resumed).length === 1 && dataOf(fresh).length === 2);
    assert.equal(dataOf(resumed)[0]!.data, '{"GREETING":"b"}');
  });

  test('a stream outlives the request timeout (which bounds receiving the request, not the answer)', async () => {
    const w = await world({ http: { headersTimeoutMs: 100, requestTimeoutMs: 200 }, watch: { heartbeatMs: 50 } });
    const s = await stream(w.base, pipeline());
    // Twenty heartbeats take at least a second: five request timeouts.
    await waitFor('twenty heartbeats', () => s.comments.filter((c) => c === 'heartbeat').length >= 20);
    await w.mem.set([{ set: 'prod', key: 'GREETING', value: 'late' }]);
    await waitFor('the change event', () => dataOf(s).length === 2);
    assert.equal(w.app.cfgu.watch.watchers, 1);
  });

  test('a request that is not a valid pipeline is an ordinary problem, not a stream', async () => {
    const w = await world();
    const s = await stream(w.base, [{ store: 'nope', schema }]);
    await s.ended;
    assert.equal(s.status, 400);
    const p = JSON.parse(s.body);
    assert.equal(p.type, 'urn:cfgu:problem:unknown-store');
    assert.deepEqual(p.knownStores, ['mem', 'flaky']);
    assert.equal(w.app.cfgu.watch.watchers, 0);
  });
});

describe('limits, auth and shutdown', () => {
  test('beyond the maximum of watchers: 503 with Retry-After and the exact problem body', async () => {
    const w = await world({ watch: { maxWatchers: 1 } });
    const s = await stream(w.base, pipeline());
    await waitFor('the first event', () => dataOf(s).length === 1);
    const expected = {
      type: 'about:blank',
      title: 'Service Unavailable',
      status: 503,
      detail: 'this server already serves its maximum of 1 watchers; retry later or elsewhere',
    };
    const second = await openStream(`${w.base}/export`, pipeline());
    await second.ended;
    assert.equal(second.status, 503);
    assert.equal(second.headers['retry-after'], '5');
    assert.deepEqual(JSON.parse(second.body), expected);
    const poll: HttpAnswer = await postJson(`${w.base}/export`, pipeline(), { 'if-none-match': String(dataOf(s)[0]!.id), prefer: 'wait=60' });
    assert.deepEqual(isProblem(poll, 503), expected);
    assert.equal(poll.headers['retry-after'], '5');
    // A plain request is no watcher: still served.
    assert.equal((await postJson(`${w.base}/export`, pipeline())).status, 200);
  });

  test('auth applies to streams and long polls', async () => {
    const w = await world({ auth: { enabled: true, presharedKeys: ['watch-key-123'] } });
    const denied = await openStream(`${w.base}/export`, pipeline());
    await denied.ended;
    assert.equal(denied.status, 401);
    assert.equal(JSON.parse(denied.body).type, 'urn:cfgu:problem:unauthorized');
    const poll = await postJson(`${w.base}/export`, pipeline(), { 'if-none-match': '"x"', prefer: 'wait=60' });
    isProblem(poll, 401);
    const allowed = await stream(w.base, pipeline(), { authorization: 'Bearer watch-key-123' });
    await waitFor('the first event', () => dataOf(allowed).length === 1);
  });

  test('shutdown: readiness 503, streams end, held long polls answer 304 at once, new streams 503', async () => {
    const w = await world();
    const s = await stream(w.base, pipeline());
    await waitFor('the first event', () => dataOf(s).length === 1);
    const tag = String(dataOf(s)[0]!.id);
    const held = postJson(`${w.base}/export`, pipeline(), { 'if-none-match': tag, prefer: 'wait=300' }, { timeoutMs: 400_000 });
    await waitFor('the long poll is held', () => w.app.cfgu.watch.watchers === 2);
    w.app.cfgu.lifecycle.beginShutdown();
    assert.equal((await call(`${w.base}/ready`)).status, 503);
    await s.ended;
    const r = await held;
    assert.equal(r.status, 304);
    assert.equal(r.headers.etag, tag);
    const late = await openStream(`${w.base}/export`, pipeline());
    await late.ended;
    assert.equal(late.status, 503);
    assert.deepEqual(JSON.parse(late.body), {
      type: 'about:blank',
      title: 'Service Unavailable',
      status: 503,
      detail: 'the server is shutting down; reconnect to another replica',
    });
  });
});
