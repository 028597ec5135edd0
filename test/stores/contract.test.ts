/**
 * ONE contract suite, run against every store kind on real servers (the machine's PostgreSQL, MariaDB and Redis under
 * names this run owns; a private etcd). A kind whose server cannot be reached is skipped loudly (failed under CI=true).
 */
import assert from 'node:assert/strict';
import { describe, test, type TestContext } from 'node:test';
import { StoreUnavailableError } from '../../src/core/errors.js';
import type { Config, ConfigQuery, ConfigStore } from '../../src/core/ports.js';
import { requireService } from '../helpers/services.js';
import { KINDS, makeStore, RUN, type Kind, type Raw } from './kinds.js';

const sortConfigs = (cs: readonly Config[]) =>
  [...cs].sort((a, b) => (a.set + '\u0000' + a.key < b.set + '\u0000' + b.key ? -1 : a.set + '\u0000' + a.key > b.set + '\u0000' + b.key ? 1 : 0));

let counter = 0;

interface Ctx {
  store: ConfigStore;
  raw: Raw;
  /** Unique prefix for set and key names (also how raw access finds this test's data). */
  p: string;
  configuration: Record<string, unknown>;
  open(): ConfigStore;
}

/** Run `fn` with a fresh store of `kind`; closes and cleans up. Returns false when skipped. */
async function withStore(t: TestContext, kind: Kind, fn: (c: Ctx) => Promise<void>): Promise<void> {
  if (kind.service && !(await requireService(t, kind.service.name, kind.service.probe))) return;
  const tag = `${RUN}x${++counter}`;
  const { configuration, raw, cleanup } = await kind.fresh(tag);
  const opened: ConfigStore[] = [];
  const open = () => {
    const s = makeStore(kind.name, configuration);
    opened.push(s);
    return s;
  };
  const store = open();
  try {
    await store.init();
    await fn({ store, raw, p: tag, configuration, open });
  } finally {
    for (const s of opened) await s.close();
    await cleanup();
  }
}

for (const kind of KINDS) {
  describe(`store contract: ${kind.name}`, () => {
    test('an empty batch answers nothing; unknown keys are absent', async (t) => {
      await withStore(t, kind, async ({ store, p }) => {
        assert.deepEqual(await store.get([]), []);
        assert.deepEqual(await store.get([{ set: '', key: `none_${p}` }, { set: `s_${p}`, key: 'none' }]), []);
        await store.set([]); // no-op
      });
    });

    test('batch get across the root set and nested sets, with duplicates in the batch', async (t) => {
      await withStore(t, kind, async ({ store, p }) => {
        const data: Config[] = [
          { set: '', key: `ROOT_${p}`, value: 'root-value' },
          { set: `dev_${p}`, key: 'HOST', value: 'dev.example' },
          { set: `dev_${p}`, key: 'PORT', value: '8080' },
          { set: `dev_${p}/eu`, key: 'HOST', value: 'eu.dev.example' },
          { set: `prod_${p}`, key: 'HOST', value: 'prod.example' },
        ];
        await store.set(data);
        const queries: ConfigQuery[] = [
          ...data.map(({ set, key }) => ({ set, key })),
          { set: `dev_${p}`, key: 'HOST' },
          { set: `dev_${p}`, key: 'MISSING' },
          { set: `dev_${p}/eu`, key: 'PORT' },
          { set: '', key: `MISSING_${p}` },
        ];
        const got = await store.get(queries);
        assert.deepEqual(sortConfigs(got), sortConfigs(data));
      });
    });

    test('set, overwrite, delete by empty value; last write of a key in one batch wins', async (t) => {
      await withStore(t, kind, async ({ store, p }) => {
        const s = `app_${p}`;
        await store.set([
          { set: s, key: 'A', value: '1' },
          { set: s, key: 'B', value: '2' },
          { set: '', key: `R_${p}`, value: 'r' },
        ]);
        await store.set([{ set: s, key: 'A', value: 'one' }]);
        assert.deepEqual(await store.get([{ set: s, key: 'A' }]), [{ set: s, key: 'A', value: 'one' }]);
        await store.set([
          { set: s, key: 'B', value: '' },
          { set: '', key: `R_${p}`, value: '' },
          { set: s, key: 'NEVER', value: '' },
        ]);
        assert.deepEqual(
          sortConfigs(await store.get([{ set: s, key: 'A' }, { set: s, key: 'B' }, { set: '', key: `R_${p}` }])),
          [{ set: s, key: 'A', value: 'one' }],
        );
        await store.set([
          { set: s, key: 'C', value: 'first' },
          { set: s, key: 'C', value: 'second' },
          { set: s, key: 'D', value: 'x' },
          { set: s, key: 'D', value: '' },
        ]);
        assert.deepEqual(sortConfigs(await store.get([{ set: s, key: 'C' }, { set: s, key: 'D' }])), [
          { set: s, key: 'C', value: 'second' },
        ]);
        // Deleting every key of a set leaves nothing behind in the layout.
        await store.set([
          { set: s, key: 'A', value: '' },
          { set: s, key: 'C', value: '' },
        ]);
        assert.deepEqual(await store.get([{ set: s, key: 'A' }, { set: s, key: 'C' }]), []);
      });
    });

    test('keys are case-sensitive; values keep unicode, quotes, newlines and size', async (t) => {
      await withStore(t, kind, async ({ store, p }) => {
        const s = `case_${p}`;
        const long = 'x'.repeat(60_000); // under MySQL's 65,535-byte TEXT
        const data: Config[] = [
          { set: s, key: 'key', value: 'lower' },
          { set: s, key: 'KEY', value: 'upper' },
          { set: s, key: 'U', value: 'héllo wörld ✓ 日本 "quoted" \'single\' \\ back\nline2\ttab {"json": [1]}' },
          { set: s, key: 'LONG', value: long },
          { set: s, key: 'SPACE', value: ' ' },
        ];
        await store.set(data);
        assert.deepEqual(sortConfigs(await store.get(data.map(({ set, key }) => ({ set, key })))), sortConfigs(data));
      });
    });

    test('concurrent writers to the same set lose no update', async (t) => {
      await withStore(t, kind, async ({ store, p, open }) => {
        const s = `conc_${p}`;
        const other = kind.persistent ? open() : store;
        await other.init();
        const writes = Array.from({ length: 20 }, (_, i) => (i % 2 ? store : other).set([{ set: s, key: `K${i}`, value: `v${i}` }]));
        await Promise.all(writes);
        const got = await store.get(Array.from({ length: 20 }, (_, i) => ({ set: s, key: `K${i}` })));
        assert.equal(got.length, 20);
      });
    });

    if (kind.persistent) {
      test('data written in the existing layout (plain SQL / raw commands / plain file) is read unchanged', async (t) => {
        await withStore(t, kind, async ({ store, raw, p }) => {
          const data: Config[] = [
            { set: '', key: `EXT_${p}`, value: 'external-root' },
            { set: `ext_${p}`, key: 'A', value: 'a' },
            { set: `ext_${p}`, key: 'B', value: 'b' },
            { set: `ext_${p}/deep`, key: 'A', value: 'deep-a' },
          ];
          await raw.write(data);
          assert.deepEqual(sortConfigs(await store.get(data.map(({ set, key }) => ({ set, key })))), sortConfigs(data));
        });
      });

      test('data cfgu writes is in the existing layout, and another instance reads it', async (t) => {
        await withStore(t, kind, async ({ store, raw, p, open }) => {
          const data: Config[] = [
            { set: '', key: `OWN_${p}`, value: 'own-root' },
            { set: `own_${p}`, key: 'A', value: '1' },
            { set: `own_${p}`, key: 'B', value: '2' },
          ];
          await store.set(data);
          const seen = (await raw.read()).filter((c) => c.key.includes(p) || c.set.includes(p));
          assert.deepEqual(sortConfigs(seen), sortConfigs(data));
          const second = open();
          await second.init();
          assert.deepEqual(sortConfigs(await second.get(data.map(({ set, key }) => ({ set, key })))), sortConfigs(data));
        });
      });
    }
  });
}

describe('store errors are StoreUnavailableError without secrets', () => {
  const unreachable: Array<[string, Record<string, unknown>]> = [
    ['postgresql', { host: '127.0.0.1', port: 1, username: 'u', password: 'SuperSecret123', database: 'x', timeout: 1000 }],
    ['postgresql', { url: 'postgres://u:SuperSecret123@127.0.0.1:1/x', timeout: 1000 }],
    ['mysql', { host: '127.0.0.1', port: 1, username: 'u', password: 'SuperSecret123', timeout: 1000 }],
    ['redis', { url: 'redis://:SuperSecret123@127.0.0.1:1/0', timeout: 1000 }],
    ['etcd', { hosts: 'http://127.0.0.1:1', password: 'SuperSecret123', username: 'u', timeout: 1000 }],
  ];
  for (const [type, configuration] of unreachable) {
    test(`${type} at a closed port fails with StoreUnavailableError (${Object.keys(configuration).join(',')})`, async () => {
      const store = makeStore(type, configuration, 'down');
      try {
        for (const op of [() => store.init(), () => store.get([{ set: '', key: 'A' }]), () => store.set([{ set: '', key: 'A', value: 'v' }])]) {
          await assert.rejects(op(), (e: unknown) => {
            assert.ok(e instanceof StoreUnavailableError, `expected StoreUnavailableError, got ${String(e)}`);
            assert.equal(e.store, 'down');
            assert.match(e.message, /^store "down" is unavailable: /);
            assert.doesNotMatch(e.message, /SuperSecret123/);
            assert.doesNotMatch(e.message, /\n\s+at /);
            return true;
          });
        }
      } finally {
        await store.close();
      }
    });
  }
});

