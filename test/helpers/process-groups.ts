/**
 * Commands started in a process group of their own (`npm start`, a bash script): the shell, npm and everything they
 * start are stopped together, by the test or, when it fails half-way, by `killGroups()` in the file's `after`.
 */
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';

const groups = new Set<number>();

/** `spawn` with `detached: true` (a new process group led by the child), remembered until stopped. */
export function spawnGroup(command: string, args: string[], options: SpawnOptions): ChildProcess {
  const child = spawn(command, args, { ...options, detached: true });
  if (child.pid !== undefined) groups.add(child.pid);
  return child;
}

/** Send `signal` to every process of the group led by `pid`; the group is forgotten (it is being stopped). */
export function signalGroup(pid: number, signal: NodeJS.Signals = 'SIGKILL'): void {
  groups.delete(pid);
  try {
    process.kill(-pid, signal);
  } catch {
    /* already gone */
  }
}

/** SIGKILL every group still remembered (test teardown). */
export function killGroups(): void {
  for (const pid of [...groups]) signalGroup(pid);
}
