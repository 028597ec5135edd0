// What replacing a sandbox costs: a new child process (spawn, isolate, bundle, seal) and, where the child supports it,
// a new isolate inside a running child after a memory-limit kill (renewal). Wall time and CPU time of the child
// (utime + stime from /proc, Linux only), and the resident memory of an idle child.
//
//   npm run build && node bench/sandbox-replace.mjs [--runs 5] [--dist <folder holding sandbox-child.js and sandbox/>]
//
// --dist lets the same script measure another build (e.g. an older commit built into a scratch folder).
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const { values: args } = parseArgs({ options: { runs: { type: 'string', default: '5' }, dist: { type: 'string' } } });
const runs = Number(args.runs);
const dist = args.dist ?? join(dirname(fileURLToPath(import.meta.url)), '..', 'dist');
const TICK_MS = 1000 / 100; // USER_HZ

// A bomb that reaches the memory limit with large strings: the isolate is disposed, the process lives.
const BOMB = "(() => { const a = []; for (;;) a.push('y'.repeat(1 << 20) + a.length); })()";

/** CPU time of a process so far (ms). */
function cpuMs(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) * TICK_MS;
}
const rssMb = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024;

function startChild() {
  const config = JSON.stringify({ bundle: join(dist, 'sandbox', 'libraries.js'), timeoutMs: 10_000, memoryMb: 64, retireHeapMb: 32 });
  const child = spawn(process.execPath, ['--no-node-snapshot', join(dist, 'sandbox-child.js'), config], { stdio: ['pipe', 'pipe', 'ignore'], env: {} });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const next = async () => {
    const { value, done } = await lines.next();
    return done ? { t: 'exit' } : JSON.parse(value);
  };
  return { child, next };
}

const median = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const starts = { wall: [], cpu: [], rss: [] };
const renewals = { wall: [], cpu: [], rss: [] };
let renews = true;
for (let i = 0; i < runs; i++) {
  const t0 = performance.now();
  const { child, next } = startChild();
  const ready = await next();
  if (ready.t !== 'ready') throw new Error(`child did not start: ${JSON.stringify(ready)}`);
  starts.wall.push(performance.now() - t0);
  starts.cpu.push(cpuMs(child.pid));
  starts.rss.push(rssMb(child.pid));
  if (renews) {
    child.stdin.write(JSON.stringify({ t: 'bool', expression: BOMB, context: null }) + '\n');
    const answer = await next();
    if (answer.kind !== 'memory-limit') throw new Error(`the bomb did not reach the memory limit: ${JSON.stringify(answer)}`);
    const t1 = performance.now();
    const c1 = cpuMs(child.pid);
    const notice = await next();
    if (notice.t === 'renew') {
      child.stdin.write('{"t":"flush"}\n');
      if ((await next()).t !== 'ready') throw new Error('no ready after renew');
      renewals.wall.push(performance.now() - t1);
      renewals.cpu.push(cpuMs(child.pid) - c1);
      renewals.rss.push(rssMb(child.pid));
    } else renews = false; // a build whose child exits instead: its replacement is a new child (the start-up above)
  }
  child.kill('SIGKILL');
}
const fmt = (xs) => `${Math.round(median(xs))} (${Math.round(Math.min(...xs))}-${Math.round(Math.max(...xs))})`;
console.log(`build: ${dist}; ${runs} runs; median (min-max)`);
console.log(`new child process, spawn to ready:   wall ${fmt(starts.wall)} ms, child CPU ${fmt(starts.cpu)} ms, idle RSS ${fmt(starts.rss)} MB`);
if (renews && renewals.wall.length) {
  console.log(`isolate renewed in the child:        wall ${fmt(renewals.wall)} ms, child CPU ${fmt(renewals.cpu)} ms, idle RSS after ${fmt(renewals.rss)} MB`);
} else console.log('isolate renewed in the child:        not supported by this build (the child exits; replacement = a new child)');
