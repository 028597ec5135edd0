// Fairness benchmark: valid 10-key requests (the "10 keys" workload) from N clients at a fixed rate, first alone, then
// with runaway requests (endless loop, memory bomb) from other clients making up a share of all requests. Reports the
// p50 / p99 latency of the valid requests in both phases and how many valid requests failed.
//
//   npm run build && node bench/fairness.mjs [--rate 40] [--duration 30] [--clients 8] [--share 0.05] [--workers 1]
//     [--identity credentials|address] [--runaways repeat|vary] [--valid kept|fresh] [--root DIR] [--warmup S]
//
// --identity credentials (default): auth on, one bearer key per client, so the server queues jobs per client.
// --identity address: auth off, every request (valid and runaway) from one address (127.0.0.1): one client for the
//   server, as with no authentication or every client behind one load balancer.
// --runaways repeat (default): the same loop and the same bomb again and again (a broken schema sent again);
//   vary: each runaway a distinct expression (an attacker), so that nothing learnt from one applies to the next.
// --valid kept (default): every valid request is the same 10-key export (answered from kept answers after the first
//   of each client); fresh: each one overrides SERVICE with a value of its own, so each runs in the sandbox.
// --root: the build to serve (its bin/cfgu.js), e.g. an older checkout, to compare before and after.
// --warmup: seconds of the unreported first phase (default: --duration).
//
// The load is open-loop (a request is sent on schedule whether or not earlier ones were answered), from a second
// process, so a slow server shows up as latency rather than as a lower send rate.
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isDeepStrictEqual, parseArgs } from 'node:util';
import { tenKeys, writeFixture } from './fixture.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

const LOOP = [{ store: 'main', schema: { keys: { SPIN: { default: 'x', test: '(() => { while (true) {} })()' } } } }];
const BOMB = [{ store: 'main', schema: { keys: { BOMB: { default: 'x', test: "'x'.repeat(2 ** 28).split('').length > 0" } } } }];
/** The n-th distinct runaway (--runaways vary): the same work, another expression text. */
const loopN = (n) => [{ store: 'main', schema: { keys: { SPIN: { default: 'x', test: `(() => { let i = ${n}; while (true) { i++ } })()` } } } }];
const bombN = (n) => [{ store: 'main', schema: { keys: { BOMB: { default: 'x', test: `'x'.repeat(2 ** 28).split('').length > -${n}` } } } }];

// ------------------------------------------------------------------------------------------- load generator process
if (process.argv[2] === '--load') {
  const o = JSON.parse(process.argv[3]);
  const valid = JSON.stringify(tenKeys.body);
  const runaways = [JSON.stringify(LOOP), JSON.stringify(BOMB)];
  // Distinct per phase too, so that the warm-up phase's runaways are not the measured phase's.
  const salt = Math.floor(Math.random() * 1e9);
  const freshExpected = (n) => ({ ...tenKeys.expected, SERVICE: `checkout-${n}` });
  const latencies = [];
  let failed = 0;
  let runawayAnswers = 0;
  const statuses = {};
  const inflight = [];
  const total = Math.round(o.rate * o.duration);
  const every = 1000 / o.rate;
  const start = performance.now();
  let runawayIndex = 0;
  for (let i = 0; i < total; i++) {
    const due = start + i * every;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    // Every 1/share-th request is a runaway (alternately a loop and a bomb), from one of the attacker clients.
    const isRunaway = o.share > 0 && (i + 1) % Math.round(1 / o.share) === 0;
    const key = isRunaway ? o.attackerKeys[runawayIndex % o.attackerKeys.length] : o.clientKeys[i % o.clientKeys.length];
    let body = valid;
    let expected = tenKeys.expected;
    if (isRunaway) {
      const n = runawayIndex++;
      body = o.vary ? JSON.stringify((n % 2 ? bombN : loopN)(salt + n)) : runaways[n % 2];
    } else if (o.fresh) {
      body = JSON.stringify([{ ...tenKeys.body[0], configs: { SERVICE: `checkout-${salt + i}` } }, ...tenKeys.body.slice(1)]);
      expected = freshExpected(salt + i);
    }
    const headers = { 'content-type': 'application/json' };
    if (o.auth) headers.authorization = `Bearer ${key}`;
    const sent = performance.now();
    inflight.push(
      fetch(`${o.base}/export`, { method: 'POST', body, headers })
        .then(async (res) => {
          const text = await res.text();
          statuses[res.status] = (statuses[res.status] ?? 0) + 1;
          if (isRunaway) return void runawayAnswers++;
          latencies.push(performance.now() - sent);
          if (res.status !== 200 || !isDeepStrictEqual(JSON.parse(text), expected)) failed++;
        })
        .catch(() => {
          if (!isRunaway) failed++;
        }),
    );
  }
  await Promise.all(inflight);
  latencies.sort((a, b) => a - b);
  const pct = (p) => latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))] ?? 0;
  process.stdout.write(
    JSON.stringify({ valid: latencies.length, failed, runaways: runawayAnswers, p50: pct(50), p99: pct(99), max: latencies.at(-1) ?? 0, statuses }) + '\n',
  );
  process.exit(0);
}

// ----------------------------------------------------------------------------------------------------- orchestrator
const { values: args } = parseArgs({
  options: {
    rate: { type: 'string', default: '40' },
    duration: { type: 'string', default: '30' },
    clients: { type: 'string', default: '8' },
    attackers: { type: 'string', default: '4' },
    share: { type: 'string', default: '0.05' },
    workers: { type: 'string', default: '1' },
    identity: { type: 'string', default: 'credentials' },
    runaways: { type: 'string', default: 'repeat' },
    valid: { type: 'string', default: 'kept' },
    root: { type: 'string', default: root },
    warmup: { type: 'string' },
  },
});
if (!['credentials', 'address'].includes(args.identity)) throw new Error('--identity is credentials or address');
if (!['repeat', 'vary'].includes(args.runaways)) throw new Error('--runaways is repeat or vary');
if (!['kept', 'fresh'].includes(args.valid)) throw new Error('--valid is kept or fresh');
const auth = args.identity === 'credentials';
const load = () => loadavg().map((l) => l.toFixed(2)).join(' ');
const loadBefore = load();

const freePort = () =>
  new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });

const clientKeys = Array.from({ length: Number(args.clients) }, (_, i) => `bench-client-key-${i}`);
const attackerKeys = Array.from({ length: Number(args.attackers) }, (_, i) => `bench-attacker-key-${i}`);
const configFile = writeFixture(join(root, 'bench/.tmp/fixture'));
const port = await freePort();
const base = `http://127.0.0.1:${port}`;
const server = spawn(process.execPath, [join(args.root, 'bin/cfgu.js'), 'serve', '--config', configFile, '--port', String(port), '--host', '127.0.0.1', '--workers', args.workers], {
  stdio: ['ignore', 'ignore', 'inherit'],
  env: {
    ...process.env,
    CONFIGU_LOG_ENABLED: 'false',
    CONFIGU_AUTH_ENABLED: String(auth),
    ...(auth ? { CONFIGU_AUTH_PRESHARED_KEYS: [...clientKeys, ...attackerKeys].join(',') } : {}),
  },
});
const stop = () => server.exitCode === null && server.kill('SIGTERM');
process.on('exit', stop);

for (let i = 0; ; i++) {
  try {
    if ((await fetch(`${base}/ready`)).status === 200) break;
  } catch {
    /* not listening yet */
  }
  if (i > 600) throw new Error('the server did not become ready');
  await new Promise((r) => setTimeout(r, 100));
}

function phase(share, duration = Number(args.duration)) {
  const options = {
    base,
    rate: Number(args.rate),
    duration,
    share,
    clientKeys,
    attackerKeys,
    auth,
    vary: args.runaways === 'vary',
    fresh: args.valid === 'fresh',
  };
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [fileURLToPath(import.meta.url), '--load', JSON.stringify(options)], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`load generator exited ${code}`))));
  });
}

// Warm-up (first compilations, connection set-up), not reported.
await phase(0, Number(args.warmup ?? args.duration)).catch(() => undefined);
const without = await phase(0);
const withRunaways = await phase(Number(args.share));
stop();

const row = (name, r) =>
  `| ${name} | ${r.valid} | ${r.failed} | ${r.runaways} | ${r.p50.toFixed(1)} | ${r.p99.toFixed(1)} | ${r.max.toFixed(1)} | ${JSON.stringify(r.statuses)} |`;
const who = auth ? `${args.clients} valid clients, ${args.attackers} attacker clients (one bearer key each)` : 'every request from one address, no credentials';
console.log(`${args.root}: rate ${args.rate} req/s for ${args.duration} s, ${who}, runaways ${args.runaways}, valid ${args.valid}, runaway share ${args.share}, --workers ${args.workers}`);
console.log(`load average (1, 5, 15 min): ${loadBefore} -> ${load()}`);
console.log('| phase | valid requests | failed valid | runaway requests | p50 ms | p99 ms | max ms | statuses |');
console.log('|---|---|---|---|---|---|---|---|');
console.log(row('without runaways', without));
console.log(row(`with ${Number(args.share) * 100}% runaways`, withRunaways));
const ratio = withRunaways.p99 / without.p99;
console.log(`p99 ratio: ${ratio.toFixed(2)} (goal <= 3); failed valid requests: ${withRunaways.failed} (goal 0)`);
