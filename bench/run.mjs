// `npm run bench`: starts the proxy on the fixture, checks every workload's answer, drives each with autocannon from a
// second process on loopback, samples the server's resident memory, runs the responsiveness check and the in-process
// scaling table, and prints one table.
//
//   npm run bench -- [--duration 10] [--connections 20] [--workers N] [--only TEXT] [--no-scaling] [--warmup 2]
import { spawn, execFileSync } from 'node:child_process';
import { readdirSync, writeFileSync, mkdirSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isDeepStrictEqual, parseArgs } from 'node:util';
import { writeFixture, workloads, runaway } from './fixture.mjs';
import { freePort, load, waitReady } from './harness.mjs';
import { memory } from './proc-memory.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({
  options: {
    duration: { type: 'string', default: '10' },
    warmup: { type: 'string', default: '2' },
    connections: { type: 'string', default: '20' },
    workers: { type: 'string', default: String(availableParallelism()) },
    only: { type: 'string' },
    'no-scaling': { type: 'boolean', default: false },
  },
});
const duration = Number(args.duration);
const connections = Number(args.connections);

/** Peak RSS (MB) while sampling: of the largest server process, of the largest sandbox child, and of the whole tree. */
function sampler(pid) {
  const peak = { server: 0, sandbox: 0, total: 0 };
  const timer = setInterval(() => {
    const m = memory(pid);
    peak.server = Math.max(peak.server, m.maxServer);
    peak.sandbox = Math.max(peak.sandbox, m.maxSandbox);
    peak.total = Math.max(peak.total, m.server + m.sandbox);
  }, 200);
  return { peak, stop: () => clearInterval(timer), reset: () => Object.assign(peak, { server: 0, sandbox: 0, total: 0 }) };
}

async function check(base, w) {
  const res = await fetch(base + w.path, { method: w.method, body: w.body ? JSON.stringify(w.body) : undefined, headers: w.body ? { 'content-type': 'application/json' } : {} });
  const body = await res.json();
  if (res.status !== 200) throw new Error(`${w.name}: status ${res.status}: ${JSON.stringify(body).slice(0, 500)}`);
  if (w.expected && !isDeepStrictEqual(body, w.expected)) {
    throw new Error(`${w.name}: wrong answer:\n got      ${JSON.stringify(body).slice(0, 400)}\n expected ${JSON.stringify(w.expected).slice(0, 400)}`);
  }
}

const fixtureDir = join(root, 'bench/.tmp/fixture');
const configFile = writeFixture(fixtureDir);
const port = await freePort();
const base = `http://127.0.0.1:${port}`;
execFileSync(process.execPath, [join(root, 'scripts/build.mjs')], { stdio: 'ignore' });
const server = spawn(process.execPath, [join(root, 'bin/cfgu.js'), 'serve', '--config', configFile, '--port', String(port), '--host', '127.0.0.1', '--workers', args.workers], {
  stdio: ['ignore', 'ignore', 'inherit'],
  env: { ...process.env, CONFIGU_LOG_ENABLED: 'false' },
});
const stopServer = () => server.exitCode === null && server.kill('SIGTERM');
process.on('exit', stopServer);

const rows = [];
try {
  await waitReady(base);
  const mem = sampler(server.pid);
  for (const w of workloads.filter((w) => !args.only || w.name.includes(args.only))) {
    await check(base, w);
    const opts = { url: base + w.path, method: w.method, body: w.body ? JSON.stringify(w.body) : undefined, connections };
    if (Number(args.warmup) > 0) await load({ ...opts, duration: Number(args.warmup) });
    mem.reset();
    const r = await load({ ...opts, duration });
    rows.push({ workload: w.name, ...r, rssServerMb: mem.peak.server, rssSandboxMb: mem.peak.sandbox, rssTotalMb: mem.peak.total });
    console.error(`  measured: ${w.name}`);
  }

  // Responsiveness: /live latency while four endless-loop requests are always in flight.
  let stop = false;
  let runaways = 0;
  const statuses = new Map();
  const spinner = async () => {
    while (!stop) {
      const res = await fetch(`${base}/export`, { method: 'POST', body: JSON.stringify(runaway.body), headers: { 'content-type': 'application/json' } });
      await res.arrayBuffer();
      runaways++;
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
    }
  };
  const spinners = [spinner(), spinner(), spinner(), spinner()];
  await new Promise((r) => setTimeout(r, 300));
  const live = await load({ url: `${base}/live`, method: 'GET', connections: 4, duration: 5 });
  stop = true;
  await Promise.all(spinners);
  rows.push({ workload: `GET /live with 4 runaway expressions in flight (${runaways} runaways answered: ${[...statuses].map(([s, n]) => `${n}x${s}`).join(', ')})`, ...live });
  mem.stop();
} finally {
  stopServer();
}

const fmt = (n, d = 0) => (n === undefined ? '' : Number(n).toFixed(d));
const table = [
  '| workload | req/s | p50 ms | p99 ms | max ms | errors | non-2xx | peak RSS server / sandbox process (MB) |',
  '|---|---|---|---|---|---|---|---|',
  ...rows.map(
    (r) =>
      `| ${r.workload} | ${fmt(r.rps)} | ${fmt(r.p50, 1)} | ${fmt(r.p99, 1)} | ${fmt(r.max, 1)} | ${r.errors} | ${r.non2xx} | ${r.rssServerMb ? `${fmt(r.rssServerMb)} / ${fmt(r.rssSandboxMb)}` : ''} |`,
  ),
];
const liveRps = rows.find((r) => r.workload === 'GET /live')?.rps;
const ten = rows.find((r) => r.workload.startsWith('10 keys'));
console.log(`\ncfgu benchmark: ${args.workers} worker(s), ${connections} connections, ${duration} s per workload, ${new Date().toISOString()}\n`);
console.log(table.join('\n'));
if (liveRps && ten) console.log(`\n10-key workload at ${((100 * ten.rps) / liveRps).toFixed(0)}% of the same run's /live figure.`);

let scaling = '';
if (!args['no-scaling']) {
  scaling = execFileSync(join(root, 'node_modules/.bin/tsx'), [join(root, 'bench/scaling.ts')], { encoding: 'utf8' });
  console.log(`\n${scaling}`);
}
mkdirSync(join(root, 'bench/.tmp'), { recursive: true });
writeFileSync(join(root, 'bench/.tmp/last-run.md'), `${table.join('\n')}\n\n${scaling}`);
