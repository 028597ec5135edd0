// Three cfgu servers behind HAProxy over one PostgreSQL store: a rolling restart under continuous load, then a value
// written with `cfgu upsert` read back from every replica. Used by test/deploy/replicas.test.ts (which asserts the
// outcome) and runnable alone for bigger figures:
//
//   node_modules/.bin/tsx bench/replicas.ts [--clients 8] [--pg postgres://postgres@127.0.0.1:5432/test]
//
// HAProxy (Debian's package; scripts/test-setup-haproxy.sh) runs in the foreground with a generated configuration
// on loopback ports: health checks GET /ready every 300 ms (two failures take a replica out); a connection refused or reset by a replica that is
// going away is retried on another one (POST /export only reads, so a retry is safe). Each replica is stopped with
// SIGTERM (it turns /ready to 503 and drains), must exit 0, is started again on the same port, and the next one is
// restarted only once it is ready again. The PostgreSQL table is this run's own (random name) and is dropped at the end.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const BIN = join(ROOT, 'bin', 'cfgu.js');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export const freePort = (): Promise<number> =>
  new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });

/** The haproxy binary, or undefined. */
export function haproxyBinary(): string | undefined {
  for (const p of ['haproxy', '/usr/sbin/haproxy']) {
    try {
      execFileSync(p, ['-v'], { stdio: 'ignore' });
      return p;
    } catch {
      /* next */
    }
  }
  return undefined;
}

export function haproxyConfig(frontPort: number, backends: number[]): string {
  return [
    'global',
    '  maxconn 2000',
    'defaults',
    '  mode http',
    '  timeout connect 2s',
    '  timeout client 30s',
    '  timeout server 30s',
    // A check answered late on a loaded machine is not a dead replica: only a refused connection or a 503 is.
    '  timeout check 10s',
    '  retries 3',
    '  option redispatch',
    '  option http-buffer-request',
    // Safe here: the proxied requests only read (POST /export evaluates, it writes nothing).
    '  retry-on conn-failure empty-response response-timeout',
    'frontend cfgu',
    `  bind 127.0.0.1:${frontPort}`,
    '  default_backend replicas',
    'backend replicas',
    '  balance roundrobin',
    '  option httpchk GET /ready',
    '  http-check expect status 200',
    ...backends.map((port, i) => `  server r${i + 1} 127.0.0.1:${port} check inter 300ms fall 2 rise 1`),
    '',
  ].join('\n');
}

export interface Answer {
  status: number;
  body: string;
}

async function post(url: string, body: unknown, timeoutMs = 30_000): Promise<Answer> {
  const res = await fetch(url, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' }, signal: AbortSignal.timeout(timeoutMs) });
  return { status: res.status, body: await res.text() };
}

async function until<T>(what: string, check: () => Promise<T> | T, guardMs = 120_000): Promise<T> {
  const end = Date.now() + guardMs;
  for (;;) {
    try {
      const v = await check();
      if (v) return v;
    } catch {
      /* not yet */
    }
    if (Date.now() > end) throw new Error(`gave up waiting for ${what}`);
    await sleep(50);
  }
}

const childEnv = (extra: Record<string, string>): NodeJS.ProcessEnv => {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k) && !k.startsWith('CONFIGU_')));
  return { ...env, ...extra };
};

/**
 * Runs the scenario; resolves with counts. Cleans up everything it started (servers, haproxy, folder, table).
 * options: { pg (connection URL), clients (concurrent request loops), log (progress callback) }
 */
export interface ReplicaRun {
  requests: number;
  ok: number;
  failures: string[];
  restarts: number;
  exitCodes: Array<number | string>;
  perReplica: Answer[];
}

type Child = ChildProcess & { exited: Promise<number | string> };

export async function runReplicas({
  pg = 'postgres://postgres@127.0.0.1:5432/test',
  clients = 6,
  log = (_message: string): void => undefined,
}: { pg?: string; clients?: number; log?: (message: string) => void } = {}): Promise<ReplicaRun> {
  const haproxy = haproxyBinary();
  if (!haproxy) throw new Error('haproxy is not installed (scripts/test-setup-haproxy.sh)');
  const dir = mkdtempSync(join(tmpdir(), 'cfgu-replicas-'));
  const table = `cfgu_replicas_${randomBytes(5).toString('hex')}`;
  const config = join(dir, '.configu');
  writeFileSync(config, JSON.stringify({ stores: { main: { type: 'postgresql', configuration: { url: pg, tableName: table } } } }));
  writeFileSync(join(dir, 'app.cfgu.json'), JSON.stringify({ keys: { GREETING: { description: 'served by every replica' } } }));
  const schema = { keys: { GREETING: {} } };
  const request = [{ set: 'prod', schema }];
  const started = new Set<Child>();
  const upsert = (value: string) =>
    execFileSync(process.execPath, [BIN, 'upsert', '--config', config, '--set', 'prod', '--schema', join(dir, 'app.cfgu.json'), '--kv', `GREETING=${value}`], {
      cwd: dir,
      env: childEnv({}),
      stdio: ['ignore', 'ignore', 'pipe'],
    });
  /**
   * A replica on `port` (0: any free port), resolved once it listens, with the port it got from its own
   * `listening` log line: a port picked beforehand could be taken by another program in the meantime, and then
   * another server's /ready would pass for this replica's. Rejects with the replica's error when it exits first.
   */
  const startReplica = (port: number): Promise<{ child: Child; port: number }> => {
    const child = spawn(process.execPath, [BIN, 'serve', '--config', config, '--port', String(port), '--host', '127.0.0.1', '--workers', '1'], {
      cwd: dir,
      env: childEnv({ CONFIGU_EXPRESSION_WORKERS: '1', CONFIGU_EXPRESSION_SPARES: '0' }),
      stdio: ['ignore', 'pipe', 'pipe'],
    }) as Child;
    started.add(child);
    child.exited = new Promise((r) => child.once('exit', (code, signal) => (started.delete(child), r(code ?? signal ?? -1))));
    let stderr = '';
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
    return new Promise((resolve, reject) => {
      let out = '';
      const onData = (d: Buffer) => {
        out += d.toString('utf8');
        // Whole lines only: a chunk can end inside one.
        for (const line of out.split('\n').slice(0, -1)) {
          if (!line.includes('"listening; initialising stores"')) continue;
          child.stdout!.off('data', onData);
          child.stdout!.resume(); // its request lines from now on: read and dropped
          resolve({ child, port: (JSON.parse(line) as { port: number }).port });
          return;
        }
      };
      child.stdout!.on('data', onData);
      void child.exited.then((code) => reject(new Error(`replica on port ${port} exited (${code}) before listening: ${stderr.trim().split('\n')[0] ?? ''}`)));
    });
  };
  const ready = (port: number) => until(`replica :${port} ready`, async () => (await fetch(`http://127.0.0.1:${port}/ready`)).status === 200);

  let proxy: Child;
  let stop = false;
  const counts: ReplicaRun = { requests: 0, ok: 0, failures: [], restarts: 0, exitCodes: [], perReplica: [] };
  try {
    upsert('first');
    const first = await Promise.all([0, 0, 0].map(startReplica));
    const replicas = first.map((r) => r.child);
    const ports = first.map((r) => r.port);
    await Promise.all(ports.map(ready));
    const front = await freePort();
    writeFileSync(join(dir, 'haproxy.cfg'), haproxyConfig(front, ports));
    proxy = spawn(haproxy, ['-db', '-f', join(dir, 'haproxy.cfg')], { stdio: ['ignore', 'ignore', 'ignore'] }) as Child;
    started.add(proxy);
    proxy.exited = new Promise((r) => proxy.once('exit', (code, signal) => (started.delete(proxy), r(code ?? signal ?? -1))));
    const url = `http://127.0.0.1:${front}/export`;
    await until('haproxy forwarding', async () => (await post(url, request, 5000)).status === 200);
    log(`haproxy on :${front}, replicas on ${ports.join(', ')}`);

    // Continuous load: every answer must be 200 with the stored value.
    const loop = async () => {
      while (!stop) {
        counts.requests++;
        try {
          const r = await post(url, request);
          if (r.status === 200 && r.body === '{"GREETING":"first"}') counts.ok++;
          else counts.failures.push(`${r.status} ${r.body.slice(0, 200)}`);
        } catch (e) {
          const err = e as Error & { cause?: { code?: string } };
          counts.failures.push(String(err.cause?.code ?? err.message));
        }
      }
    };
    const loops = Array.from({ length: clients }, loop);
    await until('load running', () => counts.ok >= clients * 3);

    for (let i = 0; i < replicas.length; i++) {
      const before = counts.requests;
      const port = ports[i]!;
      replicas[i]!.kill('SIGTERM');
      counts.exitCodes.push(await replicas[i]!.exited);
      replicas[i] = (await startReplica(port)).child;
      await ready(port);
      // Let the balancer see it back (and requests flow) before the next one goes away.
      await until(`traffic after restarting r${i + 1}`, () => counts.requests > before + clients * 5);
      counts.restarts++;
      log(`restarted r${i + 1}: ${counts.requests} requests so far, ${counts.failures.length} failed`);
    }
    stop = true;
    await Promise.all(loops);

    // A new value, then the next request to each replica (directly, not through the balancer) serves it.
    upsert('second');
    for (const port of ports) counts.perReplica.push(await post(`http://127.0.0.1:${port}/export`, request));
    return counts;
  } finally {
    stop = true;
    for (const c of started) c.kill('SIGTERM');
    await Promise.all([...started].map((c) => c.exited));
    try {
      execFileSync('psql', [pg, '-q', '-c', `DROP TABLE IF EXISTS ${table}`], { stdio: 'ignore' });
    } catch {
      /* psql missing: the pg client drops it below */
      const { default: pgLib } = await import('pg');
      const client = new pgLib.Client({ connectionString: pg });
      await client.connect();
      await client.query(`DROP TABLE IF EXISTS ${table}`);
      await client.end();
    }
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({ options: { clients: { type: 'string', default: '8' }, pg: { type: 'string' } } });
  const uptime = () => execFileSync('uptime', { encoding: 'utf8' }).trim();
  const before = uptime();
  const t0 = Date.now();
  const r = await runReplicas({ clients: Number(values.clients), ...(values.pg ? { pg: values.pg } : {}), log: (m: string) => console.error(`  ${m}`) });
  console.log(`cfgu replicas: node ${process.versions.node}, 3 replicas behind haproxy, ${values.clients} clients, ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  console.log(`uptime before: ${before}\nuptime after:  ${uptime()}`);
  console.log(`requests ${r.requests}, ok ${r.ok}, failed ${r.failures.length}${r.failures.length ? ` (${[...new Set(r.failures)].slice(0, 5).join('; ')})` : ''}`);
  console.log(`restarts ${r.restarts}, exit codes ${r.exitCodes.join(', ')}`);
  console.log(`after upsert: ${r.perReplica.map((a) => `${a.status} ${a.body}`).join(' | ')}`);
  if (r.failures.length || r.exitCodes.some((c) => c !== 0)) process.exitCode = 1;
}
