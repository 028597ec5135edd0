/**
 * Running a fuzz campaign: the fixture project, the server binary on a free port, sending cases (HTTP on a fresh
 * connection, or raw bytes on a socket), the phases that compare answers over time and across servers, case files
 * and their replay. Used by test/fuzz/fuzz.test.ts (short) and scripts/fuzz.mjs (long).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { generateCase, Rng, type FuzzCase, type Profile } from './generator.js';
import { checkAnswer, documentedStatuses, isRetryLater, normalizeAnswer, STORE_CANARY, type Answer, type Finding, type OracleContext } from './oracle.js';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

// ---------------------------------------------------------------------------------------------------------------
// Fixture and server

/** A project folder: store `main` (default) over three sets, an in-memory `spare`, and `vault` that no case names. */
export function writeFixture(): string {
  const dir = mkdtempSync(join(tmpdir(), 'cfgu-fuzz-'));
  const main = [
    { set: '', key: 'HOST', value: 'localhost' },
    { set: 'prod', key: 'HOST', value: 'db.prod.internal' },
    { set: 'prod/eu', key: 'HOST', value: 'db.eu.prod.internal' },
    { set: '', key: 'PORT', value: '5432' },
    { set: 'prod', key: 'PORT', value: '8443' },
    { set: 'prod/eu', key: 'REGION', value: 'eu-west-1' },
    { set: '', key: 'LOG_LEVEL', value: 'info' },
    { set: 'prod', key: 'FEATURES', value: '{"search":true,"beta":false}' },
    { set: '', key: 'TIMEOUT_MS', value: '3000' },
    { set: 'prod', key: 'DB_USER', value: 'app' },
    { set: '', key: 'RATIO', value: '0.25' },
    { set: '', key: 'LIST', value: '["a","b"]' },
    { set: '', key: 'BIG', value: '12345678901234567890' },
    { set: 'prod', key: 'VAULT_TOKEN', value: `${STORE_CANARY}-main` },
  ];
  writeFileSync(join(dir, 'main.json'), JSON.stringify(main));
  writeFileSync(join(dir, 'vault.json'), JSON.stringify([{ set: '', key: 'HOST', value: `${STORE_CANARY}-vault` }]));
  writeFileSync(
    join(dir, '.configu'),
    JSON.stringify({
      stores: {
        main: { type: 'json-file', configuration: { path: 'main.json' }, default: true },
        spare: { type: 'in-memory' },
        vault: { type: 'json-file', configuration: { path: 'vault.json' } },
      },
    }),
  );
  return dir;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      s.close(() => resolve(typeof a === 'object' && a ? a.port : 0));
    });
  });
}

export interface RunningServer {
  url: string;
  pid: number;
  dir: string;
  child: ChildProcess;
  output(): string;
  stop(): Promise<void>;
}

/** `node bin/cfgu.js serve` (or CFGU_FUZZ_BIN) on the fixture; resolves once `/ready` answers 200. */
export async function startServer(options: { workers?: number; env?: Record<string, string> } = {}): Promise<RunningServer> {
  const dir = writeFixture();
  const port = await freePort();
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith('CONFIGU_')) env[k] = v;
  Object.assign(env, { CONFIGU_LOG_ENABLED: 'false', CONFIGU_SHUTDOWN_DRAIN_SECONDS: '0' }, options.env ?? {});
  // CFGU_FUZZ_BIN: another build's bin/cfgu.js (scripts/fuzz.mjs --bin), for a before/after comparison.
  const args = [process.env.CFGU_FUZZ_BIN ?? join(ROOT, 'bin', 'cfgu.js'), 'serve', '--config', join(dir, '.configu'), '--port', String(port), '--host', '127.0.0.1', '--workers', String(options.workers ?? 1)];
  const child = spawn(process.execPath, args, { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const keep = (c: Buffer) => {
    out += c.toString('utf8');
    if (out.length > 1_000_000) out = out.slice(-500_000);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const url = `http://127.0.0.1:${port}`;
  const server: RunningServer = {
    url,
    pid: child.pid!,
    dir,
    child,
    output: () => out,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const t = setTimeout(() => child.kill('SIGKILL'), 15_000);
        await exited;
        clearTimeout(t);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
  const probes = [
    { seed: 0, index: -1, family: 'probe', canary: '', method: 'GET', path: '/ready' },
    // `/ready` does not wait for the sandbox children: one trivial expression does, so no case pays their start-up
    { seed: 0, index: -1, family: 'probe', canary: '', method: 'POST', path: '/export', headers: { 'content-type': 'application/json' }, body: '[{"schema":{"keys":{"A":{"const":"{{ 1 + 1 }}"}}}}]' },
  ];
  for (let i = 0, probe = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`cfgu serve exited with ${child.exitCode}:\n${out}`);
    const a = await send(probes[probe]!, url, 30_000);
    if (a.status === 200 && ++probe === probes.length) return server;
    if (i > 1200) {
      await server.stop();
      throw new Error(`cfgu serve never became ready:\n${out}`);
    }
    if (a.status !== 200) await new Promise((r) => setTimeout(r, 50));
  }
}

/** Several servers started at once, so their start-ups (and their sandbox children's) overlap. All or none. */
export async function startServers(n: number, options: { workers?: number; env?: Record<string, string> } = {}): Promise<RunningServer[]> {
  const settled = await Promise.allSettled(Array.from({ length: n }, () => startServer(options)));
  const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failed) {
    await Promise.all(settled.map((s) => (s.status === 'fulfilled' ? s.value.stop() : undefined)));
    throw failed.reason;
  }
  return settled.map((s) => (s as PromiseFulfilledResult<RunningServer>).value);
}

// ---------------------------------------------------------------------------------------------------------------
// Sending

const headerRecord = (h: Record<string, string | string[] | undefined>) =>
  Object.fromEntries(Object.entries(h).map(([k, v]) => [k, Array.isArray(v) ? v.join(', ') : String(v ?? '')]));

/** One case on a fresh connection. Never rejects: failures are in `error`. */
export function send(c: FuzzCase, baseUrl: string, timeoutMs: number): Promise<Answer> {
  return c.raw !== undefined ? sendRaw(Buffer.from(c.raw, 'base64'), baseUrl, timeoutMs) : sendHttp(c, baseUrl, timeoutMs);
}

function sendHttp(c: FuzzCase, baseUrl: string, timeoutMs: number): Promise<Answer> {
  const started = performance.now();
  const u = new URL(baseUrl);
  return new Promise((resolve) => {
    let done = false;
    const finish = (a: Omit<Answer, 'ms'>) => {
      if (!done) resolve({ ...a, ms: performance.now() - started });
      done = true;
    };
    const hasBody = c.body !== undefined && c.method !== 'GET' && c.method !== 'HEAD';
    let req;
    try {
      req = httpRequest({
        host: u.hostname,
        port: u.port,
        method: c.method ?? 'POST',
        path: c.path ?? '/export',
        // an explicit length: node sends a DELETE or OPTIONS body unframed otherwise, which is our error, not the server's
        headers: { connection: 'close', ...(hasBody ? { 'content-length': String(Buffer.byteLength(c.body!)) } : {}), ...(c.headers ?? {}) },
        agent: false,
      });
    } catch (e) {
      finish({ clientError: true, error: `client refused: ${(e as Error).message}`, status: 0, contentType: '', headers: {}, body: '' });
      return;
    }
    const timer = setTimeout(() => {
      finish({ error: `timeout after ${timeoutMs} ms`, status: 0, contentType: '', headers: {}, body: '' });
      req.destroy();
    }, timeoutMs);
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (b: Buffer) => chunks.push(b));
      res.on('end', () => {
        clearTimeout(timer);
        const headers = headerRecord(res.headers);
        finish({ status: res.statusCode ?? 0, contentType: headers['content-type'] ?? '', headers, body: Buffer.concat(chunks).toString('utf8') });
      });
      res.on('error', (e) => {
        clearTimeout(timer);
        finish({ error: `reset while reading: ${e.message}`, status: res.statusCode ?? 0, contentType: '', headers: {}, body: '' });
      });
    });
    req.on('error', (e: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      finish({ error: `reset: ${e.code ?? e.message}`, status: 0, contentType: '', headers: {}, body: '' });
    });
    if (hasBody) req.end(c.body);
    else req.end();
  });
}

function sendRaw(bytes: Buffer, baseUrl: string, timeoutMs: number): Promise<Answer> {
  const started = performance.now();
  const u = new URL(baseUrl);
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let done = false;
    const s = connect(Number(u.port), u.hostname, () => s.end(bytes));
    const finish = (error?: string) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      s.destroy();
      const responses = parseResponses(Buffer.concat(chunks));
      const first = responses[0];
      if (!first) resolve({ error: error ?? 'connection closed without an answer', status: 0, contentType: '', headers: {}, body: '', ms: performance.now() - started });
      else resolve({ ...first, more: responses.slice(1).map((r) => ({ ...r, ms: 0 })), ms: performance.now() - started });
    };
    const timer = setTimeout(() => finish(`timeout after ${timeoutMs} ms`), timeoutMs);
    s.on('data', (b: Buffer) => chunks.push(b));
    s.on('end', () => finish());
    s.on('close', () => finish());
    s.on('error', (e: NodeJS.ErrnoException) => finish(`reset: ${e.code ?? e.message}`));
  });
}

/** HTTP/1.x responses in a byte stream (Content-Length, chunked, or up to the end). */
export function parseResponses(buf: Buffer): Array<Omit<Answer, 'ms'>> {
  const out: Array<Omit<Answer, 'ms'>> = [];
  let at = 0;
  while (at < buf.length) {
    const end = buf.indexOf('\r\n\r\n', at);
    if (end < 0) break;
    const lines = buf.subarray(at, end).toString('latin1').split('\r\n');
    const status = Number(/^HTTP\/\d\.\d (\d{3})/.exec(lines[0] ?? '')?.[1] ?? 0);
    const headers: Record<string, string> = {};
    for (const l of lines.slice(1)) {
      const i = l.indexOf(':');
      if (i > 0) headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
    }
    let bodyStart = end + 4;
    let body: Buffer;
    if (headers['content-length'] !== undefined) {
      body = buf.subarray(bodyStart, bodyStart + Number(headers['content-length']));
      at = bodyStart + body.length;
    } else if (/chunked/i.test(headers['transfer-encoding'] ?? '')) {
      const parts: Buffer[] = [];
      for (;;) {
        const nl = buf.indexOf('\r\n', bodyStart);
        if (nl < 0) break;
        const size = parseInt(buf.subarray(bodyStart, nl).toString('latin1'), 16);
        if (!(size > 0)) {
          bodyStart = nl + 4;
          break;
        }
        parts.push(buf.subarray(nl + 2, nl + 2 + size));
        bodyStart = nl + 2 + size + 2;
      }
      body = Buffer.concat(parts);
      at = bodyStart;
    } else {
      body = buf.subarray(bodyStart);
      at = buf.length;
    }
    out.push({ status, contentType: headers['content-type'] ?? '', headers, body: body.toString('utf8') });
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Campaign

export interface CampaignOptions {
  seed: number;
  requests: number;
  profile: Profile;
  /** Requests in flight at once (1 = strictly sequential, the deterministic mode of `npm test`). */
  concurrency: number;
  /** Share of cases re-sent later on the same server, in a shuffled order. */
  resendShare: number;
  /** Re-send that share again on a second, fresh server (another order, no shared cache). */
  freshServer: boolean;
  timeoutMs: number;
  workers: number;
  /** Extra environment of the servers started (e.g. CONFIGU_EXPRESSION_WORKERS). */
  env?: Record<string, string>;
  /** An already running server (then no fresh-server phase). */
  url?: string;
  log?: (line: string) => void;
  /** Called after each phase with the server's pid (memory sampling). */
  onServer?: (server: RunningServer, phase: 'start' | 'end') => void;
}

export interface CampaignResult {
  cases: FuzzCase[];
  answers: Answer[];
  findings: Finding[];
  /** For nondeterminism findings: the order each server saw (indexes), to build a replay. */
  orders: { first: number[]; resend: number[]; fresh: number[] };
  statusCounts: Record<string, number>;
  ms: number;
  serverOutput: string;
}

async function pool<T>(items: T[], concurrency: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.max(1, concurrency) }, async () => {
      while (next < items.length) await fn(items[next++]!);
    }),
  );
}

/** Send and, when the answer is "retry later" (503 + Retry-After), ask again a few times first. */
export async function settle(c: FuzzCase, url: string, timeoutMs: number): Promise<Answer> {
  let a = await send(c, url, timeoutMs);
  for (let i = 1; i <= 5 && isRetryLater(a); i++) {
    await new Promise((r) => setTimeout(r, 200 * i));
    a = await send(c, url, timeoutMs);
  }
  return a;
}

export function oracleContext(...servers: Array<RunningServer | undefined>): OracleContext {
  return { statuses: documentedStatuses(ROOT), secretsPaths: [ROOT, ...servers.map((s) => s?.dir ?? '')].filter(Boolean) };
}

export async function runCampaign(o: CampaignOptions): Promise<CampaignResult> {
  const started = performance.now();
  const log = o.log ?? (() => {});
  const cases = Array.from({ length: o.requests }, (_, i) => generateCase(o.seed, i, { profile: o.profile }));
  const answers: Answer[] = new Array(cases.length);
  const findings: Finding[] = [];
  const statusCounts: Record<string, number> = {};
  let server: RunningServer | undefined;
  // the server of phase 3, started with the first one (it takes no request before phase 3, so it is still fresh)
  let fresh: RunningServer | undefined;
  let output = '';
  const orders = { first: cases.map((c) => c.index), resend: [] as number[], fresh: [] as number[] };
  try {
    if (!o.url) [server, fresh] = await startServers(o.freshServer ? 2 : 1, { workers: o.workers, env: o.env });
    const url = o.url ?? server!.url;
    const ctx = oracleContext(server, fresh);
    if (server) o.onServer?.(server, 'start');

    // 1. every case once, in index order
    let sent = 0;
    await pool(cases, o.concurrency, async (c) => {
      const a = await send(c, url, o.timeoutMs);
      answers[c.index] = a;
      const key = a.error ? (a.clientError ? 'client-refused' : 'no-answer') : String(a.status);
      statusCounts[key] = (statusCounts[key] ?? 0) + 1;
      findings.push(...checkAnswer(c, a, ctx));
      if (a.ms > 1000) log(`  slow: case ${c.index} ${c.family} ${Math.round(a.ms)} ms -> ${a.status}`);
      if (++sent % 1000 === 0) log(`  ${sent}/${cases.length} sent, ${findings.length} findings`);
    });

    log(`  phase 1 done at ${Math.round(performance.now() - started)} ms`);
    // 2. a sample again, later, shuffled, on the same server
    const rng = new Rng(o.seed ^ 0x5eed);
    const sample = rng.shuffle(cases.filter(() => rng.chance(o.resendShare)));
    orders.resend = sample.map((c) => c.index);
    log(`  re-sending ${sample.length} cases in another order`);
    const compare = (phase: string, target: string) => async (c: FuzzCase) => {
      const first = answers[c.index]!;
      if (!comparable(first, first)) return;
      const again = await settle(c, target, o.timeoutMs);
      findings.push(...checkAnswer(c, again, ctx));
      if (comparable(first, again) && normalizeAnswer(again) !== normalizeAnswer(first)) {
        findings.push({ check: nondeterminismCheck(phase, first, again), index: c.index, family: c.family, message: diffMessage(first, again) });
      }
    };
    await pool(sample, o.concurrency, compare('later', url));
    log(`  phase 2 done at ${Math.round(performance.now() - started)} ms`);
    if (server) o.onServer?.(server, 'end');

    // 3. the same sample on a fresh server, reversed: answers may not depend on what a server saw before
    if (fresh) {
      output += server!.output();
      await server!.stop();
      server = undefined;
      // the reverse of the first order: every pair of sampled cases now meets the other way round
      const reversed = sample.slice().sort((a, b) => b.index - a.index);
      orders.fresh = reversed.map((c) => c.index);
      log(`  re-sending ${reversed.length} cases to a fresh server`);
      await pool(reversed, o.concurrency, compare('fresh-server', fresh.url));
    }
  } finally {
    for (const s of [server, fresh]) {
      if (!s) continue;
      output += s.output();
      await s.stop();
    }
  }
  return { cases, answers, findings, orders, statusCounts, ms: performance.now() - started, serverOutput: output };
}

/**
 * Name of a nondeterminism finding, by what differs:
 * - `limit-kind`: only which sandbox limit a job hit (a memory bomb can end as `time-limit`: a garbage-collection
 *   storm near the heap limit costs CPU time, docs/expressions.md);
 * - `time-limit`: one answer has a time-limit failure or the request's CPU budget, the other not (or not the same);
 * - `memory-limit`: the same with the memory limit (a job blamed for memory another job used);
 * - else `<phase>`: an answer that depends on what came before (`later`, `fresh-server`).
 */
export function nondeterminismCheck(phase: string, a: Answer, b: Answer): string {
  const [x, y] = [normalizeAnswer(a), normalizeAnswer(b)];
  const limit = /exceeded (?:the time limit of \d+ ms|the sandbox memory limit of \d+ MB)/g;
  if (x.replace(limit, 'exceeded a limit') === y.replace(limit, 'exceeded a limit')) return 'nondeterministic-limit-kind';
  const time = /exceeded the time limit of \d+ ms|"rule":"cpu-budget"/;
  if (time.test(x) || time.test(y)) return 'nondeterministic-time-limit';
  if (/exceeded the sandbox memory limit/.test(x + y)) return 'nondeterministic-memory-limit';
  return `nondeterministic-${phase}`;
}

function diffMessage(a: Answer, b: Answer): string {
  const x = normalizeAnswer(a);
  const y = normalizeAnswer(b);
  // the first difference, with some context (640 characters: enough for an error body's message): the status line
  // alone rarely says what changed
  let i = 0;
  while (i < x.length && x[i] === y[i]) i++;
  const at = Math.max(0, Math.min(i - 80, x.indexOf('\n') + 1 > i ? 0 : i - 80));
  const show = (t: string) => `${t.slice(0, t.indexOf('\n') < 0 ? t.length : t.indexOf('\n'))} ...${t.slice(at, at + 640)}`.replace(/\n/g, ' ');
  return `first: ${show(x)} | then: ${show(y)}`;
}

// ---------------------------------------------------------------------------------------------------------------
// Findings: grouping, case files, replay

/** A class of findings: the check and the generator family of the case. */
export const classOf = (f: Finding) => `${f.check}@${f.family}`;

export function groupFindings(findings: Finding[]): Map<string, Finding[]> {
  const groups = new Map<string, Finding[]>();
  for (const f of findings) {
    const k = classOf(f);
    if (!groups.has(k)) groups.set(k, []);
    groups.get(k)!.push(f);
  }
  return new Map([...groups].sort((a, b) => a[0].localeCompare(b[0])));
}

export interface CaseFile {
  format: 'cfgu-fuzz-case/1';
  class: string;
  check: string;
  message: string;
  /** Sent in order to one fresh server; the oracle runs on every answer. */
  sequence: FuzzCase[];
  /** Nondeterminism: the last case of `sequence` must also get the same answer alone on another fresh server. */
  compareAlone?: boolean;
  found: { seed: number; index: number; profile: string; answer: { status: number; contentType: string; body: string } };
}

export function caseFile(f: Finding, result: CampaignResult, profile: string, prefix?: FuzzCase[]): CaseFile {
  const c = result.cases[f.index]!;
  const a = result.answers[f.index]!;
  const nondet = f.check.startsWith('nondeterministic');
  return {
    format: 'cfgu-fuzz-case/1',
    class: classOf(f),
    check: f.check,
    message: f.message,
    sequence: nondet ? [...(prefix ?? []), c] : [c],
    ...(nondet ? { compareAlone: true } : {}),
    found: { seed: c.seed, index: c.index, profile, answer: { status: a.status, contentType: a.contentType, body: a.body.slice(0, 2000) } },
  };
}

export function writeCaseFile(dir: string, file: CaseFile): string {
  mkdirSync(dir, { recursive: true });
  const name = `${file.class.replace(/[^A-Za-z0-9@-]+/g, '_')}.json`;
  const path = join(dir, name);
  writeFileSync(path, JSON.stringify(file, null, 2) + '\n');
  return path;
}

export const readCaseFile = (path: string): CaseFile => JSON.parse(readFileSync(path, 'utf8')) as CaseFile;

export interface ReplayResult {
  findings: Finding[];
  /** The answers of the file's sequence, in order (server A). */
  answers: Answer[];
  /** Compared files: the last case's answer on server B, where it came before the rest of its sequence. */
  alone?: Answer;
}

/**
 * Replay case files, all on two servers started at once (or only on `url`). Server A gets every file's sequence in
 * file order. Server B first gets the last case of every `compareAlone` file (files in reverse order), so each comes
 * before the rest of its own sequence, then every other case in the reverse of A's order. Every answer goes through
 * the oracle; a request sent twice to one server must get the same answer both times; each case must get the same
 * answer from A and B. A file needs no server of its own: an answer that depends on another file's cases is an
 * order-dependent answer as much as one that depends on its own prefix.
 */
export async function replayAll(files: CaseFile[], options: { url?: string; timeoutMs?: number; workers?: number; env?: Record<string, string> } = {}): Promise<ReplayResult[]> {
  const timeoutMs = options.timeoutMs ?? 30_000;
  const entries = files.flatMap((f, file) => f.sequence.map((c, at) => ({ file, c, target: !!f.compareAlone && at === f.sequence.length - 1 })));
  const results: ReplayResult[] = files.map(() => ({ findings: [], answers: [] }));
  const needB = !options.url && files.some((f) => f.compareAlone);
  const servers = options.url ? [] : await startServers(needB ? 2 : 1, { workers: options.workers ?? 1, env: options.env });
  try {
    const ctx = oracleContext(...servers);
    const run = async (order: typeof entries, url: string) => {
      const answers = new Map<(typeof entries)[number], Answer>();
      const seen = new Map<string, Answer>();
      for (const e of order) {
        const a = await settle(e.c, url, timeoutMs);
        answers.set(e, a);
        results[e.file]!.findings.push(...checkAnswer(e.c, a, ctx));
        // the same request twice on one server must get the same answer both times
        const key = JSON.stringify([e.c.method, e.c.path, e.c.headers, e.c.body, e.c.raw]);
        const before = seen.get(key);
        if (before && comparable(before, a) && normalizeAnswer(before) !== normalizeAnswer(a)) {
          results[e.file]!.findings.push({ check: nondeterminismCheck('later', before, a), index: e.c.index, family: e.c.family, message: diffMessage(before, a) });
        }
        seen.set(key, a);
      }
      return answers;
    };
    const onA = await run(entries, options.url ?? servers[0]!.url);
    for (const e of entries) results[e.file]!.answers.push(onA.get(e)!);
    if (needB) {
      const targets = entries.filter((e) => e.target).reverse();
      const onB = await run([...targets, ...entries.filter((e) => !e.target).reverse()], servers[1]!.url);
      for (const e of entries) {
        const a = onA.get(e)!;
        const b = onB.get(e)!;
        if (e.target) results[e.file]!.alone = b;
        if (comparable(a, b) && normalizeAnswer(a) !== normalizeAnswer(b)) {
          const where = e.target ? 'before the rest of its sequence' : 'in the reverse order';
          results[e.file]!.findings.push({ check: nondeterminismCheck('fresh-server', b, a), index: e.c.index, family: e.c.family, message: `${where} ${diffMessage(b, a)}` });
        }
      }
    }
  } finally {
    await Promise.all(servers.map((s) => s.stop()));
  }
  return results;
}

/** Two answers the determinism check compares: both arrived, neither says "retry later". */
const comparable = (a: Answer, b: Answer) => !a.error && !b.error && !isRetryLater(a) && !isRetryLater(b);

/** Re-run one case file (see replayAll). */
export async function replay(file: CaseFile, options: { url?: string; timeoutMs?: number; workers?: number } = {}): Promise<ReplayResult> {
  return (await replayAll([file], options))[0]!;
}

/**
 * For an order-dependent answer: the one earlier case that, sent first to a fresh server, changes the answer of
 * `target` from what it gets alone (bisection over `before`, one fresh server per step). Undefined when no single
 * case explains it.
 */
export async function findCulprit(target: FuzzCase, before: FuzzCase[], options: { timeoutMs: number; workers: number; log?: (s: string) => void }): Promise<FuzzCase | undefined> {
  const answerAfter = async (prefix: FuzzCase[]) => {
    const server = await startServer({ workers: options.workers });
    try {
      for (const c of prefix) await send(c, server.url, options.timeoutMs);
      return normalizeAnswer(await send(target, server.url, options.timeoutMs));
    } finally {
      await server.stop();
    }
  };
  const alone = await answerAfter([]);
  let candidates = before;
  if ((await answerAfter(candidates)) === alone) return undefined;
  while (candidates.length > 1) {
    const half = candidates.slice(0, Math.ceil(candidates.length / 2));
    const rest = candidates.slice(half.length);
    options.log?.(`  bisecting: ${candidates.length} candidates`);
    if ((await answerAfter(half)) !== alone) candidates = half;
    else if ((await answerAfter(rest)) !== alone) candidates = rest;
    else return undefined;
  }
  return candidates[0];
}
