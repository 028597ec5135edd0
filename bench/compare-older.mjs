// Side by side with another implementation of the service (issue 16): cfgu as shipped and a second server started by
// a command of the caller's, both up at once on the same fixture data (bench/fixture.mjs), driven in alternation with
// the same workloads, each answer checked before it is timed.
//
//   node bench/compare-older.mjs --older '/path/to/start.sh' [--duration 8] [--connections 20] [--rounds 2]
//                                [--workers N] [--only TEXT] [--cfgu-env K=V,...]
//                                [--cfgu-dir DIR --cfgu-node PATH]
//
// The other server is started as `sh -c "<older>"` with PORT (a free loopback port) and CONFIG (a `.configu` naming
// the fixture's two json-file stores by absolute path) in its environment, and must answer `GET /live` with 200 when
// ready. Its `/export` takes the same pipeline, except that a command's schema goes as JSON text (the older proxy's
// request validation refuses a plain-string `test` or a scalar `default` in an object schema, and reads a string
// schema as Cfgu text). Both servers must give the same answer (the same JSON value; whether the bytes are the same
// is reported too) or the run stops.
//
// cfgu runs with its defaults (workers = cores, request log on, to a file like an operator's collector would read);
// `--cfgu-env` adds environment variables to it (for instance CONFIGU_LOG_ENABLED=false). Each workload is measured
// `--rounds` times per server, alternating which server goes first. `--cfgu-dir` runs the cfgu of another built
// checkout (its own bin/, dist/ and node_modules) and `--cfgu-node` runs it on another Node binary (say, the Node the
// other server runs on: native modules must be built for it, so both usually go together). Prints a table and one JSON line per
// measurement, with the load average before and after.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, openSync, writeFileSync, rmSync } from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isDeepStrictEqual, parseArgs } from 'node:util';
import { writeFixture, workloads } from './fixture.mjs';
import { freePort, load, cpuSeconds, waitReady } from './harness.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({
  options: {
    older: { type: 'string' },
    duration: { type: 'string', default: '8' },
    warmup: { type: 'string', default: '2' },
    connections: { type: 'string', default: '20' },
    rounds: { type: 'string', default: '2' },
    workers: { type: 'string', default: String(availableParallelism()) },
    only: { type: 'string' },
    'cfgu-env': { type: 'string', default: '' },
    'cfgu-dir': { type: 'string', default: root },
    'cfgu-node': { type: 'string', default: process.execPath },
  },
});
if (!args.older) {
  console.error('usage: node bench/compare-older.mjs --older "<command starting the other server>" [options]');
  process.exit(2);
}
const duration = Number(args.duration);
const connections = Number(args.connections);
const rounds = Number(args.rounds);
const extraEnv = Object.fromEntries(
  args['cfgu-env']
    .split(',')
    .filter(Boolean)
    .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
);

const scratch = mkdtempSync(join(tmpdir(), 'cfgu-compare-'));
const fixtureDir = join(root, 'bench/.tmp/fixture');
const configFile = writeFixture(fixtureDir);
// The other server's .configu: the same two stores, by absolute path.
const olderConfig = join(scratch, 'bench.configu');
writeFileSync(
  olderConfig,
  JSON.stringify({
    stores: {
      main: { type: 'json-file', configuration: { path: join(fixtureDir, 'main.json') } },
      secrets: { type: 'json-file', configuration: { path: join(fixtureDir, 'secrets.json') } },
    },
  }),
);
const cfguDir = args['cfgu-dir'];
execFileSync(args['cfgu-node'], [join(cfguDir, 'scripts/build.mjs')], { stdio: 'ignore' });
console.log(`cfgu: ${cfguDir} on Node ${execFileSync(args['cfgu-node'], ['-v'], { encoding: 'utf8' }).trim()}`);

const started = [];
const stopAll = () => {
  for (const p of started) {
    try {
      process.kill(-p.pid, 'SIGTERM');
    } catch {
      /* gone */
    }
  }
};
process.on('exit', () => {
  stopAll();
  rmSync(scratch, { recursive: true, force: true });
});
process.on('SIGINT', () => process.exit(130));

const cfguPort = await freePort();
const cfgu = spawn(
  args['cfgu-node'],
  [join(cfguDir, 'bin/cfgu.js'), 'serve', '--config', configFile, '--port', String(cfguPort), '--host', '127.0.0.1', '--workers', args.workers],
  { stdio: ['ignore', openSync(join(scratch, 'cfgu.log'), 'w'), 'inherit'], env: { ...process.env, ...extraEnv }, detached: true },
);
started.push(cfgu);
const olderPort = await freePort();
const older = spawn('sh', ['-c', args.older], {
  stdio: ['ignore', openSync(join(scratch, 'older.log'), 'w'), openSync(join(scratch, 'older.err'), 'w')],
  env: { ...process.env, PORT: String(olderPort), CONFIG: olderConfig },
  detached: true,
});
started.push(older);
const servers = [
  { name: 'cfgu', base: `http://127.0.0.1:${cfguPort}`, pid: cfgu.pid, body: (b) => b },
  {
    name: 'older',
    base: `http://127.0.0.1:${olderPort}`,
    pid: older.pid,
    body: (b) => b?.map((c) => ({ ...c, schema: JSON.stringify(c.schema) })),
  },
];
await Promise.all(servers.map((s) => waitReady(s.base, 120_000, '/live')));

async function answer(server, w) {
  const body = server.body(w.body);
  const res = await fetch(server.base + w.path, { method: w.method, body: body ? JSON.stringify(body) : undefined, headers: body ? { 'content-type': 'application/json' } : {} });
  return { status: res.status, text: await res.text() };
}

// The older proxy drops a default that is falsy (the 100-key body's `D0: { default: 0 }` comes back as ""): such a
// default is given as 100 to both servers, and those answers are checked against each other instead of the fixture's.
const comparable = (w) => {
  if (!w.body) return w;
  let changed = false;
  const body = w.body.map((c) => {
    const keys = {};
    for (const [k, cfgu] of Object.entries(c.schema.keys)) {
      if ('default' in cfgu && !cfgu.default) {
        keys[k] = { ...cfgu, default: 100 };
        changed = true;
      } else keys[k] = cfgu;
    }
    return { ...c, schema: { ...c.schema, keys } };
  });
  return changed ? { ...w, body, expected: undefined, name: `${w.name} (zero default as 100)` } : w;
};
const chosen = workloads.filter((w) => !args.only || w.name.includes(args.only)).map(comparable);
const sameBytes = {};
for (const w of chosen) {
  const answers = [];
  for (const s of servers) {
    const a = await answer(s, w);
    if (a.status !== 200) throw new Error(`${s.name} ${w.name}: status ${a.status}: ${a.text.slice(0, 400)}`);
    if (w.expected && !isDeepStrictEqual(JSON.parse(a.text), w.expected)) throw new Error(`${s.name} ${w.name}: wrong answer ${a.text.slice(0, 400)}`);
    answers.push(a.text);
  }
  if (w.path !== '/live' && !isDeepStrictEqual(JSON.parse(answers[0]), JSON.parse(answers[1]))) throw new Error(`${w.name}: the answers differ`);
  sameBytes[w.name] = answers[0] === answers[1];
}

const uptime = () => loadavg().map((n) => n.toFixed(2)).join(' ');
console.error(`load average before: ${uptime()}`);
const results = [];
for (const w of chosen) {
  for (const s of servers) {
    await load({ url: s.base + w.path, method: w.method, body: s.body(w.body) && JSON.stringify(s.body(w.body)), connections, duration: Number(args.warmup) });
  }
  for (let r = 0; r < rounds; r++) {
    const order = r % 2 === 0 ? servers : [...servers].reverse();
    for (const s of order) {
      const body = s.body(w.body);
      const cpuBefore = cpuSeconds(s.pid);
      const out = await load({ url: s.base + w.path, method: w.method, body: body && JSON.stringify(body), connections, duration });
      const cpu = cpuSeconds(s.pid) - cpuBefore;
      const row = { workload: w.name, server: s.name, round: r + 1, ...out, cpuMsPerRequest: out.total ? (cpu * 1000) / out.total : null, load: uptime() };
      results.push(row);
      console.log(JSON.stringify(row));
    }
  }
}
console.error(`load average after: ${uptime()}`);

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const live = {};
for (const s of servers) live[s.name] = median(results.filter((r) => r.server === s.name && r.workload === 'GET /live').map((r) => r.rps));
console.error('\n| workload | older req/s (rounds) | older p99 ms | cfgu req/s (rounds) | cfgu p99 ms | cfgu / older | cfgu / own /live | same bytes |');
console.error('|---|---|---|---|---|---|---|---|');
for (const w of chosen) {
  const of = (name) => results.filter((r) => r.server === name && r.workload === w.name);
  const o = of('older');
  const c = of('cfgu');
  const oR = median(o.map((r) => r.rps));
  const cR = median(c.map((r) => r.rps));
  const p99 = (rows) => rows.map((r) => r.p99).join(', ');
  const ownLive = live.cfgu ? `${((100 * cR) / live.cfgu).toFixed(1)}%` : '';
  console.error(
    `| ${w.name} | ${Math.round(oR).toLocaleString('en')} (${o.map((r) => Math.round(r.rps)).join(', ')}) | ${p99(o)} | ${Math.round(cR).toLocaleString('en')} (${c.map((r) => Math.round(r.rps)).join(', ')}) | ${p99(c)} | ${(cR / oR).toFixed(2)}x | ${ownLive} | ${w.path === '/live' ? '' : sameBytes[w.name] ? 'yes' : 'no'} |`,
  );
}
process.exit(0);
