// What the OpenTelemetry SDK itself costs for the spans of one traced 10-key export (W10: the request, its command,
// its store read and its sandbox job, with the attributes src/server/observe/observed-engine.ts gives them), with no server around
// it: CPU time per request in a process that only makes spans, in four variants, each in a fresh process, rounds
// alternating:
//   spans only        the tracer provider with no span processor: start, attributes, end
//   batched, dropped  + the batch span processor (the specification's defaults), its exporter throwing batches away
//   protobuf          + OTLP/HTTP export, protobuf (cfgu's default), to bench/otlp-sink.mjs (a process of its own)
//   JSON              + OTLP/HTTP export, JSON, to the same sink
// The provider is made as src/server/observe/tracing.ts makes it (resource, parent-based always-on sampler, batch processor,
// the exporter packages cfgu loads). Compare the figures with a W10 request's CPU time (bench/observability.mjs,
// "W10 CPU ms/request"): the first two rows are the part of tracing no encoding or transport choice can remove.
//
//   node bench/trace-floor.mjs [--rounds 5] [--requests 100000]
import { spawn, spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const here = dirname(fileURLToPath(import.meta.url));
const VARIANTS = ['spans only', 'batched, dropped', 'protobuf', 'JSON'];

if (process.argv[2] === '--variant') {
  // One variant, one round: prints the CPU µs per request.
  const [variant, requests, sinkUrl] = [process.argv[3], Number(process.argv[4]), process.argv[5]];
  const load = createRequire(join(here, '..', 'package.json'));
  const api = load('@opentelemetry/api');
  const sdk = load('@opentelemetry/sdk-trace');
  const { resourceFromAttributes } = load('@opentelemetry/resources');
  const inner =
    variant === 'batched, dropped'
      ? { export: (_spans, done) => done({ code: 0 }), shutdown: async () => {} }
      : variant === 'protobuf'
        ? new (load('@opentelemetry/exporter-trace-otlp-proto').OTLPTraceExporter)({ url: `${sinkUrl}/v1/traces` })
        : variant === 'JSON'
          ? new (load('@opentelemetry/exporter-trace-otlp-http').OTLPTraceExporter)({ url: `${sinkUrl}/v1/traces` })
          : undefined;
  // Spans handed to the exporter and done with: the producer below waits (idle, no CPU) when the batch processor's
  // queue would otherwise fill up and drop spans, as a server's other work paces it.
  let exported = 0;
  const exporter = inner && {
    export: (spans, done) => inner.export(spans, (result) => ((exported += spans.length), done(result))),
    shutdown: () => inner.shutdown(),
  };
  const provider = new sdk.TracerProvider({
    resource: resourceFromAttributes({ 'service.name': 'cfgu', 'service.version': '1.0.0' }),
    sampler: new sdk.ParentBasedSampler({ root: new sdk.AlwaysOnSampler() }),
    spanProcessors: exporter ? [new sdk.BatchSpanProcessor({ exporter })] : [],
  });
  const tracer = provider.getTracer('cfgu', '1.0.0');
  const { SpanKind, ROOT_CONTEXT, trace } = api;
  const request = () => {
    const root = tracer.startSpan('POST /export', { kind: SpanKind.SERVER, attributes: { 'http.request.method': 'POST', 'http.route': '/export' } }, ROOT_CONTEXT);
    const inRequest = trace.setSpan(ROOT_CONTEXT, root);
    const command = tracer.startSpan('cfgu.command', { kind: SpanKind.INTERNAL, attributes: { 'cfgu.command.index': 0, 'cfgu.command.keys': 10, 'cfgu.store.name': 'main' } }, inRequest);
    const inCommand = trace.setSpan(inRequest, command);
    const read = tracer.startSpan('cfgu.store.read', { kind: SpanKind.INTERNAL, attributes: { 'cfgu.store.name': 'main', 'cfgu.store.type': 'json-file', 'cfgu.store.queries': 3 } }, inCommand);
    read.setAttribute('cfgu.store.from_backup', false);
    read.end();
    const job = tracer.startSpan('cfgu.sandbox.job', { kind: SpanKind.INTERNAL, attributes: { 'cfgu.sandbox.consts': 1, 'cfgu.sandbox.checks': 2 } }, inCommand);
    job.setAttribute('cfgu.sandbox.failed', 0);
    job.end();
    command.end();
    root.setAttribute('http.response.status_code', 200);
    root.end();
  };
  // A server makes spans between other work: yield to the event loop every 20 requests, so that batches go out as
  // they would (timers, sockets), and never get more than two batches ahead of the exporter (no span is dropped).
  let made = 0;
  const run = async (n) => {
    for (let i = 0; i < n; i++) {
      request();
      made += 4;
      if (i % 20 === 19) {
        await new Promise(setImmediate);
        while (exporter && made - exported > 1024) await new Promise((r) => setTimeout(r, 1));
      }
    }
    await provider.forceFlush();
  };
  await run(Math.min(20_000, requests)); // warm-up: the JIT, the exporter's first connection
  const before = process.cpuUsage();
  await run(requests);
  const used = process.cpuUsage(before);
  await provider.shutdown();
  if (exporter && exported !== made) throw new Error(`${made - exported} of ${made} spans were not exported`);
  console.log(((used.user + used.system) / requests).toFixed(2));
  process.exit(0);
}

const { values: args } = parseArgs({ options: { rounds: { type: 'string', default: '5' }, requests: { type: 'string', default: '100000' } } });
const rounds = Number(args.rounds);
const requests = Number(args.requests);
const sink = spawn(process.execPath, [join(here, 'otlp-sink.mjs')], { stdio: ['ignore', 'pipe', 'inherit'] });
const port = await new Promise((resolve) => sink.stdout.once('data', (d) => resolve(String(d).split('\n')[0].trim())));
const sinkUrl = `http://127.0.0.1:${port}`;
const results = Object.fromEntries(VARIANTS.map((v) => [v, []]));
for (let r = 0; r < rounds; r++) {
  const order = VARIANTS.map((_, i) => VARIANTS[(i + r) % VARIANTS.length]);
  for (const v of order) {
    const out = spawnSync(process.execPath, [fileURLToPath(import.meta.url), '--variant', v, String(requests), sinkUrl], { encoding: 'utf8' });
    if (out.status !== 0) throw new Error(`${v}: ${out.stderr}`);
    results[v].push(Number(out.stdout.trim()));
  }
}
sink.kill('SIGTERM');
const spans = await new Promise((resolve) => {
  let text = '';
  sink.stdout.on('data', (d) => (text += d));
  sink.on('exit', () => resolve(text.match(/spans (\d+)/)?.[1] ?? '?'));
});
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
console.log(`${rounds} rounds x ${requests} requests (4 spans each) per variant; the sink received ${spans} spans`);
console.log('| variant | CPU µs a request, median | rounds |');
console.log('|---|---|---|');
for (const v of VARIANTS) console.log(`| ${v} | ${median(results[v]).toFixed(1)} | ${results[v].map((x) => x.toFixed(1)).join(', ')} |`);
