/**
 * Memory has a ceiling a user can set and trust (issue 31): every cache of a server process counts its estimated
 * memory against one ceiling (core/cache-budget.ts, limits.cacheMemoryMb), the default follows the heap limit, the
 * setting is read from the environment and the file and refused when bad, /metrics shows each cache, and a server fed
 * many distinct large schemas never holds more than the ceiling by its own estimate.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { pino, type Logger } from 'pino';
import type { FastifyInstance } from 'fastify';
import { CacheBudget, cacheBudget, defaultCacheMemoryMb, type CacheMember } from '../../src/core/cache-budget.js';
import { ConfigurationError } from '../../src/core/errors.js';
import { buildServer, settingsWith } from '../../src/server/index.js';
import { resolveSettings } from '../../src/server/process/resolve-settings.js';
import { loadConfiguration } from '../../src/config/index.js';
import { createStoreRegistry, type StoreRegistry } from '../../src/stores/index.js';
import { ChildStatics, StaticRegistry, childRecord, childStaticBytes, encodeWire, lineFor } from '../../src/expressions/wire/job-wire.js';
import { createSandboxEvaluator, type SandboxEvaluator } from '../../src/expressions/index.js';
import { ROOT, removeTempDirs, tempDir, writeJson } from './helpers.js';
import { openStream } from './sse-client.js';
import { waitFor } from '../helpers/wait.js';

const MiB = 1024 * 1024;

/** A member with fixed-size entries, for the budget's own rules. */
function member(name: string, entrySize: number): CacheMember & { n: number; add(): void } {
  return {
    name,
    n: 0,
    bytes() {
      return this.n * entrySize;
    },
    entries() {
      return this.n;
    },
    evictOne() {
      if (!this.n) return false;
      this.n--;
      return true;
    },
    add() {
      this.n++;
    },
  };
}

describe('the budget', () => {
  test('evicts from the cache most over its share until the total fits; a cache alone may use the whole ceiling', () => {
    const budget = new CacheBudget(100_000);
    const body = member('body', 1000);
    const schema = member('schema', 1000);
    budget.register(body);
    budget.register(schema);
    for (let i = 0; i < 150; i++) {
      body.add();
      budget.settle();
    }
    // Alone, the body cache takes the whole ceiling.
    assert.equal(body.n, 100);
    for (let i = 0; i < 150; i++) {
      schema.add();
      budget.settle();
      assert.ok(budget.totalBytes() <= budget.limitBytes);
    }
    // Both full: each converges to its weight's part (body 4, schema 3).
    assert.ok(Math.abs(body.n - 57) <= 1 && Math.abs(schema.n - 43) <= 1, `${body.n} / ${schema.n}`);
    budget.configure(50_000);
    assert.ok(budget.totalBytes() <= 50_000);
    assert.equal(budget.maxEntryBytes, 6250);
  });

  test('a cache that cannot evict (answers still in use) makes the others evict instead', () => {
    const budget = new CacheBudget(100_000);
    const watch = member('watch', 10_000);
    watch.evictOne = () => false;
    const body = member('body', 1000);
    budget.register(watch);
    budget.register(body);
    for (let i = 0; i < 6; i++) watch.add();
    for (let i = 0; i < 100; i++) {
      body.add();
      budget.settle();
    }
    assert.equal(watch.n, 6);
    assert.equal(body.n, 40);
    assert.ok(budget.totalBytes() <= budget.limitBytes);
  });

  test('the default is a quarter of the heap limit, at most 128 MiB, and follows --max-old-space-size', () => {
    assert.equal(defaultCacheMemoryMb(256 * MiB), 64);
    assert.equal(defaultCacheMemoryMb(512 * MiB), 128);
    assert.equal(defaultCacheMemoryMb(4144 * MiB), 128);
    const script = "import('./src/server/process/resolve-settings.ts').then((m) => console.log(m.resolveSettings({}).limits.cacheMemoryMb))";
    for (const [heap, expected] of [[256, 64], [400, 100]] as const) {
      const r = spawnSync(process.execPath, [`--max-old-space-size=${heap}`, '--import', 'tsx', '-e', script], { cwd: ROOT, encoding: 'utf8' });
      assert.equal(r.status, 0, r.stderr);
      // V8 adds its young generation to the limit it reports (a 256 MB old space reports 304 MB): a quarter of that.
      const mb = Number(r.stdout.trim());
      assert.ok(mb >= expected && mb <= expected * 1.25, `--max-old-space-size=${heap}: ${mb}`);
    }
  });
});

describe('the setting', () => {
  test('from the environment and from the file; the environment wins', () => {
    assert.equal(resolveSettings({ env: { CONFIGU_CACHE_MEMORY_MB: '48' } }).limits.cacheMemoryMb, 48);
    assert.equal(resolveSettings({ fileSettings: { limits: { cacheMemoryMb: 32 } }, file: '/x/.configu' }).limits.cacheMemoryMb, 32);
    assert.equal(resolveSettings({ env: { CONFIGU_CACHE_MEMORY_MB: '48' }, fileSettings: { limits: { cacheMemoryMb: 32 } } }).limits.cacheMemoryMb, 48);
    assert.equal(resolveSettings({}).limits.cacheMemoryMb, defaultCacheMemoryMb());
  });

  test('bad values are refused at start-up, naming where they came from', () => {
    const refused = (input: Parameters<typeof resolveSettings>[0], message: RegExp) =>
      assert.throws(() => resolveSettings(input), (e: unknown) => e instanceof ConfigurationError && message.test(e.message));
    refused({ env: { CONFIGU_CACHE_MEMORY_MB: '0' } }, /^environment variable CONFIGU_CACHE_MEMORY_MB: must be a whole number from 1 to 1048576, got "0"$/);
    refused({ env: { CONFIGU_CACHE_MEMORY_MB: 'lots' } }, /CONFIGU_CACHE_MEMORY_MB: must be a whole number/);
    refused({ fileSettings: { limits: { cacheMemoryMb: 1.5 } }, file: '/x/.configu' }, /^interface\.proxy\.limits\.cacheMemoryMb: must be a whole number/);
    refused({ env: { CONFIGU_CACHE_MEMORY_MB: '1000000' } }, /must be at most the heap limit of this process \(\d+ MiB; raise it with --max-old-space-size\), got 1000000/);
    refused({ fileSettings: { limits: { cacheMemoryMB: 32 } }, file: '/x/.configu' }, /unknown property "cacheMemoryMB" \(did you mean "cacheMemoryMb"/);
  });
});

describe('the static halves', () => {
  test('the host registry counts against the budget and evicts its least recently used halves', () => {
    const budget = new CacheBudget(400_000);
    const registry = new StaticRegistry(budget);
    const job = (i: number) => ({
      input: { store: { type: 'json-file' }, set: { path: '', hierarchy: [''] }, schema: { keys: { [`K${i}`]: { description: 'd'.repeat(5000) } } } },
      configs: {},
      consts: [],
      tests: [{ key: `K${i}`, expressions: ['true'] }],
    });
    for (let i = 0; i < 200; i++) {
      encodeWire(job(i) as never, registry);
      assert.ok(budget.totalBytes() <= budget.limitBytes, `${budget.totalBytes()}`);
    }
    assert.ok(registry.size < 200 && registry.size > 10, `${registry.size}`);
  });

  test('a child keeps halves up to its bytes bound, as the host records it; a half larger than the bound serves its job', () => {
    const maxBytes = 100_000;
    const registry = new StaticRegistry(new CacheBudget(64 * MiB));
    const held = childRecord(maxBytes);
    const child = new ChildStatics(maxBytes);
    const job = (i: number, size: number) => ({
      input: { store: { type: 'json-file' }, set: { path: '', hierarchy: [''] }, schema: { keys: { [`K${i}`]: { description: 'd'.repeat(size) } } } },
      configs: {},
      consts: [],
      tests: [{ key: `K${i}`, expressions: ['true'] }],
    });
    for (let i = 0; i < 100; i++) {
      for (const line of lineFor(encodeWire(job(i, 4000) as never, registry), held).split('\n')) child.decode(line);
      assert.ok(child.bytes <= maxBytes && held.calculatedSize === child.bytes, `${child.bytes} / ${held.calculatedSize}`);
      assert.equal(child.size, held.size);
    }
    const huge = encodeWire(job(1000, 80_000) as never, registry);
    assert.ok(childStaticBytes(huge.half!.text) > maxBytes);
    for (let round = 0; round < 2; round++) {
      const [s, j] = lineFor(huge, held).split('\n');
      assert.ok(s!.startsWith('{"t":"s"'), 'sent with its half every time');
      assert.deepEqual(child.decode(s!), { kept: huge.half!.id });
      assert.ok('line' in child.decode(j!));
    }
    assert.ok(child.bytes <= maxBytes);
  });
});

describe('a server', () => {
  let registry: StoreRegistry;
  let evaluator: SandboxEvaluator;
  const apps: FastifyInstance[] = [];
  const saved = cacheBudget.limitBytes;

  before(async () => {
    const dir = tempDir();
    writeJson(join(dir, 'data.json'), [{ set: '', key: 'A', value: 'abc' }]);
    writeJson(join(dir, '.configu'), { stores: { main: { type: 'json-file', configuration: { path: 'data.json' } } } });
    registry = createStoreRegistry(await loadConfiguration({ file: join(dir, '.configu') }), { logger: { warn: () => undefined } });
    await registry.init();
    evaluator = (await createSandboxEvaluator({ workers: 1, spares: 0, timeoutMs: 1000, memoryMb: 64 })) as SandboxEvaluator;
  });
  after(async () => {
    for (const a of apps) await a.close();
    await evaluator.close();
    await registry.close();
    cacheBudget.configure(saved);
    removeTempDirs();
  });

  const app = async (cacheMemoryMb: number) => {
    const a = await buildServer({ registry, evaluator, settings: settingsWith({ limits: { cacheMemoryMb } }), logger: pino({ level: 'silent' }) as unknown as Logger, ready: true });
    apps.push(a);
    return a;
  };
  /** A schema of about 650 KB: keys with a description and an enum each, and a test every 50th key. */
  const bigBody = (i: number) => {
    // A (in the store) has a test: the job takes the whole schema to the sandbox as its static half.
    const keys: Record<string, unknown> = { A: { test: '$.value.length > 0' } };
    for (let k = 0; k < 3900; k++) {
      keys[`SERVICE_${i}_KEY_${k}`] = {
        description: `Key ${k} of schema ${i}: the address the service connects to, with its port and more`,
        enum: ['alpha', 'beta', 'gamma', `delta${k}`, 'epsilon'],
        ...(k % 50 === 0 ? { test: '$.value.length > 0' } : {}),
      };
    }
    return JSON.stringify([{ store: 'main', set: '', schema: { keys } }]);
  };

  test('many distinct 650 KB schemas: the estimated total never passes the ceiling; /metrics shows every cache', async () => {
    const a = await app(64);
    assert.equal(cacheBudget.limitBytes, 64 * MiB);
    let peak = 0;
    let bodyEntries = 0;
    for (let i = 0; i < 30; i++) {
      const payload = bigBody(i);
      assert.ok(payload.length > 600_000);
      const r = await a.inject({ method: 'POST', url: '/export', headers: { 'content-type': 'application/json' }, payload });
      assert.equal(r.statusCode, 200, r.body.slice(0, 300));
      const total = cacheBudget.totalBytes();
      peak = Math.max(peak, total);
      assert.ok(total <= 64 * MiB, `after schema ${i}: ${total} bytes estimated`);
      bodyEntries = Math.max(bodyEntries, cacheBudget.stats().get('body')!.entries);
    }
    // The caches were used (and then evicted): the ceiling, not a count, bounded them.
    assert.ok(peak > 32 * MiB, `peak ${peak}`);
    assert.ok(bodyEntries >= 1);
    assert.ok((cacheBudget.evictions.get('body') ?? 0) + (cacheBudget.evictions.get('schema') ?? 0) > 0);

    const metrics = (await a.inject({ method: 'GET', url: '/metrics' })).body;
    const gauge = (name: string, cache: string) => Number(new RegExp(`^${name}\\{cache="${cache}"\\} (\\d+)$`, 'm').exec(metrics)?.[1]);
    for (const cache of ['body', 'schema', 'static', 'answers', 'watch', 'sandbox_static']) {
      assert.ok(Number.isFinite(gauge('cfgu_cache_bytes', cache)), `cfgu_cache_bytes{cache="${cache}"} in\n${metrics.slice(0, 2000)}`);
      assert.ok(Number.isFinite(gauge('cfgu_cache_entries', cache)), `cfgu_cache_entries{cache="${cache}"}`);
    }
    assert.ok(gauge('cfgu_cache_bytes', 'body') > 0 && gauge('cfgu_cache_entries', 'schema') > 0 && gauge('cfgu_cache_entries', 'static') > 0, JSON.stringify([...cacheBudget.stats()]));
    assert.ok(gauge('cfgu_cache_bytes', 'sandbox_static') > 0);
    assert.match(metrics, new RegExp(`^cfgu_cache_limit_bytes ${64 * MiB}$`, 'm'));
    let sum = 0;
    for (const cache of ['body', 'schema', 'static', 'answers', 'watch']) sum += gauge('cfgu_cache_bytes', cache);
    assert.ok(sum <= 64 * MiB);
  });

  test('the answers watched pipelines hold count as `watch` while watched, and nothing once the streams end', async () => {
    const a = await app(64);
    await a.listen({ port: 0, host: '127.0.0.1' });
    const { port } = a.server.address() as { port: number };
    const watchBytes = () => cacheBudget.stats().get('watch')?.bytes ?? 0;
    assert.equal(watchBytes(), 0);
    const body = [{ store: 'main', set: '', schema: { keys: { A: {}, W: { default: 'w'.repeat(50_000) } } } }];
    const st = await openStream(`http://127.0.0.1:${port}/export`, body);
    await waitFor('the first event', () => st.events.length >= 1);
    assert.ok(watchBytes() >= 50_000, `watch holds ${watchBytes()} bytes`);
    assert.equal(cacheBudget.stats().get('watch')!.entries, 1);
    st.close();
    await waitFor('the pipeline is dropped', () => watchBytes() === 0);
  });

  test('kept answers count against the ceiling too', async () => {
    const a = await app(4);
    for (let i = 0; i < 300; i++) {
      const payload = JSON.stringify([{ store: 'main', set: '', schema: { keys: { A: {}, [`C${i}`]: { const: `{{ $.configs.A.value }}-${'v'.repeat(8000)}-${i}` } } } }]);
      const r = await a.inject({ method: 'POST', url: '/export', headers: { 'content-type': 'application/json' }, payload });
      assert.equal(r.statusCode, 200, r.body.slice(0, 300));
      assert.ok(cacheBudget.totalBytes() <= 4 * MiB);
    }
    const answers = cacheBudget.stats().get('answers')!;
    assert.ok(answers.entries > 0 && answers.entries < 300, JSON.stringify(answers));
  });
});
