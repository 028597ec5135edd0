// The cost of POST /explain against POST /export for the same body: the 10-key (W10) and 100-key (W100) workloads of
// bench/fixture.mjs, against one server (`--workers 1`). Each body's answers are checked first (the export's is the
// expected object; the explanation is `ok` and its `values` are that object). Rounds alternate between the two
// routes so that the machine's load, which moves, falls on both alike. Compared: CPU time per request (user + system
// of the server process and its sandbox children, from /proc before and after each round), which stays put on a
// shared machine where throughput mostly measures the neighbours; req/s and latency are shown too. The answer sizes
// are those of one request.
//
//   npm run build && node bench/explain-http.mjs [--duration 8] [--rounds 3] [--connections 10]
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isDeepStrictEqual, parseArgs } from 'node:util';
import { workloads, writeFixture } from './fixture.mjs';
import { cpuSeconds, freePort, load, waitReady } from './harness.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({
  options: {
    duration: { type: 'string', default: '8' },
    rounds: { type: 'string', default: '3' },
    connections: { type: 'string', default: '10' },
  },
});

const bodies = [
  { ...workloads.find((w) => w.name.startsWith('10 keys')), name: 'W10' },
  { ...workloads.find((w) => w.name.startsWith('100 keys')), name: 'W100' },
];

const config = writeFixture(join(root, 'bench', '.tmp', 'explain-http'));
const port = await freePort();
const server = spawn(process.execPath, [join(root, 'bin/cfgu.js'), 'serve', '--config', config, '--port', String(port), '--host', '127.0.0.1', '--workers', '1'], {
  // Request lines off as in every benchmark; the audit lines stay (default) and cost the same on both routes.
  env: { ...process.env, CONFIGU_LOG_ENABLED: 'false' },
  stdio: ['ignore', 'ignore', 'inherit'],
});
const base = `http://127.0.0.1:${port}`;

/** POST `body` to `path`; on a loaded machine the very first (cold) request may run out of expression time: retry. */
async function checked(path, w) {
  for (let attempt = 1; ; attempt++) {
    const res = await fetch(`${base}${path}`, { method: 'POST', body: JSON.stringify(w.body), headers: { 'content-type': 'application/json' } });
    const text = await res.text();
    const answer = JSON.parse(text);
    const ok = path === '/export' ? isDeepStrictEqual(answer, w.expected) : answer.ok === true && isDeepStrictEqual(answer.values, w.expected);
    if (res.status === 200 && ok) return Buffer.byteLength(text);
    if (attempt === 5) throw new Error(`${w.name} ${path}: ${res.status} ${text.slice(0, 300)}`);
  }
}

const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

try {
  await waitReady(base);
  const targets = [];
  for (const w of bodies) {
    for (const path of ['/export', '/explain']) targets.push({ workload: w.name, path, body: JSON.stringify(w.body), bytes: await checked(path, w), rounds: [] });
  }
  // Warm-up: JIT, the body and schema caches, the sandbox children.
  for (const t of targets) await load({ url: `${base}${t.path}`, method: 'POST', body: t.body, connections: 4, duration: 4 });
  for (let round = 0; round < Number(args.rounds); round++) {
    for (const t of targets) {
      const before = cpuSeconds(server.pid);
      const r = await load({ url: `${base}${t.path}`, method: 'POST', body: t.body, connections: Number(args.connections), duration: Number(args.duration) });
      // A few 422s (an expression over its time limit when the machine stalls) are counted, not fatal.
      if (r.errors || r.non2xx > r.total / 100) throw new Error(`${t.workload} ${t.path}: ${r.errors} errors, ${r.non2xx} non-2xx of ${r.total}`);
      if (r.non2xx) process.stderr.write(`${t.workload} ${t.path}: ${r.non2xx} non-2xx of ${r.total}\n`);
      r.cpuMs = ((cpuSeconds(server.pid) - before) * 1000) / r.total;
      t.rounds.push(r);
      process.stderr.write(`round ${round + 1} ${t.workload} ${t.path}: ${r.rps.toFixed(0)} req/s, p50 ${r.p50} ms, ${r.cpuMs.toFixed(3)} ms CPU/request\n`);
    }
  }
  // The least disturbed round of each (its lowest CPU per request) measures the server; the median is shown too.
  const best = (rs) => Math.min(...rs.map((r) => r.cpuMs));
  console.log('| body | route | answer (bytes) | CPU ms/request (best round) | CPU ms/request (median) | req/s (best round) | p50 / p99 ms (best round) | CPU vs export (best rounds) |');
  console.log('|---|---|---|---|---|---|---|---|');
  for (const t of targets) {
    const cpu = best(t.rounds);
    const r = t.rounds.find((x) => x.cpuMs === cpu);
    const exported = targets.find((x) => x.workload === t.workload && x.path === '/export');
    const ratio = t.path === '/export' ? '—' : `${(cpu / best(exported.rounds)).toFixed(2)}x`;
    console.log(
      `| ${t.workload} | POST ${t.path} | ${t.bytes} | ${cpu.toFixed(3)} | ${median(t.rounds.map((x) => x.cpuMs)).toFixed(3)} | ${r.rps.toFixed(0)} | ${r.p50} / ${r.p99} | ${ratio} |`,
    );
  }
} finally {
  server.kill('SIGTERM');
}
