/**
 * GET /metrics as an operator uses it: a real Prometheus server (Debian's `prometheus`, fetched by
 * scripts/test-setup-prometheus.sh when missing) scrapes the real binary running with `--workers 2`, with the metrics
 * key in its scrape configuration. The test starts Prometheus itself (a generated configuration on a free loopback
 * port, a temporary data folder, a one-second scrape interval) and stops it. Every wait is on a condition: a scrape
 * newer than the last request, never a sleep.
 */
import { after, afterEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { findBinary, freePort } from '../helpers/private.js';
import { requireOrSkip } from '../helpers/services.js';
import { waitFor } from '../helpers/wait.js';
import { call, killChildren, postJson, removeTempDirs, tempDir, writeJson, type Spawned, spawnCfgu } from './helpers.js';

const METRICS_KEY = 'scrape-key-0123456789';
const N = 20;

let prometheus: ChildProcess | undefined;
let prometheusLog = '';

async function stopPrometheus(): Promise<void> {
  const p = prometheus;
  prometheus = undefined;
  if (!p || p.exitCode !== null || p.signalCode !== null) return;
  const gone = new Promise((r) => p.once('exit', r));
  p.kill('SIGTERM');
  const hard = setTimeout(() => p.kill('SIGKILL'), 30_000);
  await gone;
  clearTimeout(hard);
}

after(async () => {
  await stopPrometheus();
  await killChildren();
  removeTempDirs();
});
afterEach(async () => {
  await stopPrometheus();
  await killChildren();
});

function prometheusBinary(): string | undefined {
  const cache = join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'cfgu-test', 'prometheus', 'usr', 'bin');
  return process.env.CFGU_TEST_PROMETHEUS ?? findBinary(['prometheus'], [cache]);
}

interface Sample {
  metric: Record<string, string>;
  value: [number, string];
}

/** One instant query through Prometheus's HTTP API. */
async function query(base: string, promql: string): Promise<Sample[]> {
  const r = await call(`${base}/api/v1/query?query=${encodeURIComponent(promql)}`);
  assert.equal(r.status, 200, r.body);
  const answer = r.json<{ status: string; data: { resultType: string; result: Sample[] } }>();
  assert.equal(answer.status, 'success');
  return answer.data.result;
}

const EXPORTS = 'cfgu_http_requests_total{job="cfgu",route="/export",method="POST",status="200"}';

/** The /export counter as Prometheus last scraped it, once that scrape is newer than `after` (ms since the epoch). */
async function exportsScrapedAfter(base: string, after: number): Promise<number> {
  return waitFor(`a scrape after ${new Date(after).toISOString()}`, async () => {
    const stamp = await query(base, `timestamp(${EXPORTS})`);
    if (stamp.length !== 1 || Number(stamp[0]!.value[1]) * 1000 <= after) return undefined;
    const value = await query(base, EXPORTS);
    // The sample read must be the one that was stamped (both queries see the newest scrape).
    return value.length === 1 ? Number(value[0]!.value[1]) : undefined;
  });
}

describe('Prometheus scrapes cfgu --workers 2', { timeout: 300_000 }, () => {
  test(`the /export counter rises by exactly ${N} across both workers, and a histogram quantile is answered`, async (t) => {
    const bin = prometheusBinary();
    if (!bin) {
      requireOrSkip(t, 'prometheus', 'not installed; scripts/test-setup-prometheus.sh fetches it');
      return;
    }

    const dir = tempDir('cfgu-prom-');
    writeJson(join(dir, 'data.json'), [{ set: '', key: 'GREETING', value: 'hello' }]);
    const configu = writeJson(join(dir, '.configu'), { stores: { main: { type: 'json-file', configuration: { path: 'data.json' } } } });
    const cfgu: Spawned = spawnCfgu(['serve', '--config', configu, '--workers', '2', '--port', '0', '--host', '127.0.0.1'], {
      CONFIGU_METRICS_KEY: METRICS_KEY,
      CONFIGU_EXPRESSION_WORKERS: '1',
    });
    const ready = await cfgu.waitForLog('ready', (l) => l.role === 'primary' && l.workers === 2, 120_000);
    const target = `127.0.0.1:${ready.port as number}`;
    const body = [{ schema: { keys: { GREETING: {} } } }];
    // One request first, so the series exists before the baseline scrape.
    assert.equal((await postJson(`http://${target}/export`, body)).status, 200);

    const promPort = await freePort();
    const base = `http://127.0.0.1:${promPort}`;
    const config = join(dir, 'prometheus.yml');
    writeFileSync(
      config,
      [
        'global:',
        '  scrape_interval: 1s',
        '  scrape_timeout: 1s',
        '  evaluation_interval: 1s',
        'scrape_configs:',
        '  - job_name: cfgu',
        '    metrics_path: /metrics',
        '    authorization:',
        '      type: Bearer',
        `      credentials: ${METRICS_KEY}`,
        '    static_configs:',
        `      - targets: ['${target}']`,
        '',
      ].join('\n'),
    );
    prometheus = spawn(
      bin,
      [`--config.file=${config}`, `--storage.tsdb.path=${join(dir, 'tsdb')}`, `--web.listen-address=127.0.0.1:${promPort}`, '--log.level=warn'],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    prometheus.stdout!.on('data', (c: Buffer) => (prometheusLog += c.toString('utf8')));
    prometheus.stderr!.on('data', (c: Buffer) => (prometheusLog += c.toString('utf8')));
    const exited = new Promise((r) => prometheus!.once('exit', r));
    await waitFor('Prometheus ready', async () => {
      if (prometheus?.exitCode !== null) throw new Error(`prometheus exited:\n${prometheusLog}`);
      return (await call(`${base}/-/ready`, { timeoutMs: 2000 })).status === 200;
    });
    // The target is scraped successfully (the key is accepted): `up` is 1.
    await waitFor('target up', async () => {
      const up = await query(base, 'up{job="cfgu"}');
      return up.length === 1 && up[0]!.value[1] === '1';
    });

    const before = await exportsScrapedAfter(base, Date.now());
    assert.equal(before, 1, 'the warm-up request, counted once for the whole server');

    for (let i = 0; i < N; i++) {
      const r = await postJson(`http://${target}/export`, body);
      assert.equal(r.status, 200, r.body);
    }
    const afterN = await exportsScrapedAfter(base, Date.now());
    assert.equal(afterN - before, N, `the /export counter rose by ${afterN - before}, expected ${N}`);

    // Both workers are in the sum: each runs one sandbox child.
    const children = await query(base, 'cfgu_sandbox_children{job="cfgu",state="active"}');
    assert.deepEqual(children.map((s) => s.value[1]), ['2']);

    const quantile = await waitFor('a histogram quantile', async () => {
      const q = await query(base, 'histogram_quantile(0.9, sum by (le) (rate(cfgu_http_request_duration_seconds_bucket{job="cfgu",route="/export"}[1m])))');
      const v = q.length === 1 ? Number(q[0]!.value[1]) : NaN;
      return Number.isFinite(v) ? v : undefined;
    });
    // A finite, positive quantile: the buckets were filled and Prometheus could read them (no time goal here).
    assert.ok(quantile > 0, `p90 of /export: ${quantile} s`);

    await stopPrometheus();
    await exited;
    cfgu.child.kill('SIGTERM');
    assert.equal(await cfgu.exited, 0);
  });
});
