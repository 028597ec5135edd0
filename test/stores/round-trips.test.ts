/**
 * Round trips per batch read (spec: docs semantics, "A store answers a batch of (set, key) queries in one round trip
 * (one SQL statement, one MGET, one etcd range or transaction), never one round trip per key").
 *
 * For each server-backed store (and sqlite): write 300 keys in each of 3 sets (the root set and two named sets, 900
 * configs), then count what the store actually sends while it answers ONE `get` of all 900 (set, key) queries, and
 * check the answer. Counting is done on the real client the store holds or on the server, never by mocking the store:
 *
 *   - postgresql: every `query` of a pg Client belonging to the store's own pool (one extended-protocol exchange each);
 *   - mariadb:    the server's own per-session counters (Com_select, Questions) on the store's single pooled connection;
 *   - sqlite:     every statement execution (run/get/all/iterate, Database#exec) on the store's own database handle;
 *   - redis:      commands the store's ioredis client sends, and the server's MONITOR feed for that connection;
 *   - etcd:       unary calls through the store's etcd3 connection pool, and the gRPC calls created on its channels.
 *
 * A second read of only the two named sets (600 queries) must also be one round trip everywhere.
 */
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { describe, test } from 'node:test';
import { sqliteDriver } from '../../src/stores/drivers.js';
import type { Config, ConfigQuery, ConfigStore } from '../../src/core/ports.js';
import { requireService } from '../helpers/services.js';
import { etcdHost, KINDS, makeStore, RUN, type Kind } from './kinds.js';

const KEYS_PER_SET = 300;

const order = (a: Config, b: Config): number => {
  const x = `${a.set}\u0000${a.key}`;
  const y = `${b.set}\u0000${b.key}`;
  return x < y ? -1 : x > y ? 1 : 0;
};

/** What one measured window saw: the number of round trips and a human-readable line per round trip. */
interface Measured {
  count: number;
  detail: string[];
}

/** Counts the round trips one store makes while `fn` runs. */
type Meter = <T>(fn: () => Promise<T>) => Promise<{ result: T; seen: Measured }>;

/** Reach a private member of the store (the real driver object it holds). */
function inner<T>(store: ConfigStore, field: string): T {
  const v = (store as unknown as Record<string, unknown>)[field];
  assert.ok(v, `the ${store.type} store holds no "${field}" after init()`);
  return v as T;
}

const loadFromEtcd3 = createRequire(createRequire(import.meta.url).resolve('etcd3'));

interface Target {
  kind: string;
  /** Extra store configuration for the measurement. */
  extra?: Record<string, unknown>;
  /** Round trips expected for a get touching `storageKeys` distinct storage keys (key-value stores) / any SQL batch. */
  expected(storageKeys: number): number;
  meter(store: ConfigStore): Promise<Meter>;
}

/** etcd's default `--max-txn-ops`; the etcd store reads at most this many storage keys per transaction. */
const ETCD_MAX_TXN_OPS = 128;

const TARGETS: Target[] = [
  {
    kind: 'postgresql',
    expected: () => 1,
    async meter(store) {
      const pool = inner<{ _clients: unknown[] }>(store, 'pool');
      const { Client } = createRequire(import.meta.url)('pg') as typeof import('pg');
      return async (fn) => {
        const detail: string[] = [];
        const original = Client.prototype.query;
        // Count every statement any client of the store's pool sends (pool.query and client.query both end here).
        Client.prototype.query = function (this: unknown, ...args: unknown[]) {
          if (pool._clients.includes(this)) {
            const q = args[0] as string | { text?: string };
            detail.push(String(typeof q === 'string' ? q : q?.text).slice(0, 100));
          }
          return (original as (...a: unknown[]) => unknown).apply(this, args);
        } as typeof original;
        try {
          const result = await fn();
          return { result, seen: { count: detail.length, detail } };
        } finally {
          Client.prototype.query = original;
        }
      };
    },
  },
  {
    kind: 'mariadb',
    // One pooled connection: every statement the store sends runs on the session whose counters are read.
    extra: { poolSize: 1 },
    expected: () => 1,
    async meter(store) {
      const pool = inner<{ query(sql: string): Promise<[unknown, unknown]> }>(store, 'pool');
      const snapshot = async () => {
        const [rows] = await pool.query(
          `SELECT CONNECTION_ID() AS id, ` +
            `(SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME = 'COM_SELECT') AS sel, ` +
            `(SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME = 'QUESTIONS') AS q`,
        );
        const r = (rows as Array<{ id: number; sel: string; q: string }>)[0]!;
        return { id: Number(r.id), sel: Number(r.sel), q: Number(r.q) };
      };
      return async (fn) => {
        // Calibrate: what the snapshot statement itself adds to the counters (1 SELECT, 1 question).
        const s0 = await snapshot();
        const s1 = await snapshot();
        const result = await fn();
        const s2 = await snapshot();
        assert.ok(s0.id === s1.id && s1.id === s2.id, `the pool changed connections (${s0.id}, ${s1.id}, ${s2.id})`);
        const base = { sel: s1.sel - s0.sel, q: s1.q - s0.q };
        const selects = s2.sel - s1.sel - base.sel;
        const questions = s2.q - s1.q - base.q;
        assert.equal(selects, questions, `statements other than SELECT were sent (Com_select +${selects}, Questions +${questions})`);
        return { result, seen: { count: questions, detail: [`session ${s2.id}: Com_select +${selects}, Questions +${questions}`] } };
      };
    },
  },
  {
    kind: 'sqlite',
    expected: () => 1,
    async meter(store) {
      const db = inner<object>(store, 'db');
      const Database = sqliteDriver() as unknown as new (file: string) => {
        prepare(sql: string): object;
        close(): void;
      };
      const probe = new Database(':memory:');
      const statementProto = Object.getPrototypeOf(probe.prepare('SELECT 1')) as Record<string, unknown>;
      probe.close();
      const databaseProto = Object.getPrototypeOf(db) as Record<string, unknown>;
      return async (fn) => {
        const detail: string[] = [];
        const restore: Array<() => void> = [];
        const wrap = (proto: Record<string, unknown>, method: string, mine: (self: unknown) => boolean, text: (self: unknown, a: unknown[]) => string) => {
          const original = proto[method] as (...a: unknown[]) => unknown;
          proto[method] = function (this: unknown, ...args: unknown[]) {
            if (mine(this)) detail.push(`${method}: ${text(this, args).slice(0, 100)}`);
            return original.apply(this, args);
          };
          restore.push(() => (proto[method] = original));
        };
        const ownStatement = (s: unknown) => (s as { database?: unknown }).database === db;
        const source = (s: unknown) => String((s as { source?: string }).source);
        for (const m of ['run', 'get', 'all', 'iterate']) wrap(statementProto, m, ownStatement, source);
        wrap(databaseProto, 'exec', (d) => d === db, (_d, a) => String(a[0]));
        try {
          const result = await fn();
          return { result, seen: { count: detail.length, detail } };
        } finally {
          for (const r of restore) r();
        }
      };
    },
  },
  {
    kind: 'redis',
    expected: () => 1,
    async meter(store) {
      type Client = {
        sendCommand(cmd: { name: string }, ...rest: unknown[]): unknown;
        echo(s: string): Promise<string>;
        stream: { localAddress?: string; localPort?: number };
        duplicate(): MonitorSource;
      };
      type MonitorSource = { monitor(): Promise<Monitor>; disconnect(): void };
      type Monitor = {
        on(ev: 'monitor', fn: (time: string, args: string[], source: string) => void): void;
        disconnect(): void;
      };
      const client = inner<Client>(store, 'client');
      const address = `${client.stream.localAddress?.replace(/^::ffff:/, '')}:${client.stream.localPort}`;
      return async (fn) => {
        const sent: string[] = [];
        const onServer: string[] = [];
        const marker = `round-trips-end-${RUN}-${Math.random().toString(36).slice(2)}`;
        const source = client.duplicate();
        const monitor = await source.monitor();
        let done!: () => void;
        const ended = new Promise<void>((resolve) => (done = resolve));
        monitor.on('monitor', (_time, args, from) => {
          if (from !== address) return;
          if (args[0]?.toLowerCase() === 'echo' && args[1] === marker) done();
          else onServer.push(`${args[0]} (${args.length - 1} args)`);
        });
        // Client side: every command the store's own client sends.
        const original = client.sendCommand;
        client.sendCommand = function (this: Client, cmd, ...rest) {
          sent.push(cmd.name);
          return original.call(this, cmd, ...rest);
        };
        try {
          const result = await fn();
          client.sendCommand = original;
          // Same connection, so the server executes (and MONITOR reports) the marker after everything `fn` sent.
          await client.echo(marker);
          await Promise.race([ended, new Promise((_, reject) => setTimeout(() => reject(new Error('MONITOR never saw the end marker')), 3000))]);
          assert.equal(onServer.length, sent.length, `the server saw [${onServer.join(', ')}], the client sent [${sent.join(', ')}]`);
          return { result, seen: { count: onServer.length, detail: onServer } };
        } finally {
          client.sendCommand = original;
          monitor.disconnect();
          source.disconnect();
        }
      };
    },
  },
  {
    kind: 'etcd',
    // A transaction holds at most ETCD_MAX_TXN_OPS operations (the server rejects more; checked below), so a read of
    // more storage keys than that is legitimately ceil(keys / 128) transactions: one per 128 keys, never one per key.
    expected: (storageKeys) => Math.ceil(storageKeys / ETCD_MAX_TXN_OPS),
    async meter(store) {
      const pool = inner<{ pool: { exec(service: string, method: string, payload: unknown, options?: unknown): Promise<unknown> } }>(
        store,
        'client',
      ).pool;
      const grpc = loadFromEtcd3('@grpc/grpc-js') as { Channel: { prototype: { createCall(...a: unknown[]): unknown } } };
      return async (fn) => {
        const calls: string[] = [];
        const grpcCalls: string[] = [];
        // Client level: each call through the store's connection pool (instance property shadows the prototype).
        pool.exec = function (this: unknown, service, method, payload, options) {
          const ops = (payload as { success?: unknown[] }).success?.length;
          calls.push(`${service}.${method}${ops === undefined ? '' : ` (${ops} ops)`}`);
          return Object.getPrototypeOf(pool).exec.call(this, service, method, payload, options);
        };
        // gRPC level: each call created on a channel (a retry by the client's policy would be a new call).
        const proto = grpc.Channel.prototype;
        const original = proto.createCall;
        proto.createCall = function (this: unknown, ...args: unknown[]) {
          grpcCalls.push(String(args[0]));
          return original.apply(this, args);
        };
        try {
          const result = await fn();
          assert.equal(grpcCalls.length, calls.length, `gRPC calls [${grpcCalls.join(', ')}], through the pool [${calls.join(', ')}]`);
          for (const c of calls) {
            const ops = Number(/\((\d+) ops\)/.exec(c)?.[1] ?? 0);
            assert.ok(ops <= ETCD_MAX_TXN_OPS, `${c}: over etcd's ${ETCD_MAX_TXN_OPS}-operation limit`);
          }
          return { result, seen: { count: calls.length, detail: calls } };
        } finally {
          delete (pool as { exec?: unknown }).exec;
          proto.createCall = original;
        }
      };
    },
  },
];

let counter = 0;

describe('a batch get is one round trip (or the documented chunk count)', () => {
  for (const target of TARGETS) {
    const kind: Kind | undefined = KINDS.find((k) => k.name === target.kind);
    test(`${target.kind}: get of ${KEYS_PER_SET} keys x 3 sets (${KEYS_PER_SET * 3} queries)`, async (t) => {
      assert.ok(kind, `no kind "${target.kind}" in kinds.ts`);
      if (kind.service && !(await requireService(t, kind.service.name, kind.service.probe))) return;
      const tag = `${RUN}rt${++counter}`;
      const { configuration, cleanup } = await kind.fresh(tag);
      const store = makeStore(kind.name, { ...configuration, ...target.extra });
      try {
        await store.init();
        // The root set (each root key is its own storage key in the key-value layout) and two named sets.
        const sets = ['', `rt_${tag}_a`, `rt_${tag}_a/b`];
        const data: Config[] = sets.flatMap((set) =>
          Array.from({ length: KEYS_PER_SET }, (_, i) => ({
            set,
            key: set === '' ? `RT_${tag}_${i}` : `K${i}`,
            value: `v${i}@${set || 'root'}`,
          })),
        );
        await store.set(data);
        const queries: ConfigQuery[] = data.map(({ set, key }) => ({ set, key }));
        const expectedSorted = [...data].sort(order);
        const meter = await target.meter(store);

        const all = await meter(() => store.get(queries));
        assert.deepEqual([...all.result].sort(order), expectedSorted, 'the batch answer is wrong');
        const storageKeys = KEYS_PER_SET + 2;
        const want = target.expected(storageKeys);
        t.diagnostic(`${target.kind}: ${queries.length} queries -> ${all.seen.count} round trip(s): ${all.seen.detail.join(' | ')}`);
        assert.equal(all.seen.count, want, `${queries.length} queries took ${all.seen.count} round trips (want ${want}): ${all.seen.detail.join(' | ')}`);

        const named = queries.filter((q) => q.set !== '');
        const some = await meter(() => store.get(named));
        assert.deepEqual(
          [...some.result].sort(order),
          expectedSorted.filter((c) => c.set !== ''),
          'the named-sets answer is wrong',
        );
        t.diagnostic(`${target.kind}: ${named.length} queries -> ${some.seen.count} round trip(s): ${some.seen.detail.join(' | ')}`);
        assert.equal(some.seen.count, target.expected(2), `${named.length} queries took ${some.seen.count} round trips: ${some.seen.detail.join(' | ')}`);

        // Control: the meter is not blind. Three separate single-key reads must count as three round trips.
        const control = await meter(async () => {
          for (const q of queries.slice(0, 3)) await store.get([q]);
        });
        assert.equal(control.seen.count, 3, `the meter saw ${control.seen.count} round trips for 3 single-key reads: ${control.seen.detail.join(' | ')}`);
      } finally {
        await store.close();
        await cleanup();
      }
    });
  }

  test(`etcd: a transaction of more than ${ETCD_MAX_TXN_OPS} operations is refused (why the etcd store chunks)`, async (t) => {
    const kind = KINDS.find((k) => k.name === 'etcd')!;
    if (!(await requireService(t, kind.service!.name, kind.service!.probe))) return;
    const { Etcd3 } = loadFromEtcd3('etcd3') as typeof import('etcd3');
    const client = new Etcd3({ hosts: await etcdHost() });
    try {
      const ranges = (n: number) =>
        client.kv.txn({
          compare: [],
          success: Array.from({ length: n }, (_, i) => ({ request_range: { key: Buffer.from(`rt_${RUN}_${i}`) } })),
          failure: [],
        });
      const ok = await ranges(ETCD_MAX_TXN_OPS);
      assert.equal(ok.responses.length, ETCD_MAX_TXN_OPS);
      await assert.rejects(ranges(ETCD_MAX_TXN_OPS + 1), /too many operations in txn request/);
    } finally {
      client.close();
    }
  });
});

describe('a list under a prefix is one statement (SQL) / one range transaction (etcd, under 256 storage keys)', () => {
  for (const target of TARGETS.filter((t) => t.kind !== 'redis')) {
    const kind: Kind | undefined = KINDS.find((k) => k.name === target.kind);
    test(`${target.kind}: list of 3 sets x ${KEYS_PER_SET} keys`, async (t) => {
      assert.ok(kind, `no kind "${target.kind}" in kinds.ts`);
      if (kind.service && !(await requireService(t, kind.service.name, kind.service.probe))) return;
      const tag = `${RUN}rl${++counter}`;
      const { configuration, cleanup } = await kind.fresh(tag);
      const store = makeStore(kind.name, { ...configuration, ...target.extra });
      try {
        await store.init();
        const sets = [`rl_${tag}`, `rl_${tag}/a`, `rl_${tag}/a/b`];
        const keys = Array.from({ length: KEYS_PER_SET }, (_, i) => `K${String(i).padStart(4, '0')}`);
        await store.set(sets.flatMap((set) => keys.map((key) => ({ set, key, value: 'v' }))));
        // PostgreSQL asks once per store object how the table's set column collates (selectUnder): not metered.
        await store.list(`rl_${tag}/none`);
        const meter = await target.meter(store);
        const listed = await meter(() => store.list(`rl_${tag}`));
        assert.deepEqual(listed.result.sets, sets.map((set) => ({ set, keys })));
        assert.equal(listed.result.truncated, false);
        t.diagnostic(`${target.kind}: list -> ${listed.seen.count} round trip(s): ${listed.seen.detail.join(' | ')}`);
        assert.equal(listed.seen.count, 1, `list took ${listed.seen.count} round trips: ${listed.seen.detail.join(' | ')}`);
      } finally {
        await store.close();
        await cleanup();
      }
    });
  }
});
