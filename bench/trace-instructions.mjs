// What tracing costs a 10-key export, in machine instructions: `valgrind --tool=callgrind` counts every instruction
// the server process runs (not the kernel's), the same count for the same program whatever else the machine is doing,
// where CPU time on a shared 2-core VM moves by 20-50% between runs. Node runs with V8's `--single-threaded`: the
// optimizing compiler and the garbage collector then work on the main thread, in an order valgrind's thread
// scheduling does not change; with their background threads, two runs of one variant differed by up to 100,000
// instructions a request (20%). Even so, repeat a run before trusting a difference under about 15% (RESULTS.md,
// "Traces over protobuf": one variant still moved by 13% between two runs). Each variant runs twice, with N1 and N2
// requests (bench/trace-instructions-app.ts, bundled first); the difference divided by N2 - N1 is the steady-state
// cost of one request, start-up and warm-up left out. N1 must be large enough that the JIT has settled: under
// valgrind that takes a few thousand requests.
//
//   node bench/trace-instructions.mjs [--n1 3000] [--n2 7000] [--variants off,sampled-out,protobuf,json]
//
// Needs valgrind (Debian's package). Two runs at a time; about 3 minutes per variant on a 2-core machine.
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({
  options: {
    n1: { type: 'string', default: '3000' },
    n2: { type: 'string', default: '7000' },
    variants: { type: 'string', default: 'off,sampled-out,protobuf,json' },
  },
});
const n1 = Number(args.n1);
const n2 = Number(args.n2);
const variants = args.variants.split(',');
if (!(n2 > n1 && n1 > 0)) throw new Error('--n2 must be larger than --n1');
if (spawnSync('valgrind', ['--version'], { stdio: 'ignore' }).status !== 0) {
  console.error('valgrind is not installed (Debian: apt-get install valgrind)');
  process.exit(1);
}

// Inside the checkout, so that the bundle finds node_modules.
mkdirSync(join(root, 'bench/.tmp'), { recursive: true });
const work = mkdtempSync(join(root, 'bench/.tmp/trace-instructions-'));
const bundle = join(work, 'app.mjs');
const built = spawnSync(
  join(root, 'node_modules/.bin/esbuild'),
  [join(root, 'bench/trace-instructions-app.ts'), '--bundle', '--platform=node', '--format=esm', '--packages=external', `--outfile=${bundle}`, '--log-level=warning'],
  { stdio: 'inherit', cwd: root },
);
if (built.status !== 0) process.exit(built.status ?? 1);

/** Instructions of one run under callgrind (its "Collected" total). */
function count(variant, n) {
  return new Promise((resolve, reject) => {
    const child = spawn('valgrind', ['--tool=callgrind', '--callgrind-out-file=/dev/null', process.execPath, '--single-threaded', bundle, variant, String(n)], {
      cwd: root,
      env: { ...process.env, CFGU_OTLP_SINK: join(root, 'bench/otlp-sink.mjs') },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let err = '';
    child.stderr.on('data', (d) => (err += d));
    child.on('close', (code) => {
      const m = /Collected\s*:\s*(\d+)/.exec(err);
      if (code === 0 && m) resolve(Number(m[1]));
      else reject(new Error(`${variant} ${n}: exit ${code}\n${err.slice(-2000)}`));
    });
  });
}

const perRequest = new Map();
try {
  for (const v of variants) {
    const [a, b] = await Promise.all([count(v, n1), count(v, n2)]);
    perRequest.set(v, (b - a) / (n2 - n1));
    console.error(`${v}: ${a} instructions for ${n1} requests, ${b} for ${n2}`);
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}
const base = perRequest.get('off');
console.log(`\nInstructions per 10-key export (steady state, requests ${n1} to ${n2}), metrics on:\n`);
console.log('| variant | instructions per request | vs off |');
console.log('|---|---|---|');
for (const [v, x] of perRequest) {
  const vs = base ? `${x >= base ? '+' : ''}${((100 * (x - base)) / base).toFixed(1)}%` : '';
  console.log(`| ${v} | ${Math.round(x).toLocaleString('en-US')} | ${vs} |`);
}
