/** Shared helpers of the server suites: temp folders, free ports, spawning the real binary, HTTP calls. */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Writable } from 'node:stream';
import { pino, type Logger } from 'pino';
import { lineRecorder, record, recordHeaders } from '../helpers/capture.js';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
/** The binary under test (CFGU_TEST_BIN overrides, e.g. for an installed copy). */
export const BIN = process.env.CFGU_TEST_BIN ?? join(ROOT, 'bin', 'cfgu.js');

const dirs: string[] = [];
export function tempDir(prefix = 'cfgu-server-'): string {
  const d = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(d);
  return d;
}
export function removeTempDirs(): void {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
}

export function writeJson(path: string, value: unknown): string {
  writeFileSync(path, JSON.stringify(value, null, 2));
  return path;
}

export { freePort } from '../helpers/private.js';

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export interface HttpAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  json<T = any>(): T;
}

export interface CallOptions {
  method?: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
  /** PEM CA for https URLs. */
  ca?: string | Buffer;
  /** Idle-socket limit, only where a poll retries (waitForStatus); a plain call waits as long as its test does. */
  timeoutMs?: number;
  agent?: false;
  /** The local address to connect from (another loopback address, 127.0.0.2, is another client). */
  localAddress?: string;
}

/** One HTTP(S) call with node's clients (no keep-alive): status, headers, text body. */
export function call(url: string, options: CallOptions = {}): Promise<HttpAnswer> {
  const u = new URL(url);
  const req = u.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const r = req(
      u,
      {
        method: options.method ?? 'GET',
        headers: { connection: 'close', ...(options.headers ?? {}) },
        agent: false,
        ...(options.ca ? { ca: options.ca } : {}),
        ...(options.timeoutMs ? { timeout: options.timeoutMs } : {}),
        ...(options.localAddress ? { localAddress: options.localAddress } : {}),
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const body = Buffer.concat(chunks).toString('utf8');
          record('response-body', body);
          recordHeaders(res.headers);
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body, json: () => JSON.parse(body) });
        });
        res.on('error', reject);
      },
    );
    r.on('timeout', () => r.destroy(new Error(`timeout calling ${url}`)));
    r.on('error', reject);
    if (options.body !== undefined) r.write(options.body);
    r.end();
  });
}

export const postJson = (url: string, body: unknown, headers: Record<string, string> = {}, extra: CallOptions = {}) =>
  call(url, { ...extra, method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });

// ---------------------------------------------------------------------------------------------------------------
// The real binary

/**
 * The sandbox layout of the servers the tests start: one sandbox child and no warm spare per server process. Each
 * sandbox process costs ~0.7 s of CPU to start (~0.5 s with the build's start-up aids), and the suite started ~290 of
 * them (half of its CPU time) when every server ran the binary's default of two and a spare.
 */
export const ONE_SANDBOX_CHILD = { CONFIGU_EXPRESSION_WORKERS: '1', CONFIGU_EXPRESSION_SPARES: '0' } as const;

const children = new Set<ChildProcess>();

export interface Spawned {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves with the exit code (or the signal name). */
  exited: Promise<number | string>;
  /** Waits until stdout has a JSON log line whose `msg` is `msg` (and that `match` accepts). */
  waitForLog(msg: string, match?: (line: Record<string, any>) => boolean, timeoutMs?: number): Promise<Record<string, any>>;
  /** Every JSON log line so far. */
  logs(): Array<Record<string, any>>;
}

/** `launcher`: a command that runs the server in its place (e.g. `['prlimit', '--nofile=1024:1024']`, which execs it). */
export function spawnCfgu(args: string[], env: Record<string, string | undefined> = {}, cwd = ROOT, launcher: string[] = []): Spawned {
  const childEnv: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith('CONFIGU_')) childEnv[k] = v;
  // ONE_SANDBOX_CHILD unless the test sets its own sandbox layout: tests about the pool, its children or its spares
  // set CONFIGU_EXPRESSION_WORKERS or CONFIGU_EXPRESSION_SPARES themselves and then get the binary's defaults for the
  // rest.
  if (!('CONFIGU_EXPRESSION_WORKERS' in env) && !('CONFIGU_EXPRESSION_SPARES' in env)) Object.assign(childEnv, ONE_SANDBOX_CHILD);
  // No drain after SIGTERM unless the test is about it: a server stopped by a test has no load balancer in front, and
  // the default drain (5 s) per stop would add minutes to the suite. The drain's own tests set it.
  childEnv.CONFIGU_SHUTDOWN_DRAIN_SECONDS = '0';
  for (const [k, v] of Object.entries(env)) if (v !== undefined) childEnv[k] = v;
  const command = [...launcher, process.execPath, BIN, ...args];
  const child = spawn(command[0]!, command.slice(1), { cwd, env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  let out = '';
  let err = '';
  // Captured for the whole-suite scan (test/helpers/capture.ts): stdout is the server's log, a JSON line each.
  const logLines = lineRecorder('log-line');
  const errLines = lineRecorder('server-stderr');
  child.stdout!.on('data', (c: Buffer) => (out += c.toString('utf8'), logLines.write(c)));
  child.stderr!.on('data', (c: Buffer) => (err += c.toString('utf8'), errLines.write(c)));
  child.on('close', () => (logLines.end(), errLines.end()));
  const exited = new Promise<number | string>((resolve) => {
    child.on('exit', (code, signal) => {
      children.delete(child);
      resolve(code ?? signal ?? -1);
    });
  });
  const logs = (): Array<Record<string, any>> =>
    out
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => {
        try {
          return JSON.parse(l) as Record<string, any>;
        } catch {
          return {};
        }
      });
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    exited,
    logs,
    async waitForLog(msg, match = () => true, timeoutMs = 60_000) {
      const end = Date.now() + timeoutMs;
      for (;;) {
        const hit = logs().find((l) => l.msg === msg && match(l));
        if (hit) return hit;
        if (child.exitCode !== null || child.signalCode !== null) {
          throw new Error(`cfgu exited (${child.exitCode ?? child.signalCode}) before logging "${msg}"\nstdout:\n${out}\nstderr:\n${err}`);
        }
        if (Date.now() > end) throw new Error(`timed out waiting for log "${msg}"\nstdout:\n${out}\nstderr:\n${err}`);
        await sleep(25);
      }
    },
  };
}

/** Kill every child still running (test teardown). */
export async function killChildren(): Promise<void> {
  const waits: Promise<unknown>[] = [];
  for (const c of children) {
    if (c.exitCode === null && c.signalCode === null) {
      waits.push(new Promise((r) => c.once('exit', r)));
      c.kill('SIGKILL');
    }
  }
  children.clear();
  await Promise.all(waits);
}

/** Poll until `url` answers `status` (or throw). */
export async function waitForStatus(url: string, status: number, timeoutMs = 60_000, options: CallOptions = {}): Promise<HttpAnswer> {
  const end = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const r = await call(url, { ...options, timeoutMs: 2000 });
      if (r.status === status) return r;
      last = `status ${r.status}`;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) throw new Error(`timed out waiting for ${status} from ${url}: ${String(last)}`);
    await sleep(25);
  }
}

/** Problem-details assertions shared by the suites. */
export function isProblem(r: HttpAnswer, status: number): Record<string, any> {
  if (r.status !== status) throw new Error(`expected ${status}, got ${r.status}: ${r.body}`);
  const ct = String(r.headers['content-type'] ?? '');
  if (!ct.startsWith('application/problem+json')) throw new Error(`expected problem+json, got ${ct}`);
  const p = JSON.parse(r.body);
  for (const f of ['type', 'title', 'status', 'detail']) if (!(f in p)) throw new Error(`problem without ${f}: ${r.body}`);
  if (p.status !== status) throw new Error(`problem status ${p.status} != ${status}`);
  return p;
}

/**
 * `cfgu serve ... --port 0 --host 127.0.0.1`: the system picks a free port, read back from the server's
 * "listening; initialising stores" log line (no port is chosen beforehand, so none can be taken in between). Needs
 * logging on (the default). Resolves once that line is logged; wait for /ready yourself when stores matter.
 */
export async function serveOnFreePort(
  args: string[],
  env: Record<string, string | undefined> = {},
  cwd = ROOT,
  launcher: string[] = [],
): Promise<{ p: Spawned; port: number; base: string }> {
  const p = spawnCfgu(['serve', ...args, '--port', '0', '--host', '127.0.0.1'], env, cwd, launcher);
  // No time limit: the wait ends on the line or on the process's exit (waitForLog throws then), so a machine busy
  // enough to take minutes to start node (a CPU hog beside the suite) slows the test instead of failing it.
  const line = await p.waitForLog('listening; initialising stores', (l) => typeof l.port === 'number' && l.port > 0, Infinity);
  return { p, port: line.port as number, base: `http://127.0.0.1:${line.port}` };
}

/** A pino logger whose JSON lines are kept: the raw text, and the lines parsed. */
export function captureLog(): { logger: Logger; raw: () => string; lines: () => Array<Record<string, unknown>> } {
  let raw = '';
  const lines = lineRecorder('log-line');
  const stream = new Writable({
    write(chunk, _enc, cb) {
      raw += chunk.toString();
      lines.write(chunk);
      cb();
    },
  });
  return {
    logger: pino({ level: 'info' }, stream) as unknown as Logger,
    raw: () => raw,
    lines: () => raw.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}
