/**
 * Scaling table: median in-process evaluation time (exportPipeline through the real sandbox) for 10, 100, 1,000 and
 * 10,000 keys, without expressions and with expressions (a `test` on every 10th key and a `const` on every 20th).
 *
 *   npx tsx bench/scaling.ts [--runs 200]
 */
import { performance } from 'node:perf_hooks';
import { exportPipeline, type EvalCommandInput } from '../src/core/index.js';
import { createSandboxEvaluator } from '../src/expressions/index.js';
import { memoryRegistry } from './stores.js';

const runsArg = process.argv.indexOf('--runs');
const RUNS = runsArg === -1 ? 200 : Number(process.argv[runsArg + 1]);
const SIZES = [10, 100, 1000, 10000];
const SETS = ['', 'prod', 'prod/eu'];

function schema(n: number, expressions: boolean) {
  const keys: Record<string, unknown> = {};
  for (let i = 0; i < n; i++) {
    if (expressions && i % 20 === 19) keys[`K${i}`] = { const: `{{ $.configs.K${i - 1}.value }}-c` };
    else if (expressions && i % 10 === 0) keys[`K${i}`] = { test: '$.value !== ""' };
    else keys[`K${i}`] = i % 7 === 0 ? { default: i } : {};
  }
  return { keys };
}

const configs: Array<{ set: string; key: string; value: string }> = [];
for (let i = 0; i < 10000; i++) configs.push({ set: SETS[i % 3]!, key: `K${i}`, value: `v${i}` });
const stores = await memoryRegistry(configs);
const expressions = createSandboxEvaluator({ workers: 1 });

const rows: string[] = ['| keys | no expressions: median ms | with expressions: median ms | expressions in the schema |', '|---|---|---|---|'];
for (const n of SIZES) {
  const cells: string[] = [];
  let count = 0;
  for (const withExpr of [false, true]) {
    const runs = n >= 10000 ? Math.min(RUNS, 30) : n >= 1000 ? Math.min(RUNS, 100) : RUNS;
    const times: number[] = [];
    for (let r = 0; r < runs + 10; r++) {
      const body = [{ set: 'prod/eu', schema: schema(n, withExpr) }] as unknown as EvalCommandInput[];
      const t0 = performance.now();
      const { configs: out } = await exportPipeline(body, { stores, expressions });
      const dt = performance.now() - t0;
      if (Object.keys(out).length !== n) throw new Error('wrong answer');
      if (r >= 10) times.push(dt);
    }
    times.sort((a, b) => a - b);
    cells.push(times[Math.floor(times.length / 2)]!.toFixed(3));
    if (withExpr) count = Object.values(schema(n, true).keys).filter((c) => Object.keys(c as object).some((p) => p === 'test' || p === 'const')).length;
  }
  rows.push(`| ${n.toLocaleString('en')} | ${cells[0]} | ${cells[1]} | ${count} |`);
}
await expressions.close();
await stores.close();
console.log('In-process evaluation (engine + sandbox, in-memory store, 3-level set):\n');
console.log(rows.join('\n'));
