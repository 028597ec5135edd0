// A/B of two builds of cfgu by server CPU time per request under the same load. Each directory is a complete, built
// checkout (bin/, dist/, node_modules), e.g. the base commit unpacked next to this one:
//
//   mkdir -p /tmp/cfgu-a && git archive <base> | tar -x -C /tmp/cfgu-a && ln -s "$PWD/node_modules" /tmp/cfgu-a/
//   (cd /tmp/cfgu-a && node scripts/build.mjs) && node scripts/build.mjs
//   node bench/ab-builds.mjs --a /tmp/cfgu-a --b . [--rounds 4] [--requests 8000] [--connections 10] [--workloads live,w10,w100,pipeline,w1000] [--log]
//
// --a-node / --b-node: the Node binary each build runs on (default: this one); a build's native modules must be built
// for it (a copy of the project installed on that Node).
//
// --log: request and audit lines on (the shipped default), each server's stdout appended to a file of its own in a
// temporary folder (removed at the end), as a log collector reading a file would have it; without it, lines are off.
//
// Both servers (one worker process each, with its sandbox children) run side by side on one fixture (bench/fixture.mjs,
// json-file stores). Every round sends exactly --requests requests to each server in turn, the order flipped every
// round, so that the machine's load, which moves, falls on both alike. The figure is CPU time (user + system) of each
// server's whole process tree, read from /proc before and after the round, divided by the requests: on a shared
// machine throughput mostly measures the neighbours, while the CPU a request needs stays put. Best and median round.
import { spawn } from 'node:child_process';
import { mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isDeepStrictEqual, parseArgs } from 'node:util';
import { workloads as allWorkloads, writeFixture } from './fixture.mjs';
import { cpuSeconds, freePort, waitReady } from './harness.mjs';

const here = dirname(fileURLToPath(import.meta.url));

// The load generator re-runs this file with --load: autocannon in its own process, a fixed number of requests.
if (process.argv[2] === '--load') {
  const { default: autocannon } = await import('autocannon');
  const o = JSON.parse(process.argv[3]);
  const r = await autocannon({ url: o.url, method: o.method, body: o.body, headers: o.body ? { 'content-type': 'application/json' } : {}, connections: o.connections, amount: o.amount, pipelining: 1 });
  process.stdout.write(JSON.stringify({ total: r.requests.total, non2xx: r.non2xx, errors: r.errors + r.timeouts, rps: r.requests.average }) + '\n');
  process.exit(0);
}

const { values: args } = parseArgs({
  options: {
    a: { type: 'string' },
    b: { type: 'string' },
    rounds: { type: 'string', default: '4' },
    requests: { type: 'string', default: '8000' },
    connections: { type: 'string', default: '10' },
    workloads: { type: 'string', default: 'live,w10,w100' },
    log: { type: 'boolean', default: false },
    'a-node': { type: 'string', default: process.execPath },
    'b-node': { type: 'string', default: process.execPath },
  },
});
if (!args.a || !args.b) {
  console.error('usage: node bench/ab-builds.mjs --a DIR --b DIR [--rounds 4] [--requests 8000] [--connections 10] [--workloads live,w10,w100,pipeline,w1000] [--log] [--a-node PATH] [--b-node PATH]');
  process.exit(2);
}
const builds = [
  { name: 'A', dir: resolve(args.a), node: args['a-node'] },
  { name: 'B', dir: resolve(args.b), node: args['b-node'] },
];
const byName = { live: allWorkloads[0], w10: allWorkloads[1], w100: allWorkloads[2], pipeline: allWorkloads[3], w1000: allWorkloads[4] };
const chosen = args.workloads.split(',').map((w) => {
  if (!byName[w]) throw new Error(`unknown workload ${w} (live, w10, w100, pipeline, w1000)`);
  return { id: w, ...byName[w] };
});

function load(options) {
  return new Promise((resolveLoad, reject) => {
    const child = spawn(process.execPath, [fileURLToPath(import.meta.url), '--load', JSON.stringify(options)], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.on('exit', (code) => (code === 0 ? resolveLoad(JSON.parse(out)) : reject(new Error(`load generator exited ${code}`))));
  });
}

const config = writeFixture(join(here, '.tmp', 'ab-builds'));
const logDir = args.log ? mkdtempSync(join(tmpdir(), 'cfgu-ab-logs-')) : undefined;
process.on('exit', () => logDir && rmSync(logDir, { recursive: true, force: true }));
const servers = [];
async function start(build) {
  const port = await freePort();
  const child = spawn(build.node, [join(build.dir, 'bin/cfgu.js'), 'serve', '--config', config, '--port', String(port), '--host', '127.0.0.1', '--workers', '1'], {
    env: { ...process.env, CONFIGU_LOG_ENABLED: args.log ? 'true' : 'false' },
    stdio: ['ignore', logDir ? openSync(join(logDir, `${build.name}.log`), 'a') : 'ignore', 'inherit'],
  });
  servers.push(child);
  const base = `http://127.0.0.1:${port}`;
  await waitReady(base);
  return { ...build, base, pid: child.pid };
}

const median = (xs) => [...xs].sort((x, y) => x - y)[xs.length >> 1];
const uptime = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');

try {
  const started = await Promise.all(builds.map(start));
  const results = new Map();
  const loads = [];
  for (const w of chosen) {
    // Check each answer once, warm up (JIT, caches, sandbox children).
    for (const s of started) {
      for (let attempt = 1; ; attempt++) {
        const res = await fetch(`${s.base}${w.path}`, { method: w.method, body: w.body ? JSON.stringify(w.body) : undefined, headers: { 'content-type': 'application/json' } });
        const body = await res.json();
        if (res.status === 200 && (!w.expected || isDeepStrictEqual(body, w.expected))) break;
        if (attempt === 5) throw new Error(`${s.name} ${w.id}: ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
      }
      await load({ url: `${s.base}${w.path}`, method: w.method, body: w.body ? JSON.stringify(w.body) : undefined, connections: 4, amount: Math.min(2000, Number(args.requests)) });
    }
    for (let round = 0; round < Number(args.rounds); round++) {
      const order = round % 2 === 0 ? started : [...started].reverse();
      for (const s of order) {
        loads.push(uptime());
        const before = cpuSeconds(s.pid);
        const r = await load({ url: `${s.base}${w.path}`, method: w.method, body: w.body ? JSON.stringify(w.body) : undefined, connections: Number(args.connections), amount: Number(args.requests) });
        const cpuMs = ((cpuSeconds(s.pid) - before) * 1000) / r.total;
        if (r.errors || r.non2xx > r.total / 100) throw new Error(`${s.name} ${w.id}: ${r.errors} errors, ${r.non2xx} non-2xx of ${r.total}`);
        const key = `${w.id}:${s.name}`;
        if (!results.has(key)) results.set(key, []);
        results.get(key).push({ cpuMs, rps: r.rps });
        process.stderr.write(`${w.id} round ${round + 1} ${s.name}: ${cpuMs.toFixed(4)} ms CPU/request, ${r.rps.toFixed(0)} req/s, load ${uptime()}\n`);
      }
    }
  }
  console.log(`A = ${builds[0].dir} (${builds[0].node}), B = ${builds[1].dir} (${builds[1].node}); ${args.rounds} rounds x ${args.requests} requests, ${args.connections} connections`);
  console.log('| workload | A CPU ms/req best | A median | B CPU ms/req best | B median | B vs A (best) | B vs A (median) | rounds A | rounds B |');
  console.log('|---|---|---|---|---|---|---|---|---|');
  for (const w of chosen) {
    const a = results.get(`${w.id}:A`).map((r) => r.cpuMs);
    const b = results.get(`${w.id}:B`).map((r) => r.cpuMs);
    const pct = (x, y) => `${((y / x - 1) * 100).toFixed(1)}%`;
    console.log(
      `| ${w.id} | ${Math.min(...a).toFixed(4)} | ${median(a).toFixed(4)} | ${Math.min(...b).toFixed(4)} | ${median(b).toFixed(4)} | ${pct(Math.min(...a), Math.min(...b))} | ${pct(median(a), median(b))} | ${a.map((x) => x.toFixed(3)).join(' ')} | ${b.map((x) => x.toFixed(3)).join(' ')} |`,
    );
  }
  console.log(`load average (1/5/15 min) at the start of each measured round: ${loads.join('; ')}`);
} finally {
  for (const s of servers) s.kill('SIGTERM');
}
