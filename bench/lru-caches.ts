/**
 * Micro-benchmark of the two LRU caches on their hot path: BodyCache.get (a body sent again) and prepareSchema (a
 * schema sent again, not frozen: looked up by its JSON text), plus a churn run that evicts on every insertion.
 * Run: npx tsx bench/lru-caches.ts   (prints ns per operation, median of 7 rounds)
 */
import { BodyCache } from '../src/server/http/body/body-cache.js';
import { CacheBudget } from '../src/core/cache-budget.js';
import { configureSchemaCache, prepareSchema } from '../src/core/schema.js';

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[s.length >> 1]!;
}

function measure(name: string, ops: number, run: () => void): void {
  run(); // warm-up
  const rounds: number[] = [];
  for (let r = 0; r < 7; r++) {
    const t = process.hrtime.bigint();
    run();
    rounds.push(Number(process.hrtime.bigint() - t) / ops);
  }
  console.log(`${name.padEnd(44)} ${median(rounds).toFixed(1).padStart(8)} ns/op`);
}

const bodies = Array.from({ length: 64 }, (_, i) => JSON.stringify([{ schema: { keys: { [`K${i}`]: { description: 'x'.repeat(400 + i) } } } }]));
const cache = new BodyCache();
for (const t of bodies) cache.add(t, JSON.parse(t));
const N = 200_000;
measure('BodyCache.get (hit, 64 bodies)', N, () => {
  for (let i = 0; i < N; i++) cache.get(bodies[i & 63]!);
});

const small = new BodyCache(new CacheBudget(400 * 1024), 256); // ~100 bodies of ~600 characters: every add past that evicts
const churn = Array.from({ length: 4096 }, (_, i) => JSON.stringify([{ schema: { keys: { [`C${i}`]: { description: 'y'.repeat(600) } } } }]));
const parsed = churn.map((t) => JSON.parse(t) as unknown);
measure('BodyCache.add (evicting)', churn.length, () => {
  for (let i = 0; i < churn.length; i++) small.add(churn[i]!, parsed[i]);
});

const schemas = Array.from({ length: 32 }, (_, i) => ({
  keys: Object.fromEntries(Array.from({ length: 20 }, (_, k) => [`KEY_${i}_${k}`, { description: 'd', default: k }])),
}));
for (const s of schemas) prepareSchema(s);
const M = 50_000;
measure('prepareSchema (hit by text, 20 keys)', M, () => {
  for (let i = 0; i < M; i++) prepareSchema(schemas[i & 31]!);
});

const tiny = Array.from({ length: 32 }, (_, i) => ({ keys: { [`T${i}`]: {} } }));
for (const s of tiny) prepareSchema(s);
measure('prepareSchema (hit by text, 1 key)', M, () => {
  for (let i = 0; i < M; i++) prepareSchema(tiny[i & 31]!);
});

configureSchemaCache({ entries: 16 });
const many = Array.from({ length: 2048 }, (_, i) => ({ keys: { [`K${i}`]: { description: 'd' } } }));
measure('prepareSchema (miss, evicting; 16 entries)', many.length, () => {
  for (const s of many) prepareSchema(s);
});
