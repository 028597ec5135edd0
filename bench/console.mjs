// The browser console's costs (issue 35), three parts, each side by side in one run:
//   size    the JavaScript and CSS shipped, raw and gzipped (dist/console/manifest.json, made by the build), against
//           the budget below; exit code 1 when over it.
//   matrix  the time to the first rendered matrix of 100 keys x 20 sets in headless Chromium: from the navigation's
//           start to the first cell of the grid on screen, signed-in page loaded cold (a new browser context each run).
//   export  POST /export throughput (the 10-key workload of bench/fixture.mjs, `--workers 1`) in rounds alternating
//           between: exports only; exports with console pages open (the matrix and the values view, each holding
//           its change stream); a writer changing the console's store once a second, without pages (the control);
//           and both (each change makes every open page fetch again). The server's own CPU per round is shown too.
//
//   npm run build && node bench/console.mjs [--part size,matrix,export] [--runs 7] [--rounds 3] [--duration 8] [--pages 2]
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { workloads, writeFixture } from './fixture.mjs';
import { cpuSeconds, freePort, load, waitReady } from './harness.mjs';
import { CONSOLE_BUDGET as BUDGET } from '../scripts/build-console.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({
  options: {
    part: { type: 'string', default: 'size,matrix,export' },
    runs: { type: 'string', default: '7' },
    rounds: { type: 'string', default: '3' },
    duration: { type: 'string', default: '8' },
    pages: { type: 'string', default: '2' },
    connections: { type: 'string', default: '10' },
  },
});
const parts = new Set(args.part.split(','));

const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const kib = (n) => `${(n / 1024).toFixed(1)} KiB`;

function sizes() {
  const manifest = JSON.parse(readFileSync(join(root, 'dist/console/manifest.json'), 'utf8'));
  const js = manifest.files[manifest.js];
  const css = manifest.files[manifest.css];
  const html = manifest.files['index.html'];
  console.log('| file | bytes | gzip | budget (gzip) |');
  console.log('|---|---|---|---|');
  console.log(`| index.html | ${kib(html.bytes)} | ${kib(html.gzip)} | |`);
  console.log(`| ${manifest.js} | ${kib(js.bytes)} | ${kib(js.gzip)} | ${kib(BUDGET.js)} |`);
  console.log(`| ${manifest.css} | ${kib(css.bytes)} | ${kib(css.gzip)} | ${kib(BUDGET.css)} |`);
  console.log(`| total | ${kib(html.bytes + js.bytes + css.bytes)} | ${kib(html.gzip + js.gzip + css.gzip)} | |`);
  if (js.gzip > BUDGET.js || css.gzip > BUDGET.css) {
    console.error('console bundle over its budget');
    process.exitCode = 1;
  }
}

/** A store of `keys` keys at `sets` sets under `fleet/`, and the named schema `wide` declaring them. */
function wideFixture(dir, keys = 100, sets = 20) {
  const config = writeFixture(dir);
  const names = Array.from({ length: keys }, (_, i) => `KEY_${String(i + 1).padStart(3, '0')}`);
  const schema = { keys: Object.fromEntries(names.map((k, i) => [k, i % 10 === 0 ? { required: true, description: `key ${k}` } : { default: 'x' }])) };
  const configs = [];
  for (let s = 0; s < sets; s++) {
    const set = `fleet/s${String(s + 1).padStart(2, '0')}`;
    // Most keys at most sets; every tenth set misses a required key, so the matrix shows failures too.
    names.forEach((k, i) => (s % 10 === 9 && i % 10 === 0) || (i + s) % 3 === 0 || configs.push({ set, key: k, value: `${k.toLowerCase()}-${s}` }));
  }
  writeFileSync(join(dir, 'wide.json'), JSON.stringify(configs));
  writeFileSync(join(dir, 'wide.cfgu.json'), JSON.stringify(schema));
  const configu = JSON.parse(readFileSync(config, 'utf8'));
  configu.stores.wide = { type: 'json-file', configuration: { path: './wide.json' } };
  configu.schemas = { wide: 'wide.cfgu.json' };
  writeFileSync(config, JSON.stringify(configu, null, 2));
  return config;
}

async function startServer(config) {
  const port = await freePort();
  const server = spawn(process.execPath, [join(root, 'bin/cfgu.js'), 'serve', '--config', config, '--port', String(port), '--host', '127.0.0.1', '--workers', '1'], {
    env: { ...process.env, CONFIGU_LOG_ENABLED: 'false' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const base = `http://127.0.0.1:${port}`;
  await waitReady(base);
  return { server, base };
}

async function browser() {
  const { chromium } = await import('playwright-core');
  const { CHROMIUM_ARGS, findChromium } = await import('./console-chromium.mjs');
  const executablePath = findChromium();
  if (!executablePath) throw new Error('no Chromium (scripts/test-setup-chromium.sh installs it)');
  return chromium.launch({ executablePath, args: CHROMIUM_ARGS, headless: true });
}

const MATRIX = '/console?view=matrix&store=wide&schema=wide';

async function timeToMatrix(base, b) {
  const times = [];
  for (let run = 0; run < Number(args.runs); run++) {
    const context = await b.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    await page.goto(`${base}${MATRIX}`);
    await page.locator('[role=grid] [role=gridcell]').first().waitFor({ timeout: 0 });
    const ms = await page.evaluate(() => performance.now());
    const cells = await page.locator('[role=grid] [role=gridcell]').count();
    times.push(ms);
    process.stderr.write(`run ${run + 1}: first cell after ${ms.toFixed(0)} ms (${cells} cells rendered)\n`);
    await context.close();
  }
  console.log(`time to the first rendered matrix (100 keys x 20 sets), ${times.length} cold loads: median ${median(times).toFixed(0)} ms, best ${Math.min(...times).toFixed(0)} ms, worst ${Math.max(...times).toFixed(0)} ms`);
}

async function exportWithConsole(base, pid, b) {
  const w10 = workloads.find((w) => w.name.startsWith('10 keys'));
  const body = JSON.stringify(w10.body);
  const exportLoad = () => load({ url: `${base}/export`, method: 'POST', body, connections: Number(args.connections), duration: Number(args.duration) });
  await load({ url: `${base}/export`, method: 'POST', body, connections: 4, duration: 3 });
  const open = async () => {
    const context = await b.newContext();
    for (let i = 0; i < Number(args.pages); i++) {
      const page = await context.newPage();
      await page.goto(`${base}${i % 2 ? '/console?view=schema&store=wide&schema=wide&set=fleet/s01' : MATRIX}`);
      await page.locator('main table, main [role=grid]').first().waitFor({ timeout: 0 });
    }
    return context;
  };
  const writer = () => {
    let running = true;
    let n = 0;
    const done = (async () => {
      while (running) {
        const res = await fetch(`${base}/upsert`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ store: 'wide', set: 'fleet/s01', schema: 'wide', values: { KEY_002: `v${n}` }, message: 'bench' }) });
        if (res.status !== 200) throw new Error(`POST /upsert: ${res.status} ${(await res.text()).slice(0, 200)}`);
        n++;
        await new Promise((r) => setTimeout(r, 1000));
      }
      return n;
    })();
    return { stop: () => ((running = false), done) };
  };
  const conditions = ['exports only', 'console pages open', 'a write each second, no console', 'console pages open, a write each second'];
  const results = Object.fromEntries(conditions.map((c) => [c, []]));
  for (let round = 0; round < Number(args.rounds); round++) {
    for (const condition of conditions) {
      const context = condition.startsWith('console') ? await open() : undefined;
      const w = condition.includes('a write each second') ? writer() : undefined;
      const cpu0 = cpuSeconds(pid);
      const r = await exportLoad();
      r.cpu = cpuSeconds(pid) - cpu0;
      r.writes = w ? await w.stop() : 0;
      await context?.close();
      if (r.errors || r.non2xx) throw new Error(`${condition}: ${r.errors} errors, ${r.non2xx} non-2xx`);
      results[condition].push(r);
      process.stderr.write(`round ${round + 1} ${condition}: ${r.rps.toFixed(0)} req/s, p99 ${r.p99} ms, server CPU ${r.cpu.toFixed(2)} s, ${r.writes} writes\n`);
    }
  }
  console.log(`| condition | export req/s median (best) | p99 ms (median) | server CPU s per ${args.duration} s round (median) | ratio to exports only |`);
  console.log('|---|---|---|---|---|');
  const base0 = median(results[conditions[0]].map((r) => r.rps));
  for (const [condition, rs] of Object.entries(results)) {
    const m = median(rs.map((r) => r.rps));
    console.log(`| ${condition} | ${m.toFixed(0)} (${Math.max(...rs.map((r) => r.rps)).toFixed(0)}) | ${median(rs.map((r) => r.p99))} | ${median(rs.map((r) => r.cpu)).toFixed(2)} | ${(m / base0).toFixed(3)} |`);
  }
}

if (parts.has('size')) sizes();
if (parts.has('matrix') || parts.has('export')) {
  if (!existsSync(join(root, 'dist/console/index.html'))) throw new Error('the console is not built: npm run build');
  const dir = join(root, 'bench', '.tmp', 'console');
  mkdirSync(dir, { recursive: true });
  const { server, base } = await startServer(wideFixture(dir));
  const b = await browser();
  try {
    if (parts.has('matrix')) await timeToMatrix(base, b);
    if (parts.has('export')) await exportWithConsole(base, server.pid, b);
  } finally {
    await b.close();
    server.kill('SIGTERM');
  }
}
