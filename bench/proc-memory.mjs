// Resident memory of a cfgu server's process tree, read from /proc (Linux), for the benchmarks, the soak and the fuzz campaign.
import { readFileSync } from 'node:fs';

/** `pid` and every process below it (children listed by /proc/PID/task/PID/children); processes that exit are skipped. */
export function processTree(pid) {
  const pids = [pid];
  for (let i = 0; i < pids.length; i++) {
    try {
      const kids = readFileSync(`/proc/${pids[i]}/task/${pids[i]}/children`, 'utf8').trim();
      if (kids) pids.push(...kids.split(/\s+/).map(Number));
    } catch {
      /* exited meanwhile */
    }
  }
  return pids;
}

/**
 * RSS in MB of the tree below `pid`, split by kind: `server` (the server processes: primary and workers) and
 * `sandbox` (the expression sandbox children), each a total and its largest process, with the process counts.
 */
export function memory(pid) {
  const m = { server: 0, sandbox: 0, maxServer: 0, maxSandbox: 0, servers: 0, sandboxes: 0 };
  for (const p of processTree(pid)) {
    try {
      const mb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${p}/status`, 'utf8'))?.[1] ?? 0) / 1024;
      if (readFileSync(`/proc/${p}/cmdline`, 'utf8').includes('sandbox-child')) {
        m.sandbox += mb;
        m.maxSandbox = Math.max(m.maxSandbox, mb);
        m.sandboxes++;
      } else {
        m.server += mb;
        m.maxServer = Math.max(m.maxServer, mb);
        m.servers++;
      }
    } catch {
      /* exited meanwhile */
    }
  }
  return m;
}
