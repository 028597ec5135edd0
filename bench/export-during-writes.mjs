// POST /export throughput with and without writes running at the same time: the 10-key workload (W10) of
// bench/fixture.mjs against one server per build (`--workers 1`), in rounds of "exports only" and "exports while a
// writer sends POST /upsert at a steady rate", the conditions' order turning every round, so that the machine's moving
// load falls on every condition alike. Two write targets: a set the exports do not read ("bench/writes") and the set
// they read ("prod/eu", key COUNTER, which W10 does not declare: its answer stays the same, but the store's data for
// that set changes). Each write is a new revision with its history record. Shown per build and condition: the median
// and best req/s and p50/p99 latency of the exports, the median (and range) of each round's ratio to that round's
// "exports only", and the writes the writer got through (all must be 200).
//
// Then the CPU of a write: per build and target, --cpu-writes writes one at a time without exports, the server's CPU
// time (user + system of its process tree, from /proc, so the file system's thread pool counts; and of its main
// thread alone, the one the exports need) divided by the writes.
//
//   npm run build && node bench/export-during-writes.mjs [--duration 8] [--rounds 3] [--connections 10]
//     [--write-rate 20] [--kind json-file|sqlite|postgresql] [--builds DIR[,DIR]] [--cpu-writes 200]
//     [--targets other,read[,live]]
//
// --targets live adds a control: GET /live at the same rate. --duration 0: the CPU of a write only. --write-rate 0: the writer sends its next write as soon as the last one is
// answered. --write-store secrets: the writes go to the fixture's small second store (json-file), which the exports
// do not read. --builds: built checkouts compared in the same run (e.g. the base commit in a worktree of its own beside
// this one, `--builds ../base,.`), each with its own server and its own copy of the data, the order flipping every
// round. --kind sqlite or postgresql: the fixture's main store (the one W10 reads and the writes go to) in that kind
// (bench/seed-store.mjs: a SQLite file beside the fixture, or a PostgreSQL table dropped at the end).
import { spawn } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isDeepStrictEqual, parseArgs } from 'node:util';
import { workloads, writeFixture } from './fixture.mjs';
import { cpuSeconds, freePort, load, waitReady } from './harness.mjs';
import { dropSeeded, KINDS, seedStore } from './seed-store.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({
  options: {
    duration: { type: 'string', default: '8' },
    rounds: { type: 'string', default: '3' },
    connections: { type: 'string', default: '10' },
    'write-rate': { type: 'string', default: '20' },
    'write-store': { type: 'string', default: 'main' },
    kind: { type: 'string', default: 'json-file' },
    builds: { type: 'string', default: '.' },
    'cpu-writes': { type: 'string', default: '200' },
    targets: { type: 'string', default: 'other,read' },
  },
});
const rate = Number(args['write-rate']);
// `live`: a control, not a write: GET /live at the same rate (what any 20 requests a second cost the exports, the
// writer's own client included).
const TARGETS = { other: 'bench/writes', read: 'prod/eu', live: '/live' };
const targets = args.targets.split(',').filter(Boolean);
for (const t of targets) if (!TARGETS[t]) throw new Error(`unknown target ${t} (other, read, live)`);
const cpuTargets = targets.filter((t) => t !== 'live');
if (!KINDS.includes(args.kind)) throw new Error(`unknown kind ${args.kind} (${KINDS.join(', ')})`);
const w10 = workloads.find((w) => w.name.startsWith('10 keys'));

/** The fixture for one build, with its main store in the chosen kind (seeded with the json-file fixture's values). */
async function fixtureFor(n) {
  // A fresh folder: a history file left by an earlier run (of another build) is not carried over.
  const folder = join(root, 'bench', '.tmp', `export-during-writes-${n}`);
  rmSync(folder, { recursive: true, force: true });
  const config = writeFixture(folder);
  if (args.kind === 'json-file') return config;
  const dir = dirname(config);
  const configu = JSON.parse(readFileSync(config, 'utf8'));
  configu.stores.main = await seedStore(args.kind, dir, `edw${n}`, JSON.parse(readFileSync(join(dir, 'main.json'), 'utf8')));
  writeFileSync(config, JSON.stringify(configu, null, 2));
  return config;
}

const builds = args.builds.split(',').map((d, n) => ({ n, dir: resolve(d), label: basename(resolve(d)) }));
const children = [];

async function start(build) {
  const config = await fixtureFor(build.n);
  const port = await freePort();
  const child = spawn(process.execPath, [join(build.dir, 'bin/cfgu.js'), 'serve', '--config', config, '--port', String(port), '--host', '127.0.0.1', '--workers', '1'], {
    env: { ...process.env, CONFIGU_LOG_ENABLED: 'false' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  children.push(child);
  const base = `http://127.0.0.1:${port}`;
  await waitReady(base);
  const res = await fetch(`${base}/export`, { method: 'POST', body: JSON.stringify(w10.body), headers: { 'content-type': 'application/json' } });
  if (res.status !== 200 || !isDeepStrictEqual(await res.json(), w10.expected)) throw new Error(`${build.label}: W10: unexpected answer`);
  return { ...build, base, pid: child.pid, counter: 0 };
}

/** One write of COUNTER at `set` (any answer but 200 is fatal). */
async function writeOnce(s, set) {
  if (set === TARGETS.live) {
    const res = await fetch(`${s.base}/live`);
    await res.text();
    if (res.status !== 200) throw new Error(`GET /live: ${res.status}`);
    return;
  }
  const res = await fetch(`${s.base}/upsert`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ store: args['write-store'], set, schema: { keys: { COUNTER: {} } }, values: { COUNTER: String(s.counter++) }, message: 'bench' }),
  });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`POST /upsert: ${res.status} ${text.slice(0, 300)}`);
}

/** Write until `stop()`; resolves with how many writes were answered 200. */
function writer(s, set) {
  let running = true;
  let n = 0;
  const done = (async () => {
    while (running) {
      const started = performance.now();
      await writeOnce(s, set);
      n++;
      const wait = rate > 0 ? 1000 / rate - (performance.now() - started) : 0;
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    }
    return n;
  })();
  return { stop: () => ((running = false), done) };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

/** CPU seconds (user + system) of a process's main thread, the one that runs its event loop. */
function mainThreadSeconds(pid) {
  const stat = readFileSync(`/proc/${pid}/task/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}
const conditions = ['alone', ...targets];

try {
  const started = [];
  for (const b of builds) started.push(await start(b));
  const body = JSON.stringify(w10.body);
  const exportLoad = (s) => load({ url: `${s.base}/export`, method: 'POST', body, connections: Number(args.connections), duration: Number(args.duration) });
  if (Number(args.duration) > 0) for (const s of started) await load({ url: `${s.base}/export`, method: 'POST', body, connections: 4, duration: 3 });
  const results = new Map(started.map((s) => [s, Object.fromEntries(conditions.map((c) => [c, []]))]));
  const cpu = new Map(started.map((s) => [s, Object.fromEntries(cpuTargets.map((t) => [t, []]))]));
  const cpuWrites = Number(args['cpu-writes']);
  for (let round = 0; round < Number(args.rounds); round++) {
    const order = round % 2 ? [...started].reverse() : started;
    for (const s of order) {
      // The conditions' order turns every round, so that no condition always follows another.
      const turned = conditions.map((_, i) => conditions[(i + round) % conditions.length]);
      for (const condition of Number(args.duration) > 0 ? turned : []) {
        const w = condition === 'alone' ? undefined : writer(s, TARGETS[condition]);
        const r = await exportLoad(s);
        r.writes = w ? await w.stop() : 0;
        if (r.errors || r.non2xx) throw new Error(`${s.label} ${condition}: ${r.errors} errors, ${r.non2xx} non-2xx`);
        results.get(s)[condition].push(r);
        process.stderr.write(`round ${round + 1} ${s.label} ${condition}: ${r.rps.toFixed(0)} req/s, p50 ${r.p50} ms, p99 ${r.p99} ms, ${r.writes} writes\n`);
      }
      for (const t of cpuWrites > 0 ? cpuTargets : []) {
        const c0 = cpuSeconds(s.pid);
        const m0 = mainThreadSeconds(s.pid);
        for (let i = 0; i < cpuWrites; i++) await writeOnce(s, TARGETS[t]);
        const ms = ((cpuSeconds(s.pid) - c0) * 1000) / cpuWrites;
        const main = ((mainThreadSeconds(s.pid) - m0) * 1000) / cpuWrites;
        cpu.get(s)[t].push({ ms, main });
        process.stderr.write(`round ${round + 1} ${s.label} CPU per write to "${TARGETS[t]}": ${ms.toFixed(2)} ms, main thread ${main.toFixed(2)} ms\n`);
      }
    }
  }
  const speed = rate > 0 ? `${rate}/s` : 'full speed';
  const label = (c) => (c === 'alone' ? 'exports only' : c === 'live' ? `exports + GET /live at ${speed} (control)` : `exports + POST /upsert to "${TARGETS[c]}" at ${speed}`);
  console.log(`kind ${args.kind}, store "${args['write-store']}", ${args.rounds} rounds of ${args.duration} s, ${args.connections} connections`);
  if (Number(args.duration) > 0) {
    console.log(`| build | condition | export req/s median (best) | vs exports only, same round: median (range) | p50 / p99 ms | writes per round |`);
    console.log('|---|---|---|---|---|---|');
    const pct = (x) => `${x >= 0 ? '+' : ''}${(x * 100).toFixed(1)}%`;
    for (const s of started) {
      const alone = results.get(s).alone;
      for (const c of conditions) {
        const rs = results.get(s)[c];
        const m = median(rs.map((r) => r.rps));
        const mr = rs.find((r) => r.rps === m);
        // Each round's ratio to that round's "exports only": the machine's load moves less within a round than across.
        const ratios = rs.map((r, i) => r.rps / alone[i].rps - 1);
        const ratio = c === 'alone' ? '' : `${pct(median(ratios))} (${pct(Math.min(...ratios))} to ${pct(Math.max(...ratios))})`;
        console.log(`| ${s.label} | ${label(c)} | ${m.toFixed(0)} (${Math.max(...rs.map((r) => r.rps)).toFixed(0)}) | ${ratio} | ${mr.p50} / ${mr.p99} | ${median(rs.map((r) => r.writes))} |`);
      }
    }
  }
  if (cpuWrites > 0) {
    console.log(`\nCPU per write, ms: the server's process tree (its event loop's thread); median of rounds, ${cpuWrites} writes one at a time, no exports`);
    console.log(`| build | ${cpuTargets.map((t) => `to "${TARGETS[t]}"`).join(' | ')} |`);
    console.log(`|---|${cpuTargets.map(() => '---|').join('')}`);
    const cell = (xs) => `${median(xs.map((x) => x.ms)).toFixed(2)} (${median(xs.map((x) => x.main)).toFixed(2)})`;
    for (const s of started) console.log(`| ${s.label} | ${cpuTargets.map((t) => cell(cpu.get(s)[t])).join(' | ')} |`);
  }
} finally {
  for (const child of children) child.kill('SIGTERM');
  await dropSeeded().catch((e) => console.error(`dropping the bench tables: ${e.message}`));
}
