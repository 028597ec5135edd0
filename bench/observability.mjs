// What seeing inside costs: metrics, traces (100% sampled, every span exported to an OTLP/HTTP sink in this process)
// and the request log line (off, pino's synchronous writer, the asynchronous writer cfgu uses), measured side by side
// in one run. One server per variant (bench/observability-server.ts: one process, one sandbox child), all started
// at once; the rounds interleave the variants (their order rotates each round), so a change in the machine's load
// hits all of them alike; the figure of a variant is its median over the rounds. Log lines go to a pipe this process
// drains, as a log collector would read them.
//
//   node bench/observability.mjs [--duration 5] [--rounds 3] [--connections 20]
import { createServer as createHttpServer } from 'node:http';
import { execFileSync, spawn } from 'node:child_process';
import { loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isDeepStrictEqual, parseArgs } from 'node:util';
import { tenKeys, writeFixture } from './fixture.mjs';
import { freePort, load, waitReady } from './harness.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({
  options: {
    duration: { type: 'string', default: '5' },
    rounds: { type: 'string', default: '3' },
    connections: { type: 'string', default: '20' },
  },
});
const duration = Number(args.duration);
const rounds = Number(args.rounds);
const connections = Number(args.connections);

// The OTLP/HTTP sink: answers every export and counts the spans it got (JSON export requests).
let spansReceived = 0;
const sink = createHttpServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    try {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      for (const rs of body.resourceSpans ?? []) for (const ss of rs.scopeSpans ?? []) spansReceived += (ss.spans ?? []).length;
    } catch {
      /* not JSON: not ours */
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
});
await new Promise((r) => sink.listen(0, '127.0.0.1', r));
const sinkUrl = `http://127.0.0.1:${sink.address().port}`;

const VARIANTS = [
  { name: 'base: metrics off, traces off, log off', metrics: false, log: 'off' },
  { name: 'metrics on', metrics: true, log: 'off' },
  { name: 'metrics on + traces on (100% sampled)', metrics: true, tracing: true, log: 'off' },
  { name: 'log on, synchronous writer', metrics: false, log: 'sync' },
  { name: 'log on, asynchronous writer', metrics: false, log: 'async' },
  { name: 'shipped defaults: metrics on, log on (asynchronous)', metrics: true, log: 'async' },
];
const WORKLOADS = [
  { name: 'GET /live', path: '/live', method: 'GET' },
  { name: 'W10: 10 keys (2 tests, 1 const, 1 default)', path: '/export', method: 'POST', body: tenKeys.body, expected: tenKeys.expected },
];

const config = writeFixture(join(root, 'bench/.tmp/observability'));
const tsx = join(root, 'node_modules/.bin/tsx');
const servers = [];
const stopAll = () => {
  for (const s of servers) if (s.child.exitCode === null) s.child.kill('SIGTERM');
};
process.on('exit', stopAll);

for (const v of VARIANTS) {
  const port = await freePort();
  const options = { config, port, metrics: v.metrics, log: v.log, ...(v.tracing ? { tracing: sinkUrl } : {}) };
  const child = spawn(tsx, [join(root, 'bench/observability-server.ts'), JSON.stringify(options)], { stdio: ['ignore', 'pipe', 'inherit'] });
  let logBytes = 0;
  child.stdout.on('data', (c) => (logBytes += c.length));
  servers.push({ v, child, base: `http://127.0.0.1:${port}`, logBytes: () => logBytes });
}

const results = new Map(); // `${variant}|${workload}` -> [rps...]
const loads = [];
try {
  for (const s of servers) await waitReady(s.base, 180_000);
  for (const s of servers) {
    for (const w of WORKLOADS) {
      const r = await fetch(s.base + w.path, { method: w.method, body: w.body ? JSON.stringify(w.body) : undefined, headers: w.body ? { 'content-type': 'application/json' } : {} });
      const body = await r.json();
      if (r.status !== 200 || (w.expected && !isDeepStrictEqual(body, w.expected))) throw new Error(`${s.v.name} / ${w.name}: wrong answer ${r.status} ${JSON.stringify(body).slice(0, 300)}`);
      // Warm-up: JIT, caches, the sandbox child.
      await load({ url: s.base + w.path, method: w.method, body: w.body ? JSON.stringify(w.body) : undefined, connections, duration: 1 });
    }
  }
  for (let round = 0; round < rounds; round++) {
    for (const w of WORKLOADS) {
      const order = servers.map((_, i) => servers[(i + round) % servers.length]);
      for (const s of order) {
        loads.push(loadavg()[0]);
        const r = await load({ url: s.base + w.path, method: w.method, body: w.body ? JSON.stringify(w.body) : undefined, connections, duration });
        if (r.errors || r.non2xx) throw new Error(`${s.v.name} / ${w.name}: ${r.errors} errors, ${r.non2xx} non-2xx`);
        const key = `${s.v.name}|${w.name}`;
        results.set(key, [...(results.get(key) ?? []), r.rps]);
        console.error(`  round ${round + 1}: ${s.v.name} / ${w.name}: ${r.rps.toFixed(0)} req/s`);
      }
    }
  }
} finally {
  // Each server flushes its last spans on SIGTERM: keep the sink open until they are gone.
  const exits = servers.filter((s) => s.child.exitCode === null).map((s) => new Promise((r) => s.child.once('exit', r)));
  stopAll();
  await Promise.all(exits);
  sink.close();
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const rps = (variant, workload) => median(results.get(`${variant}|${workload}`));
const base = VARIANTS[0].name;
const metricsOn = VARIANTS[1].name;
const lines = [
  `cfgu observability overhead: ${new Date().toISOString()}, ${rounds} rounds x ${duration} s per variant and workload, ${connections} connections, 1 process + 1 sandbox child per variant, load average (1 min) during the run ${Math.min(...loads).toFixed(1)}-${Math.max(...loads).toFixed(1)}`,
  '',
  `| variant | ${WORKLOADS.map((w) => `${w.name} req/s (median; rounds)`).join(' | ')} | ${WORKLOADS.map((w) => `vs base, ${w.name.split(':')[0]}`).join(' | ')} |`,
  `|---|${WORKLOADS.map(() => '---|').join('')}${WORKLOADS.map(() => '---|').join('')}`,
];
for (const v of VARIANTS) {
  const cells = WORKLOADS.map((w) => `${rps(v.name, w.name).toFixed(0)} (${results.get(`${v.name}|${w.name}`).map((x) => x.toFixed(0)).join(', ')})`);
  const deltas = WORKLOADS.map((w) => {
    const d = (100 * (rps(v.name, w.name) - rps(base, w.name))) / rps(base, w.name);
    return `${d >= 0 ? '+' : ''}${d.toFixed(1)}%`;
  });
  lines.push(`| ${v.name} | ${cells.join(' | ')} | ${deltas.join(' | ')} |`);
}
const w10 = WORKLOADS[1].name;
const tracingCost = (100 * (rps(metricsOn, w10) - rps(VARIANTS[2].name, w10))) / rps(metricsOn, w10);
lines.push('', `Traces on W10 against metrics on alone: ${tracingCost >= 0 ? '-' : '+'}${Math.abs(tracingCost).toFixed(1)}% throughput; spans received by the OTLP sink: ${spansReceived}.`);
lines.push(`Log bytes written: ${servers.map((s) => `${s.v.log}/${s.v.metrics ? 'm' : '-'}: ${(s.logBytes() / 1e6).toFixed(1)} MB`).join(', ')}.`);
console.log(lines.join('\n'));
try {
  execFileSync('uptime', { stdio: 'inherit' });
} catch {
  /* no uptime */
}
