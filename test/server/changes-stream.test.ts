/**
 * GET /changes?store=S, the change stream of one store (docs/server.md, "Following a store: GET /changes";
 * docs/security.md, "Change streams"). cfgu's server runs in this process over real stores (a json-file, a sqlite
 * database, an in-memory store, a json-file whose feed is hidden so that it is polled, and PostgreSQL with
 * `notify: true` when the shared server is there), over real sockets:
 *   - a POST /upsert (and a POST /rollback) in one connection arrives in a second as exactly one `change` event naming
 *     the set; another program's write arrives too (a file renamed over the store's, the sqlite3 client, psql);
 *   - notices within the debounce make one event; a store without a feed is compared set by set, without spam;
 *   - a scoped token sees only the sets its grants cover ("any set" reaches everyone);
 *   - every refusal with its exact status and body (401, 400, 403, 405, 429, 503), HEAD, the audit line;
 *   - the stream's credential: a JWT that expires, a credential removed or narrowed by a reload;
 *   - a feed outage (error event, then "any set"), shutdown and server close.
 * That an event does not arrive is shown by a later event that must arrive, with nothing before it.
 */
import { after, before, describe, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SignJWT, exportJWK, generateKeyPair, type CryptoKey } from 'jose';
import { pino, type Logger } from 'pino';
import type { FastifyInstance } from 'fastify';
import { buildServer } from '../../src/server/index.js';
import { resolveSettings } from '../../src/server/process/resolve-settings.js';
import { loadConfiguration } from '../../src/config/index.js';
import { createStoreRegistry, type StoreRegistryWithStatus } from '../../src/stores/index.js';
import type { ResolvedStore, StoreResolver } from '../../src/core/ports.js';
import type { InMemoryConfigStore } from '../../src/stores/in-memory.js';
import { dropPostgresTables, pgUpsert, psql, requireTool, sqlite3 } from '../helpers/plain-clients.js';
import { probeTcp, requireService } from '../helpers/services.js';
import { waitFor } from '../helpers/wait.js';
import { PG, RUN } from '../stores/kinds.js';
import { call, captureLog, isProblem, postJson, removeTempDirs, tempDir, writeJson } from './helpers.js';
import { openGetStream, openStream, type SseStream } from './sse-client.js';

const sha256 = (t: string) => createHash('sha256').update(t, 'utf8').digest('hex');
const PRESHARED = `preshared-${randomUUID()}`;
/** Every store, the sets under prod only. */
const PROD = `cfgu_prod-${randomUUID()}`;
/** Store mem (and a store `ghost` that is not declared), every set. */
const MEM_ONLY = `cfgu_mem-${randomUUID()}`;
const ISSUER = 'https://idp.changes.test';
const AUDIENCE = 'cfgu-proxy';
const PG_TABLE = `cfgu_changes_${RUN}`;
const PG_POLLED = `cfgu_changes_${RUN}_p`;

const UNAUTHORIZED = { type: 'urn:cfgu:problem:unauthorized', title: 'Unauthorized', status: 401, detail: 'a valid bearer key is required (Authorization: Bearer <key>)' };
const forbiddenStore = (store: string) => ({
  type: 'urn:cfgu:problem:forbidden',
  title: 'Forbidden',
  status: 403,
  detail: `no grant of this credential covers store "${store}": following its changes needs one`,
  refused: [],
});
const unavailable = (store: string) => ({ type: 'urn:cfgu:problem:store-unavailable', title: 'Store Unavailable', status: 503, detail: `store "${store}" cannot be reached or read; retry later` });

let privateKey: CryptoKey;
let jwksFile: string;

before(async () => {
  const pair = await generateKeyPair('RS256', { extractable: true });
  privateKey = pair.privateKey;
  jwksFile = join(tempDir('cfgu-changes-jwks-'), 'jwks.json');
  writeFileSync(jwksFile, JSON.stringify({ keys: [{ ...(await exportJWK(pair.publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' }] }));
});
after(async () => {
  await dropPostgresTables(PG, [PG_TABLE, PG_POLLED]);
  removeTempDirs();
});

const jwt = (claims: Record<string, unknown>, ttlSeconds: number) =>
  new SignJWT({ sub: 'svc-changes', scope: 'cfgu:prod', ...claims })
    .setProtectedHeader({ alg: 'RS256', kid: 'k1' })
    .setIssuer(ISSUER)
    .setAudience(AUDIENCE)
    .setIssuedAt()
    .setExpirationTime(Math.floor(Date.now() / 1000) + ttlSeconds)
    .sign(privateKey);

const credentials = (prodStores = ['*']) => [
  { name: 'prod-team', sha256: sha256(PROD), stores: prodStores, sets: ['prod/**'] },
  { name: 'mem-team', sha256: sha256(MEM_ONLY), stores: ['mem', 'ghost'], sets: ['**'] },
];
const authSettings = (prodStores?: string[]) => ({
  enabled: true,
  presharedKeys: [PRESHARED],
  credentials: credentials(prodStores),
  jwt: { jwksFile, issuer: ISSUER, audience: AUDIENCE, clockSkewSeconds: 0, grants: [{ claim: 'scope', value: 'cfgu:prod', stores: ['*'], sets: ['prod/**'] }] },
});
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const ADMIN = bearer(PRESHARED);

interface World {
  app: FastifyInstance;
  base: string;
  dir: string;
  /** The json-file of store `files`, and of store `polled` (whose feed is hidden: it is polled). */
  files: string;
  polled: string;
  database: string;
  mem: InMemoryConfigStore;
  audit: () => Array<Record<string, unknown>>;
}

/**
 * A server over stores `files` (json-file, the default), `lite` (sqlite), `mem` (in-memory), `polled` (a json-file
 * whose change feed this resolver hides) and, with `pg`, `pg` (PostgreSQL, with `notify: true` or polled). Closed when the test ends.
 */
async function world(t: TestContext, proxy: Record<string, unknown> = {}, options: { auth?: boolean; pg?: 'notify' | 'poll' } = {}): Promise<World> {
  const dir = tempDir('cfgu-changes-');
  const files = join(dir, 'config.json');
  const polled = join(dir, 'polled.json');
  const database = join(dir, 'config.db');
  const stores: Record<string, unknown> = {
    files: { type: 'json-file', configuration: { path: files }, default: true },
    lite: { type: 'sqlite', configuration: { database, tableName: 'config', feedIntervalMs: 50 } },
    mem: { type: 'in-memory' },
    polled: { type: 'json-file', configuration: { path: polled } },
  };
  if (options.pg === 'notify') stores.pg = { type: 'postgresql', configuration: { ...PG, tableName: PG_TABLE, notify: true, feedIntervalMs: 50 } };
  // Without notify, a periodic check that here never comes by itself: only this server's own writes start one.
  if (options.pg === 'poll') stores.pg = { type: 'postgresql', configuration: { ...PG, tableName: PG_POLLED, feedIntervalMs: 3_600_000 } };
  writeJson(join(dir, '.configu'), { stores });
  const registry: StoreRegistryWithStatus = createStoreRegistry(await loadConfiguration({ file: join(dir, '.configu') }), { logger: { warn: () => undefined } });
  t.after(() => registry.close());
  await registry.init();
  const resolver: StoreResolver = {
    resolve(name) {
      const store = registry.resolve(name);
      return store.name === 'polled' ? withoutFeed(store) : store;
    },
    names: () => registry.names(),
  };
  const capture = captureLog();
  const fileSettings = { ...(options.auth === false ? {} : { auth: authSettings() }), ...proxy };
  const settings = resolveSettings({ fileSettings, file: join(dir, '.configu'), env: {} });
  const app = await buildServer({ registry: resolver, settings: { ...settings, workers: 1 }, logger: pino({ level: 'silent' }) as unknown as Logger, auditLogger: capture.logger, ready: true });
  await app.listen({ port: 0, host: '127.0.0.1' });
  t.after(() => app.close());
  const audit = () => capture.lines().map(({ level: _l, time: _t, pid: _p, hostname: _h, msg: _m, ms: _ms, ...rest }) => rest);
  return { app, base: `http://127.0.0.1:${(app.server.address() as { port: number }).port}`, dir, files, polled, database, mem: registry.store('mem') as InMemoryConfigStore, audit };
}

/** The store without its change feed (a kind that has none): everything else as it is. */
function withoutFeed(store: ResolvedStore): ResolvedStore {
  return {
    name: store.name,
    type: store.type,
    read: (queries) => store.read(queries),
    write: (configs) => store.write(configs),
    list: (prefix, options) => store.list!(prefix, options),
    ...(store.revisions ? { revisions: store.revisions } : {}),
  };
}

/** Open a change stream and wait for its `ready` event (closed when the test ends). */
async function follow(t: TestContext, w: World, store: string, headers: Record<string, string> = ADMIN): Promise<SseStream> {
  const s = await openGetStream(`${w.base}/changes?store=${store}`, headers);
  t.after(() => s.close());
  assert.equal(s.status, 200, s.body);
  await waitFor('the ready event', () => s.events.length > 0);
  assert.deepEqual(s.events[0], { event: 'ready', id: undefined, data: JSON.stringify({ store }) });
  return s;
}

/** The `change` events' data so far. */
const changes = (s: SseStream) => s.events.filter((e) => e.event === 'change').map((e) => JSON.parse(e.data) as { store: string; sets: string[] | null });

/** Wait for a change event naming `set` (or `null`: any set), and answer its index among the change events. */
const changeNaming = (s: SseStream, set: string | null, from = 0) =>
  waitFor(`a change event naming ${set === null ? 'any set' : set}`, () => {
    const i = changes(s).findIndex((c, j) => j >= from && (set === null ? c.sets === null : c.sets?.includes(set) === true));
    return i >= 0 ? i : undefined;
  });

const schemaOf = (values: Record<string, unknown>) => ({ keys: Object.fromEntries(Object.keys(values).map((k) => [k, {}])) });

async function upsert(w: World, store: string, set: string, values: Record<string, unknown>, headers = ADMIN): Promise<{ revision: number }> {
  const r = await postJson(`${w.base}/upsert`, { store, set, schema: schemaOf(values), values }, headers);
  assert.equal(r.status, 200, r.body);
  return r.json();
}

/** Another program saves the json-file as an editor does: a new file renamed over the store's. */
function renameOver(path: string, configs: Array<{ set: string; key: string; value: string }> | string): void {
  writeFileSync(`${path}.new`, typeof configs === 'string' ? configs : JSON.stringify(configs));
  renameSync(`${path}.new`, path);
}

// ------------------------------------------------------------------------------------------------------------------

describe('a write reaches the change streams of its store', () => {
  test('json-file: an upsert and a rollback in one connection are one event each in a second; a file renamed over arrives', async (t) => {
    const w = await world(t);
    const s = await follow(t, w, 'files');
    assert.equal(s.headers['content-type'], 'text/event-stream; charset=utf-8');
    assert.equal(s.headers['cache-control'], 'no-store');
    assert.equal(s.headers['x-accel-buffering'], 'no');

    const first = await upsert(w, 'files', 'prod/eu', { HOST: 'a' });
    await changeNaming(s, 'prod/eu');
    await upsert(w, 'files', 'prod/eu', { HOST: 'b' });
    await changeNaming(s, 'prod/eu', 1);
    const rollback = await postJson(`${w.base}/rollback`, { store: 'files', set: 'prod/eu', schema: schemaOf({ HOST: 1 }), toRevision: first.revision }, ADMIN);
    assert.equal(rollback.status, 200, rollback.body);
    await changeNaming(s, 'prod/eu', 2);
    // A later write to another set: nothing came between (one event per write, never a duplicate).
    await upsert(w, 'files', 'marker', { M: '1' });
    const marker = await changeNaming(s, 'marker');
    assert.equal(marker, 3);
    assert.deepEqual(changes(s), [
      { store: 'files', sets: ['prod/eu'] },
      { store: 'files', sets: ['prod/eu'] },
      { store: 'files', sets: ['prod/eu'] },
      { store: 'files', sets: ['marker'] },
    ]);

    // Another program: an editor's save of the whole file, changing one set (the others as they are).
    renameOver(w.files, [
      { set: 'prod/eu', key: 'HOST', value: 'a' },
      { set: 'marker', key: 'M', value: '1' },
      { set: 'staging', key: 'HOST', value: 's' },
    ]);
    await changeNaming(s, 'staging');
    assert.deepEqual(changes(s).slice(4), [{ store: 'files', sets: ['staging'] }]);
    assert.deepEqual(s.events.map((e) => e.event), ['ready', 'change', 'change', 'change', 'change', 'change']);
  });

  test('sqlite: an upsert is one event naming the set; a commit by the sqlite3 client is "any set"', async (t) => {
    if (!requireTool(t, 'sqlite3')) return;
    const w = await world(t);
    // The database is open (the registry initialised it): the feed's first look is taken within watch(), before
    // `ready`, so no "any set" follows it.
    const s = await follow(t, w, 'lite');
    await upsert(w, 'lite', 'prod/eu', { HOST: 'a' });
    await changeNaming(s, 'prod/eu');
    await upsert(w, 'lite', 'marker', { M: '1' });
    await changeNaming(s, 'marker');
    assert.deepEqual(changes(s), [
      { store: 'lite', sets: ['prod/eu'] },
      { store: 'lite', sets: ['marker'] },
    ]);
    // SQLite tells another connection's commit, not which set it wrote.
    await sqlite3(w.database, `${pgUpsert('config', 'staging', 'HOST', 's')};`);
    await changeNaming(s, null);
    assert.deepEqual(changes(s).slice(2), [{ store: 'lite', sets: null }]);
  });

  test('postgresql, notify: true: an upsert is one event naming the set; psql\'s write names its set', async (t) => {
    if (!(await requireService(t, 'postgresql', probeTcp(PG.port)))) return;
    if (!requireTool(t, 'psql')) return;
    const w = await world(t, {}, { pg: 'notify' });
    await upsert(w, 'pg', 'init', { I: '1' }); // the table exists before the feed installs its trigger
    const s = await follow(t, w, 'pg');
    await changeNaming(s, null); // listening: "any set", once
    await upsert(w, 'pg', 'prod/eu', { HOST: 'a' });
    await changeNaming(s, 'prod/eu');
    await psql(PG.port, PG.database, pgUpsert(PG_TABLE, 'staging', 'HOST', 's'));
    await changeNaming(s, 'staging');
    assert.deepEqual(changes(s), [
      { store: 'pg', sets: null },
      { store: 'pg', sets: ['prod/eu'] },
      { store: 'pg', sets: ['staging'] },
    ]);
  });

  test('postgresql without notify (a periodic check every hour): an upsert of this server still arrives at once', async (t) => {
    if (!(await requireService(t, 'postgresql', probeTcp(PG.port)))) return;
    if (!requireTool(t, 'psql')) return;
    const w = await world(t, {}, { pg: 'poll' });
    await upsert(w, 'pg', 'init', { I: '1' });
    const s = await follow(t, w, 'pg');
    await changeNaming(s, null); // the first check (the baseline): "any set", once
    await upsert(w, 'pg', 'prod/eu', { HOST: 'a' });
    await changeNaming(s, 'prod/eu');
    // psql's write is seen at the next check, here the one the next write of this server starts.
    await psql(PG.port, PG.database, pgUpsert(PG_POLLED, 'staging', 'HOST', 's'));
    await upsert(w, 'pg', 'marker', { M: '1' });
    await changeNaming(s, 'marker');
    assert.deepEqual(changes(s), [
      { store: 'pg', sets: null },
      { store: 'pg', sets: ['prod/eu'] },
      { store: 'pg', sets: ['marker', 'staging'] },
    ]);
  });

  test('notices within the debounce are one event, their sets merged and sorted; heartbeats', async (t) => {
    const w = await world(t, { watch: { heartbeatMs: 50 } });
    const s = await follow(t, w, 'mem');
    // Two writes in the same tick: their notices arrive within any debounce.
    await Promise.all([w.mem.set([{ set: 'b', key: 'K', value: '1' }]), w.mem.set([{ set: 'a', key: 'K', value: '1' }, { set: 'b/c', key: 'K', value: '1' }])]);
    await changeNaming(s, 'a');
    await w.mem.set([{ set: 'marker', key: 'K', value: '1' }]);
    await changeNaming(s, 'marker');
    assert.deepEqual(changes(s), [
      { store: 'mem', sets: ['a', 'b', 'b/c'] },
      { store: 'mem', sets: ['marker'] },
    ]);
    await waitFor('a heartbeat', () => s.comments.includes('heartbeat'));
  });

  test('a store without a change feed: each periodic look compares the sets, and a look that finds nothing says nothing', async (t) => {
    const w = await world(t, { watch: { pollMs: 20 } });
    renameOver(w.polled, [{ set: 'x', key: 'K', value: '1' }]);
    const s = await follow(t, w, 'polled'); // ready once the first look is taken
    renameOver(w.polled, [{ set: 'x', key: 'K', value: '2' }, { set: 'y', key: 'K', value: '1' }]);
    await changeNaming(s, 'x');
    await upsert(w, 'polled', 'prod/eu', { HOST: 'a' });
    await changeNaming(s, 'prod/eu');
    assert.deepEqual(changes(s), [
      { store: 'polled', sets: ['x', 'y'] },
      { store: 'polled', sets: ['prod/eu'] },
    ]);
    // Many more looks, nothing written: no event.
    const looks = w.app.cfgu.watch.stats.notices;
    await waitFor('ten more looks', () => w.app.cfgu.watch.stats.notices >= looks + 10);
    renameOver(w.polled, [{ set: 'x', key: 'K', value: '2' }, { set: 'y', key: 'K', value: '1' }, { set: 'prod/eu', key: 'HOST', value: 'a' }]);
    await upsert(w, 'polled', 'marker', { M: '1' });
    await changeNaming(s, 'marker');
    assert.deepEqual(changes(s).slice(2), [{ store: 'polled', sets: ['marker'] }]);
  });
});

describe('who sees what', () => {
  test('a token limited to prod/** sees prod/eu, never staging; "any set" reaches it too', async (t) => {
    if (!requireTool(t, 'sqlite3')) return;
    const w = await world(t);
    const all = await follow(t, w, 'mem');
    const prod = await follow(t, w, 'mem', bearer(PROD));
    // Written one after the other (maybe one event, maybe two), then together (one event).
    await w.mem.set([{ set: 'staging', key: 'K', value: '1' }]);
    await w.mem.set([{ set: 'prod/eu', key: 'K', value: '1' }]);
    await changeNaming(prod, 'prod/eu');
    await changeNaming(all, 'prod/eu');
    assert.deepEqual(changes(prod), [{ store: 'mem', sets: ['prod/eu'] }]);
    assert.deepEqual(new Set(changes(all).flatMap((c) => c.sets!)), new Set(['staging', 'prod/eu']));
    const seen = changes(all).length;
    await Promise.all([w.mem.set([{ set: 'staging', key: 'K', value: '2' }]), w.mem.set([{ set: 'prod', key: 'K', value: '2' }])]);
    await changeNaming(prod, 'prod', 1);
    await changeNaming(all, 'prod', seen);
    assert.deepEqual(changes(prod), [{ store: 'mem', sets: ['prod/eu'] }, { store: 'mem', sets: ['prod'] }]);
    assert.deepEqual(changes(all).slice(seen), [{ store: 'mem', sets: ['prod', 'staging'] }]);
    // Only staging written: nothing for the scoped stream; the next prod write is its next event.
    await w.mem.set([{ set: 'staging', key: 'K', value: '3' }]);
    await changeNaming(all, 'staging', seen + 1);
    await w.mem.set([{ set: 'prod/us', key: 'K', value: '1' }]);
    await changeNaming(prod, 'prod/us');
    assert.deepEqual(changes(prod).slice(2), [{ store: 'mem', sets: ['prod/us'] }]);
    assert.ok(!prod.body.includes('staging'), 'no set out of scope is ever named to the scoped stream');

    // "Any set" (a commit by another program to the sqlite database) goes to everyone.
    const liteAll = await follow(t, w, 'lite');
    const liteProd = await follow(t, w, 'lite', bearer(PROD));
    await sqlite3(w.database, `${pgUpsert('config', 'staging', 'HOST', 's')};`);
    await changeNaming(liteProd, null);
    await changeNaming(liteAll, null);
    assert.deepEqual(changes(liteProd), [{ store: 'lite', sets: null }]);
  });

  test('refusals: 401, 400 (query, unknown store), 403 (no grant on the store), 405; HEAD opens nothing', async (t) => {
    const w = await world(t);
    let r = await call(`${w.base}/changes?store=files`);
    assert.deepEqual(isProblem(r, 401), UNAUTHORIZED);
    assert.equal(r.headers['www-authenticate'], 'Bearer realm="cfgu"');

    r = await call(`${w.base}/changes?store=files&since=1`, { headers: ADMIN });
    assert.deepEqual(isProblem(r, 400), {
      type: 'urn:cfgu:problem:invalid-request',
      title: 'Invalid Request',
      status: 400,
      detail: 'the query string is not valid: /since is not an allowed property',
      issues: [{ path: '/since', message: 'is not an allowed property' }],
    });

    r = await call(`${w.base}/changes?store=nope`, { headers: ADMIN });
    assert.deepEqual(isProblem(r, 400), {
      type: 'urn:cfgu:problem:unknown-store',
      title: 'Unknown Store',
      status: 400,
      detail: 'unknown store "nope"; known stores: "files", "lite", "mem", "polled"',
      knownStores: ['files', 'lite', 'mem', 'polled'],
      store: 'nope',
    });
    // A name the token's grants cover but the server does not declare: only the names it may name are listed.
    r = await call(`${w.base}/changes?store=ghost`, { headers: bearer(MEM_ONLY) });
    assert.deepEqual(isProblem(r, 400), {
      type: 'urn:cfgu:problem:unknown-store',
      title: 'Unknown Store',
      status: 400,
      detail: 'unknown store "ghost"; known stores: "mem"',
      knownStores: ['mem'],
      store: 'ghost',
    });
    // No grant on the store: 403, declared or not (nothing learnt about the server's other stores).
    for (const store of ['files', 'nope']) {
      r = await call(`${w.base}/changes?store=${store}`, { headers: bearer(MEM_ONLY) });
      assert.deepEqual(isProblem(r, 403), forbiddenStore(store));
    }
    // Without `store`: the default store (files), by the same rule.
    r = await call(`${w.base}/changes`, { headers: bearer(MEM_ONLY) });
    assert.deepEqual(isProblem(r, 403), forbiddenStore('files'));

    r = await call(`${w.base}/changes?store=files`, { method: 'POST', headers: { ...ADMIN, 'content-type': 'application/json' }, body: '{}' });
    assert.deepEqual(isProblem(r, 405), { type: 'about:blank', title: 'Method Not Allowed', status: 405, detail: 'POST is not allowed on /changes; allowed: GET, HEAD' });
    assert.equal(r.headers.allow, 'GET, HEAD');

    r = await call(`${w.base}/changes?store=files`, { method: 'HEAD', headers: ADMIN });
    assert.equal(r.status, 200);
    assert.equal(r.headers['content-type'], 'text/event-stream; charset=utf-8');
    assert.equal(r.headers['cache-control'], 'no-store');
    assert.equal(r.body, '');
    assert.equal(w.app.cfgu.watch.watchers, 0);

    // The default store, followed without `store`; every request left its audit line.
    const s = await openGetStream(`${w.base}/changes`, { ...ADMIN, 'x-request-id': 'changes-default' });
    await waitFor('the ready event', () => s.events.length === 1);
    assert.deepEqual(JSON.parse(s.events[0]!.data), { store: 'files' });
    s.close();
    const line = await waitFor('its audit line', () => w.audit().find((l) => l.requestId === 'changes-default'));
    assert.deepEqual(line, {
      requestId: 'changes-default', subject: 'preshared:1', auth: 'preshared', client: '127.0.0.1', commands: [], keys: 0, status: 200,
      watch: 'stream', events: 0, ended: 'client', changes: { store: 'files' },
    });
    // One line per request routed to GET /changes (HEAD included; the 405 was routed nowhere).
    const lines = w.audit();
    assert.deepEqual(lines.map((l) => l.status), [401, 400, 400, 400, 403, 403, 403, 200, 200]);
    // (The 401 was refused before the route looked at its query string: its line names no store.)
    assert.deepEqual(lines.map((l) => l.changes ?? null), [
      null, { store: 'files' }, { store: 'nope' }, { store: 'ghost' }, { store: 'files' }, { store: 'nope' }, { store: 'files' }, { store: 'files' }, { store: 'files' },
    ]);
  });

  test('watcher limits: export streams and change streams count alike (429 per client, 503 in all)', async (t) => {
    const w = await world(t, { watch: { maxWatchers: 3, maxWatchersPerClient: 2 } });
    await upsert(w, 'files', 'prod', { HOST: 'a' });
    const exported = await openStream(`${w.base}/export`, [{ set: 'prod', schema: { keys: { HOST: {} } } }], ADMIN);
    t.after(() => exported.close());
    await waitFor('the export stream\'s first event', () => exported.events.length === 1);
    await follow(t, w, 'files');
    const third = await call(`${w.base}/changes?store=files`, { headers: ADMIN });
    assert.deepEqual(isProblem(third, 429), {
      type: 'about:blank',
      title: 'Too Many Requests',
      status: 429,
      detail: 'this client already holds its maximum of 2 watchers (streams and long polls); close one, or retry later',
    });
    assert.equal(third.headers['retry-after'], '5');
    await follow(t, w, 'files', bearer(PROD));
    const fourth = await call(`${w.base}/changes?store=files`, { headers: bearer(PROD) });
    assert.deepEqual(isProblem(fourth, 503), {
      type: 'about:blank',
      title: 'Service Unavailable',
      status: 503,
      detail: 'this server already serves its maximum of 3 watchers; retry later or elsewhere',
    });
    assert.equal(w.app.cfgu.watch.watchers, 3);
  });
});

describe('rate limits', () => {
  test('GET /changes spends the caller\'s budget as other routes do: over it, 429 before anything opens', async (t) => {
    const w = await world(t, { rateLimit: { enabled: true, max: 2, windowSeconds: 3600 } });
    await follow(t, w, 'mem');
    await follow(t, w, 'files');
    const r = await call(`${w.base}/changes?store=mem`, { headers: ADMIN });
    const retry = Number(r.headers['retry-after']);
    assert.ok(Number.isInteger(retry) && retry >= 1 && retry <= 3600, `Retry-After ${r.headers['retry-after']}`);
    assert.deepEqual(isProblem(r, 429), { type: 'urn:cfgu:problem:rate-limited', title: 'Too Many Requests', status: 429, detail: `more than 2 requests in 3600 s; retry after ${retry} s` });
    assert.equal(w.app.cfgu.watch.watchers, 2);
    await follow(t, w, 'mem', bearer(PROD)); // another subject: its own budget
  });
});

describe('the stream\'s life', () => {
  test('a JWT that expires ends the stream with an end event holding the 401 body', async (t) => {
    const w = await world(t, { watch: { heartbeatMs: 3_600_000 } });
    const token = await jwt({}, 4);
    const exp = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()).exp as number;
    const s = await follow(t, w, 'mem', { ...bearer(token), 'x-request-id': 'changes-jwt' });
    await w.mem.set([{ set: 'prod/eu', key: 'K', value: '1' }]);
    await changeNaming(s, 'prod/eu');
    await s.ended;
    assert.ok(Date.now() >= exp * 1000, 'never before exp');
    assert.deepEqual(s.events.map((e) => e.event), ['ready', 'change', 'end']);
    assert.deepEqual(JSON.parse(s.events.at(-1)!.data), UNAUTHORIZED);
    const line = await waitFor('its audit line', () => w.audit().find((l) => l.requestId === 'changes-jwt'));
    assert.deepEqual(line, {
      requestId: 'changes-jwt', subject: 'svc-changes', auth: 'jwt', client: '127.0.0.1', commands: [], keys: 0, status: 200,
      watch: 'stream', events: 1, ended: 'expired', changes: { store: 'mem' },
    });
    assert.equal(w.app.cfgu.watch.watchers, 0);
  });

  test('a reload of the credentials: a removed credential ends its stream (401), a grant narrowed off the store (403), narrowed sets cut the next event', async (t) => {
    const w = await world(t, { watch: { heartbeatMs: 3_600_000 } });
    const memStream = await follow(t, w, 'mem', bearer(MEM_ONLY));
    const prodStream = await follow(t, w, 'files', bearer(PROD));
    const kept = await follow(t, w, 'mem', bearer(PROD));
    // prod-team keeps its grant on mem only; mem-team is gone.
    const auth = authSettings(['mem']);
    w.app.cfgu.replaceCredentials(resolveSettings({ fileSettings: { auth: { ...auth, credentials: auth.credentials.slice(0, 1) } }, file: join(w.dir, '.configu'), env: {} }).auth);
    await memStream.ended;
    await prodStream.ended;
    assert.deepEqual(memStream.events.map((e) => e.event), ['ready', 'end']);
    assert.deepEqual(JSON.parse(memStream.events[1]!.data), UNAUTHORIZED);
    assert.deepEqual(prodStream.events.map((e) => e.event), ['ready', 'end']);
    assert.deepEqual(JSON.parse(prodStream.events[1]!.data), forbiddenStore('files'));
    await w.mem.set([{ set: 'prod', key: 'K', value: '1' }]);
    await changeNaming(kept, 'prod');
    // Its sets narrowed to prod/eu: the next event is cut by the new grants.
    const narrowed = { ...auth, credentials: [{ ...auth.credentials[0]!, sets: ['prod/eu'] }] };
    w.app.cfgu.replaceCredentials(resolveSettings({ fileSettings: { auth: narrowed }, file: join(w.dir, '.configu'), env: {} }).auth);
    await Promise.all([w.mem.set([{ set: 'prod/us', key: 'K', value: '1' }]), w.mem.set([{ set: 'prod/eu', key: 'K', value: '1' }])]);
    await changeNaming(kept, 'prod/eu');
    assert.deepEqual(changes(kept), [{ store: 'mem', sets: ['prod'] }, { store: 'mem', sets: ['prod/eu'] }]);
  });

  test('a feed outage: an error event with the 503 body, then "any set" once the store is back; a stream opened meanwhile is told at once', async (t) => {
    const w = await world(t);
    renameOver(w.files, [{ set: 'prod', key: 'K', value: '1' }]);
    const s = await follow(t, w, 'files');
    renameOver(w.files, '{ not json');
    await waitFor('the error event', () => s.events.length === 2);
    assert.equal(s.events[1]!.event, 'error');
    assert.deepEqual(JSON.parse(s.events[1]!.data), unavailable('files'));
    const late = await follow(t, w, 'files');
    await waitFor('the late stream\'s error event', () => late.events.length === 2);
    assert.deepEqual(late.events[1], s.events[1]);
    renameOver(w.files, [{ set: 'prod', key: 'K', value: '2' }]);
    await changeNaming(s, null);
    await changeNaming(late, null);
    assert.deepEqual(s.events.map((e) => e.event), ['ready', 'error', 'change']);
    assert.deepEqual(changes(s), [{ store: 'files', sets: null }]);
  });

  test('shutdown ends every stream cleanly and refuses new ones (503); closing the server ends them too', async (t) => {
    const w = await world(t);
    const s = await follow(t, w, 'mem');
    w.app.cfgu.lifecycle.beginShutdown();
    await s.ended;
    assert.deepEqual(s.events.map((e) => e.event), ['ready']);
    const late = await call(`${w.base}/changes?store=mem`, { headers: ADMIN });
    assert.deepEqual(isProblem(late, 503), { type: 'about:blank', title: 'Service Unavailable', status: 503, detail: 'the server is shutting down; reconnect to another replica' });
    assert.equal(late.headers['retry-after'], '1');

    const other = await world(t, {}, { auth: false });
    const open = await follow(t, other, 'files', {});
    await other.app.close();
    await open.ended;
    assert.deepEqual(open.events.map((e) => e.event), ['ready']);
    assert.equal(other.app.cfgu.watch.watchers, 0);
  });
});
