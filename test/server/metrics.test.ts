/**
 * GET /metrics in-process (buildServer + inject, the real engine, stores and sandbox): what it counts, its own bearer
 * key with exact problem bodies, how it sits with the API's keys, and the settings that drive it. The cluster-wide
 * view through a real Prometheus is in metrics-prometheus.test.ts.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { pino, type Logger } from 'pino';
import type { FastifyInstance } from 'fastify';
import { buildServer, resolveSettings, settingsWith, type SettingsOverrides } from '../../src/server/index.js';
import { ConfigurationError } from '../../src/core/errors.js';
import { loadConfiguration } from '../../src/config/index.js';
import { createStoreRegistry } from '../../src/stores/index.js';
import type { StoreRegistryWithStatus } from '../../src/stores/registry.js';
import { createSandboxEvaluator, type SandboxEvaluator } from '../../src/expressions/index.js';
import { captureLog, removeTempDirs, tempDir, writeJson } from './helpers.js';
import { waitFor } from '../helpers/wait.js';

const API_KEY = 'api-key-0123456789';
const METRICS_KEY = 'scrape-key-0123456789';
const PLANTED = 'planted-value-7f3a9c';
let dir: string;
let registry: StoreRegistryWithStatus;
let evaluator: SandboxEvaluator;
const apps: FastifyInstance[] = [];
const silent = pino({ level: 'silent' }) as unknown as Logger;

async function app(overrides: SettingsOverrides = {}): Promise<FastifyInstance> {
  const a = await buildServer({ registry, evaluator, settings: settingsWith(overrides), logger: silent, ready: true });
  apps.push(a);
  return a;
}

const exportReq = (a: FastifyInstance, body: unknown, headers: Record<string, string> = {}) =>
  a.inject({ method: 'POST', url: '/export', headers: { 'content-type': 'application/json', ...headers }, payload: JSON.stringify(body) });

/** The value of one sample of the exposition text (`name{labels}`, labels in the order prom-client writes them). */
function sample(text: string, series: string): number | undefined {
  for (const line of text.split('\n')) {
    if (line.startsWith(`${series} `)) return Number(line.slice(series.length + 1));
  }
  return undefined;
}

/** Every sample of a metric (`name` then `{` or a space), with its value, in the order of the text. */
const seriesOf = (text: string, name: string): Array<[string, number]> =>
  text
    .split('\n')
    .filter((line) => line.startsWith(`${name}{`) || line.startsWith(`${name} `))
    .map((line) => [line.slice(0, line.lastIndexOf(' ')), Number(line.slice(line.lastIndexOf(' ') + 1))]);

const scrape = async (a: FastifyInstance, headers: Record<string, string> = {}) => {
  const r = await a.inject({ method: 'GET', url: '/metrics', headers });
  assert.equal(r.statusCode, 200, r.body);
  return r.body;
};

before(async () => {
  dir = tempDir();
  writeJson(join(dir, 'data.json'), [
    { set: '', key: 'GREETING', value: PLANTED },
    { set: '', key: 'PORT', value: '3000' },
  ]);
  writeFileSync(join(dir, 'broken.json'), '{ not json');
  writeJson(join(dir, '.configu'), {
    stores: {
      main: { type: 'json-file', configuration: { path: 'data.json' }, default: true },
      broken: { type: 'json-file', configuration: { path: 'broken.json' } },
    },
  });
  const loaded = await loadConfiguration({ file: join(dir, '.configu') });
  registry = createStoreRegistry(loaded, { logger: { warn: () => undefined } });
  await registry.init();
  evaluator = createSandboxEvaluator({ workers: 1, spares: 0, timeoutMs: 2000, memoryMb: 64 });
  await evaluator.ready();
});

after(async () => {
  for (const a of apps) await a.close();
  await registry?.close();
  await evaluator?.close();
  removeTempDirs();
});

describe('GET /metrics: what it counts', () => {
  test('requests, evaluations, failures by rule, expressions, store reads, the body cache, the sandbox, default process metrics', async () => {
    const a = await app();
    // A body over the body cache's minimum size, sent three times: one miss, then two hits.
    const big = [{ schema: { keys: { GREETING: { description: 'x'.repeat(300) }, PORT: { test: '$.value > 0' } } } }];
    for (let i = 0; i < 3; i++) assert.equal((await exportReq(a, big)).statusCode, 200);
    const invalid = await exportReq(a, [{ schema: { keys: { MISSING: { required: true } } } }]);
    assert.equal(invalid.statusCode, 422);
    const down = await exportReq(a, [{ store: 'broken', schema: { keys: { A: {} } } }]);
    assert.equal(down.statusCode, 503);
    assert.equal((await a.inject({ method: 'GET', url: '/live' })).statusCode, 200);
    assert.equal((await a.inject({ method: 'GET', url: '/nowhere' })).statusCode, 404);

    const r = await a.inject({ method: 'GET', url: '/metrics' });
    assert.equal(r.statusCode, 200);
    assert.equal(r.headers['content-type'], 'text/plain; version=0.0.4; charset=utf-8');
    const text = r.body;
    assert.equal(sample(text, 'cfgu_http_requests_total{route="/export",method="POST",status="200"}'), 3);
    assert.equal(sample(text, 'cfgu_http_requests_total{route="/export",method="POST",status="422"}'), 1);
    assert.equal(sample(text, 'cfgu_http_requests_total{route="/export",method="POST",status="503"}'), 1);
    assert.equal(sample(text, 'cfgu_http_requests_total{route="/live",method="GET",status="200"}'), 1);
    assert.equal(sample(text, 'cfgu_http_requests_total{route="none",method="GET",status="404"}'), 1, 'an unknown path is counted without its path');
    assert.doesNotMatch(text, /nowhere/);
    assert.equal(sample(text, 'cfgu_http_request_duration_seconds_count{route="/export"}'), 5);
    assert.equal(sample(text, 'cfgu_evaluations_total{route="export",outcome="ok"}'), 3);
    assert.equal(sample(text, 'cfgu_evaluations_total{route="export",outcome="validation_failed"}'), 1);
    assert.equal(sample(text, 'cfgu_evaluations_total{route="export",outcome="store_unavailable"}'), 1);
    assert.equal(sample(text, 'cfgu_evaluation_duration_seconds_count{route="export"}'), 5);
    assert.equal(sample(text, 'cfgu_evaluation_commands_sum{route="export"}'), 5);
    assert.equal(sample(text, 'cfgu_evaluation_keys_sum{route="export"}'), 3 * 2 + 1 + 1);
    assert.equal(sample(text, 'cfgu_evaluation_failures_total{rule="required"}'), 1);
    assert.equal(sample(text, 'cfgu_expressions_total'), 3, 'one test per successful request');
    assert.equal(sample(text, 'cfgu_sandbox_job_duration_seconds_count'), 3);
    assert.equal(sample(text, 'cfgu_sandbox_children{state="active"}'), 1);
    assert.equal(sample(text, 'cfgu_sandbox_jobs_queued'), 0);
    assert.equal(sample(text, 'cfgu_sandbox_restarts_total{kind="process"}'), 0);
    assert.equal(sample(text, 'cfgu_sandbox_answers_kept_total'), 2, 'the same job of the same client, twice more');
    assert.equal(sample(text, 'cfgu_sandbox_limit_kills_total{limit="time"}'), 0);
    assert.equal(sample(text, 'cfgu_store_operations_total{store="main",operation="read",outcome="ok"}'), 4);
    assert.equal(sample(text, 'cfgu_store_operations_total{store="broken",operation="read",outcome="error"}'), 1);
    assert.equal(sample(text, 'cfgu_store_operation_duration_seconds_count{store="main",operation="read"}'), 4);
    assert.equal(sample(text, 'cfgu_store_up{store="main"}'), 1);
    assert.equal(sample(text, 'cfgu_store_up{store="broken"}'), 0);
    assert.equal(sample(text, 'cfgu_store_backup_answers_total{store="main"}'), 0);
    assert.equal(sample(text, 'cfgu_body_cache_misses_total'), 3, 'the first of the three equal bodies and the two others');
    assert.equal(sample(text, 'cfgu_body_cache_hits_total'), 2);
    assert.ok((sample(text, 'process_cpu_user_seconds_total') ?? -1) >= 0, 'default process metrics');
    assert.ok(text.includes('# TYPE nodejs_eventloop_lag_seconds gauge'));
    assert.ok(!text.includes(PLANTED), 'no stored value in the metrics');
  });

  test('watch evaluations (long poll, SSE) are counted and read through the observed stores and sandbox; an SSE stream end is counted and logged', async () => {
    const log = captureLog();
    const a = await buildServer({ registry, evaluator, settings: settingsWith({}), logger: log.logger, ready: true });
    apps.push(a);
    const body = [{ schema: { keys: { GREETING: {}, PORT: { test: '$.value > 0' } } } }];
    // A long poll whose tag is stale: answered at once from its pipeline's first evaluation.
    const poll = await exportReq(a, body, { 'if-none-match': '"stale"', prefer: 'wait=5' });
    assert.equal(poll.statusCode, 200, poll.body);
    // An SSE stream over a socket: its first event, then the client goes away.
    await a.listen({ port: 0, host: '127.0.0.1' });
    const { port } = a.server.address() as AddressInfo;
    const first = await new Promise<string>((resolve, reject) => {
      const req = httpRequest(
        { host: '127.0.0.1', port, method: 'POST', path: '/export', headers: { 'content-type': 'application/json', accept: 'text/event-stream', 'x-request-id': 'sse-1' } },
        (res) => {
          let buf = '';
          res.setEncoding('utf8');
          res.on('data', (d: string) => {
            buf += d;
            if (buf.includes('\n\n')) {
              resolve(buf);
              req.destroy();
            }
          });
        },
      );
      req.on('error', (e) => (e.message.includes('socket hang up') ? undefined : reject(e)));
      req.end(JSON.stringify(body));
    });
    assert.match(first, /^id: "/);
    const ended = await waitFor('the stream end line', () => log.lines().find((l) => l.msg === 'watch stream ended'));
    assert.equal(ended.reqId, 'sse-1');
    assert.equal(ended.reason, 'client');
    assert.equal(ended.status, 200);
    assert.equal(typeof ended.ms, 'number');

    const text = await scrape(a);
    // The poll's pipeline was dropped once answered, so the stream's pipeline was evaluated afresh: two evaluations.
    assert.equal(sample(text, 'cfgu_watch_evaluations_total{outcome="ok"}'), 2);
    assert.equal(sample(text, 'cfgu_watch_streams_ended_total{reason="client"}'), 1);
    assert.equal(sample(text, 'cfgu_store_operations_total{store="main",operation="read",outcome="ok"}'), 2, 'the watch reads went through the observed store');
    assert.equal(sample(text, 'cfgu_expressions_total'), 2, 'and the sandbox jobs through the observed sandbox');
    assert.equal(sample(text, 'cfgu_sandbox_job_duration_seconds_count'), 2);
    assert.deepEqual(seriesOf(text, 'cfgu_evaluations_total'), [], 'watch evaluations are not counted as requests\' evaluations');
  });

  test('evaluations by route: an export, an explanation and a matrix are told apart', async () => {
    const a = await app();
    const post = (url: string, body: unknown) => a.inject({ method: 'POST', url, headers: { 'content-type': 'application/json' }, payload: JSON.stringify(body) });
    assert.equal((await exportReq(a, [{ schema: { keys: { GREETING: {} } } }])).statusCode, 200);
    // An explanation is answered (200) whether or not its pipeline passes validation: both count as ok.
    assert.equal((await post('/explain', [{ schema: { keys: { GREETING: {}, PORT: {} } } }])).statusCode, 200);
    const failing = await post('/explain', [{ schema: { keys: { MISSING: { required: true } } } }]);
    assert.equal(failing.statusCode, 200, failing.body);
    assert.equal(failing.json().ok, false);
    const matrix = await post('/matrix', { schema: { keys: { GREETING: {}, PORT: {}, OTHER: {} } }, sets: ['', 'a', 'a/b'] });
    assert.equal(matrix.statusCode, 200, matrix.body);
    assert.equal((await post('/matrix', { store: 'broken', schema: { keys: { A: {} } }, sets: [''] })).statusCode, 503);

    const text = await scrape(a);
    assert.deepEqual(seriesOf(text, 'cfgu_evaluations_total'), [
      ['cfgu_evaluations_total{route="export",outcome="ok"}', 1],
      ['cfgu_evaluations_total{route="explain",outcome="ok"}', 2],
      ['cfgu_evaluations_total{route="matrix",outcome="ok"}', 1],
      ['cfgu_evaluations_total{route="matrix",outcome="store_unavailable"}', 1],
    ]);
    assert.deepEqual(seriesOf(text, 'cfgu_evaluation_duration_seconds_count'), [
      ['cfgu_evaluation_duration_seconds_count{route="export"}', 1],
      ['cfgu_evaluation_duration_seconds_count{route="explain"}', 2],
      ['cfgu_evaluation_duration_seconds_count{route="matrix"}', 2],
    ]);
    // A matrix is one command (its schema) whatever the number of sets; keys as declared.
    assert.deepEqual(seriesOf(text, 'cfgu_evaluation_commands_sum'), [
      ['cfgu_evaluation_commands_sum{route="export"}', 1],
      ['cfgu_evaluation_commands_sum{route="explain"}', 2],
      ['cfgu_evaluation_commands_sum{route="matrix"}', 2],
    ]);
    assert.deepEqual(seriesOf(text, 'cfgu_evaluation_keys_sum'), [
      ['cfgu_evaluation_keys_sum{route="export"}', 1],
      ['cfgu_evaluation_keys_sum{route="explain"}', 3],
      ['cfgu_evaluation_keys_sum{route="matrix"}', 4],
    ]);
    assert.equal(sample(text, 'cfgu_evaluation_failures_total{rule="required"}'), undefined, 'no 422 was answered');
  });

  test('a sandbox time limit is counted', async () => {
    const a = await app();
    const r = await exportReq(a, [{ schema: { keys: { SPIN: { default: 'x', test: '(() => { while (true) {} })()' } } } }]);
    assert.equal(r.statusCode, 422, r.body);
    const text = await scrape(a);
    assert.ok((sample(text, 'cfgu_sandbox_limit_kills_total{limit="time"}') ?? 0) >= 1, text);
  });

  test('HEAD /metrics answers; other methods are 405 with Allow', async () => {
    const a = await app();
    assert.equal((await a.inject({ method: 'HEAD', url: '/metrics' })).statusCode, 200);
    const r = await a.inject({ method: 'POST', url: '/metrics' });
    assert.equal(r.statusCode, 405);
    assert.equal(r.headers.allow, 'GET, HEAD');
    assert.deepEqual(r.json(), { type: 'about:blank', title: 'Method Not Allowed', status: 405, detail: 'POST is not allowed on /metrics; allowed: GET, HEAD' });
  });

  test('metrics off: /metrics is an unknown route', async () => {
    const a = await app({ metrics: { enabled: false } });
    const r = await a.inject({ method: 'GET', url: '/metrics' });
    assert.equal(r.statusCode, 404);
    assert.deepEqual(r.json(), { type: 'about:blank', title: 'Not Found', status: 404, detail: 'no route GET /metrics' });
    assert.equal((await exportReq(a, [{ schema: { keys: { PORT: {} } } }])).statusCode, 200);
  });
});

describe('GET /metrics: its own key', () => {
  const metricsProblem = {
    type: 'urn:cfgu:problem:unauthorized',
    title: 'Unauthorized',
    status: 401,
    detail: 'a valid metrics key is required (Authorization: Bearer <key>)',
  };
  const apiProblem = {
    type: 'urn:cfgu:problem:unauthorized',
    title: 'Unauthorized',
    status: 401,
    detail: 'a valid bearer key is required (Authorization: Bearer <key>)',
  };

  test('with a metrics key: no key, a wrong key and an API key are 401 with the exact problem; the metrics key is 200', async () => {
    const a = await app({ auth: { enabled: true, presharedKeys: [API_KEY] }, metrics: { key: METRICS_KEY } });
    for (const headers of [{}, { authorization: 'Bearer wrong-key-0123456' }, { authorization: `Bearer ${API_KEY}` }, { authorization: METRICS_KEY }]) {
      const r = await a.inject({ method: 'GET', url: '/metrics', headers });
      assert.equal(r.statusCode, 401, JSON.stringify(headers));
      assert.equal(r.headers['content-type'], 'application/problem+json; charset=utf-8');
      assert.equal(r.headers['www-authenticate'], 'Bearer realm="cfgu-metrics"');
      assert.deepEqual(r.json(), metricsProblem);
    }
    const ok = await a.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${METRICS_KEY}` } });
    assert.equal(ok.statusCode, 200);
    assert.match(ok.body, /^# HELP /m);
  });

  test('the metrics key opens nothing else: /export with it is 401 (the API problem)', async () => {
    const a = await app({ auth: { enabled: true, presharedKeys: [API_KEY] }, metrics: { key: METRICS_KEY } });
    const r = await exportReq(a, [{ schema: { keys: { PORT: {} } } }], { authorization: `Bearer ${METRICS_KEY}` });
    assert.equal(r.statusCode, 401);
    assert.deepEqual(r.json(), apiProblem);
  });

  test('a metrics key without API authentication still guards /metrics', async () => {
    const a = await app({ metrics: { key: METRICS_KEY } });
    const r = await a.inject({ method: 'GET', url: '/metrics' });
    assert.equal(r.statusCode, 401);
    assert.deepEqual(r.json(), metricsProblem);
    assert.equal((await a.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${METRICS_KEY}` } })).statusCode, 200);
  });

  test('without a metrics key, /metrics follows the API keys', async () => {
    const a = await app({ auth: { enabled: true, presharedKeys: [API_KEY] } });
    const r = await a.inject({ method: 'GET', url: '/metrics' });
    assert.equal(r.statusCode, 401);
    assert.deepEqual(r.json(), apiProblem);
    assert.equal((await a.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${API_KEY}` } })).statusCode, 200);
  });
});

describe('metrics settings', () => {
  test('defaults: on, no key; the environment and .configu set them', () => {
    assert.deepEqual(resolveSettings({ env: {} }).metrics, { enabled: true, key: undefined });
    assert.deepEqual(resolveSettings({ env: { CONFIGU_METRICS_ENABLED: 'false' } }).metrics, { enabled: false, key: undefined });
    assert.deepEqual(resolveSettings({ env: { CONFIGU_METRICS_KEY: METRICS_KEY } }).metrics, { enabled: true, key: METRICS_KEY });
    assert.deepEqual(resolveSettings({ env: {}, fileSettings: { metrics: { key: METRICS_KEY, enabled: true } } }).metrics, { enabled: true, key: METRICS_KEY });
  });

  test('a short key, a key with spaces or a key that is not a string is refused, naming its source', () => {
    for (const [input, property] of [
      [{ env: { CONFIGU_METRICS_KEY: 'short' } }, 'CONFIGU_METRICS_KEY'],
      [{ env: { CONFIGU_METRICS_KEY: 'has a space in it' } }, 'CONFIGU_METRICS_KEY'],
      [{ env: {}, fileSettings: { metrics: { key: 123456789 } } }, 'interface.proxy.metrics.key'],
    ] as const) {
      assert.throws(
        () => resolveSettings(input as Parameters<typeof resolveSettings>[0]),
        (e: unknown) => e instanceof ConfigurationError && e.property === property && /the metrics key must be at least 8 characters without spaces/.test(e.message),
      );
    }
  });
});
