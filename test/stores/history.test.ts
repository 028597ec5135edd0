/**
 * Revisions, compare-and-set writes and history (RevisionedStore, docs/stores.md "Revisions and history"), for every
 * store kind on the real servers the suite uses (the machine's PostgreSQL, MariaDB and Redis under names this run owns;
 * a private etcd), SQLite and json-file: write, history, conflicts, retention, outside changes, concurrency with one
 * and with two store objects, and Configu's layout left as it was.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, test, type TestContext } from 'node:test';
import { Etcd3 } from 'etcd3';
import { Redis } from 'ioredis';
import { RevisionConflictError } from '../../src/core/errors.js';
import { keyProblem, parseSet } from '../../src/core/names.js';
import { isRevisioned, type Config, type ConfigStore, type RevisionedStore, type RevisionRecord } from '../../src/core/ports.js';
import { InMemoryConfigStore } from '../../src/stores/in-memory.js';
import { DEFAULT_HISTORY, type HistorySettings } from '../../src/stores/history.js';
import { buildStore, defineStore, type StoreType } from '../../src/stores/index.js';
import { requireService } from '../helpers/services.js';
import { waitFor } from '../helpers/wait.js';
import { dropHistoryTables, KINDS, makeStore, RUN, type Kind } from './kinds.js';

let counter = 0;

/** The `history` store setting as `.configu` writes it. */
type HistorySetting = false | { keep?: number; maxAgeDays?: number };

const settingsOf = (h: HistorySetting | undefined): HistorySettings | undefined =>
  h === undefined ? undefined : h === false ? { ...DEFAULT_HISTORY, enabled: false } : { enabled: true, keep: h.keep ?? DEFAULT_HISTORY.keep, maxAgeDays: h.maxAgeDays };

interface Ctx {
  /** Unique prefix of this test's sets and keys. */
  p: string;
  /**
   * A new store object over this test's data (a second replica), with its own history setting and, when given, its
   * own clock (ms since the epoch) for the times of its records and retention by age.
   */
  open(history?: HistorySetting, now?: () => number): Promise<RevisionedStore>;
  /** The store's configuration (for a child process to open the same data). */
  configuration: Record<string, unknown>;
  /** Configu's layout, read directly (for the key-value kinds: the storage keys that hold this test's sets). */
  layout(): Promise<Config[]>;
}

const sortConfigs = (cs: readonly Config[]) => [...cs].sort((a, b) => `${a.set}\u0000${a.key}`.localeCompare(`${b.set}\u0000${b.key}`));

/**
 * The key-value layout of this test's names, read directly, with the reserved `cfgu:` keys left out (kinds.ts reads
 * every key holding the tag as configuration; the reserved ones are checked in a test of their own below).
 */
async function keyValueLayout(kind: string, configuration: Record<string, unknown>, tag: string): Promise<Config[]> {
  const entries: Array<[string, string]> = [];
  if (kind === 'redis') {
    const r = new Redis({ host: '127.0.0.1', port: 6379, maxRetriesPerRequest: 1 });
    try {
      const keys = ((await r.keys(`*${tag}*`)) as string[]).filter((k) => !k.startsWith('cfgu:'));
      for (const k of keys) entries.push([k, (await r.get(k))!]);
    } finally {
      r.disconnect();
    }
  } else {
    const e = new Etcd3({ hosts: configuration.hosts as string });
    try {
      for (const [k, v] of Object.entries(await e.getAll().strings())) if (k.includes(tag) && !k.startsWith('cfgu:')) entries.push([k, v]);
    } finally {
      e.close();
    }
  }
  const out: Config[] = [];
  for (const [k, v] of entries) {
    if (v.startsWith('{')) for (const [key, value] of Object.entries(JSON.parse(v) as Record<string, string>)) out.push({ set: k, key, value });
    else out.push({ set: '', key: k, value: v });
  }
  return out;
}

/** A store as makeStore builds it, whose history settings carry the clock `now`. */
function storeWithClock(type: string, configuration: Record<string, unknown>, now: () => number): ConfigStore {
  const definition = defineStore({ name: `${type}-test`, type: type as StoreType, configuration, default: false, backup: false });
  const settings = definition.settings as { history?: HistorySettings };
  settings.history = { ...(settings.history ?? DEFAULT_HISTORY), now };
  return buildStore(definition);
}

async function withStore(t: TestContext, kind: Kind, fn: (c: Ctx) => Promise<void>): Promise<void> {
  if (kind.service && !(await requireService(t, kind.service.name, kind.service.probe))) return;
  const tag = `${RUN}h${++counter}`;
  const { configuration, raw, cleanup } = await kind.fresh(tag);
  const opened: RevisionedStore[] = [];
  let memory: InMemoryConfigStore | undefined;
  const open = async (history?: HistorySetting, now?: () => number) => {
    let s: RevisionedStore;
    if (kind.name === 'in-memory') {
      // One process, one memory: a second object would be another store, so "replicas" share the first one.
      memory ??= new InMemoryConfigStore('in-memory-test', settingsOf(history));
      s = memory;
    } else {
      const withHistory = { ...configuration, ...(history === undefined ? {} : { history }) };
      const store = now ? storeWithClock(kind.name, withHistory, now) : makeStore(kind.name, withHistory);
      assert.ok(isRevisioned(store), `${kind.name} keeps revisions`);
      s = store;
    }
    opened.push(s);
    await s.init();
    return s;
  };
  const layout = async (): Promise<Config[]> => {
    if (kind.name === 'in-memory') return [];
    if (kind.name === 'redis' || kind.name === 'etcd') return keyValueLayout(kind.name, configuration, tag);
    return (await raw.read()).filter((c) => c.set.includes(tag) || c.key.includes(tag));
  };
  try {
    await fn({ p: tag, open, layout, configuration });
  } finally {
    for (const s of opened) await s.close();
    if (typeof configuration.tableName === 'string') await dropHistoryTables(kind.name, configuration.tableName);
    await cleanup();
  }
}

const values = (records: readonly RevisionRecord[]) => records.map((r) => ({ revision: r.revision, recorded: r.recorded, changes: r.changes }));

/** Every record of a set, newest first, read page by page. */
async function allRecords(store: RevisionedStore, set: string, pageSize = 97): Promise<RevisionRecord[]> {
  const out: RevisionRecord[] = [];
  let before: number | undefined;
  for (;;) {
    const page = await store.history({ set, limit: pageSize, ...(before === undefined ? {} : { before }) });
    out.push(...page.records);
    if (page.next === undefined) return out;
    before = page.next;
  }
}

for (const kind of KINDS) {
  describe(`revisions and history: ${kind.name}`, () => {
    test('a write raises the revision and appends its record; history is newest first; the layout is Configu\'s', async (t) => {
      await withStore(t, kind, async ({ p, open, layout }) => {
        const store = await open();
        const set = `s_${p}/eu`;
        assert.deepEqual(await store.revision(set), { set, revision: 0, changedOutside: false });
        const first = await store.write(set, [{ key: 'A', value: '1' }, { key: 'B', value: '2' }], { subject: 'alice', requestId: 'r1', message: 'first' });
        assert.equal(first.revision, 1);
        assert.equal(first.records.length, 1);
        const second = await store.write(set, [{ key: 'B', value: null }, { key: 'A', value: '3' }, { key: 'C', value: '' }], { expectedRevision: 1 });
        assert.equal(second.revision, 2);
        assert.deepEqual(await store.revision(set), { set, revision: 2, changedOutside: false });
        const page = await store.history({ set });
        assert.deepEqual(values(page.records), [
          {
            revision: 2,
            recorded: true,
            changes: [
              { key: 'A', before: '1', after: '3' },
              { key: 'B', before: '2', after: null },
              { key: 'C', before: null, after: null },
            ],
          },
          { revision: 1, recorded: true, changes: [{ key: 'A', before: null, after: '1' }, { key: 'B', before: null, after: '2' }] },
        ]);
        assert.equal(page.next, undefined);
        const [r2, r1] = page.records;
        assert.deepEqual([r1!.subject, r1!.requestId, r1!.message, r1!.set], ['alice', 'r1', 'first', set]);
        assert.deepEqual([r2!.subject, r2!.requestId, r2!.message], [null, null, null]);
        assert.ok(Date.parse(r1!.time) <= Date.parse(r2!.time) && r2!.time.endsWith('Z'));
        assert.deepEqual(first.records[0], r1);
        // The data reads as usual, and the layout holds the configuration only.
        assert.deepEqual(await store.get([{ set, key: 'A' }, { set, key: 'B' }]), [{ set, key: 'A', value: '3' }]);
        if (kind.name !== 'in-memory') assert.deepEqual(await layout(), [{ set, key: 'A', value: '3' }]);
        // Filters and pages.
        assert.deepEqual((await store.history({ set, key: 'B' })).records.map((r) => r.revision), [2, 1]);
        assert.deepEqual((await store.history({ set, key: 'C' })).records.map((r) => r.revision), [2]);
        const one = await store.history({ set, limit: 1 });
        assert.deepEqual([one.records.map((r) => r.revision), one.next], [[2], 2]);
        assert.deepEqual((await store.history({ set, before: one.next })).records.map((r) => r.revision), [1]);
        assert.deepEqual((await store.history({ set, since: '2999-01-01T00:00:00Z' })).records, []);
        assert.deepEqual((await store.history({ set, until: '2000-01-01T00:00:00Z' })).records, []);
        assert.deepEqual((await store.history({ set: `other_${p}` })).records, []);
        // A rollback is a write of the `before` values with the expected revision.
        const rollback = await store.write(set, r2!.changes.map((c) => ({ key: c.key, value: c.before })), { expectedRevision: 2, message: 'rollback to 1' });
        assert.equal(rollback.revision, 3);
        assert.deepEqual(sortConfigs(await store.get([{ set, key: 'A' }, { set, key: 'B' }, { set, key: 'C' }])), [
          { set, key: 'A', value: '1' },
          { set, key: 'B', value: '2' },
        ]);
      });
    });

    test('a stale expected revision is refused with the current one, and nothing is written', async (t) => {
      await withStore(t, kind, async ({ p, open }) => {
        const store = await open();
        const set = `c_${p}`;
        await store.write(set, [{ key: 'A', value: '1' }]);
        await store.write(set, [{ key: 'A', value: '2' }], { expectedRevision: 1 });
        for (const expected of [0, 1, 5]) {
          await assert.rejects(store.write(set, [{ key: 'A', value: 'lost' }], { expectedRevision: expected }), (e: unknown) => {
            assert.ok(e instanceof RevisionConflictError);
            assert.deepEqual([e.store, e.set, e.expected, e.current, e.code], [`${kind.name}-test`, set, expected, 2, 'CFGU_REVISION_CONFLICT']);
            return true;
          });
        }
        assert.deepEqual(await store.get([{ set, key: 'A' }]), [{ set, key: 'A', value: '2' }]);
        assert.deepEqual((await store.history({ set })).records.map((r) => r.revision), [2, 1]);
        assert.equal((await store.revision(set)).revision, 2);
      });
    });

    test('retention: by count, and by age (the newest record always stays); history off keeps revisions only', async (t) => {
      await withStore(t, kind, async ({ p, open }) => {
        const store = await open({ keep: 3 });
        const set = `k_${p}`;
        for (let i = 1; i <= 5; i++) await store.write(set, [{ key: 'A', value: String(i) }], { expectedRevision: i - 1 });
        assert.deepEqual((await store.history({ set })).records.map((r) => r.revision), [5, 4, 3]);
        if (kind.name === 'in-memory') return; // one store object: its settings are fixed
        // Age on the store's own clock: records a day old stay, a millisecond more and the next write drops them.
        const DAY = 86_400_000;
        let clock = Date.parse('2031-03-01T00:00:00.000Z');
        const aging = await open({ maxAgeDays: 1 }, () => clock);
        const aged = `a_${p}`;
        const revisionsAndTimes = async () => (await aging.history({ set: aged })).records.map((r) => [r.revision, r.time]);
        for (let i = 1; i <= 3; i++) await aging.write(aged, [{ key: 'A', value: String(i) }]);
        clock += DAY;
        await aging.write(aged, [{ key: 'A', value: '4' }]);
        const t0 = '2031-03-01T00:00:00.000Z';
        const t1 = '2031-03-02T00:00:00.000Z';
        assert.deepEqual(await revisionsAndTimes(), [[4, t1], [3, t0], [2, t0], [1, t0]]);
        clock += 1;
        await aging.write(aged, [{ key: 'A', value: '5' }]);
        assert.deepEqual(await revisionsAndTimes(), [[5, '2031-03-02T00:00:00.001Z'], [4, t1]]);
        clock += 30 * DAY;
        assert.deepEqual(await revisionsAndTimes(), [[5, '2031-03-02T00:00:00.001Z'], [4, t1]], 'pruning happens at writes only');
        await aging.write(aged, [{ key: 'A', value: '6' }]);
        assert.deepEqual((await aging.history({ set: aged })).records.map((r) => r.revision), [6], 'a write a month later leaves its own record only');
        const off = await open(false);
        const plain = `o_${p}`;
        await off.write(plain, [{ key: 'A', value: '1' }]);
        await off.write(plain, [{ key: 'A', value: '2' }], { expectedRevision: 1 });
        await assert.rejects(off.write(plain, [{ key: 'A', value: '3' }], { expectedRevision: 1 }), RevisionConflictError);
        assert.deepEqual(await off.history({ set: plain }), { set: plain, records: [] });
        assert.deepEqual(await off.revision(plain), { set: plain, revision: 2, changedOutside: false });
      });
    });

    test('a change made outside cfgu shows, and is recorded at the next write as not recorded, before the write\'s own record', async (t) => {
      await withStore(t, kind, async ({ p, open }) => {
        const store = await open();
        const set = `x_${p}`;
        // Present before cfgu kept history: the first write records them as found.
        await store.set([{ set, key: 'OLD', value: 'o' }]);
        assert.deepEqual(await store.revision(set), { set, revision: 0, changedOutside: true });
        const first = await store.write(set, [{ key: 'A', value: '1' }], { subject: 'alice' });
        assert.deepEqual(values(first.records), [
          { revision: 1, recorded: false, changes: [{ key: 'OLD', before: null, after: 'o' }] },
          { revision: 2, recorded: true, changes: [{ key: 'A', before: null, after: '1' }] },
        ]);
        assert.deepEqual([first.records[0]!.subject, first.records[0]!.requestId], [null, null]);
        assert.match(first.records[0]!.message!, /not recorded/);
        assert.deepEqual(await store.revision(set), { set, revision: 2, changedOutside: false });
        // Another tool (set() writes Configu's layout and keeps no history) changes and removes keys.
        await store.set([{ set, key: 'A', value: 'edited' }, { set, key: 'OLD', value: '' }, { set, key: 'NEW', value: 'n' }]);
        assert.deepEqual(await store.revision(set), { set, revision: 2, changedOutside: true });
        const next = await store.write(set, [{ key: 'B', value: 'b' }], { expectedRevision: 2, subject: 'bob' });
        assert.equal(next.revision, 4);
        assert.deepEqual(values((await store.history({ set })).records), [
          { revision: 4, recorded: true, changes: [{ key: 'B', before: null, after: 'b' }] },
          {
            revision: 3,
            recorded: false,
            changes: [
              { key: 'A', before: '1', after: 'edited' },
              { key: 'NEW', before: null, after: 'n' },
              { key: 'OLD', before: 'o', after: null },
            ],
          },
          { revision: 2, recorded: true, changes: [{ key: 'A', before: null, after: '1' }] },
          { revision: 1, recorded: false, changes: [{ key: 'OLD', before: null, after: 'o' }] },
        ]);
      });
    });

    const writers = async (stores: RevisionedStore[], set: string) => {
      const accepted = new Map<string, number>();
      let refused = 0;
      const run = async (w: number) => {
        const store = stores[w % stores.length]!;
        let expected = (await store.revision(set)).revision;
        for (let i = 0; i < 50; i++) {
          const id = `w${w}-${i}`;
          try {
            const res = await store.write(set, [{ key: 'A', value: id }, { key: 'B', value: `${id}b` }, { key: `W${w}`, value: String(i) }], {
              expectedRevision: expected,
              requestId: id,
            });
            accepted.set(id, res.revision);
            expected = res.revision;
          } catch (e) {
            if (!(e instanceof RevisionConflictError)) throw e;
            refused++;
            expected = e.current;
          }
        }
      };
      await Promise.all(Array.from({ length: 20 }, (_, w) => run(w)));
      assert.equal(accepted.size + refused, 1000);
      const records = (await allRecords(stores[0]!, set)).reverse();
      assert.deepEqual(records.map((r) => r.revision), Array.from({ length: accepted.size }, (_, i) => i + 1), 'every revision once, in order');
      assert.deepEqual(new Set(records.map((r) => r.requestId)), new Set(accepted.keys()), 'every accepted write is in the history');
      for (const r of records) assert.equal(accepted.get(r.requestId!), r.revision);
      for (let i = 1; i < records.length; i++) {
        for (const c of records[i]!.changes.filter((c) => c.key === 'A')) assert.equal(c.before, records[i - 1]!.changes.find((x) => x.key === 'A')!.after);
      }
      const last = records.at(-1)!;
      const got = await stores[0]!.get(last.changes.map((c) => ({ set, key: c.key })));
      assert.deepEqual(sortConfigs(got), sortConfigs(last.changes.map((c) => ({ set, key: c.key, value: c.after! }))));
      assert.equal((await stores[0]!.revision(set)).revision, accepted.size);
      return { accepted: accepted.size, refused };
    };

    test('20 writers x 50 writes with expected revisions on one store object', async (t) => {
      await withStore(t, kind, async ({ p, open }) => {
        const { accepted, refused } = await writers([await open()], `w_${p}`);
        t.diagnostic(`${kind.name}: ${accepted} accepted, ${refused} refused`);
      });
    });

    if (kind.name === 'redis' || kind.name === 'etcd') {
      test('the reserved cfgu: keys are never read as configuration: no set path or key can name them, list() skips them', async (t) => {
        await withStore(t, kind, async ({ p, open }) => {
          const store = await open();
          const set = `l_${p}`;
          await store.write(set, [{ key: 'A', value: '1' }]);
          await store.write('', [{ key: `R_${p}`, value: 'root' }]);
          const names = [`cfgu:rev:${set}`, `cfgu:hist:${set}`, 'cfgu:rev:', 'cfgu:hist:'];
          for (const name of names) {
            assert.ok(keyProblem(name), `${name} is no key name`);
            assert.ok('problem' in parseSet(name), `${name} is no set path`);
          }
          const listed = await store.list('');
          assert.deepEqual(listed.sets.filter((s) => s.set.startsWith('cfgu:') || s.keys.some((k) => k.startsWith('cfgu:'))), []);
          assert.deepEqual((await store.list(set)).sets, [{ set, keys: ['A'] }]);
          assert.ok(listed.sets.some((s) => s.set === '' && s.keys.includes(`R_${p}`)));
          // The root set's revision and history are the database's (shared by every run on the machine's Redis).
          const [newest] = (await store.history({ set: '', limit: 1 })).records;
          assert.deepEqual([newest!.recorded, newest!.changes], [true, [{ key: `R_${p}`, before: null, after: 'root' }]]);
          if (kind.name === 'redis') {
            const r = new Redis({ host: '127.0.0.1', port: 6379, maxRetriesPerRequest: 1 });
            await r.del('cfgu:rev:', 'cfgu:hist:');
            r.disconnect();
          }
        });
      });
    }

    if (kind.persistent) {
      test('20 writers x 50 writes with expected revisions on two store objects (two replicas)', async (t) => {
        await withStore(t, kind, async ({ p, open }) => {
          const { accepted, refused } = await writers([await open(), await open()], `r_${p}`);
          t.diagnostic(`${kind.name}: ${accepted} accepted, ${refused} refused`);
        });
      });
    }
  });
}

const WRITER = join(dirname(fileURLToPath(import.meta.url)), 'fixtures', 'history-writer.ts');

/** Fold a set's history (oldest first) from nothing: the values its records say the set holds. */
function folded(records: readonly RevisionRecord[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const r of records) for (const c of r.changes) (c.after === null ? out.delete(c.key) : out.set(c.key, c.after));
  return out;
}

for (const name of ['json-file', 'postgresql']) {
  const kind = KINDS.find((k) => k.name === name)!;
  describe(`crash safety: ${name}`, () => {
    test('a writer killed (SIGKILL) in the middle of a stream of writes: history and stored values agree, three times over', async (t) => {
      await withStore(t, kind, async ({ p, open, configuration }) => {
        const set = `k_${p}`;
        // A killed json-file writer leaves its lock behind: the next one takes it over once it is 300 ms stale.
        const settings = kind.name === 'json-file' ? { ...configuration, staleLockMs: 300, lockTimeoutMs: 20_000 } : configuration;
        for (let round = 0; round < 3; round++) {
          const child = spawn(process.execPath, ['--import', 'tsx', WRITER, kind.name, JSON.stringify(settings), set], {
            cwd: join(dirname(fileURLToPath(import.meta.url)), '..', '..'),
            stdio: ['ignore', 'pipe', 'inherit'],
          });
          let accepted = 0;
          child.stdout!.on('data', (d: Buffer) => (accepted += (d.toString().match(/rev \d+/g) ?? []).length));
          const exited = new Promise((resolve) => child.once('exit', resolve));
          await waitFor('the writer wrote 10 revisions', () => accepted >= 10 + round * 3);
          child.kill('SIGKILL');
          await exited;
          const store = await open();
          const records: RevisionRecord[] = [];
          let before: number | undefined;
          for (;;) {
            const page = await store.history({ set, limit: 1000, ...(before === undefined ? {} : { before }) });
            records.push(...page.records);
            if (page.next === undefined) break;
            before = page.next;
          }
          records.reverse();
          assert.deepEqual(records.map((r) => r.revision), Array.from({ length: records.length }, (_, i) => i + 1));
          assert.ok(records.every((r) => r.recorded), 'no write shows as an outside change');
          const data = await store.get(['A', 'B', 'C'].map((key) => ({ set, key })));
          assert.deepEqual(new Map(data.map((c) => [c.key, c.value])), folded(records));
          assert.deepEqual(await store.revision(set), { set, revision: records.length, changedOutside: false });
          t.diagnostic(`round ${round}: ${records.length} revisions, the writer reported ${accepted} of them`);
        }
      });
    });
  });
}
