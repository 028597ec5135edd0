// What metrics, traces and the request log line cost in CPU time per request, measured in one process with Fastify's
// inject (no sockets, no load generator), so that the figure depends as little as possible on how busy the machine
// is: CPU time is counted for this process and its sandbox child (from /proc), whatever share of the CPU they get.
// Variants are interleaved round by round, many short rounds. Contention only ever adds CPU time (cache misses, lost
// turbo, context switches), so the smallest figure of a variant over its rounds is the best estimate of its own cost;
// the median is shown next to it.
//   Phase 1 (no tracing SDK loaded): base, metrics on, log line with the synchronous writer, with the asynchronous one.
//   Phase 2 (tracing SDK started, every span exported over OTLP/HTTP to a sink in another process, 100% sampled):
//   metrics on without traces against metrics on with traces (both pay for the SDK's context manager being on).
// Each round runs every variant back to back, so the ratio of a variant to the first row within one round compares
// two measurements taken under the same load: the median of those per-round ratios ("paired") is the figure least
// moved by a machine whose load changes from round to round.
// Log lines go to stdout: run it with stdout into a pipe, as a log collector would read it:
//   node_modules/.bin/tsx bench/observability-cpu.ts [rounds] [requests] [phases: 1, 2 or 12] | cat > /dev/null
// (the table is on stderr)
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pino, type Logger } from 'pino';
import type { FastifyInstance } from 'fastify';
import { createStoreRegistry, loadConfiguration } from '../src/config/index.js';
import { createSandboxEvaluator } from '../src/expressions/index.js';
import { buildServer, settingsWith } from '../src/server/index.js';
import { createLogger, REDACT_PATHS } from '../src/server/observe/logger.js';
import { startTracing } from '../src/server/observe/tracing.js';
// @ts-expect-error the fixture is plain JavaScript
import { tenKeys, writeFixture } from './fixture.mjs';

const rounds = Number(process.argv[2] ?? 15);
const requests = Number(process.argv[3] ?? 400);
const phases = process.argv[4] ?? '12';
const out = (line: string) => process.stderr.write(`${line}\n`);

const cpuMs = (pid: number): number => {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(f[11]) + Number(f[12])) * 10;
  } catch {
    return 0;
  }
};

const config = writeFixture(join(import.meta.dirname, '.tmp', 'observability-cpu'));
const configuration = await loadConfiguration({ file: config });
const registry = createStoreRegistry(configuration, { logger: { warn: () => undefined } });
await registry.init();
const evaluator = createSandboxEvaluator({ workers: 1, spares: 0 });
await evaluator.ready();
const processCpu = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000 + evaluator.pids().reduce((a, p) => a + cpuMs(p), 0);
};

const syncLogger = (): Logger =>
  pino(
    { level: 'info', base: { pid: process.pid }, timestamp: pino.stdTimeFunctions.isoTime, redact: { paths: REDACT_PATHS, censor: '[redacted]' }, formatters: { level: (label) => ({ level: label }) } },
    pino.destination({ dest: 1, sync: true }),
  );

async function app(metrics: boolean, log: 'off' | 'sync' | 'async'): Promise<FastifyInstance> {
  const settings = settingsWith({ metrics: { enabled: metrics }, log: { enabled: log !== 'off' } });
  return buildServer({ registry, evaluator, settings, logger: log === 'sync' ? syncLogger() : createLogger(settings), ready: true });
}

const WORKLOADS = [
  { name: 'GET /live', inject: { method: 'GET' as const, url: '/live' } },
  { name: 'W10', inject: { method: 'POST' as const, url: '/export', headers: { 'content-type': 'application/json' }, payload: JSON.stringify(tenKeys.body) } },
];

const notOk = new Map<string, number>();

async function measure(variants: Array<{ name: string; app: FastifyInstance }>, results: Map<string, number[]>) {
  for (const v of variants) for (const w of WORKLOADS) for (let i = 0; i < 300; i++) await v.app.inject(w.inject); // warm-up
  for (let round = 0; round < rounds; round++) {
    for (const w of WORKLOADS) {
      for (let k = 0; k < variants.length; k++) {
        const v = variants[(k + round) % variants.length]!;
        const before = processCpu();
        for (let i = 0; i < requests; i++) {
          const r = await v.app.inject(w.inject);
          // On a starved machine an expression can hit its CPU-time limit (422) or the sandbox can be busy (503): counted.
          if (r.statusCode !== 200) {
            if (r.statusCode !== 422 && r.statusCode !== 503) throw new Error(`${v.name} / ${w.name}: ${r.statusCode} ${r.body.slice(0, 200)}`);
            notOk.set(`${v.name}|${w.name}`, (notOk.get(`${v.name}|${w.name}`) ?? 0) + 1);
          }
        }
        const key = `${v.name}|${w.name}`;
        results.set(key, [...(results.get(key) ?? []), (processCpu() - before) / requests]);
      }
    }
  }
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const pct = (x: number) => `${x >= 0 ? '+' : ''}${x.toFixed(1)}%`;
function table(title: string, variants: string[], results: Map<string, number[]>) {
  out(`\n${title}\n`);
  out('| variant | workload | CPU ms per request: smallest of the rounds | vs first row | median of the rounds | vs first row | paired: median of the per-round ratios to the first row | answers not 200 |');
  out('|---|---|---|---|---|---|---|---|');
  for (const w of WORKLOADS) {
    const ref = results.get(`${variants[0]}|${w.name}`)!;
    for (const v of variants) {
      const xs = results.get(`${v}|${w.name}`)!;
      const min = Math.min(...xs);
      out(
        `| ${v} | ${w.name} | ${min.toFixed(4)} | ${pct((100 * (min - Math.min(...ref))) / Math.min(...ref))} | ${median(xs).toFixed(4)} | ` +
          `${pct((100 * (median(xs) - median(ref))) / median(ref))} | ${pct(100 * (median(xs.map((x, i) => x / ref[i]!)) - 1))} | ${notOk.get(`${v}|${w.name}`) ?? 0} |`,
      );
    }
  }
}

const phase1 = phases.includes('1')
  ? [
      { name: 'base: metrics off, log off', app: await app(false, 'off') },
      { name: 'metrics on', app: await app(true, 'off') },
      { name: 'log on, synchronous writer', app: await app(false, 'sync') },
      { name: 'log on, asynchronous writer', app: await app(false, 'async') },
      { name: 'shipped defaults: metrics on, log on (asynchronous)', app: await app(true, 'async') },
    ]
  : [];
if (phase1.length) {
  const r1 = new Map<string, number[]>();
  await measure(phase1, r1);
  table(`Phase 1: ${rounds} rounds x ${requests} requests per variant and workload`, phase1.map((v) => v.name), r1);
}
if (!phases.includes('2')) {
  for (const v of phase1) await v.app.close();
  await registry.close();
  await evaluator.close();
  process.exit(0);
}

// The OTLP sink in its own process (receiving spans is the collector's cost, not cfgu's); it counts the spans.
const sink = spawn(process.execPath, [join(import.meta.dirname, 'otlp-sink.mjs')]);
let sinkOut = '';
const sinkPort = await new Promise<number>((resolve) => sink.stdout.on('data', (d: Buffer) => ((sinkOut += d), /\n/.test(sinkOut) && resolve(Number(sinkOut.trim())))));
const metricsOnly = { name: 'metrics on (tracing SDK loaded, no spans)', app: await app(true, 'off') };
const tracing = startTracing({
  OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${sinkPort}`,
  OTEL_TRACES_SAMPLER: 'always_on',
  OTEL_BSP_MAX_QUEUE_SIZE: '200000',
  OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '4096',
  OTEL_BSP_SCHEDULE_DELAY: '500',
})!;
const phase2 = [metricsOnly, { name: 'metrics on + traces on (100% sampled, all exported)', app: await app(true, 'off') }];
const r2 = new Map<string, number[]>();
await measure(phase2, r2);
await tracing.shutdown();
table(`Phase 2: the same, tracing SDK started`, phase2.map((v) => v.name), r2);
sink.kill('SIGTERM');
await new Promise((r) => sink.once('exit', r));
out(`spans received by the sink: ${sinkOut.split('\n').find((l) => l.startsWith('spans')) ?? '?'}`);
for (const v of [...phase1, ...phase2]) await v.app.close();
await registry.close();
await evaluator.close();
