/**
 * Export against explain, in-process: the fixture of bench/core.bench.ts (a 1,000-key schema without expressions,
 * the shipped in-memory store, a three-level set, a fresh body each run), measured in interleaved rounds so that the
 * machine's load falls on every variant alike. With `--base DIR` (a checkout of another commit, e.g. the one before
 * explain, `git archive <commit> src | tar -x -C DIR`, with node_modules linked), that checkout's exportPipeline is
 * measured too, in the same rounds, to show the export path unchanged.
 *
 *   npx tsx bench/explain.bench.ts [--keys 1000] [--runs 2000] [--base DIR]
 */
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { performance } from 'node:perf_hooks';
import { explainPipeline, exportPipeline, type EvalCommandInput } from '../src/core/index.js';
import { memoryRegistry } from './stores.js';

const arg = (name: string): string | undefined => {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? undefined : process.argv[i + 1];
};
const KEYS = Number(arg('keys') ?? 1000);
const RUNS = Number(arg('runs') ?? 2000);
const BASE = arg('base');

/** Every tenth key has a default, an enum or is required; the store holds the others at one of three sets. */
function schema(n: number) {
  const keys: Record<string, unknown> = {};
  for (let i = 0; i < n; i++) keys[`KEY_${i}`] = i % 10 === 0 ? { default: i } : i % 10 === 1 ? { enum: [`v${i}`, 'other'] } : i % 10 === 2 ? { required: true } : {};
  return { keys };
}

const configs: Array<{ set: string; key: string; value: string }> = [];
for (let i = 0; i < KEYS; i++) {
  const set = i % 3 === 0 ? '' : i % 3 === 1 ? 'prod' : 'prod/eu';
  if (i % 10 !== 0) configs.push({ set, key: `KEY_${i}`, value: i % 10 === 1 ? `v${i}` : String(i * 7) });
}
const stores = await memoryRegistry(configs);
const body = () => [{ set: 'prod/eu', schema: schema(KEYS) }] as unknown as EvalCommandInput[];

type Run = () => Promise<number>;
const variants: Array<[string, Run]> = [
  ['export (this checkout)', async () => Object.keys((await exportPipeline(body(), { stores })).configs).length],
];
if (BASE) {
  const base = (await import(pathToFileURL(join(resolve(BASE), 'src/core/index.ts')).href)) as { exportPipeline: typeof exportPipeline };
  variants.push(['export (--base)', async () => Object.keys((await base.exportPipeline(body(), { stores })).configs).length]);
}
variants.push(['explain (this checkout)', async () => Object.keys((await explainPipeline(body(), { stores })).values!).length]);

const times = variants.map(() => [] as number[]);
for (let r = 0; r < RUNS + 50; r++) {
  // Each round runs every variant once, in an order that turns every round.
  for (let j = 0; j < variants.length; j++) {
    const v = (r + j) % variants.length;
    const t0 = performance.now();
    const n = await variants[v]![1]();
    const dt = performance.now() - t0;
    if (n !== KEYS) throw new Error(`${variants[v]![0]}: wrong answer`);
    if (r >= 50) times[v]!.push(dt); // the first 50 rounds warm the JIT and the caches
  }
}
for (let v = 0; v < variants.length; v++) {
  const t = times[v]!.sort((a, b) => a - b);
  const q = (p: number) => t[Math.min(t.length - 1, Math.floor(p * t.length))]!.toFixed(3);
  console.log(`${variants[v]![0].padEnd(24)} ${KEYS} keys, ${RUNS} runs: median ${q(0.5)} ms, p90 ${q(0.9)} ms, p99 ${q(0.99)} ms`);
}
