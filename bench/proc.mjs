// Process-tree memory readings from /proc, shared by the benchmarks (run.mjs, layouts.mjs, replicas.mjs).
import { readFileSync } from 'node:fs';

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
