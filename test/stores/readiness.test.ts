/**
 * Readiness with a store down, through the running server (startServer, real sandbox, real stores): `/ready` is 503
 * until every store without a backup has answered once, a store with a backup never holds it, and requests to a
 * store that is down get 503 meanwhile. No shared service is used: the network stores point at a closed free port.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import pino from 'pino';
import { prepare, startServer, type RunningServer } from '../../src/server/process/start.js';
import { ONE_SANDBOX_CHILD } from '../server/helpers.js';

const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** A port nothing listens on (bound, then closed). */
function closedPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const a = srv.address();
      srv.close(() => resolve(typeof a === 'object' && a ? a.port : 0));
    });
  });
}

/** The server's log lines, and a way to wait for one. */
function capture() {
  const lines: Array<Record<string, any>> = [];
  const waiters = new Set<() => void>();
  const logger = pino(
    { level: 'info' },
    {
      write(line: string) {
        lines.push(JSON.parse(line));
        for (const w of [...waiters]) w();
      },
    },
  );
  /** Resolves once `count` lines match; rejects as soon as a line matches `unless` (the awaited state cannot come). */
  const waitFor = (predicate: (l: Record<string, any>) => boolean, count = 1, unless?: (l: Record<string, any>) => boolean) =>
    new Promise<void>((resolve, reject) => {
      const look = () => {
        const stop = unless && lines.find(unless);
        if (stop || lines.filter(predicate).length >= count) waiters.delete(look);
        if (stop) reject(new Error(`unexpected log line: ${JSON.stringify(stop)}`));
        else if (lines.filter(predicate).length >= count) resolve();
      };
      waiters.add(look);
      look();
    });
  return { logger, lines, waitFor };
}

async function serve(configu: unknown, files: Record<string, string> = {}): Promise<{ dir: string; server: RunningServer; base: string; log: ReturnType<typeof capture> }> {
  const dir = mkdtempSync(join(tmpdir(), 'cfgu-ready-'));
  dirs.push(dir);
  writeFileSync(join(dir, '.configu'), JSON.stringify(configu));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  const env = { PATH: process.env.PATH ?? '', HOME: dir, XDG_CACHE_HOME: join(dir, 'cache'), ...ONE_SANDBOX_CHILD };
  const prepared = await prepare({ config: join(dir, '.configu'), flags: { workers: '1', port: '0', host: '127.0.0.1' }, env, cwd: dir });
  const log = capture();
  const server = await startServer(prepared, {}, log.logger);
  const address = server.app.server.address();
  const base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  return { dir, server, base, log };
}

const exportFrom = (base: string, store: string) =>
  fetch(`${base}/export`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify([{ store, schema: { keys: { A: {} } } }]),
  });

const notReady = (l: Record<string, any>) => l.msg === 'not ready: waiting for stores without a backup to answer';
const ready = (l: Record<string, any>) => l.msg === 'ready';

describe('readiness with a store down', () => {
  test('a store without a backup holds /ready at 503 until it answers; one with a backup does not', async () => {
    const redisPort = await closedPort();
    const { dir, server, base, log } = await serve({
      stores: {
        files: { type: 'json-file', configuration: { path: 'data.json' }, default: true },
        cache: { type: 'redis', configuration: { host: '127.0.0.1', port: redisPort, timeout: 1000 }, backup: true },
      },
    }, { 'data.json': '{ not json' });
    try {
      // Two rounds of the start-up loop have found `files` unreadable: still not ready.
      await log.waitFor(notReady, 2, ready);
      assert.deepEqual(log.lines.find(notReady)!.stores, ['files'], 'the store with a backup is not waited for');
      let r = await fetch(`${base}/ready`);
      assert.equal(r.status, 503);
      assert.equal(await r.text(), '');

      // Requests to it get 503 meanwhile.
      r = await exportFrom(base, 'files');
      assert.equal(r.status, 503);
      assert.equal(r.headers.get('content-type'), 'application/problem+json; charset=utf-8');
      assert.match(String(r.headers.get('retry-after')), /^\d+$/);
      const problem = (await r.json()) as Record<string, unknown>;
      assert.deepEqual(
        problem,
        {
          type: 'urn:cfgu:problem:store-unavailable',
          title: 'Store Unavailable',
          status: 503,
          detail: 'store "files" cannot be reached or read; retry later',
        },
      );

      // Fixed: the next round (or this request) finds it answering, and the server turns ready, with `cache` still down.
      writeFileSync(join(dir, 'data.json'), '[{ "set": "", "key": "A", "value": "a" }]');
      await log.waitFor(ready);
      r = await fetch(`${base}/ready`);
      assert.equal(r.status, 200);
      assert.deepEqual(await r.json(), { status: 'ready' });
      assert.ok(log.lines.some((l) => /^store "cache" is unavailable: .*; its backup answers meanwhile/.test(l.msg)));
    } finally {
      assert.equal(await server.shutdown('test'), 0);
    }
  });

  test('network stores without a backup on a closed port: not ready, and their requests get 503', async () => {
    const port = await closedPort();
    const { server, base, log } = await serve({
      stores: {
        db: { type: 'postgresql', configuration: { host: '127.0.0.1', port, username: 'u', password: 'secret-pw', database: 'd', timeout: 1000 } },
        cache: { type: 'redis', configuration: { host: '127.0.0.1', port, timeout: 1000 } },
      },
    });
    try {
      // Still both after the second round (a client reconnecting in the background is not an answer).
      await log.waitFor(notReady, 2, ready);
      assert.deepEqual(log.lines.filter(notReady).map((l) => l.stores), [['db', 'cache'], ['db', 'cache']]);
      const r = await fetch(`${base}/ready`);
      assert.equal(r.status, 503);
      assert.equal(await r.text(), '');
      const e = await exportFrom(base, 'db');
      assert.equal(e.status, 503);
      const text = await e.text();
      assert.equal(e.headers.get('content-type'), 'application/problem+json; charset=utf-8');
      const problem = JSON.parse(text) as Record<string, unknown>;
      assert.deepEqual(
        problem,
        { type: 'urn:cfgu:problem:store-unavailable', title: 'Store Unavailable', status: 503, detail: 'store "db" cannot be reached or read; retry later' },
      );
      assert.doesNotMatch(text, /secret-pw|127\.0\.0\.1/);
      assert.ok(!log.lines.some(ready));
    } finally {
      assert.equal(await server.shutdown('test'), 0);
    }
  });
});
