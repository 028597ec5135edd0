// Pieces the benchmark drivers share: a free loopback port, the load generator run in its own process, and waiting
// until a server reports ready.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

export const freePort = () =>
  new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });

/** autocannon from bench/load.mjs in a second process (it must not share the server's CPU budget); its summary. */
export function load(options) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(root, 'bench/load.mjs'), JSON.stringify(options)], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`load generator exited ${code}`))));
  });
}

/** Poll `${base}/ready` (or another path) until it answers 200. */
export async function waitReady(base, ms = 60000, path = '/ready') {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    try {
      if ((await fetch(`${base}${path}`)).status === 200) return;
    } catch {
      /* not listening yet */
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${base}: the server did not become ready`);
}

/** Every pid in the tree below `pid` (a server, its workers, their sandbox processes), from /proc. */
import { processTree } from './proc-memory.mjs';
export { processTree as tree };

/** CPU seconds (user + system) used so far by the tree below `pid`, from /proc/<pid>/stat. */
export function cpuSeconds(pid) {
  let ticks = 0;
  for (const p of processTree(pid)) {
    try {
      const stat = readFileSync(`/proc/${p}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(fields[11]) + Number(fields[12]); // utime, stime (fields 14 and 15 of stat)
    } catch {
      /* exited meanwhile */
    }
  }
  return ticks / 100; // USER_HZ
}

/**
 * A child that answers in JSON lines, one per command written to its standard input (the in-process servers of
 * bench/sse-server.ts and bench/stream-memory-server.ts): `ask(command)` writes the command and resolves with the next
 * line; `ask()` without one waits for the next line (the first: the child's port).
 */
export function jsonLines(child) {
  let out = '';
  const waiters = [];
  child.stdout.setEncoding('utf8').on('data', (c) => {
    out += c;
    let nl;
    while ((nl = out.indexOf('\n')) !== -1) {
      const line = out.slice(0, nl);
      out = out.slice(nl + 1);
      waiters.shift()?.(JSON.parse(line));
    }
  });
  return (command) =>
    new Promise((resolve) => {
      waiters.push(resolve);
      if (command) child.stdin.write(`${command}\n`);
    });
}
