// Where the time of metrics and traces goes: the real app in this process (Fastify's inject, the fixture's JSON-file
// stores, one sandbox child), N requests of one workload under the V8 CPU profiler (node:inspector), then the profile's
// self time grouped by the code it was spent in. The sandbox child is another process and is not profiled: shares are
// of this process's sampled time.
//   node --import tsx bench/observability-profile.ts {base|metrics|traces} [requests] [W10|live] [out.cpuprofile]
//     base:    metrics off, traces off
//     metrics: metrics on (the shipped default), traces off
//     traces:  metrics on, traces on (100% sampled, every span exported over OTLP/HTTP to a sink in another process)
// The request log line is off in every variant. The .cpuprofile opens in Chrome DevTools (Performance tab).
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { join } from 'node:path';
import { createStoreRegistry, loadConfiguration } from '../src/config/index.js';
import { createSandboxEvaluator } from '../src/expressions/index.js';
import { buildServer, settingsWith } from '../src/server/index.js';
import { createLogger } from '../src/server/observe/logger.js';
import { startTracing } from '../src/server/observe/tracing.js';
// @ts-expect-error the fixture is plain JavaScript
import { tenKeys, writeFixture } from './fixture.mjs';

const variant = process.argv[2] ?? 'metrics';
const requests = Number(process.argv[3] ?? 4000);
const workload = process.argv[4] ?? 'W10';
const outFile = process.argv[5];
if (!['base', 'metrics', 'traces'].includes(variant) || !['W10', 'live'].includes(workload) || !(requests > 0)) {
  process.stderr.write('usage: node --import tsx bench/observability-profile.ts {base|metrics|traces} [requests] [W10|live] [out.cpuprofile]\n');
  process.exit(2);
}

// The OTLP sink (traces only): receiving spans is the collector's cost, not cfgu's.
let sink: ChildProcess | undefined;
let sinkOut = '';
if (variant === 'traces') {
  sink = spawn(process.execPath, [join(import.meta.dirname, 'otlp-sink.mjs')]);
  const port = await new Promise<number>((resolve) => sink!.stdout!.on('data', (d: Buffer) => ((sinkOut += d), /\n/.test(sinkOut) && resolve(Number(sinkOut.trim())))));
  startTracing({
    OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`,
    OTEL_TRACES_SAMPLER: 'always_on',
    OTEL_BSP_MAX_QUEUE_SIZE: '200000',
    OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '4096',
    OTEL_BSP_SCHEDULE_DELAY: '500',
  });
}

const config = writeFixture(join(import.meta.dirname, '.tmp', 'observability-profile'));
const registry = createStoreRegistry(await loadConfiguration({ file: config }), { logger: { warn: () => undefined } });
await registry.init();
const evaluator = createSandboxEvaluator({ workers: 1, spares: 0 });
await evaluator.ready();
const settings = settingsWith({ metrics: { enabled: variant !== 'base' }, log: { enabled: false } });
// No audit lines either (they are the same in every variant).
const app = await buildServer({ registry, evaluator, settings, logger: createLogger(settings), auditLogger: false, ready: true });
const inject =
  workload === 'W10'
    ? { method: 'POST' as const, url: '/export', headers: { 'content-type': 'application/json' }, payload: JSON.stringify(tenKeys.body) }
    : { method: 'GET' as const, url: '/live' };

let notOk = 0;
const drive = async (n: number) => {
  for (let i = 0; i < n; i++) {
    const r = await app.inject(inject);
    if (r.statusCode !== 200) notOk++;
  }
};
await drive(Math.min(1000, requests)); // warm-up: JIT, caches, label sets

const session = new Session();
session.connect();
await session.post('Profiler.enable');
await session.post('Profiler.setSamplingInterval', { interval: 100 });
await session.post('Profiler.start');
const cpuBefore = process.cpuUsage();
await drive(requests);
const cpu = process.cpuUsage(cpuBefore);
const { profile } = await session.post('Profiler.stop');
session.disconnect();
if (outFile) writeFileSync(outFile, JSON.stringify(profile));

// Self time per node (sample deltas), grouped by where the code lives.
interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}
const nodes = new Map<number, Node>((profile.nodes as Node[]).map((n) => [n.id, n]));
const self = new Map<number, number>();
const samples = profile.samples ?? [];
const deltas = profile.timeDeltas ?? [];
for (let i = 0; i < samples.length; i++) self.set(samples[i]!, (self.get(samples[i]!) ?? 0) + (deltas[i] ?? 0));

const GROUPS: Array<[string, RegExp]> = [
  ['metrics: prom-client', /node_modules\/prom-client\//],
  ['metrics: src/server/observe/metrics.ts, metric-cells.ts, metric-sources.ts, cluster-metrics.ts', /src\/server\/observe\/(metrics|metric-cells|metric-sources|cluster-metrics)\.ts/],
  ['traces: @opentelemetry (SDK, exporter)', /node_modules\/@opentelemetry\//],
  ['traces: src/server/observe/tracing.ts', /src\/server\/observe\/tracing\.ts/],
  ['observation.ts, request-hooks.ts, observed-engine.ts (hooks and wrappers of both)', /src\/server\/observe\/(observation|request-hooks|observed-engine)\.ts/],
  ['async_hooks (context propagation)', /node:async_hooks|async_local_storage|async_hooks/],
];
const byGroup = new Map<string, number>();
const byFunction = new Map<string, number>();
let total = 0;
let idle = 0;
for (const [id, us] of self) {
  const n = nodes.get(id)!;
  const name = n.callFrame.functionName;
  total += us;
  if (name === '(idle)' || name === '(program)' || name === '(garbage collector)') {
    if (name === '(idle)') idle += us;
  }
  const group = GROUPS.find(([, re]) => re.test(n.callFrame.url))?.[0];
  if (!group) continue;
  byGroup.set(group, (byGroup.get(group) ?? 0) + us);
  const where = `${name || '(anonymous)'} ${n.callFrame.url.replace(/^.*\/(node_modules|src)\//, '$1/')}:${n.callFrame.lineNumber + 1}`;
  byFunction.set(where, (byFunction.get(where) ?? 0) + us);
}
const busy = total - idle;
const pct = (us: number) => `${((100 * us) / busy).toFixed(1)}%`;
const out = (s: string) => process.stdout.write(`${s}\n`);
out(`variant ${variant}, ${requests} x ${workload}; answers not 200: ${notOk}`);
out(`process CPU ${((cpu.user + cpu.system) / 1000 / requests).toFixed(4)} ms per request; profiled busy time ${(busy / 1000).toFixed(0)} ms (idle ${(idle / 1000).toFixed(0)} ms left out)`);
out('\n| code | self time | share of busy time |\n|---|---|---|');
let observability = 0;
for (const [g] of GROUPS) {
  const us = byGroup.get(g) ?? 0;
  observability += us;
  out(`| ${g} | ${(us / 1000).toFixed(1)} ms | ${pct(us)} |`);
}
out(`| **all of the above** | ${(observability / 1000).toFixed(1)} ms | **${pct(observability)}** |`);
out('\nTop functions in those groups (self time):');
for (const [f, us] of [...byFunction].sort((a, b) => b[1] - a[1]).slice(0, 15)) out(`  ${pct(us).padStart(6)}  ${f}`);

await app.close();
await registry.close();
await evaluator.close();
if (sink) {
  sink.kill('SIGTERM');
  await new Promise((r) => sink!.once('exit', r));
  out(`spans received by the sink: ${sinkOut.split('\n').find((l) => l.startsWith('spans'))?.slice(6) ?? '?'}`);
}
