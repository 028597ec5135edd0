// Where the CPU time of `npm test` goes: runs a command (default `npm test`, extra arguments are passed to it) while
// reading every process of the machine from /proc ten times a second, then prints the CPU time (user + system) of
// each kind of process (sandbox children, runs of the built binary, test processes, the servers tests start) and, for
// each test file, that of its test process and of every process started below it. Linux only.
//
//   node scripts/suite-cpu.mjs                    # the whole suite
//   node scripts/suite-cpu.mjs test/expressions   # some files (as `npm test -- test/expressions`)
//
// A process is counted at its last reading, so a process that lives less than 100 ms can be missed or undercounted:
// the figures are a lower bound. Processes that are not below the command (the machine's own services) are listed
// under "not started by the command". The process kinds are recognised by their command lines.
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

const TICK_MS = 100;
const seen = new Map(); // `${pid}:${starttime}` -> { pid, ppid, cmd, cpuMs }
const USER_HZ = 100; // clock ticks per second in /proc/PID/stat on Linux

function read() {
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const key = `${pid}:${f[19]}`;
      let p = seen.get(key);
      if (!p) {
        p = { pid, ppid: f[1], cmd: readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ').trim(), cpuMs: 0 };
        seen.set(key, p);
      }
      p.cpuMs = ((Number(f[11]) + Number(f[12])) * 1000) / USER_HZ;
    } catch {
      // gone between the listing and the read
    }
  }
}

function kind(cmd) {
  if (cmd.includes('sandbox-child.js')) return 'sandbox child';
  if (/bin\/cfgu\.js|\/cfgu\s/.test(cmd)) return 'cfgu binary';
  if (/test-build\/test\/\S+\.test\.mjs/.test(cmd)) return /--test-reporter/.test(cmd) ? 'test runner' : 'test process';
  if (cmd === '') return '(exited before its command line was read)';
  const exe = cmd.split(' ')[0].split('/').pop();
  return exe;
}

const command = ['npm', ['test', ...(process.argv.length > 2 ? ['--', ...process.argv.slice(2)] : [])]];
read();
const before = new Map([...seen].map(([key, p]) => [key, p.cpuMs]));
const timer = setInterval(read, TICK_MS);
const started = Date.now();
const child = spawn(command[0], command[1], { stdio: 'inherit' });
const code = await new Promise((resolve) => child.on('close', (c) => resolve(c ?? 1)));
clearInterval(timer);
read();

const byPid = new Map();
for (const p of seen.values()) byPid.set(p.pid, p);
const root = String(child.pid);
/** The nearest ancestor (or itself) that is a test process, and whether the command started the process at all. */
function place(p) {
  let testFile;
  let under = false;
  for (let a = p, hops = 0; a && hops < 64; a = byPid.get(a.ppid), hops++) {
    const m = !testFile && a.cmd.match(/test-build\/(test\/\S+\.test)\.mjs/);
    if (m && !/--test-reporter/.test(a.cmd)) testFile = `${m[1]}.ts`;
    if (a.pid === root) {
      under = true;
      break;
    }
  }
  return { testFile, under };
}

const kinds = new Map();
const files = new Map();
let outside = 0;
for (const [key, p] of seen) {
  const { testFile, under } = place(p);
  if (!under) {
    outside += p.cpuMs - (before.get(key) ?? 0);
    continue;
  }
  const k = kind(p.cmd);
  const row = kinds.get(k) ?? { n: 0, ms: 0 };
  row.n++;
  row.ms += p.cpuMs;
  kinds.set(k, row);
  if (testFile) {
    const f = files.get(testFile) ?? { ms: 0, self: 0, sandbox: 0, sandboxN: 0, binary: 0, binaryN: 0, other: 0 };
    f.ms += p.cpuMs;
    if (k === 'test process') f.self += p.cpuMs;
    else if (k === 'sandbox child') (f.sandbox += p.cpuMs), f.sandboxN++;
    else if (k === 'cfgu binary') (f.binary += p.cpuMs), f.binaryN++;
    else f.other += p.cpuMs;
    files.set(testFile, f);
  }
}

const s = (ms) => (ms / 1000).toFixed(1).padStart(7);
const total = [...kinds.values()].reduce((a, r) => a + r.ms, 0);
const out = [
  '',
  `suite-cpu: ${((Date.now() - started) / 1000).toFixed(1)} s wall, ${s(total).trim()} s of CPU in the processes the command started (exit ${code})`,
  '',
  'CPU s   processes  kind',
  ...[...kinds].sort((a, b) => b[1].ms - a[1].ms).map(([k, r]) => `${s(r.ms)} ${String(r.n).padStart(6)}     ${k}`),
  `${s(outside)}            not started by the command (the machine's other processes, meanwhile)`,
  '',
  'per test file: CPU s of the file and everything it started = its test process + sandbox children (count) + cfgu binaries (count) + other',
  ...[...files]
    .sort((a, b) => b[1].ms - a[1].ms)
    .map(([f, r]) => `${s(r.ms)} = ${s(r.self)} + ${s(r.sandbox)} (${r.sandboxN}) + ${s(r.binary)} (${r.binaryN}) + ${s(r.other)}  ${f}`),
];
process.stderr.write(`${out.join('\n')}\n`);
process.exit(code);
