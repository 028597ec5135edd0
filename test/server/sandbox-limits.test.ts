// The sandbox's limits as HTTP answers: a full queue is 503 + Retry-After, a request over its budget is 422, each with
// its exact problem+json body; the other requests are unaffected.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { pino, type Logger } from 'pino';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { buildServer, settingsWith } from '../../src/server/index.js';
import { loadConfiguration } from '../../src/config/index.js';
import { createStoreRegistry, type StoreRegistry } from '../../src/stores/index.js';
import { createSandboxEvaluator, type SandboxEvaluator, type SandboxOptions } from '../../src/expressions/index.js';
import { removeTempDirs, tempDir, writeJson } from './helpers.js';
import { waitFor } from '../helpers/wait.js';

let registry: StoreRegistry;
const apps: FastifyInstance[] = [];
const pools: SandboxEvaluator[] = [];

before(async () => {
  const dir = tempDir();
  writeJson(join(dir, 'data.json'), [{ set: '', key: 'A', value: 'abc' }]);
  writeJson(join(dir, '.configu'), { stores: { main: { type: 'json-file', configuration: { path: 'data.json' } } } });
  registry = createStoreRegistry(await loadConfiguration({ file: join(dir, '.configu') }), { logger: { warn: () => undefined } });
  await registry.init();
});

after(async () => {
  for (const a of apps) await a.close();
  for (const p of pools) await p.close();
  await registry?.close();
  removeTempDirs();
});

async function server(options: SandboxOptions): Promise<{ app: FastifyInstance; evaluator: SandboxEvaluator }> {
  const evaluator = createSandboxEvaluator(options);
  pools.push(evaluator);
  const app = await buildServer({ registry, evaluator, settings: settingsWith({}), logger: pino({ level: 'silent' }) as unknown as Logger, ready: true });
  apps.push(app);
  return { app, evaluator };
}

const post = (a: FastifyInstance, body: unknown, remoteAddress = '127.0.0.1') =>
  a.inject({ method: 'POST', url: '/export', remoteAddress, headers: { 'content-type': 'application/json' }, payload: JSON.stringify(body) });

const command = (test: string) => ({ store: 'main', schema: { keys: { A: { test } } } });

function exactly(r: LightMyRequestResponse, status: number, body: Record<string, unknown>): void {
  assert.equal(r.statusCode, status, r.body);
  assert.equal(r.headers['content-type'], 'application/problem+json; charset=utf-8');
  assert.deepEqual(r.json(), body);
}

describe('sandbox limits over HTTP', () => {
  test('503 with Retry-After when the client’s queue, or the whole queue, is full', async () => {
    const { app, evaluator } = await server({ workers: 1, spares: 0, queueLimit: 2, clientQueueLimit: 1 });
    // A child that never becomes ready: every job waits in the host's queue.
    process.kill(evaluator.pids()[0]!, 'SIGSTOP');
    const first = post(app, [command('$.value === "abc"')]);
    await waitFor('one job of 127.0.0.1 queued', () => evaluator.queued()['ip:127.0.0.1'] === 1);
    const busy = await post(app, [command('true')]);
    exactly(busy, 503, {
      type: 'urn:cfgu:problem:sandbox-busy',
      title: 'Expressions Busy',
      status: 503,
      detail: 'this client has too many expression jobs waiting; retry later',
    });
    assert.equal(busy.headers['retry-after'], '1');
    // Another client still gets a place, until the whole queue is full.
    const second = post(app, [command('true')], '10.0.0.2');
    await waitFor('one job of 10.0.0.2 queued', () => evaluator.queued()['ip:10.0.0.2'] === 1);
    const full = await post(app, [command('true')], '10.0.0.3');
    exactly(full, 503, {
      type: 'urn:cfgu:problem:sandbox-busy',
      title: 'Expressions Busy',
      status: 503,
      detail: 'the expression sandbox has too many jobs waiting; retry later',
    });
    assert.equal(full.headers['retry-after'], '1');
    process.kill(evaluator.pids()[0]!, 'SIGCONT');
    for (const r of await Promise.all([first, second])) {
      assert.equal(r.statusCode, 200, r.body);
      assert.deepEqual(r.json(), { A: 'abc' });
    }
  });

  test('422 when a request’s expressions use up its CPU budget; the next request is served', async () => {
    const { app, evaluator } = await server({ workers: 1, timeoutMs: 50, requestCpuMs: 120 });
    await evaluator.ready();
    // Distinct runaways (a repeat of the same one would be answered from memory at no cost, see the last test).
    const spin = (n: number) => command(`(() => { let i = ${n}; while (true) { i++ } })()`);
    // Every runaway costs at least 50 ms of CPU: the third command cannot start.
    exactly(await post(app, [spin(1), spin(2), spin(3), command('true')]), 422, {
      type: 'urn:cfgu:problem:budget-exceeded',
      title: 'Budget Exceeded',
      status: 422,
      detail: "the request's expressions used more than its CPU-time budget of 120 ms",
      rule: 'cpu-budget',
    });
    const ok = await post(app, [command('$.value === "abc"')]);
    assert.equal(ok.statusCode, 200, ok.body);
  });

  test('a repeated runaway is answered with the very same 422 without running again', async () => {
    const { app, evaluator } = await server({ workers: 1, spares: 0, timeoutMs: 100 });
    await evaluator.ready();
    for (const [body, message] of [
      [[command('(() => { while (true) {} })()')], 'exceeded the time limit of 100 ms'],
      [[command("'x'.repeat(2 ** 28).split('').length > 0")], 'exceeded the sandbox memory limit of 64 MB'],
    ] as const) {
      const first = await post(app, body);
      assert.equal(first.statusCode, 422, first.body);
      assert.equal(first.json().errors[0].rule, 'test');
      assert.match(first.json().errors[0].message, new RegExp(message));
      await evaluator.ready();
      const { spawns } = evaluator.replacements();
      const refused = evaluator.runawaysRefused();
      const again = await post(app, body);
      exactly(again, 422, first.json());
      assert.equal(evaluator.runawaysRefused(), refused + 1);
      assert.equal(evaluator.replacements().spawns, spawns);
    }
  });

  test('503 with Retry-After for a client whose expressions keep exceeding their limits; other clients are served', async () => {
    // A runaway of 500 ms, once the client is in the slow lane, keeps the lane closed for 9 x 500 ms.
    const { app, evaluator } = await server({ workers: 1, spares: 0, timeoutMs: 500 });
    await evaluator.ready();
    for (let n = 0; n < 3; n++) {
      // Another client is served: the lane has someone to protect (a client alone is never held back). Served before
      // each runaway, so that on a loaded machine, where a runaway and the new child it costs take seconds, the last
      // such service stays within the lane's window (SLOW_LANE_OTHERS_MS) whatever the runaways took.
      assert.equal((await post(app, [command('$.value === "abc"')], '10.0.0.10')).statusCode, 200);
      const r = await post(app, [command(`(() => { let i = ${n}; while (true) { i++ } })()`)], '10.0.0.9');
      assert.equal(r.statusCode, 422, r.body);
    }
    const slowed = await post(app, [command('true')], '10.0.0.9');
    exactly(slowed, 503, {
      type: 'urn:cfgu:problem:sandbox-busy',
      title: 'Expressions Busy',
      status: 503,
      detail: "this client's expressions keep exceeding their limits; retry later",
    });
    // The seconds until the lane opens.
    assert.ok(Number(slowed.headers['retry-after']) >= 1 && Number(slowed.headers['retry-after']) <= 5, String(slowed.headers['retry-after']));
    const other = await post(app, [command('$.value === "abc"')], '10.0.0.10');
    assert.equal(other.statusCode, 200, other.body);
  });

  test('422 when a request’s expressions make the sandbox restart too often', async () => {
    const { app, evaluator } = await server({ workers: 1, timeoutMs: 2000, requestRestarts: 1 });
    await evaluator.ready();
    const bomb = (n: number) => command(`'x'.repeat(2 ** 28).split('').length > ${n}`);
    exactly(await post(app, [bomb(1), bomb(2), bomb(3), command('true')]), 422, {
      type: 'urn:cfgu:problem:budget-exceeded',
      title: 'Budget Exceeded',
      status: 422,
      detail: "the request's expressions caused more than 1 sandbox restarts (its budget)",
      rule: 'restart-budget',
    });
    await evaluator.ready();
    const ok = await post(app, [command('$.value === "abc"')]);
    assert.equal(ok.statusCode, 200, ok.body);
  });
});
