// What seeing inside costs: metrics, traces (100% sampled, every span exported to an OTLP/HTTP sink in this process,
// encoded as protobuf, the default, and as JSON)
// and the request log line (off, pino's synchronous writer, the asynchronous writer cfgu uses), measured side by side
// in one run. One server per variant (bench/observability-server.ts: one process, one sandbox child), all started
// at once; the rounds interleave the variants (their order rotates each round), so a change in the machine's load
// hits all of them alike; the figure of a variant is its median over the rounds. Log lines go to a pipe this process
// drains, as a log collector would read them.
//
// Besides requests per second, every run records the CPU time the variant's processes (server and sandbox child)
// spent per request (from /proc): on a machine shared with other work, throughput follows the share of the CPU the
// server happens to get, while CPU time per request is what the variant itself costs. For a CPU-bound server the two
// give the same overhead when the machine is quiet.
//
//   node bench/observability.mjs [--duration 5] [--rounds 3] [--connections 20] [--binary]
//
// --binary: each variant is the built binary (`node bin/cfgu.js serve --workers 1`, one sandbox child, no spare), set
// by its environment (CONFIGU_METRICS_ENABLED, CONFIGU_LOG_ENABLED, CONFIGU_LOG_PROBES, OTEL_*), as an operator runs
// it; the synchronous-writer variant, which only the bench server has, is left out. Without it, the servers are
// bench/observability-server.ts under tsx, whose transform names every function it creates (esbuild's keepNames: a
// property definition per closure made on the request path), a cost the built binary does not have.
import { createServer as createHttpServer } from 'node:http';
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isDeepStrictEqual, parseArgs } from 'node:util';
import { tenKeys, writeFixture } from './fixture.mjs';
import { sinkHandler } from './otlp.mjs';
import { freePort, load, tree, waitReady } from './harness.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({
  options: {
    duration: { type: 'string', default: '5' },
    rounds: { type: 'string', default: '3' },
    connections: { type: 'string', default: '20' },
    binary: { type: 'boolean', default: false },
  },
});
const binary = args.binary;
const duration = Number(args.duration);
const rounds = Number(args.rounds);
const connections = Number(args.connections);

// The OTLP/HTTP sink (bench/otlp.mjs): counts the spans it got by path, as each traced variant exports to a path of
// its own.
const spansReceived = new Map();
const sink = createHttpServer(sinkHandler((n, path) => spansReceived.set(path, (spansReceived.get(path) ?? 0) + n)));
await new Promise((r) => sink.listen(0, '127.0.0.1', r));
const sinkUrl = `http://127.0.0.1:${sink.address().port}`;

const VARIANTS = [
  { name: 'base: metrics off, traces off, log off', metrics: false, log: 'off' },
  { name: 'metrics on', metrics: true, log: 'off' },
  { name: 'metrics on + traces on (100% sampled)', metrics: true, tracing: 'http/protobuf', log: 'off', spansPath: '/protobuf/v1/traces' },
  { name: 'metrics on + traces on (100% sampled, JSON)', metrics: true, tracing: 'http/json', log: 'off', spansPath: '/json/v1/traces' },
  // The log-on variants log health probes too (log.probes), so that /live shows what a request line costs.
  ...(binary ? [] : [{ name: 'log on, synchronous writer', metrics: false, log: 'sync', probes: true }]),
  { name: 'log on, asynchronous writer', metrics: false, log: 'async', probes: true },
  { name: 'metrics on, log on (asynchronous), probes logged', metrics: true, log: 'async', probes: true },
  { name: 'shipped defaults: metrics on, log on (asynchronous), probes not logged', metrics: true, log: 'async' },
];
// spans: what one request makes when traced (the request; W10 adds its command, its store read and its sandbox job).
const WORKLOADS = [
  { name: 'GET /live', path: '/live', method: 'GET', spans: 1 },
  { name: 'W10: 10 keys (2 tests, 1 const, 1 default)', path: '/export', method: 'POST', body: tenKeys.body, expected: tenKeys.expected, spans: 4 },
];

const config = writeFixture(join(root, 'bench/.tmp/observability'));
const tsx = join(root, 'node_modules/.bin/tsx');
const servers = [];
const stopAll = () => {
  for (const s of servers) if (s.child.exitCode === null) s.child.kill('SIGTERM');
};
process.on('exit', stopAll);

/** The environment of a variant run as the binary: no CONFIGU_* or OTEL_* of this shell, the variant's own. */
const binaryEnv = (v) => ({
  ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^(CONFIGU_|OTEL_)/.test(k))),
  CONFIGU_EXPRESSION_WORKERS: '1',
  CONFIGU_EXPRESSION_SPARES: '0',
  CONFIGU_METRICS_ENABLED: String(v.metrics),
  CONFIGU_LOG_ENABLED: String(v.log !== 'off'),
  CONFIGU_LOG_PROBES: String(v.probes ?? false),
  // The batch processor's defaults, as an operator runs it; the run checks that no span was dropped.
  ...(v.tracing ? { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: sinkUrl + v.spansPath, OTEL_EXPORTER_OTLP_PROTOCOL: v.tracing, OTEL_TRACES_SAMPLER: 'always_on' } : {}),
});
for (const v of VARIANTS) {
  const port = await freePort();
  const options = { config, port, metrics: v.metrics, log: v.log, probes: v.probes ?? false, ...(v.tracing ? { tracing: sinkUrl + v.spansPath, protocol: v.tracing } : {}) };
  const child = binary
    ? spawn(process.execPath, [join(root, 'bin/cfgu.js'), 'serve', '--config', config, '--port', String(port), '--host', '127.0.0.1', '--workers', '1'], {
        stdio: ['ignore', 'pipe', 'inherit'],
        env: binaryEnv(v),
      })
    : spawn(tsx, [join(root, 'bench/observability-server.ts'), JSON.stringify(options)], { stdio: ['ignore', 'pipe', 'inherit'] });
  let logBytes = 0;
  child.stdout.on('data', (c) => (logBytes += c.length));
  servers.push({ v, child, base: `http://127.0.0.1:${port}`, logBytes: () => logBytes, sent: new Map() });
}

const TICK_MS = 1000 / 100; // USER_HZ
/** CPU time (user + system, ms) of a process tree, by pid. */
function cpuOf(pid) {
  const byPid = new Map();
  for (const p of tree(pid)) {
    try {
      const fields = readFileSync(`/proc/${p}/stat`, 'utf8').split(') ')[1].split(' ');
      byPid.set(p, (Number(fields[11]) + Number(fields[12])) * TICK_MS);
    } catch {
      /* gone */
    }
  }
  return byPid;
}
const cpuSpent = (before, after) => {
  let ms = 0;
  for (const [p, v] of after) ms += v - (before.get(p) ?? 0);
  return ms;
};

const results = new Map(); // `${variant}|${workload}` -> [rps...]
const cpuPerRequest = new Map(); // `${variant}|${workload}` -> [ms...]
const refused = new Map();
const loads = [];
try {
  for (const s of servers) await waitReady(s.base, 600_000);
  for (const s of servers) {
    for (const w of WORKLOADS) {
      s.sent.set(w.name, (s.sent.get(w.name) ?? 0) + 1);
      const r = await fetch(s.base + w.path, { method: w.method, body: w.body ? JSON.stringify(w.body) : undefined, headers: w.body ? { 'content-type': 'application/json' } : {} });
      const body = await r.json();
      if (r.status !== 200 || (w.expected && !isDeepStrictEqual(body, w.expected))) throw new Error(`${s.v.name} / ${w.name}: wrong answer ${r.status} ${JSON.stringify(body).slice(0, 300)}`);
      // Warm-up: JIT, caches, the sandbox child.
      const warm = await load({ url: s.base + w.path, method: w.method, body: w.body ? JSON.stringify(w.body) : undefined, connections, duration: 1 });
      s.sent.set(w.name, s.sent.get(w.name) + warm.total);
    }
  }
  for (let round = 0; round < rounds; round++) {
    for (const w of WORKLOADS) {
      const order = servers.map((_, i) => servers[(i + round) % servers.length]);
      for (const s of order) {
        loads.push(loadavg()[0]);
        const before = cpuOf(s.child.pid);
        const r = await load({ url: s.base + w.path, method: w.method, body: w.body ? JSON.stringify(w.body) : undefined, connections, duration });
        s.sent.set(w.name, s.sent.get(w.name) + r.total);
        const cpu = cpuSpent(before, cpuOf(s.child.pid));
        const key = `${s.v.name}|${w.name}`;
        // Under a heavy load the sandbox may answer 503 (it could not run a job within its time limit): counted apart.
        if (r.errors || r.non2xx) refused.set(key, (refused.get(key) ?? 0) + r.errors + r.non2xx);
        results.set(key, [...(results.get(key) ?? []), r.rps]);
        cpuPerRequest.set(key, [...(cpuPerRequest.get(key) ?? []), cpu / Math.max(1, r.total)]);
        console.error(`  round ${round + 1}: ${s.v.name} / ${w.name}: ${r.rps.toFixed(0)} req/s, ${(cpu / Math.max(1, r.total)).toFixed(3)} CPU ms/request`);
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
const cpu = (variant, workload) => median(cpuPerRequest.get(`${variant}|${workload}`));
const pct = (x) => `${x >= 0 ? '+' : ''}${x.toFixed(1)}%`;
const base = VARIANTS[0].name;
const metricsOn = VARIANTS[1].name;
const lines = [
  `cfgu observability overhead: ${new Date().toISOString()}, ${binary ? 'the built binary (--binary)' : 'bench/observability-server.ts under tsx'}, ${rounds} rounds x ${duration} s per variant and workload, ${connections} connections, 1 process + 1 sandbox child per variant, load average (1 min) during the run ${Math.min(...loads).toFixed(1)}-${Math.max(...loads).toFixed(1)}`,
  '',
  '| variant | workload | req/s, median (rounds) | CPU ms per request, median (rounds) | CPU per request vs base | req/s vs base | refused |',
  '|---|---|---|---|---|---|---|',
];
for (const w of WORKLOADS) {
  for (const v of VARIANTS) {
    const key = `${v.name}|${w.name}`;
    lines.push(
      `| ${v.name} | ${w.name.split(':')[0]} | ${rps(v.name, w.name).toFixed(0)} (${results.get(key).map((x) => x.toFixed(0)).join(', ')}) | ` +
        `${cpu(v.name, w.name).toFixed(3)} (${cpuPerRequest.get(key).map((x) => x.toFixed(3)).join(', ')}) | ` +
        `${pct((100 * (cpu(v.name, w.name) - cpu(base, w.name))) / cpu(base, w.name))} | ${pct((100 * (rps(v.name, w.name) - rps(base, w.name))) / rps(base, w.name))} | ${refused.get(key) ?? 0} |`,
    );
  }
}
const w10 = WORKLOADS[1].name;
const tracing = VARIANTS[2].name;
const tracingJson = VARIANTS[3].name;
const against = (v) => `${pct((100 * (cpu(v, w10) - cpu(metricsOn, w10))) / cpu(metricsOn, w10))} CPU, ${pct((100 * (rps(v, w10) - rps(metricsOn, w10))) / rps(metricsOn, w10))} req/s`;
lines.push(
  '',
  `W10, CPU per request: metrics on ${pct((100 * (cpu(metricsOn, w10) - cpu(base, w10))) / cpu(base, w10))} against base; ` +
    `traces on (100%) ${against(tracing)} (JSON: ${against(tracingJson)}) against metrics on alone. ` +
    `Spans received by the OTLP sink, of those the requests answered should make: ${servers
      .filter((s) => s.v.tracing)
      .map((s) => `${s.v.tracing} ${spansReceived.get(s.v.spansPath) ?? 0} of ${WORKLOADS.reduce((n, w) => n + (s.sent.get(w.name) ?? 0) * w.spans, 0)}`)
      .join(', ')}.`,
  `Log bytes written: ${servers.map((s) => `${s.v.name}: ${(s.logBytes() / 1e6).toFixed(1)} MB`).join('; ')}.`,
);
console.log(lines.join('\n'));
try {
  execFileSync('uptime', { stdio: 'inherit' });
} catch {
  /* no uptime */
}
