// Deeply nested request bodies against the real binary (issue 31): N bodies of about 800 kB whose override nests
// `--depth` arrays (each differing by one space, so no cache answers them) are sent one after another, while a probe
// asks GET /live every 50 ms from another loopback address and records its latency. Prints one JSON line: the /live
// latencies during the run, each deep request's time and status, and the server's resident memory at the end.
//
//   node bench/deep-bodies.mjs [--bodies 6] [--depth 400000] [--bin PATH]
//   node bench/deep-bodies.mjs --shape keys [--keys 10000] [--commands 1] [--bodies 6] [--bin PATH] [--probe-ms 50]
//
// --shape keys sends wide bodies instead: one command declaring --keys keys with a default each (distinct per body),
// the other large shape a body may have within the limits; --commands N sends N such commands in each body (the
// largest body the default limits allow: --commands 10 --keys 9000 --short, one `{}` declaration a key, about 1 MiB).
// --probe-ms sets the pause between two /live probes (a shorter one finds shorter stalls).
// --bin runs another build (an older checkout's bin/cfgu.js) for a before/after comparison.
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { freePort } from './harness.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({
  options: {
    bodies: { type: 'string', default: '6' },
    depth: { type: 'string', default: '400000' },
    shape: { type: 'string', default: 'nested' },
    keys: { type: 'string', default: '10000' },
    commands: { type: 'string', default: '1' },
    short: { type: 'boolean', default: false },
    'probe-ms': { type: 'string', default: '50' },
    bin: { type: 'string', default: join(root, 'bin', 'cfgu.js') },
  },
});
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function send(port, method, path, body, localAddress) {
  const t0 = performance.now();
  return new Promise((resolve) => {
    const r = request(
      { host: '127.0.0.1', port, method, path, agent: false, ...(localAddress ? { localAddress } : {}), headers: body ? { 'content-type': 'application/json' } : {} },
      (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode, ms: performance.now() - t0 }));
      },
    );
    r.on('error', () => resolve({ status: 0, ms: performance.now() - t0 }));
    r.end(body);
  });
}

const rssOf = (pid) => {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Math.round(Number(m[1]) / 1024) : null;
  } catch {
    return null;
  }
};

const dir = join(root, 'bench', '.tmp', 'deep-bodies');
mkdirSync(dir, { recursive: true });
writeFileSync(join(dir, 'data.json'), JSON.stringify([{ set: '', key: 'A', value: 'a' }]));
writeFileSync(join(dir, '.configu'), JSON.stringify({ stores: { main: { type: 'json-file', configuration: { path: 'data.json' } } } }));
const port = await freePort();
const server = spawn(process.execPath, [args.bin, 'serve', '--config', join(dir, '.configu'), '--port', String(port), '--host', '127.0.0.1', '--workers', '1'], {
  env: { ...process.env, CONFIGU_LOG_ENABLED: 'false', CONFIGU_SHUTDOWN_DRAIN_SECONDS: '0' },
  stdio: ['ignore', 'ignore', 'inherit'],
});
for (;;) {
  if ((await send(port, 'GET', '/ready')).status === 200) break;
  await sleep(100);
}
const rssBefore = rssOf(server.pid);
const depth = Number(args.depth);
let running = true;
const lives = [];
const probe = (async () => {
  while (running) {
    lives.push((await send(port, 'GET', '/live', undefined, '127.0.0.2')).ms);
    await sleep(Number(args['probe-ms']));
  }
})();
const deep = [];
let bodyKB = 0;
for (let i = 0; i < Number(args.bodies); i++) {
  const body =
    args.shape === 'keys'
      ? JSON.stringify(
          Array.from({ length: Number(args.commands) }, (_, c) => ({
            schema: { keys: Object.fromEntries(Array.from({ length: Number(args.keys) }, (_, k) => (args.short ? [`K${i}_${c}_${k}`, {}] : [`KEY_${i}_${c}_${k}`, { default: `value-${k}` }]))) },
          })),
        )
      : `[{"schema":{"keys":{"A":{}}},"configs":{"A":${'['.repeat(depth)}${']'.repeat(depth)}}}]${' '.repeat(i)}`;
  const r = await send(port, 'POST', '/export', body);
  deep.push({ status: r.status, ms: Math.round(r.ms) });
  bodyKB = Math.round(Buffer.byteLength(body) / 1024);
}
await sleep(500);
running = false;
await probe;
const rssAfter = rssOf(server.pid);
server.kill('SIGTERM');
lives.sort((a, b) => a - b);
const q = (f) => Math.round(lives[Math.min(lives.length - 1, Math.floor(f * lives.length))] * 10) / 10;
process.stdout.write(
  `${JSON.stringify({ shape: args.shape, bodies: deep.length, ...(args.shape === 'keys' ? { commands: Number(args.commands), keys: Number(args.keys), bodyKB } : { depth, bodyKB: Math.round((depth * 2 + 40) / 1024) }), deep, liveProbes: lives.length, liveP50ms: q(0.5), liveP99ms: q(0.99), liveMaxMs: q(1), rssBeforeMB: rssBefore, rssAfterMB: rssAfter })}\n`,
);
process.exit(0);
