// Soak: the server binary on the benchmark fixture, clients sending a mix of valid requests and runaway expressions
// for a given time. Reports latency of valid requests (p50/p99/max), every valid request that did not get its exact
// expected answer, the runaways' statuses, and the resident memory of the server and sandbox processes over time.
//
//   node bench/soak.mjs [--duration 150] [--connections 8] [--runaway 0.05] [--workers 2] [--seed 1] [--sample 10]
import { spawn } from 'node:child_process';
import { request } from 'node:http';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isDeepStrictEqual, parseArgs } from 'node:util';
import { mkdtempSync, rmSync } from 'node:fs';
import { writeFixture, workloads, runaway } from './fixture.mjs';
import { memory } from './proc-memory.mjs';
import { mulberry32 } from '../test/fuzz/prng.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({
  options: {
    duration: { type: 'string', default: '150' },
    connections: { type: 'string', default: '8' },
    runaway: { type: 'string', default: '0.05' },
    workers: { type: 'string', default: '2' },
    seed: { type: 'string', default: '1' },
    sample: { type: 'string', default: '10' },
  },
});
const duration = Number(args.duration) * 1000;
const runawayShare = Number(args.runaway);

// the valid mix: every export workload of the benchmark except the 1,000-key one (it measures throughput, not a mix)
const valid = workloads.filter((w) => w.method === 'POST' && w.expected && !/1,000/.test(w.name));
const runawayBodies = [
  runaway.body,
  [{ store: 'main', schema: { keys: { BOMB: { default: 'x', test: '"x".repeat(2**28).split("")' } } } }],
];

const freePort = () =>
  new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });

function post(port, body, timeoutMs = 60_000) {
  const started = performance.now();
  const text = JSON.stringify(body);
  return new Promise((resolve) => {
    const req = request(
      { host: '127.0.0.1', port, method: 'POST', path: '/export', agent: false, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), connection: 'close' }, timeout: timeoutMs },
      (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString('utf8'), ms: performance.now() - started }));
        res.on('error', (e) => resolve({ status: 0, error: e.message, ms: performance.now() - started }));
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer in ${timeoutMs} ms`)));
    req.on('error', (e) => resolve({ status: 0, error: e.message, ms: performance.now() - started }));
    req.end(text);
  });
}


const dir = mkdtempSync(join(tmpdir(), 'cfgu-soak-'));
const configu = writeFixture(dir);
const port = await freePort();
const env = { ...process.env, CONFIGU_LOG_ENABLED: 'false' };
for (const k of Object.keys(env)) if (k.startsWith('CONFIGU_') && k !== 'CONFIGU_LOG_ENABLED') delete env[k];
const server = spawn(process.execPath, [join(root, 'bin/cfgu.js'), 'serve', '--config', configu, '--port', String(port), '--host', '127.0.0.1', '--workers', args.workers], { env, stdio: ['ignore', 'pipe', 'pipe'] });
let output = '';
server.stdout.on('data', (c) => (output = (output + c).slice(-200_000)));
server.stderr.on('data', (c) => (output = (output + c).slice(-200_000)));
let exited = null;
server.on('exit', (code, signal) => (exited = code ?? signal));

for (let i = 0; ; i++) {
  const r = await new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, path: '/ready', agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    });
    req.on('error', () => resolve(0));
    req.end();
  });
  if (r === 200) break;
  if (exited !== null || i > 400) throw new Error(`the server did not become ready (exit ${exited}):\n${output}`);
  await new Promise((r) => setTimeout(r, 50));
}

console.log(`soak: ${args.duration} s, ${args.connections} connections, ${(runawayShare * 100).toFixed(0)}% runaways, --workers ${args.workers}; valid mix: ${valid.map((w) => w.name).join('; ')}`);
const t0 = performance.now();
const timeline = [{ t: 0, ...memory(server.pid) }];
const sampler = setInterval(() => timeline.push({ t: Math.round((performance.now() - t0) / 1000), ...memory(server.pid) }), Number(args.sample) * 1000);
const latencies = [];
const failures = new Map();
const runawayStatuses = {};
let validCount = 0;
const rng = mulberry32(Number(args.seed));

await Promise.all(
  Array.from({ length: Number(args.connections) }, async () => {
    while (performance.now() - t0 < duration && exited === null) {
      if (rng() < runawayShare) {
        const r = await post(port, runawayBodies[Math.floor(rng() * runawayBodies.length)]);
        const k = r.error ? `no answer (${r.error})` : String(r.status);
        runawayStatuses[k] = (runawayStatuses[k] ?? 0) + 1;
        continue;
      }
      const w = valid[Math.floor(rng() * valid.length)];
      const r = await post(port, w.body);
      validCount++;
      let ok = r.status === 200;
      if (ok) {
        try {
          ok = isDeepStrictEqual(JSON.parse(r.body), w.expected);
        } catch {
          ok = false;
        }
      }
      if (ok) latencies.push(r.ms);
      else {
        // the failure messages, not the body's start: they say which rule and which limit
        let detail = r.body.slice(0, 300);
        try {
          const p = JSON.parse(r.body);
          if (Array.isArray(p.errors)) detail = [...new Set(p.errors.map((e) => `${e.rule}: ${String(e.message).replace(/^.*(failed|match[^:]*):/, '')}`))].join('; ').slice(0, 300);
        } catch {
          /* not JSON */
        }
        const why = r.error ? `no answer: ${r.error}` : `${r.status} ${detail}`;
        failures.set(why, (failures.get(why) ?? 0) + 1);
      }
    }
  }),
);
clearInterval(sampler);
timeline.push({ t: Math.round((performance.now() - t0) / 1000), ...memory(server.pid) });
const diedDuring = exited;
server.kill('SIGTERM');
await new Promise((r) => (exited !== null ? r() : server.once('exit', r)));
rmSync(dir, { recursive: true, force: true });

latencies.sort((a, b) => a - b);
const pct = (p) => (latencies.length ? latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))].toFixed(1) : '-');
const failed = [...failures.values()].reduce((s, n) => s + n, 0);
console.log(`\nvalid requests: ${validCount} (${(validCount / (duration / 1000)).toFixed(0)}/s), p50 ${pct(50)} ms, p99 ${pct(99)} ms, max ${latencies.at(-1)?.toFixed(0) ?? '-'} ms; failed ${failed}`);
for (const [why, n] of failures) console.log(`  ${n}x ${why}`);
console.log(`runaway requests: ${JSON.stringify(runawayStatuses)}`);
console.log('\nRSS over time (MB): t(s)  server total (largest)  sandbox total (largest, children)');
for (const m of timeline) console.log(`  ${String(m.t).padStart(4)}  ${m.server.toFixed(0).padStart(5)} (${m.maxServer.toFixed(0)})  ${m.sandbox.toFixed(0).padStart(5)} (${m.maxSandbox.toFixed(0)}, ${m.sandboxes})`);
const first = timeline[1] ?? timeline[0];
const last = timeline.at(-1);
console.log(`server RSS ${first.server.toFixed(0)} -> ${last.server.toFixed(0)} MB (${(((last.server - first.server) / first.server) * 100).toFixed(0)}% from the first sample under load)`);
if (diedDuring !== null) console.log(`the server exited with ${diedDuring} during the soak:\n${output.slice(-2000)}`);
