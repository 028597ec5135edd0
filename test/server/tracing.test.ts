/**
 * OpenTelemetry traces from the real binary: an OTLP/HTTP receiver in this test (a loopback HTTP server that decodes
 * the exporter's export requests, protobuf or JSON, with bench/otlp.mjs) gets the spans of one POST /export sent with
 * a W3C `traceparent`. The tree is
 * checked (the caller's trace id, the request span under the caller's span, a span per command and per store read, a
 * sandbox job under its command), and no stored value, override, hidden secret or bearer key appears anywhere in
 * what was exported. Traces stay off without the OTEL_* variables (unit checks of the switch).
 */
import { after, afterEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { gunzipSync } from 'node:zlib';
import { join } from 'node:path';
import { waitFor } from '../helpers/wait.js';
import { killChildren, postJson, removeTempDirs, serveOnFreePort, tempDir, waitForStatus, writeJson } from './helpers.js';
import { samplerFromEnv, startTracing, tracesProtocol, tracesUrl, tracingRequested } from '../../src/server/observe/tracing.js';
import { readTraceRequest, type OtlpSpan, type OtlpTraceRequest } from '../../bench/otlp.mjs';

const API_KEY = 'api-key-trace-0123456789';
const PLANTED = {
  stored: 'stored-value-4c1d9e',
  secret: 'hidden-secret-8b2f7a',
  override: 'override-value-1e6c3b',
};

const receivers: Server[] = [];
after(async () => {
  await killChildren();
  removeTempDirs();
  await Promise.all(receivers.map((receiver) => new Promise<void>((r) => receiver.close(() => r()))));
});
afterEach(killChildren);

/**
 * A minimal OTLP/HTTP traces endpoint: keeps every decoded export request and the raw bytes of all of them (as text:
 * a value would be there byte for byte in either encoding).
 */
async function startReceiver(): Promise<{
  port: number;
  spans: () => OtlpSpan[];
  requests: () => OtlpTraceRequest[];
  raw: () => string;
  contentTypes: Set<string>;
}> {
  const bodies: OtlpTraceRequest[] = [];
  let raw = '';
  const contentTypes = new Set<string>();
  const receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let buf = Buffer.concat(chunks);
      if (req.headers['content-encoding'] === 'gzip') buf = gunzipSync(buf);
      contentTypes.add(String(req.headers['content-type']));
      if (req.method === 'POST' && req.url === '/v1/traces') {
        raw += buf.toString('utf8');
        bodies.push(readTraceRequest(buf, req.headers['content-type']));
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  receivers.push(receiver);
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', () => r()));
  const a = receiver.address();
  const port = typeof a === 'object' && a ? a.port : 0;
  const spans = () => bodies.flatMap((b) => (b.resourceSpans ?? []).flatMap((rs) => (rs.scopeSpans ?? []).flatMap((ss) => ss.spans ?? [])));
  return { port, spans, requests: () => bodies, raw: () => raw, contentTypes };
}

const attr = (s: OtlpSpan, key: string): unknown => {
  const v = s.attributes?.find((a) => a.key === key)?.value;
  if (!v) return undefined;
  if ('stringValue' in v) return v.stringValue;
  if ('intValue' in v) return Number(v.intValue);
  if ('boolValue' in v) return v.boolValue;
  return v;
};

describe('traces over OTLP/HTTP', { timeout: 300_000 }, () => {
  test('one trace under the caller\'s traceparent: request, a span per command and per store read, sandbox jobs; no value anywhere; protobuf, after a warning about a protocol cfgu does not send', async () => {
    const otlp = await startReceiver();
    const dir = tempDir('cfgu-trace-');
    writeJson(join(dir, 'main.json'), [
      { set: '', key: 'HOST', value: PLANTED.stored },
      { set: '', key: 'PORT', value: '5432' },
    ]);
    writeJson(join(dir, 'secrets.json'), [{ set: '', key: 'DB_PASSWORD', value: PLANTED.secret }]);
    const configu = writeJson(join(dir, '.configu'), {
      stores: {
        main: { type: 'json-file', configuration: { path: 'main.json' }, default: true },
        secrets: { type: 'json-file', configuration: { path: 'secrets.json' } },
      },
    });
    // gRPC is not sent: the server says so and uses the default, http/protobuf (what it uses with no protocol set).
    const { p, base } = await serveOnFreePort(['--config', configu, '--workers', '1'], {
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${otlp.port}`,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
      OTEL_SERVICE_NAME: 'cfgu-under-test',
      OTEL_TRACES_SAMPLER: 'parentbased_always_on',
      OTEL_BSP_SCHEDULE_DELAY: '100',
      CONFIGU_AUTH_ENABLED: 'true',
      CONFIGU_AUTH_PRESHARED_KEYS: API_KEY,
      CONFIGU_EXPRESSION_WORKERS: '1',
    });
    await waitForStatus(`${base}/ready`, 200, 120_000);
    assert.deepEqual(
      p.logs().filter((l) => l.level === 'warn').map((l) => l.msg),
      ['OTEL_EXPORTER_OTLP_PROTOCOL="grpc" is not a protocol cfgu sends traces with (http/protobuf or http/json); traces go out as http/protobuf'],
    );

    const traceId = randomBytes(16).toString('hex');
    const callerSpan = randomBytes(8).toString('hex');
    const pipeline = [
      {
        store: 'main',
        schema: { keys: { HOST: { test: 'typeof $.value === "string"' }, PORT: {}, MODE: {} } },
        configs: { MODE: PLANTED.override },
      },
      {
        store: 'secrets',
        schema: { keys: { DB_PASSWORD: { hidden: true }, DSN: { const: '{{ $.configs.HOST.value }}:{{ $.configs.DB_PASSWORD.value }}' } } },
      },
    ];
    const r = await postJson(`${base}/export`, pipeline, { authorization: `Bearer ${API_KEY}`, traceparent: `00-${traceId}-${callerSpan}-01` });
    assert.equal(r.status, 200, r.body);
    assert.equal(r.json().DSN, `${PLANTED.stored}:${PLANTED.secret}`, 'the values really went through the traced request');

    // The request span ends after its answer: wait until it (the root of our part of the tree) has been exported.
    const spans = await waitFor('the request span', () => {
      const all = otlp.spans().filter((s) => s.traceId === traceId);
      return all.some((s) => s.parentSpanId === callerSpan) ? all : undefined;
    });

    const requestSpans = spans.filter((s) => s.parentSpanId === callerSpan);
    assert.equal(requestSpans.length, 1, 'one request span under the caller');
    const request = requestSpans[0]!;
    assert.equal(request.name, 'POST /export');
    assert.equal(request.kind, 2, 'SERVER');
    assert.equal(attr(request, 'http.route'), '/export');
    assert.equal(attr(request, 'http.response.status_code'), 200);

    const byName = (name: string) => spans.filter((s) => s.name === name);
    const commands = byName('cfgu.command').sort((a, b) => Number(attr(a, 'cfgu.command.index')) - Number(attr(b, 'cfgu.command.index')));
    assert.deepEqual(
      commands.map((c) => [c.parentSpanId, attr(c, 'cfgu.command.index'), attr(c, 'cfgu.store.name'), attr(c, 'cfgu.command.keys')]),
      [
        [request.spanId, 0, 'main', 3],
        [request.spanId, 1, 'secrets', 2],
      ],
    );
    const reads = byName('cfgu.store.read').sort((a, b) => String(attr(a, 'cfgu.store.name')).localeCompare(String(attr(b, 'cfgu.store.name'))));
    assert.deepEqual(
      reads.map((s) => [s.parentSpanId, attr(s, 'cfgu.store.name'), attr(s, 'cfgu.store.type'), attr(s, 'cfgu.store.from_backup')]),
      [
        [request.spanId, 'main', 'json-file', false],
        [request.spanId, 'secrets', 'json-file', false],
      ],
    );
    const jobs = byName('cfgu.sandbox.job');
    assert.deepEqual(
      jobs.map((j) => commands.findIndex((c) => c.spanId === j.parentSpanId)).sort(),
      [0, 1],
      'one sandbox job under each command (a test in the first, a const in the second)',
    );
    assert.equal(spans.length, 1 + commands.length + reads.length + jobs.length, `no other span: ${spans.map((s) => s.name).join(', ')}`);
    assert.ok(spans.every((s) => s.traceId === traceId));

    // Nothing that looks like a value, in any attribute or anywhere in what was exported.
    const exported = otlp.raw();
    const planted: Array<[string, string]> = [...Object.entries(PLANTED), ['bearer key', API_KEY]];
    for (const [what, value] of planted) {
      assert.ok(!exported.includes(value), `${what} leaked into the exported spans`);
    }
    const services = otlp
      .requests()
      .flatMap((b) => (b.resourceSpans ?? []).map((rs) => rs.resource?.attributes?.find((a) => a.key === 'service.name')?.value.stringValue));
    assert.deepEqual([...new Set(services)], ['cfgu-under-test'], 'OTEL_SERVICE_NAME names the service');
    assert.deepEqual([...otlp.contentTypes], ['application/x-protobuf']);
  });
});

describe('traces of watched pipelines', { timeout: 300_000 }, () => {
  test('a watch evaluation is a trace of its own: cfgu.watch.evaluation with its command, store read and sandbox job; an unsampled request exports nothing; no value anywhere; JSON when the traces protocol says so', async () => {
    const otlp = await startReceiver();
    const dir = tempDir('cfgu-trace-watch-');
    writeJson(join(dir, 'main.json'), [{ set: '', key: 'HOST', value: PLANTED.stored }]);
    const configu = writeJson(join(dir, '.configu'), { stores: { main: { type: 'json-file', configuration: { path: 'main.json' }, default: true } } });
    const { base } = await serveOnFreePort(['--config', configu, '--workers', '1'], {
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${otlp.port}`,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
      OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
      OTEL_TRACES_SAMPLER: 'parentbased_always_on',
      OTEL_BSP_SCHEDULE_DELAY: '100',
      CONFIGU_EXPRESSION_WORKERS: '1',
    });
    await waitForStatus(`${base}/ready`, 200, 120_000);
    // First a request whose caller did not sample its trace (flags 00): the parent-based sampler leaves it out. Spans
    // are exported in the order they end, so once the watch's spans (below) are in, any span of it would be too.
    const unsampled = randomBytes(16).toString('hex');
    const plain = await postJson(`${base}/export`, [{ schema: { keys: { HOST: { test: 'true' } } } }], { traceparent: `00-${unsampled}-${randomBytes(8).toString('hex')}-00` });
    assert.equal(plain.status, 200, plain.body);
    // A long poll with a stale tag: its pipeline's first evaluation answers it at once.
    const pipeline = [{ schema: { keys: { HOST: { test: 'typeof $.value === "string"' }, MODE: {} } }, configs: { MODE: PLANTED.override } }];
    const r = await postJson(`${base}/export`, pipeline, { 'if-none-match': '"stale"', prefer: 'wait=5' });
    assert.equal(r.status, 200, r.body);
    assert.equal(r.json().HOST, PLANTED.stored);

    const { root, tree } = await waitFor('the watch evaluation and its children', () => {
      const all = otlp.spans();
      const root = all.find((s) => s.name === 'cfgu.watch.evaluation');
      if (!root) return undefined;
      const tree = all.filter((s) => s.traceId === root.traceId && s !== root);
      return tree.length >= 3 ? { root, tree } : undefined;
    });
    assert.ok(!root.parentSpanId, 'a root span');
    assert.equal(attr(root, 'cfgu.watch.commands'), 1);
    const command = tree.find((s) => s.name === 'cfgu.command');
    assert.equal(command?.parentSpanId, root.spanId);
    assert.deepEqual(
      tree.map((s) => [s.name, s.parentSpanId === root.spanId ? 'root' : s.parentSpanId === command!.spanId ? 'command' : 'elsewhere']).sort(),
      [
        ['cfgu.command', 'root'],
        ['cfgu.sandbox.job', 'command'],
        ['cfgu.store.read', 'root'],
      ],
    );
    assert.deepEqual(otlp.spans().filter((s) => s.traceId === unsampled), [], 'nothing of the unsampled request');
    const exported = otlp.raw();
    for (const [what, value] of Object.entries(PLANTED)) assert.ok(!exported.includes(value), `${what} leaked into the exported spans`);
    assert.deepEqual([...otlp.contentTypes], ['application/json'], 'the signal\'s own protocol variable wins');
  });
});

describe('the switch', () => {
  test('off without an OTLP endpoint, or when disabled; on with either endpoint variable', () => {
    assert.equal(tracingRequested({}), false);
    assert.equal(tracingRequested({ OTEL_SERVICE_NAME: 'x' }), false);
    assert.equal(tracingRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' }), true);
    assert.equal(tracingRequested({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://127.0.0.1:4318/v1/traces' }), true);
    assert.equal(tracingRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', OTEL_SDK_DISABLED: 'true' }), false);
    assert.equal(tracingRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', OTEL_TRACES_EXPORTER: 'none' }), false);
  });

  test('the traces URL: the signal endpoint as given, else the general one with /v1/traces', () => {
    assert.equal(tracesUrl({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }), 'http://collector:4318/v1/traces');
    assert.equal(tracesUrl({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/base/' }), 'http://collector:4318/base/v1/traces');
    assert.equal(
      tracesUrl({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://other:4318/custom' }),
      'http://other:4318/custom',
    );
  });

  test('the protocol: http/protobuf by default, http/json when asked, the signal\'s own variable first; others fall back with a warning', async () => {
    assert.deepEqual(tracesProtocol({}), { protocol: 'http/protobuf' });
    assert.deepEqual(tracesProtocol({ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' }), { protocol: 'http/json' });
    assert.deepEqual(tracesProtocol({ OTEL_EXPORTER_OTLP_PROTOCOL: ' HTTP/JSON ' }), { protocol: 'http/json' });
    assert.deepEqual(tracesProtocol({ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf' }), { protocol: 'http/protobuf' });
    assert.deepEqual(tracesProtocol({ OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: ' ', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' }), { protocol: 'http/json' });
    assert.deepEqual(tracesProtocol({ OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'grpc' }), {
      protocol: 'http/protobuf',
      warning: 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="grpc" is not a protocol cfgu sends traces with (http/protobuf or http/json); traces go out as http/protobuf',
    });
    assert.match(tracesProtocol({ OTEL_EXPORTER_OTLP_PROTOCOL: 'x'.repeat(100) }).warning ?? '', /^OTEL_EXPORTER_OTLP_PROTOCOL="x{40}\.\.\."/);
    // What startTracing makes of it (nothing is sent: no span is made).
    const tracing = startTracing({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/jsn' });
    try {
      assert.equal(tracing?.protocol, 'http/protobuf');
      assert.deepEqual(tracing?.warnings, [tracesProtocol({ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/jsn' }).warning]);
    } finally {
      await tracing?.shutdown();
    }
  });

  test('OTEL_TRACES_SAMPLER names the sampler', () => {
    assert.match(samplerFromEnv({}).toString(), /ParentBased\{root=AlwaysOnSampler/);
    assert.equal(samplerFromEnv({ OTEL_TRACES_SAMPLER: 'always_off' }).toString(), 'AlwaysOffSampler');
    assert.equal(samplerFromEnv({ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.25' }).toString(), 'TraceIdRatioBased{0.25}');
    assert.match(samplerFromEnv({ OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.5' }).toString(), /root=TraceIdRatioBased\{0\.5\}/);
  });
});
