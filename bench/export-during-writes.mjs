// POST /export throughput with and without writes running at the same time: the 10-key workload (W10) of
// bench/fixture.mjs against one server (`--workers 1`), in rounds that alternate between "exports only" and "exports
// while a writer sends POST /upsert at a steady rate" (to another set of the same json-file store, each write a new
// revision with its history record), so that the machine's moving load falls on both alike. Shown per condition: the
// median and best req/s and p50/p99 latency of the exports, and the writes the writer got through (all must be 200).
//
//   npm run build && node bench/export-during-writes.mjs [--duration 8] [--rounds 3] [--connections 10] [--write-rate 20]
//   (--write-rate 0: the writer sends its next write as soon as the last one is answered; --write-store secrets: the
//   writes go to the fixture's small second store, which the exports do not read)
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isDeepStrictEqual, parseArgs } from 'node:util';
import { workloads, writeFixture } from './fixture.mjs';
import { freePort, load, waitReady } from './harness.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({
  options: {
    duration: { type: 'string', default: '8' },
    rounds: { type: 'string', default: '3' },
    connections: { type: 'string', default: '10' },
    'write-rate': { type: 'string', default: '20' },
    'write-store': { type: 'string', default: 'main' },
  },
});
const rate = Number(args['write-rate']);
const w10 = workloads.find((w) => w.name.startsWith('10 keys'));
const config = writeFixture(join(root, 'bench', '.tmp', 'export-during-writes'));
const port = await freePort();
const server = spawn(process.execPath, [join(root, 'bin/cfgu.js'), 'serve', '--config', config, '--port', String(port), '--host', '127.0.0.1', '--workers', '1'], {
  env: { ...process.env, CONFIGU_LOG_ENABLED: 'false' },
  stdio: ['ignore', 'ignore', 'inherit'],
});
const base = `http://127.0.0.1:${port}`;

/** Write until `stop()`; resolves with how many writes were answered 200 (any other answer is fatal). */
function writer() {
  let running = true;
  let n = 0;
  const done = (async () => {
    while (running) {
      const started = performance.now();
      const res = await fetch(`${base}/upsert`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ store: args['write-store'], set: 'bench/writes', schema: { keys: { COUNTER: {} } }, values: { COUNTER: String(n) }, message: 'bench' }),
      });
      const text = await res.text();
      if (res.status !== 200) throw new Error(`POST /upsert: ${res.status} ${text.slice(0, 300)}`);
      n++;
      const wait = rate > 0 ? 1000 / rate - (performance.now() - started) : 0;
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    }
    return n;
  })();
  return { stop: () => ((running = false), done) };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

try {
  await waitReady(base);
  const res = await fetch(`${base}/export`, { method: 'POST', body: JSON.stringify(w10.body), headers: { 'content-type': 'application/json' } });
  if (res.status !== 200 || !isDeepStrictEqual(await res.json(), w10.expected)) throw new Error('W10: unexpected answer');
  const body = JSON.stringify(w10.body);
  const exportLoad = () => load({ url: `${base}/export`, method: 'POST', body, connections: Number(args.connections), duration: Number(args.duration) });
  await load({ url: `${base}/export`, method: 'POST', body, connections: 4, duration: 3 });
  const results = { alone: [], writing: [] };
  for (let round = 0; round < Number(args.rounds); round++) {
    for (const condition of ['alone', 'writing']) {
      const w = condition === 'writing' ? writer() : undefined;
      const r = await exportLoad();
      r.writes = w ? await w.stop() : 0;
      if (r.errors || r.non2xx) throw new Error(`${condition}: ${r.errors} errors, ${r.non2xx} non-2xx`);
      results[condition].push(r);
      process.stderr.write(`round ${round + 1} ${condition}: ${r.rps.toFixed(0)} req/s, p50 ${r.p50} ms, p99 ${r.p99} ms, ${r.writes} writes\n`);
    }
  }
  console.log(`| condition | export req/s (median) | export req/s (best) | p50 / p99 ms (median round) | writes per round (${args.duration} s) |`);
  console.log('|---|---|---|---|---|');
  for (const [condition, rs] of Object.entries(results)) {
    const m = median(rs.map((r) => r.rps));
    const mr = rs.find((r) => r.rps === m);
    const label = condition === 'alone' ? 'exports only' : `exports + POST /upsert to "${args['write-store']}" at ${rate > 0 ? `${rate}/s` : 'full speed (one at a time)'}`;
    console.log(`| ${label} | ${m.toFixed(0)} | ${Math.max(...rs.map((r) => r.rps)).toFixed(0)} | ${mr.p50} / ${mr.p99} | ${median(rs.map((r) => r.writes))} |`);
  }
} finally {
  server.kill('SIGTERM');
}
