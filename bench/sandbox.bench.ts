// Cost of the expression sandbox through the real evaluator (host -> child process -> isolate and back):
//   npx tsx bench/sandbox.bench.ts [runs=2000]
// Prints start-up time and the latency of a 10-key job with 10 test expressions (median, p99), plus throughput with
// concurrent jobs, and the quickjs-emscripten alternative for comparison.
import { performance } from 'node:perf_hooks';
import { createSandboxEvaluator } from '../src/expressions/index.js';
import type { ConfigView, ExpressionJob } from '../src/core/ports.js';

const runs = Number(process.argv[2] ?? 2000);

const configs: Record<string, ConfigView> = {};
const tests: ExpressionJob['tests'] = [];
const EXPRESSIONS = [
  '$.value > 1000',
  'validator.isPort($.storedValue)',
  "_.isNumber($.value)",
  "z.number().int().min(1).max(65535).safeParse($.value).success",
  "JSONSchema.validate({ type: 'number' }, $.value)",
  "expect($.value).to.be.a('number') && true",
  "$.configs.K0.origin === 'store'",
  "$.labels.includes('net')",
  "String($.value).length < 10",
  "$.input.store.type === 'in-memory'",
];
for (let i = 0; i < 10; i++) {
  const key = `K${i}`;
  configs[key] = { key, storedValue: String(8000 + i), value: 8000 + i, origin: 'store', cfgu: { test: EXPRESSIONS[i], label: 'net' }, labels: ['net'] };
  tests.push({ key, expressions: [EXPRESSIONS[i]!] });
}
const job: ExpressionJob = {
  input: { store: { type: 'in-memory' }, set: { path: '', hierarchy: [''] }, schema: { keys: configs } },
  configs,
  consts: [],
  tests,
};

const pct = (xs: number[], p: number) => xs[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;
const fmt = (ms: number) => (ms < 1 ? `${(ms * 1000).toFixed(0)} us` : `${ms.toFixed(1)} ms`);
const rows: Array<[string, string]> = [];

let t = performance.now();
const ev = createSandboxEvaluator({ workers: 2 });
await ev.ready();
rows.push(['start-up: 2 children (spawn + isolate + libraries + seal, in parallel)', fmt(performance.now() - t)]);

const first = await ev.run(job);
if (first.tests.length) throw new Error(`bench job failed: ${JSON.stringify(first.tests)}`);
for (let i = 0; i < 200; i++) await ev.run(job); // warm-up

const lat: number[] = [];
for (let i = 0; i < runs; i++) {
  const s = performance.now();
  await ev.run(job);
  lat.push(performance.now() - s);
}
lat.sort((a, b) => a - b);
rows.push([`10 keys x 10 expressions, sequential (${runs} runs): median`, fmt(pct(lat, 50))]);
rows.push([`10 keys x 10 expressions, sequential (${runs} runs): p99`, fmt(pct(lat, 99))]);

const small: ExpressionJob = { ...job, tests: job.tests.slice(0, 3) };
t = performance.now();
let done = 0;
const total = runs * 2;
await Promise.all(
  Array.from({ length: 16 }, async () => {
    while (done < total) {
      done++;
      await ev.run(small);
    }
  }),
);
rows.push([`3 expressions/job, 16 concurrent, 2 children: throughput`, `${Math.round(total / ((performance.now() - t) / 1000))} jobs/s`]);

// Replacement: a child killed by memory, time until the pool is whole again.
t = performance.now();
await ev.run({ ...job, tests: [{ key: 'K0', expressions: ["'x'.repeat(2 ** 28).split('')"] }] });
await ev.ready();
rows.push(['replacement after a memory kill (job answered + new child ready)', fmt(performance.now() - t)]);
await ev.close();

// The alternative design: quickjs-emscripten (WebAssembly QuickJS), for comparison.
try {
  const { getQuickJS } = await import('quickjs-emscripten');
  const { readFileSync } = await import('node:fs');
  const { join } = await import('node:path');
  t = performance.now();
  const qjs = await getQuickJS();
  const vm = qjs.newContext();
  const bundle = readFileSync(join(import.meta.dirname, '..', 'dist', 'sandbox', 'libraries.js'), 'utf8');
  vm.unwrapResult(vm.evalCode('globalThis.console = { log() {}, warn() {}, error() {} }')).dispose();
  const loaded = vm.evalCode(bundle + '\n;__cfguRuntime.seal(), 1');
  let loadMs = performance.now() - t;
  if (loaded.error) {
    rows.push(['quickjs: load library bundle', `failed: ${JSON.stringify(vm.dump(loaded.error)).slice(0, 80)}`]);
    loaded.error.dispose();
  } else {
    loaded.value.dispose();
    rows.push(['quickjs: new runtime + load library bundle + seal', fmt(loadMs)]);
    const src = `(() => { const $ = { value: 8080, storedValue: '8080', labels: ['net'], configs: { K0: { origin: 'store' } }, input: { store: { type: 'in-memory' } } }; let ok = 0; ${EXPRESSIONS.map((e) => `if (${e}) ok++;`).join(' ')} return ok; })()`;
    const ql: number[] = [];
    for (let i = 0; i < Math.min(runs, 500); i++) {
      const s = performance.now();
      const r = vm.evalCode(src);
      if (r.error) {
        r.error.dispose();
      } else r.value.dispose();
      ql.push(performance.now() - s);
    }
    ql.sort((a, b) => a - b);
    rows.push(['quickjs: same 10 expressions in one warm context, in-thread: median', fmt(pct(ql, 50))]);
  }
  vm.dispose();
  loadMs = 0;
} catch (e) {
  rows.push(['quickjs', `not measured: ${(e as Error).message}`]);
}

const w = Math.max(...rows.map(([a]) => a.length));
console.log(`node ${process.version}, ${process.platform}/${process.arch}`);
for (const [a, b] of rows) console.log(`${a.padEnd(w)}  ${b}`);
