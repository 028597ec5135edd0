// What a start costs, for two builds side by side: CPU time (user + system, from /proc) of `cfgu serve --workers 1`
// until its `listening` line (the server process alone, not its sandbox child), and of a one-key `cfgu eval` run to
// its end. Every worker, every replacement of a dead worker and every `cfgu` command pays these. Each directory is a
// complete, built checkout (bin/, dist/, node_modules), as for bench/ab-builds.mjs:
//
//   mkdir -p /tmp/cfgu-a && git archive <base> | tar -x -C /tmp/cfgu-a && ln -s "$PWD/node_modules" /tmp/cfgu-a/
//   (cd /tmp/cfgu-a && node scripts/build.mjs) && node scripts/build.mjs
//   node bench/startup.mjs --a /tmp/cfgu-a --b . [--rounds 8]
//
// Rounds alternate the builds (A then B, then B then A, ...), so that a machine whose speed moves weighs on both.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';

const { values: args } = parseArgs({ options: { a: { type: 'string' }, b: { type: 'string' }, rounds: { type: 'string', default: '8' } } });
if (!args.a || !args.b) {
  console.error('usage: node bench/startup.mjs --a DIR --b DIR [--rounds 8]');
  process.exit(2);
}
const builds = { A: resolve(args.a), B: resolve(args.b) };
const dir = mkdtempSync(join(tmpdir(), 'cfgu-startup-'));
writeFileSync(join(dir, 'data.json'), JSON.stringify([{ set: '', key: 'A', value: '1' }]));
writeFileSync(join(dir, '.configu'), JSON.stringify({ stores: { main: { type: 'json-file', configuration: { path: 'data.json' }, default: true } } }));
writeFileSync(join(dir, 'app.cfgu.json'), JSON.stringify({ keys: { A: {} } }));
const env = { PATH: process.env.PATH ?? '', HOME: dir, CONFIGU_EXPRESSION_WORKERS: '1', CONFIGU_EXPRESSION_SPARES: '0' };

const cpuMs = (pid) => {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) * 10;
};

/** CPU ms of `cfgu serve` until it logs `listening`. */
async function serve(root) {
  const child = spawn(process.execPath, [join(root, 'bin/cfgu.js'), 'serve', '--config', join(dir, '.configu'), '--port', '0', '--host', '127.0.0.1', '--workers', '1'], { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const ms = await new Promise((ok, fail) => {
    child.stdout.on('data', (d) => {
      out += d;
      if (/"msg":"listening/.test(out)) ok(cpuMs(child.pid));
    });
    child.once('exit', (code) => fail(new Error(`cfgu serve exited (${code}) before listening: ${out.slice(-400)}`)));
  });
  child.removeAllListeners('exit');
  const gone = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await gone;
  return ms;
}

/** CPU ms of a whole one-key `cfgu eval` (the process's own and its children's, read when it ends). */
async function evalOnce(root) {
  const child = spawn('/usr/bin/time', ['-f', '%U %S', process.execPath, join(root, 'bin/cfgu.js'), 'eval', '--store', 'main', '--schema', 'app.cfgu.json'], { cwd: dir, env, stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  child.stderr.on('data', (d) => (err += d));
  const code = await new Promise((r) => child.once('exit', r));
  const m = err.trim().split('\n').pop().match(/^([\d.]+) ([\d.]+)$/);
  if (code !== 0 || !m) throw new Error(`cfgu eval failed (${code}): ${err.slice(-400)}`);
  return Math.round((Number(m[1]) + Number(m[2])) * 1000);
}

const results = { A: { serve: [], eval: [] }, B: { serve: [], eval: [] } };
for (let round = 0; round < Number(args.rounds); round++) {
  for (const name of round % 2 ? ['B', 'A'] : ['A', 'B']) {
    results[name].serve.push(await serve(builds[name]));
    results[name].eval.push(await evalOnce(builds[name]));
  }
}
rmSync(dir, { recursive: true, force: true });
const median = (v) => {
  const s = [...v].sort((x, y) => x - y);
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
console.log(`A = ${builds.A}, B = ${builds.B}; ${args.rounds} rounds, alternating; load average ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')} at the end`);
console.log('| start | A CPU ms, median (range) | B CPU ms, median (range) | B vs A |');
console.log('|---|---|---|---|');
for (const what of ['serve', 'eval']) {
  const a = results.A[what];
  const b = results.B[what];
  const label = what === 'serve' ? '`cfgu serve` until listening' : 'one-key `cfgu eval`, whole run';
  console.log(`| ${label} | ${median(a)} (${Math.min(...a)}-${Math.max(...a)}) | ${median(b)} (${Math.min(...b)}-${Math.max(...b)}) | ${(((median(b) - median(a)) / median(a)) * 100).toFixed(1)}% |`);
}
