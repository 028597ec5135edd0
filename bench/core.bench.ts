/**
 * In-process engine benchmark (issue 2): a 1,000-key schema without expressions, evaluated and exported from an
 * in-memory store over a three-level set hierarchy. Prints the median and p99 of N runs.
 *
 *   npx tsx bench/core.bench.ts [--keys 1000] [--runs 500]
 */
import { performance } from 'node:perf_hooks';
import { exportPipeline, type EvalCommandInput } from '../src/core/index.js';
import { memoryRegistry } from './stores.js';

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? fallback : Number(process.argv[i + 1]);
};
const KEYS = arg('keys', 1000);
const RUNS = arg('runs', 500);

export function fixtureSchema(n: number) {
  const keys: Record<string, unknown> = {};
  for (let i = 0; i < n; i++) {
    const key = `KEY_${i}`;
    keys[key] = i % 10 === 0 ? { default: i } : i % 10 === 1 ? { enum: [`v${i}`, 'other'] } : i % 10 === 2 ? { required: true } : {};
  }
  return { keys };
}

const configs: Array<{ set: string; key: string; value: string }> = [];
for (let i = 0; i < KEYS; i++) {
  const set = i % 3 === 0 ? '' : i % 3 === 1 ? 'prod' : 'prod/eu';
  if (i % 10 !== 0) configs.push({ set, key: `KEY_${i}`, value: i % 10 === 1 ? `v${i}` : String(i * 7) });
}
const stores = await memoryRegistry(configs);

const times: number[] = [];
for (let r = 0; r < RUNS + 50; r++) {
  // A fresh body every run, as a server would parse it from each request.
  const body = [{ set: 'prod/eu', schema: fixtureSchema(KEYS) }] as unknown as EvalCommandInput[];
  const t0 = performance.now();
  const { configs: out } = await exportPipeline(body, { stores });
  const dt = performance.now() - t0;
  if (Object.keys(out).length !== KEYS) throw new Error('wrong answer');
  if (r >= 50) times.push(dt); // the first 50 warm the JIT and the schema cache
}
times.sort((a, b) => a - b);
const q = (p: number) => times[Math.min(times.length - 1, Math.floor(p * times.length))]!.toFixed(3);
console.log(`engine, ${KEYS} keys, no expressions, ${RUNS} runs: median ${q(0.5)} ms, p99 ${q(0.99)} ms (target: median < 5 ms)`);
