// Cost of the json-file store's per-request change check (src/stores/json-file.ts): one synchronous bigint `stat` and
// the fingerprint string, against watch mode (`watch: true`: no stat while no file-system event arrived).
//   npx tsx bench/json-file-read.ts [--rounds 7] [--iterations 20000]
// Each figure is process CPU µs per `get` of the W10 reads (10 keys x 3 sets), median over rounds; plus the bare
// statSync call for reference.
import { mkdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { JsonFileConfigStore } from '../src/stores/json-file.js';
import type { ConfigQuery } from '../src/core/ports.js';

const { values: args } = parseArgs({ options: { rounds: { type: 'string', default: '7' }, iterations: { type: 'string', default: '20000' } } });
const rounds = Number(args.rounds);
const iterations = Number(args.iterations);

const dir = join(import.meta.dirname, '.tmp', 'json-file-read');
mkdirSync(dir, { recursive: true });
const path = join(dir, 'main.json');
const configs = [];
for (let i = 0; i < 1000; i++) configs.push({ set: ['', 'prod', 'prod/eu'][i % 3], key: `K${i}`, value: `v${i}` });
writeFileSync(path, JSON.stringify(configs));
const queries: ConfigQuery[] = [];
for (const set of ['', 'prod', 'prod/eu']) for (let i = 0; i < 10; i++) queries.push({ set, key: `K${i}` });

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
async function time(fn: () => unknown): Promise<number> {
  const per: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const start = process.cpuUsage();
    for (let i = 0; i < iterations; i++) await fn();
    const used = process.cpuUsage(start);
    per.push((used.user + used.system) / iterations);
  }
  return median(per);
}

const plain = new JsonFileConfigStore('plain', { path });
const watched = new JsonFileConfigStore('watched', { path, watch: true, recheckMs: 60_000 });
await plain.init();
await watched.init();
const rows: Array<[string, number]> = [
  ['statSync(path, { bigint: true }) alone', await time(() => statSync(path, { bigint: true, throwIfNoEntry: false }))],
  ['get(30 queries), default: stat per request', await time(() => plain.get(queries))],
  ['get(30 queries), watch: true (no stat while no event)', await time(() => watched.get(queries))],
];
await plain.close?.();
await watched.close?.();
console.log('| operation | CPU µs per call (median) |');
console.log('|---|---|');
for (const [name, us] of rows) console.log(`| ${name} | ${us.toFixed(2)} |`);
