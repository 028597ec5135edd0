// What tracing costs a 10-key export (W10) in the server, layer by layer: the built binary, one server process
// (`--workers 1`) and one sandbox child per variant, all up at once, rounds alternating (the order rotates), the
// OTLP sink in a process of its own (bench/otlp-sink.mjs). For each round: requests per second, and the CPU time per
// request of the server process, of its main thread alone, and of its sandbox child (from /proc). Metrics on and the
// request log off in every variant.
//
//   node bench/trace-ablation.mjs [--rate 0] [--duration 5] [--rounds 5] [--connections 10] [--variants off,sampled-out,protobuf]
//
// --rate 0 loads each server as fast as it answers; a number fixes the rate (autocannon's overallRate), so that the
// variants are compared at the same request rate. Variants:
//   off          no tracing (OTEL_* unset)
//   sampled-out  the SDK started, sampler always_off: the hooks and the sampler run, no span is recorded
//   protobuf     every request traced, exported over OTLP/HTTP protobuf (the default)
//   json         the same, exported as JSON
//   NAME=DIR     every request traced, run from another built checkout DIR (to measure a change to src/ before
//                committing it); `NAME=DIR:VAR=VALUE:...` adds environment variables to that variant
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import { tenKeys, writeFixture } from './fixture.mjs';
import { freePort, waitReady } from './harness.mjs';

const root = join(import.meta.dirname, '..');
const { values: args } = parseArgs({
  options: {
    rate: { type: 'string', default: '0' },
    duration: { type: 'string', default: '5' },
    rounds: { type: 'string', default: '5' },
    connections: { type: 'string', default: '10' },
    variants: { type: 'string', default: 'off,sampled-out,protobuf' },
  },
});
const BUILT_IN = {
  off: { env: {} },
  'sampled-out': { env: { OTEL_TRACES_SAMPLER: 'always_off' }, traced: true },
  protobuf: { env: { OTEL_TRACES_SAMPLER: 'always_on' }, traced: true },
  json: { env: { OTEL_TRACES_SAMPLER: 'always_on', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' }, traced: true },
};
const variants = args.variants.split(',').map((spec) => {
  if (BUILT_IN[spec]) return { name: spec, ...BUILT_IN[spec] };
  const m = /^([\w-]+)=([^:]+)((?::[A-Z_][A-Z0-9_]*=[^:]*)*)$/.exec(spec);
  if (!m) throw new Error(`unknown variant ${spec}`);
  const env = Object.fromEntries(m[3].split(':').filter(Boolean).map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]));
  return { name: m[1], dir: m[2], env: { OTEL_TRACES_SAMPLER: 'always_on', ...env }, traced: true };
});

const sink = spawn(process.execPath, [join(root, 'bench/otlp-sink.mjs')], { stdio: ['ignore', 'pipe', 'inherit'] });
const sinkPort = await new Promise((r) => sink.stdout.once('data', (d) => r(Number(String(d).trim()))));
const config = writeFixture(join(root, 'bench/.tmp/trace-ablation'));
const servers = [];
process.on('exit', () => {
  for (const s of servers) s.child.kill('SIGTERM');
  sink.kill('SIGKILL');
});
for (const v of variants) {
  const env = {
    ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^(CONFIGU_|OTEL_)/.test(k))),
    CONFIGU_EXPRESSION_WORKERS: '1',
    CONFIGU_EXPRESSION_SPARES: '0',
    CONFIGU_METRICS_ENABLED: 'true',
    CONFIGU_LOG_ENABLED: 'false',
    ...(v.traced ? { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `http://127.0.0.1:${sinkPort}/${v.name}/v1/traces` } : {}),
    ...v.env,
  };
  // The request log is off, so there is no `listening` line to read a port from: a free port is picked here.
  const port = await freePort();
  const child = spawn(process.execPath, [join(v.dir ?? root, 'bin/cfgu.js'), 'serve', '--config', config, '--port', String(port), '--host', '127.0.0.1', '--workers', '1'], {
    stdio: ['ignore', 'ignore', 'inherit'],
    env,
  });
  servers.push({ v, child, base: `http://127.0.0.1:${port}` });
}

const ticks = (path) => {
  try {
    const f = readFileSync(path, 'utf8').split(') ')[1].split(' ');
    return (Number(f[11]) + Number(f[12])) * 10; // ms (USER_HZ 100)
  } catch {
    return 0;
  }
};
const childrenOf = (pid) => {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
  } catch {
    return [];
  }
};
const cpu = (pid) => ({
  server: ticks(`/proc/${pid}/stat`),
  main: ticks(`/proc/${pid}/task/${pid}/stat`),
  child: childrenOf(pid).reduce((t, c) => t + ticks(`/proc/${c}/stat`), 0),
});
const body = JSON.stringify(tenKeys.body);
const load = (base, rate, duration) =>
  new Promise((resolve, reject) =>
    autocannon(
      { url: `${base}/export`, method: 'POST', body, headers: { 'content-type': 'application/json' }, connections: Number(args.connections), duration, ...(rate ? { overallRate: rate } : {}) },
      (e, r) => (e ? reject(e) : resolve(r)),
    ),
  );

for (const s of servers) {
  await waitReady(s.base, 120_000);
  const r = await fetch(`${s.base}/export`, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
  const answer = await r.text();
  if (r.status !== 200 || answer !== JSON.stringify(tenKeys.expected)) throw new Error(`${s.v.name}: wrong answer ${r.status} ${answer.slice(0, 200)}`);
  await load(s.base, 0, 2); // warm-up
}
const rows = new Map(variants.map((v) => [v.name, []]));
for (let round = 0; round < Number(args.rounds); round++) {
  for (let i = 0; i < servers.length; i++) {
    const s = servers[(i + round) % servers.length];
    const before = cpu(s.child.pid);
    const out = await load(s.base, Number(args.rate), Number(args.duration));
    const after = cpu(s.child.pid);
    const n = Math.max(1, out.requests.total);
    const row = {
      rps: out.requests.average,
      server: ((after.server - before.server) * 1000) / n,
      main: ((after.main - before.main) * 1000) / n,
      child: ((after.child - before.child) * 1000) / n,
      refused: out.non2xx + out.errors,
    };
    rows.get(s.v.name).push(row);
    console.error(`round ${round + 1}, ${s.v.name}: ${row.rps.toFixed(0)} req/s; CPU µs a request: server ${row.server.toFixed(0)} (main thread ${row.main.toFixed(0)}), sandbox child ${row.child.toFixed(0)}`);
  }
}
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const first = variants[0].name;
const m = (name, f) => median(rows.get(name).map(f));
console.log(`trace-ablation: ${args.rounds} rounds x ${args.duration} s, ${args.rate === '0' ? 'as fast as answered' : `${args.rate} req/s`}, ${args.connections} connections`);
console.log('| variant | W10 req/s | vs first | server CPU µs a request | main thread | sandbox child | server + child | vs first | refused |');
console.log('|---|---|---|---|---|---|---|---|---|');
const pct = (a, b) => `${a >= b ? '+' : ''}${((100 * (a - b)) / b).toFixed(1)}%`;
for (const v of variants) {
  const total = (r) => r.server + r.child;
  console.log(
    `| ${v.name} | ${m(v.name, (r) => r.rps).toFixed(0)} | ${pct(m(v.name, (r) => r.rps), m(first, (r) => r.rps))} | ${m(v.name, (r) => r.server).toFixed(0)} | ${m(v.name, (r) => r.main).toFixed(0)} | ` +
      `${m(v.name, (r) => r.child).toFixed(0)} | ${m(v.name, total).toFixed(0)} | ${pct(m(v.name, total), m(first, total))} | ${rows.get(v.name).reduce((t, r) => t + r.refused, 0)} |`,
  );
}
// Each server sends its last spans on SIGTERM; then the sink reports what it received.
await Promise.all(servers.map((s) => new Promise((r) => (s.child.once('exit', r), s.child.kill('SIGTERM')))));
const spans = new Promise((r) => sink.stdout.on('data', (d) => r(String(d).trim())));
sink.kill('SIGTERM');
console.log(`OTLP sink: ${await spans}`);
