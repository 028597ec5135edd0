/**
 * The matrix (core/matrix.ts) over many sets, in-process: a store filled here (json-file or sqlite, in a temp folder)
 * with `--sets` sets under the prefix `fleet` (`fleet` and `fleet/node-N`) of `--keys` keys each (every set holds 90 of its keys; the rest come from
 * `fleet` itself, the root set or a default), one schema of `--keys` keys (every tenth required, every tenth with an
 * enum, every tenth with a default; `--tests` adds a `test` to every tenth key, so that each set is a sandbox job).
 * Each run lists the prefix `fleet` and evaluates the matrix; printed: the time of each run (median and spread), the
 * heap and RSS growth over the runs and at their peak, and the cells.
 *
 * With `--compare`, the same sets are then evaluated one by one with evaluatePipeline (a store read per set, no
 * explanation): what a client asking set by set would cost, for comparison.
 *
 *   npx tsx --expose-gc bench/matrix.bench.ts [--store json-file|sqlite] [--sets 1000] [--keys 100] [--runs 10] [--tests] [--compare]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { evaluatePipeline, matrixOf, type Config } from '../src/core/index.js';
import { createStoreRegistry } from '../src/stores/index.js';

const arg = (name: string): string | undefined => {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? undefined : process.argv[i + 1];
};
const KIND = (arg('store') ?? 'json-file') as 'json-file' | 'sqlite';
const SETS = Number(arg('sets') ?? 1000);
const KEYS = Number(arg('keys') ?? 100);
const RUNS = Number(arg('runs') ?? 10);
const TESTS = process.argv.includes('--tests');

const dir = mkdtempSync(join(tmpdir(), 'cfgu-matrix-bench-'));
const configuration = KIND === 'sqlite' ? { database: join(dir, 'bench.db'), tableName: 'config' } : { path: join(dir, 'bench.json') };
const registry = createStoreRegistry({
  file: undefined,
  stores: [{ name: 'main', type: KIND, configuration, default: true, backup: false }],
  defaultStore: 'main',
  backup: '',
  schemas: {},
  scripts: {},
  interface: {},
} as unknown as Parameters<typeof createStoreRegistry>[0]);
await registry.init();

const configs: Config[] = [];
for (let i = 0; i < KEYS; i++) if (i % 10 === 9) configs.push({ set: '', key: `KEY_${i}`, value: `root-${i}` });
for (let i = 0; i < KEYS; i++) if (i % 10 === 8) configs.push({ set: 'fleet', key: `KEY_${i}`, value: `fleet-${i}` });
for (let s = 0; s < SETS - 1; s++) {
  for (let i = 0; i < KEYS; i++) {
    if (i % 10 >= 8) continue; // from `fleet` or the root set
    if (i % 10 === 0 && s % 2 === 0) continue; // from the default at half the sets
    // Every 50th set has a value outside the enum of the keys with one.
    const value = i % 10 === 1 ? (s % 50 === 0 ? 'verbose' : 'info') : `v-${s}-${i}`;
    configs.push({ set: `fleet/node-${String(s).padStart(4, '0')}`, key: `KEY_${i}`, value });
  }
}
const filling = performance.now();
await registry.store('main')!.set(configs);
const filled = performance.now() - filling;

const keys: Record<string, unknown> = {};
for (let i = 0; i < KEYS; i++) {
  const cfgu: Record<string, unknown> = {};
  if (i % 10 === 0) cfgu.default = `default-${i}`;
  if (i % 10 === 1) cfgu.enum = ['debug', 'info', 'warn'];
  if (i % 10 === 2) cfgu.required = true;
  if (TESTS && i % 10 === 3) cfgu.test = '$.value.length > 2';
  keys[`KEY_${i}`] = cfgu;
}
const schema = { keys } as Parameters<typeof matrixOf>[0]['schema'];

// The sandbox as `cfgu serve` starts it, with two children (this machine's cores).
const expressions = TESTS ? (await import('../src/expressions/index.js')).createSandboxEvaluator({ workers: 2 }) : undefined;

const mb = (bytes: number) => (bytes / (1024 * 1024)).toFixed(1);
const times: number[] = [];
let peakHeap = 0;
let peakRss = 0;
let cells = 0;
let failed = 0;
let sets = 0;
let jsonBytes = 0;
global.gc?.();
const heap0 = process.memoryUsage().heapUsed;
const rss0 = process.memoryUsage().rss;
const sampler = setInterval(() => {
  const m = process.memoryUsage();
  peakHeap = Math.max(peakHeap, m.heapUsed);
  peakRss = Math.max(peakRss, m.rss);
}, 5);
for (let r = 0; r < RUNS; r++) {
  const t0 = performance.now();
  const m = await matrixOf({ schema, prefix: 'fleet' }, { stores: registry, ...(expressions ? { expressions } : {}) });
  times.push(performance.now() - t0);
  sets = m.sets.length;
  cells = m.sets.length * m.keys.length;
  failed = m.failed.reduce((a, b) => a + b, 0);
  jsonBytes = Buffer.byteLength(JSON.stringify(m));
}
clearInterval(sampler);
global.gc?.();
const heap1 = process.memoryUsage().heapUsed;
times.sort((a, b) => a - b);
const median = times[Math.floor(times.length / 2)]!;
console.log(`store ${KIND}, ${configs.length} configs stored in ${filled.toFixed(0)} ms; matrix of ${sets} sets x ${KEYS} keys = ${cells} cells (${failed} not ok)${TESTS ? ', with tests (a sandbox job per set)' : ''}`);
console.log(`runs ${RUNS}: median ${median.toFixed(0)} ms, min ${times[0]!.toFixed(0)} ms, max ${times[times.length - 1]!.toFixed(0)} ms`);
console.log(`heap: peak ${mb(peakHeap)} MiB (${mb(peakHeap - heap0)} MiB over the start), the answer's JSON ${mb(jsonBytes)} MiB; after the runs ${mb(heap1 - heap0)} MiB over the start; rss peak ${mb(peakRss)} MiB (+${mb(peakRss - rss0)})`);
if (process.argv.includes('--compare')) {
  const names = (await registry.resolve('main').list!('fleet')).sets.map((s) => s.set);
  const one: number[] = [];
  for (let r = 0; r < RUNS; r++) {
    const t0 = performance.now();
    for (const set of names) {
      await evaluatePipeline([{ set, schema }], { stores: registry, ...(expressions ? { expressions } : {}) }).catch(() => undefined);
    }
    one.push(performance.now() - t0);
  }
  one.sort((a, b) => a - b);
  console.log(`set by set (evaluatePipeline, a read each): median ${one[Math.floor(one.length / 2)]!.toFixed(0)} ms, min ${one[0]!.toFixed(0)} ms`);
}
await expressions?.close();
await registry.close();
rmSync(dir, { recursive: true, force: true });
