/**
 * Host-side costs of hostile requests (issue 10, findings 4 and 7), in-process, one run each:
 *   1. `const` reference analysis: 10,000 const keys whose templates are one long name (`{{a0a0...}}`), ~850 KB;
 *   2. set depth fan-out: 10,000 store keys read at a set 3,000 segments deep, ~135 KB;
 *   3. pipeline amplification: 12 commands, each a const of `"x".repeat(2 ** 21)` (needs the sandbox).
 * Prints the wall time of each, the heap growth of 2, and the answer (the error, when the engine refuses).
 *
 *   npx tsx bench/host-limits.ts [--depth 3000] [--cases 1,2,3]
 */
import { performance } from 'node:perf_hooks';
import { exportPipeline, prepareSchema, type EvalCommandInput } from '../src/core/index.js';
import { createSandboxEvaluator } from '../src/expressions/index.js';
import { memoryRegistry } from './stores.js';

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? fallback : Number(process.argv[i + 1]);
};
const DEPTH = arg('depth', 3000);
const casesArg = process.argv.indexOf('--cases');
const cases = new Set((casesArg === -1 ? '1,2,3' : process.argv[casesArg + 1]!).split(',').map(Number));

const outcome = (e: unknown) => (e instanceof Error ? `${e.name}: ${e.message.slice(0, 120)}` : 'ok');

async function timed(label: string, run: () => unknown): Promise<void> {
  global.gc?.();
  const heap0 = process.memoryUsage().heapUsed;
  let peak = heap0;
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().heapUsed)), 5);
  const t0 = performance.now();
  let result = 'ok';
  try {
    await run();
  } catch (e) {
    result = outcome(e);
  }
  const ms = performance.now() - t0;
  clearInterval(sampler);
  peak = Math.max(peak, process.memoryUsage().heapUsed);
  console.log(`| ${label} | ${ms.toFixed(0)} ms | ${((peak - heap0) / 2 ** 20).toFixed(0)} MB | ${result} |`);
}

console.log('| input | time | heap growth (sampled) | answer |');
console.log('|---|---|---|---|');

// 1. const analysis
if (cases.has(1)) {
  const keys: Record<string, unknown> = {};
  const name = 'a0'.repeat(30);
  for (let i = 0; i < 10_000; i++) keys[`a0_${i}`] = { const: `{{${name}}}` };
  const schema = { keys };
  const bytes = JSON.stringify(schema).length;
  await timed(`10,000 consts, \`{{a0a0...}}\` templates (${(bytes / 1024).toFixed(0)} KB): prepareSchema`, () => prepareSchema(schema));
}

// 2. set depth fan-out
if (cases.has(2)) {
  const stores = await memoryRegistry([{ set: '', key: 'K0', value: 'x' }]);
  const keys: Record<string, null> = {};
  for (let i = 0; i < 10_000; i++) keys[`K${i}`] = null;
  const set = Array.from({ length: DEPTH }, () => 'a').join('/');
  const body = [{ set, schema: { keys } }] as unknown as EvalCommandInput[];
  const bytes = JSON.stringify(body).length;
  await timed(`10,000 keys at a set ${DEPTH} segments deep (${(bytes / 1024).toFixed(0)} KB): exportPipeline`, () => exportPipeline(body, { stores }));
  await stores.close();
}

// 3. pipeline amplification
if (cases.has(3)) {
  const expressions = createSandboxEvaluator({ workers: 1 });
  // Started and warm before the clock runs: the figure is the pipeline's own cost.
  await expressions.ready();
  await exportPipeline([{ schema: { keys: { W: { const: '{{ 1 }}' } } } }], { defaultsOnly: true, expressions });
  const body = Array.from({ length: 12 }, (_, i) => ({ schema: { keys: { [`C${i}`]: { const: '{{ "x".repeat(2**21) }}' } } } }));
  const bytes = JSON.stringify(body).length;
  await timed(`12 commands, each a 2 MiB const (${bytes} bytes): exportPipeline`, () => exportPipeline(body, { defaultsOnly: true, expressions }));
  await expressions.close();
}
