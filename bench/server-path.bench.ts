/**
 * The engine's part of a repeated `POST /export`, in process (issue 16): one of the load benchmark's bodies
 * (bench/fixture.mjs), deep-frozen as the server's body cache hands it out, evaluated again and again over the
 * fixture's json-file stores with `exportPipelineJson`, which is what the route calls. No sandbox: use it for the
 * workloads without expressions. Prints the median and 10th percentile of the wall time of one evaluation and the
 * process's CPU time per evaluation (all threads: the garbage collector's too), after a warm-up.
 *
 *   npx tsx bench/server-path.bench.ts [--workload "1,000 keys"] [--runs 4000]
 */
import { performance } from 'node:perf_hooks';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isDeepStrictEqual, parseArgs } from 'node:util';
import { loadConfiguration } from '../src/config/index.js';
import { createStoreRegistry } from '../src/stores/index.js';
import { exportPipelineJson, freezeDeep, type EvalCommandInput } from '../src/core/index.js';
// @ts-expect-error: a JavaScript module without types
import { workloads, writeFixture } from './fixture.mjs';

const { values: args } = parseArgs({
  options: { workload: { type: 'string', default: '1,000 keys' }, runs: { type: 'string', default: '4000' }, warmup: { type: 'string', default: '500' } },
});
type Workload = { name: string; body: unknown; expected: unknown };
const w = (workloads as Workload[]).find((x) => x.name.includes(args.workload!));
if (!w) throw new Error(`no workload named like "${args.workload}"`);
const dir = join(dirname(fileURLToPath(import.meta.url)), '.tmp/fixture');
const file = writeFixture(dir) as string;
const stores = createStoreRegistry(await loadConfiguration({ file, env: {}, cwd: dir }), {});
await stores.init();
const body = freezeDeep(JSON.parse(JSON.stringify(w.body))) as EvalCommandInput[];
const runs = Number(args.runs);
const warmup = Number(args.warmup);

let text = '';
for (let r = 0; r < warmup; r++) text = (await exportPipelineJson(body, { stores })).text;
if (!isDeepStrictEqual(JSON.parse(text), w.expected)) throw new Error(`${w.name}: wrong answer`);
const times: number[] = [];
const cpu0 = process.cpuUsage();
for (let r = 0; r < runs; r++) {
  const t0 = performance.now();
  text = (await exportPipelineJson(body, { stores })).text;
  times.push(performance.now() - t0);
}
const cpu = process.cpuUsage(cpu0);
await stores.close();
times.sort((a, b) => a - b);
const us = (ms: number) => (ms * 1000).toFixed(1);
console.log(
  `${w.name}: ${runs} runs, median ${us(times[times.length >> 1]!)} µs, p10 ${us(times[Math.floor(times.length * 0.1)]!)} µs, ` +
    `CPU ${((cpu.user + cpu.system) / runs).toFixed(1)} µs a run`,
);
