// Process layouts side by side: for each (server workers x sandbox children + spares), start the proxy on the bench
// fixture, read the whole process tree's resident memory once it is ready and idle, then drive the 10-key and the
// 100-key workloads with autocannon (bench/load.mjs, its own process) and record throughput, p99 and peak memory.
//
//   node bench/layouts.mjs [--duration 8] [--connections 20] [--layouts 1x1+0,1x1+1,1x2+1,2x2+1]
//
// A layout "WxC+S" is --workers W, CONFIGU_EXPRESSION_WORKERS=C, CONFIGU_EXPRESSION_SPARES=S. Prints a Markdown table
// with `uptime` before and after (the machine is shared: the load average belongs next to the figures).
import { execFileSync, spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { writeFixture, workloads } from './fixture.mjs';
import { load } from './harness.mjs';
import { memory } from './proc-memory.mjs';

/** Total resident memory of the tree below `pid`, in MB, with the process count. */
const treeRss = (pid) => {
  const m = memory(pid);
  return { mb: m.server + m.sandbox, processes: m.servers + m.sandboxes };
};

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({
  options: {
    duration: { type: 'string', default: '8' },
    warmup: { type: 'string', default: '2' },
    connections: { type: 'string', default: '20' },
    layouts: { type: 'string', default: '1x1+0,1x1+1,1x2+1,2x1+1,2x2+1' },
    idle: { type: 'string', default: '3' },
  },
});
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const uptime = () => execFileSync('uptime', { encoding: 'utf8' }).trim();

/** Starts `cfgu serve` with the layout; resolves with the child and its port once /ready answers 200. */
async function start(layout) {
  const [, w, c, s] = /^(\d+)x(\d+)\+(\d+)$/.exec(layout) ?? [];
  if (!w) throw new Error(`bad layout ${layout} (expected WxC+S)`);
  const env = { ...process.env, CONFIGU_LOG_ENABLED: 'false', CONFIGU_EXPRESSION_WORKERS: c, CONFIGU_EXPRESSION_SPARES: s };
  const server = spawn(process.execPath, [join(root, 'bin/cfgu.js'), 'serve', '--config', configFile, '--port', '0', '--host', '127.0.0.1', '--workers', w], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...env, CONFIGU_LOG_ENABLED: 'true' },
  });
  let out = '';
  server.stdout.on('data', (d) => (out += d));
  for (;;) {
    const m = /"port":(\d+)[^\n]*"msg":"ready"|"msg":"ready"[^\n]*"port":(\d+)/.exec(out);
    if (m) return { server, base: `http://127.0.0.1:${m[1] ?? m[2]}` };
    if (server.exitCode !== null) throw new Error(`server exited ${server.exitCode}`);
    await sleep(100);
  }
}

const configFile = writeFixture(join(root, 'bench/.tmp/fixture'));
const chosen = workloads.filter((w) => /^(10|100) keys/.test(w.name));
const before = uptime();
const rows = [];
for (const layout of args.layouts.split(',')) {
  const { server, base } = await start(layout);
  try {
    await sleep(Number(args.idle) * 1000);
    const idle = treeRss(server.pid);
    const row = { layout, processes: idle.processes, idleMb: idle.mb };
    let peak = idle.mb;
    const timer = setInterval(() => (peak = Math.max(peak, treeRss(server.pid).mb)), 200);
    for (const w of chosen) {
      const opts = { url: base + w.path, method: w.method, body: JSON.stringify(w.body), connections: Number(args.connections) };
      await load({ ...opts, duration: Number(args.warmup) });
      row[w.name.startsWith('100') ? 'w100' : 'w10'] = await load({ ...opts, duration: Number(args.duration) });
    }
    clearInterval(timer);
    row.peakMb = peak;
    rows.push(row);
    console.error(`  measured ${layout}`);
  } finally {
    server.kill('SIGTERM');
    await new Promise((r) => (server.exitCode !== null ? r() : server.once('exit', r)));
  }
}
const f = (n, d = 0) => Number(n).toFixed(d);
console.log(`\ncfgu layouts: node ${process.versions.node}, ${args.connections} connections, ${args.duration} s per workload, ${new Date().toISOString()}`);
console.log(`uptime before: ${before}\nuptime after:  ${uptime()}\n`);
console.log('| layout (workers x children + spares) | processes | idle RSS total MB | W10 req/s | W10 p99 ms | W100 req/s | W100 p99 ms | errors | peak RSS MB |');
console.log('|---|---|---|---|---|---|---|---|---|');
for (const r of rows) {
  const errors = r.w10.errors + r.w10.non2xx + r.w100.errors + r.w100.non2xx;
  console.log(`| ${r.layout} | ${r.processes} | ${f(r.idleMb)} | ${f(r.w10.rps)} | ${f(r.w10.p99, 1)} | ${f(r.w100.rps)} | ${f(r.w100.p99, 1)} | ${errors} | ${f(r.peakMb)} |`);
}
