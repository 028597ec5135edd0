// The program bench/trace-instructions.mjs runs under valgrind: the real app in this process (Fastify's inject, the
// fixture's JSON-file stores, one sandbox child), N requests of the 10-key export, with metrics on and tracing as the
// variant says; nothing is measured here, valgrind counts the instructions of the whole run.
//   node <bundle of this file> {off|sampled-out|protobuf|json} N
// Variants: off (no tracing code loaded), sampled-out (tracing started, the sampler keeps nothing), protobuf / json
// (every request sampled and its spans exported over OTLP/HTTP in that encoding to bench/otlp-sink.mjs, another
// process). Batches go when full (512 spans, the default size): the delay is set so long
// that valgrind's slowness does not turn timer-driven small batches into the common case.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createStoreRegistry, loadConfiguration } from '../src/config/index.js';
import { createSandboxEvaluator } from '../src/expressions/index.js';
import { buildServer, settingsWith } from '../src/server/index.js';
import { createLogger } from '../src/server/observe/logger.js';
import { startTracing } from '../src/server/observe/tracing.js';
// @ts-expect-error the fixture is plain JavaScript
import { tenKeys, writeFixture } from './fixture.mjs';

const variant = process.argv[2] ?? 'off';
const requests = Number(process.argv[3] ?? 1000);
if (!['off', 'sampled-out', 'protobuf', 'json'].includes(variant) || !(requests > 0)) {
  process.stderr.write('usage: node trace-instructions-app.js {off|sampled-out|protobuf|json} N\n');
  process.exit(2);
}

let sink: ChildProcess | undefined;
let tracing: ReturnType<typeof startTracing>;
if (variant !== 'off') {
  // The driver runs a bundle of this file from elsewhere and names the sink's path.
  sink = spawn(process.execPath, [process.env.CFGU_OTLP_SINK ?? join(import.meta.dirname, 'otlp-sink.mjs')]);
  const port = await new Promise<number>((resolve) => sink!.stdout!.once('data', (d: Buffer) => resolve(Number(String(d).trim()))));
  tracing = startTracing({
    OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`,
    OTEL_EXPORTER_OTLP_PROTOCOL: variant === 'json' ? 'http/json' : 'http/protobuf',
    OTEL_TRACES_SAMPLER: variant === 'sampled-out' ? 'always_off' : 'always_on',
    OTEL_BSP_SCHEDULE_DELAY: '100000000',
  });
}

const dir = mkdtempSync(join(tmpdir(), 'cfgu-trace-instructions-'));
const registry = createStoreRegistry(await loadConfiguration({ file: writeFixture(dir) }), { logger: { warn: () => undefined } });
await registry.init();
const evaluator = createSandboxEvaluator({ workers: 1, spares: 0 });
await evaluator.ready();
const settings = settingsWith({ metrics: { enabled: true }, log: { enabled: false } });
const app = await buildServer({ registry, evaluator, settings, logger: createLogger(settings), auditLogger: false, ready: true });
const inject = { method: 'POST' as const, url: '/export', headers: { 'content-type': 'application/json' }, payload: JSON.stringify(tenKeys.body) };
for (let i = 0; i < requests; i++) {
  const r = await app.inject(inject);
  if (r.statusCode !== 200) throw new Error(`answer ${r.statusCode}: ${r.body.slice(0, 200)}`);
  // Let the exporter's sockets and timers run now and then, as between a server's requests.
  if (i % 100 === 99) await new Promise((r) => setImmediate(r));
}
await tracing?.shutdown();
await app.close();
await registry.close();
await evaluator.close();
sink?.kill();
rmSync(dir, { recursive: true, force: true });
process.exit(0);
