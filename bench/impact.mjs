// The cost of a write's impact check (docs/server.md, "The impact"): POST /upsert of one key, with 0, 1 or 5 of the
// server's named schemas declaring that key (5 named schemas in all: those that do not declare it are passed over),
// and 1, 10 or 50 sets at or under the written set, as a dry run and as a real write. The impact evaluates every
// declaring schema at every such set twice (before and after), so the work grows with schemas x sets.
//
// Each named schema has 10 keys: the written key with a `test`, a `const` built from three keys, two defaults, and
// six keys read from the store. The written sets are "one" (no set under it), "ten" (9 under it) and "fifty" (49
// under it), each set holding values for the six keys and only the written one the written key (so the write reaches
// every set under it: the work is never cut short), in one store (--kind, bench/seed-store.mjs). One server
// (`--workers 1`) per number of declaring schemas; per case, --writes writes one at a time: the median and 95th
// percentile latency, and the server's CPU time per write (user + system of its process tree, from /proc; a database
// server's own work is not in it).
//
//   npm run build && node bench/impact.mjs [--writes 40] [--rounds 3] [--kind json-file|sqlite|postgresql] [--builds DIR[,DIR]]
//   (--builds: built checkouts to compare in the same run; their servers take turns, case by case)
import { spawn } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { cpuSeconds, freePort, waitReady } from './harness.mjs';
import { dropSeeded, KINDS, seedStore } from './seed-store.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const { values: args } = parseArgs({
  options: {
    writes: { type: 'string', default: '40' },
    rounds: { type: 'string', default: '3' },
    builds: { type: 'string', default: join(here, '..') },
    kind: { type: 'string', default: 'json-file' },
  },
});
const WRITES = Number(args.writes);
if (!KINDS.includes(args.kind)) throw new Error(`unknown kind ${args.kind} (${KINDS.join(', ')})`);
const SCHEMAS = [0, 1, 5];
const SETS = { one: 1, ten: 10, fifty: 50 };
const KEY = 'COUNTER';

/** A named schema of 10 keys; `declares`: whether it declares the written key. */
function namedSchema(i, declares) {
  const keys = {
    [declares ? KEY : `OTHER_${i}`]: { test: '$.value !== ""' },
    HOST: { default: 'localhost' },
    PORT: { default: 8080 },
    URL: { const: `{{ $.configs.HOST.value }}:{{ $.configs.PORT.value }}/{{ $.configs.${declares ? KEY : `OTHER_${i}`}.value }}` },
  };
  for (let k = 0; k < 6; k++) keys[`K${k}`] = {};
  return { keys };
}

async function fixture(dir, declaring) {
  // A fresh folder: a history file left by an earlier run (of another build) is not carried over.
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const configs = [];
  for (const [top, count] of Object.entries(SETS)) {
    const sets = [top, ...Array.from({ length: count - 1 }, (_, i) => `${top}/s${String(i).padStart(2, '0')}`)];
    for (const set of sets) {
      for (let k = 0; k < 6; k++) configs.push({ set, key: `K${k}`, value: `${set}-${k}` });
      // Only the written set holds the key: its value reaches every set under it (each pair's status is "changes").
      if (set === top) configs.push({ set, key: KEY, value: '0' });
    }
  }
  const main = await seedStore(args.kind, dir, `impact${declaring}`, configs);
  const schemas = {};
  for (let i = 0; i < 5; i++) {
    writeFileSync(join(dir, `s${i}.cfgu.json`), JSON.stringify(namedSchema(i, i < declaring)));
    schemas[`s${i}`] = `s${i}.cfgu.json`;
  }
  const configu = { stores: { main }, schemas };
  writeFileSync(join(dir, '.configu'), JSON.stringify(configu, null, 2));
  return join(dir, '.configu');
}

const children = [];
async function start(build, declaring) {
  const config = await fixture(join(here, '.tmp', `impact-${build.n}-${declaring}`), declaring);
  const port = await freePort();
  const child = spawn(process.execPath, [join(build.dir, 'bin/cfgu.js'), 'serve', '--config', config, '--port', String(port), '--host', '127.0.0.1', '--workers', '1'], {
    env: { ...process.env, CONFIGU_LOG_ENABLED: 'false' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  children.push(child);
  const base = `http://127.0.0.1:${port}`;
  await waitReady(base);
  return { base, pid: child.pid, counter: 0 };
}

/** One write; checks the impact covers the expected schemas x sets. Returns its latency in ms. */
async function writeOnce(server, set, dryRun, declaring) {
  const started = performance.now();
  const res = await fetch(`${server.base}/upsert`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ set, schema: { keys: { [KEY]: {} } }, values: { [KEY]: String(++server.counter) }, dryRun }),
  });
  const body = await res.json();
  const ms = performance.now() - started;
  if (res.status !== 200) throw new Error(`POST /upsert: ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
  if (body.impact.length !== declaring * SETS[set]) throw new Error(`impact of ${body.impact.length} entries, expected ${declaring * SETS[set]}`);
  if (!body.impact.every((i) => i.status === 'changes')) throw new Error(`an impact entry is not "changes": ${JSON.stringify(body.impact).slice(0, 300)}`);
  return ms;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const p95 = (xs) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * 0.95))];

try {
  const builds = args.builds.split(',').map((d, n) => ({ n, dir: resolve(d), label: basename(resolve(d)) }));
  const servers = new Map();
  for (const b of builds) for (const k of SCHEMAS) servers.set(`${b.n}:${k}`, await start(b, k));
  const cases = [];
  for (const k of SCHEMAS) for (const set of Object.keys(SETS)) for (const dryRun of [true, false]) cases.push({ k, set, dryRun });
  const results = new Map();
  for (const s of servers.values()) for (const set of Object.keys(SETS)) for (let i = 0; i < 5; i++) await writeOnce(s, set, true, 0).catch(() => undefined); // warm-up
  for (let round = 0; round < Number(args.rounds); round++) {
    for (const c of cases) {
      for (const b of round % 2 ? [...builds].reverse() : builds) {
        const s = servers.get(`${b.n}:${c.k}`);
        const c0 = cpuSeconds(s.pid);
        const lat = [];
        for (let i = 0; i < WRITES; i++) lat.push(await writeOnce(s, c.set, c.dryRun, c.k));
        const cpu = ((cpuSeconds(s.pid) - c0) * 1000) / WRITES;
        const key = `${b.label}|${c.k}|${c.set}|${c.dryRun}`;
        const r = results.get(key) ?? { lat: [], cpu: [] };
        r.lat.push(...lat);
        r.cpu.push(cpu);
        results.set(key, r);
      }
    }
    process.stderr.write(`round ${round + 1} done\n`);
  }
  console.log(`${args.kind}: ${WRITES} writes per case and round, ${args.rounds} rounds; latency over all writes, CPU the median of the rounds`);
  console.log('| build | declaring schemas | sets | dry run: ms p50 / p95 | dry run: CPU ms | write: ms p50 / p95 | write: CPU ms |');
  console.log('|---|---|---|---|---|---|---|');
  for (const b of builds) {
    for (const k of SCHEMAS) {
      for (const set of Object.keys(SETS)) {
        const cell = (dry) => {
          const r = results.get(`${b.label}|${k}|${set}|${dry}`);
          return `${median(r.lat).toFixed(1)} / ${p95(r.lat).toFixed(1)} | ${median(r.cpu).toFixed(2)}`;
        };
        console.log(`| ${b.label} | ${k} | ${SETS[set]} | ${cell(true)} | ${cell(false)} |`);
      }
    }
  }
} finally {
  for (const c of children) c.kill('SIGTERM');
  await dropSeeded().catch((e) => console.error(`dropping the bench tables: ${e.message}`));
}
