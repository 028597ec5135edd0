// Slow clients against the real binary: N connections each send the headers of a POST /export that announces a
// 100 kB body, then one byte per second; a connection the server closes is reopened at once, so N stay open the whole
// run. Meanwhile a probe asks GET /live every 100 ms (new connection each time, 2 s timeout) and records its latency.
// The slow clients run in a child process of their own, so that reopening hundreds of connections at once does not
// delay the probe's own event loop (the probe measures the server, not this script).
//
//   node bench/slow-clients.mjs [--connections 1000] [--duration 75] [--workers 1] [--mode body|headers] [--bin PATH]
//                               [--nofile 1024] [--probe-from 127.0.0.2]
//
// --mode headers drips header lines instead of body bytes. --bin runs another build (e.g. an older checkout's
// bin/cfgu.js) for a before/after comparison. --nofile runs the server under that limit of open files, soft and hard
// (`prlimit`, util-linux), as a container or a systemd unit often gives. --probe-from sends the /live probes from
// another loopback address, as a health checker on another host would (the slow clients come from 127.0.0.1).
// Prints one JSON line.
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { connect, createServer } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({
  options: {
    connections: { type: 'string', default: '1000' },
    duration: { type: 'string', default: '75' },
    workers: { type: 'string', default: '1' },
    mode: { type: 'string', default: 'body' },
    bin: { type: 'string', default: join(root, 'bin', 'cfgu.js') },
    nofile: { type: 'string' },
    'probe-from': { type: 'string' },
    // internal: run only the slow clients against this port, report their counts on stdout when told to stop
    'clients-for-port': { type: 'string' },
  },
});
const N = Number(args.connections);
const durationMs = Number(args.duration) * 1000;

const freePort = () =>
  new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The slow clients (child process): keep N connections dripping until the parent says stop, then report. */
function runClients(port) {
  const head =
    args.mode === 'headers'
      ? 'POST /export HTTP/1.1\r\nHost: x\r\n'
      : 'POST /export HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n[';
  const drip = args.mode === 'headers' ? 'X: 1\r\n' : ' ';
  const stats = { opened: 0, cutByServer: 0, answered408: 0, lifetimes: [], connectErrors: 0, minOpen: Infinity };
  const open = new Set();
  let running = true;

  function slowClient() {
    if (!running) return;
    const s = connect(port, '127.0.0.1');
    const t0 = performance.now();
    let got = '';
    s.on('connect', () => {
      stats.opened++;
      open.add(s);
      s.write(head);
    });
    s.on('data', (c) => (got += c.toString('latin1')));
    s.on('error', () => {
      if (!open.has(s)) stats.connectErrors++;
    });
    s.on('close', () => {
      const wasOpen = open.delete(s);
      if (!running) return;
      if (wasOpen) {
        stats.cutByServer++;
        stats.lifetimes.push(performance.now() - t0);
        if (got.startsWith('HTTP/1.1 408 ')) stats.answered408++;
      }
      setTimeout(slowClient, wasOpen ? 0 : 100);
    });
  }
  for (let i = 0; i < N; i++) slowClient();
  const dripTimer = setInterval(() => {
    for (const s of open) if (s.writable) s.write(drip);
  }, 1000);
  process.on('message', () => {
    running = false;
    clearInterval(dripTimer);
    for (const s of open) s.destroy();
    process.send({ ...stats, minOpen: stats.minOpen }, () => process.exit(0));
  });
  const started = performance.now();
  setInterval(() => {
    if (performance.now() - started > 5000) stats.minOpen = Math.min(stats.minOpen, open.size);
  }, 100);
}

/** The parent: start the server, start the clients, probe /live, print the summary. */
async function main() {
  const dir = join(root, 'bench', '.tmp', 'slow-clients');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'data.json'), JSON.stringify([{ set: '', key: 'A', value: 'a' }]));
  writeFileSync(join(dir, '.configu'), JSON.stringify({ stores: { main: { type: 'json-file', configuration: { path: 'data.json' } } } }));

  const port = await freePort();
  const env = { ...process.env, CONFIGU_LOG_ENABLED: 'false' };
  const command = [process.execPath, args.bin, 'serve', '--config', join(dir, '.configu'), '--port', String(port), '--host', '127.0.0.1', '--workers', args.workers];
  if (args.nofile) command.unshift('prlimit', `--nofile=${args.nofile}:${args.nofile}`);
  const server = spawn(command[0], command.slice(1), {
    env,
    stdio: ['ignore', 'ignore', 'inherit'],
  });

  function live(timeoutMs = 2000) {
    const t0 = performance.now();
    return new Promise((resolve) => {
      const from = args['probe-from'] ? { localAddress: args['probe-from'] } : {};
      const r = request({ host: '127.0.0.1', port, path: '/live', agent: false, timeout: timeoutMs, ...from }, (res) => {
        res.resume();
        res.on('end', () => resolve({ ok: res.statusCode === 200, ms: performance.now() - t0 }));
      });
      r.on('timeout', () => r.destroy(new Error('timeout')));
      r.on('error', () => resolve({ ok: false, ms: performance.now() - t0 }));
      r.end();
    });
  }

  for (;;) {
    if ((await live(500)).ok) break;
    if (server.exitCode !== null) throw new Error('the server exited');
    await sleep(100);
  }

  const clients = spawn(process.execPath, [fileURLToPath(import.meta.url), '--clients-for-port', String(port), '--connections', String(N), '--mode', args.mode], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const probes = [];
  const started = performance.now();
  while (performance.now() - started < durationMs) {
    probes.push(await live());
    await sleep(100);
  }
  const stats = await new Promise((resolve) => {
    clients.once('message', resolve);
    clients.send('stop');
  });
  const minOpen = stats.minOpen ?? Infinity;
  server.kill('SIGTERM');

  const ok = probes.filter((p) => p.ok).map((p) => p.ms).sort((a, b) => a - b);
  const q = (arr, f) => (arr.length ? Math.round(arr[Math.min(arr.length - 1, Math.floor(f * arr.length))] * 10) / 10 : null);
  const life = stats.lifetimes.sort((a, b) => a - b);
  process.stdout.write(
    `${JSON.stringify({
      mode: args.mode,
      connections: N,
      durationS: durationMs / 1000,
      workers: Number(args.workers),
      nofile: args.nofile ? Number(args.nofile) : null,
      probeFrom: args['probe-from'] ?? '127.0.0.1',
      slowConnectionsOpenedTotal: stats.opened,
      fewestOpenAtOnce: minOpen === Infinity ? null : minOpen,
      cutByServer: stats.cutByServer,
      answered408: stats.answered408,
      lifetimeP50s: life.length ? q(life, 0.5) / 1000 : null,
      liveProbes: probes.length,
      liveFailed: probes.length - ok.length,
      liveP50ms: q(ok, 0.5),
      liveP99ms: q(ok, 0.99),
      liveMaxMs: q(ok, 1),
    })}\n`,
  );
  process.exit(0);
}

if (args['clients-for-port']) runClients(Number(args['clients-for-port']));
else await main();
