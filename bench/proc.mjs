// Helpers shared by the benchmarks (run.mjs, layouts.mjs): process-tree memory readings from /proc, and the load
// generator (bench/load.mjs) run as a process of its own.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));

/** Runs bench/load.mjs with `options` (autocannon's url, method, body, connections, duration); resolves its summary. */
export function load(options) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(here, 'load.mjs'), JSON.stringify(options)], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`load generator exited ${code}`))));
  });
}

/** Every pid in the tree below `pid` (the primary, its workers, their sandbox processes). */
export function tree(pid) {
  const out = [pid];
  for (let i = 0; i < out.length; i++) {
    try {
      const kids = readFileSync(`/proc/${out[i]}/task/${out[i]}/children`, 'utf8').trim();
      if (kids) out.push(...kids.split(/\s+/).map(Number));
    } catch {
      /* gone */
    }
  }
  return out;
}

/** Resident memory of one process, in kB (0 once it is gone). */
export const rssKb = (pid) => {
  try {
    return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
  } catch {
    return 0;
  }
};

/** 'sandbox' for an expression sandbox child, 'server' for the rest, 'gone' once it exited. */
export const comm = (pid) => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('sandbox-child') ? 'sandbox' : 'server';
  } catch {
    return 'gone';
  }
};

/** Total resident memory of the tree below `pid`, in MB, with the process count. */
export function treeRss(pid) {
  const pids = tree(pid);
  return { mb: pids.reduce((sum, p) => sum + rssKb(p), 0) / 1024, processes: pids.filter((p) => comm(p) !== 'gone').length };
}
