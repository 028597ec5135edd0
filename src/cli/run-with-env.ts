/** `cfgu export --run CMD`: run a shell command with the exported values added to its environment. */
import { spawn } from 'node:child_process';
import type { ExportedConfigs } from '../core/index.js';
import { setOwn } from '../core/names.js';
import { textOf } from './export-formats.js';
import type { CommandIO } from './io.js';

/**
 * Run `command` through the shell with the values (as text) added to `io.env`; resolves to its exit code (128 + the
 * signal number when a signal ended it, 127 when it could not start). SIGINT and SIGTERM are forwarded to it.
 */
export function runWithEnv(command: string, configs: ExportedConfigs, io: CommandIO): Promise<number> {
  const childEnv: NodeJS.ProcessEnv = { ...io.env };
  for (const [k, v] of Object.entries(configs)) setOwn(childEnv, k, textOf(v));
  // The command shares the process's own terminal and streams; injected writers (in-process runs) get its output.
  const own = io.stdout === process.stdout && io.stderr === process.stderr;
  return new Promise((resolveExit) => {
    const child = spawn(command, { shell: true, stdio: own ? 'inherit' : ['ignore', 'pipe', 'pipe'], env: childEnv, cwd: io.cwd });
    child.stdout?.setEncoding('utf8').on('data', (text: string) => io.stdout.write(text));
    child.stderr?.setEncoding('utf8').on('data', (text: string) => io.stderr.write(text));
    const forward = (signal: NodeJS.Signals) => child.kill(signal);
    process.on('SIGINT', forward);
    process.on('SIGTERM', forward);
    const done = (code: number) => {
      process.off('SIGINT', forward);
      process.off('SIGTERM', forward);
      resolveExit(code);
    };
    child.on('error', (e) => {
      io.stderr.write(`cfgu export: --run: ${e.message}\n`);
      done(127);
    });
    child.on('close', (code, signal) => done(code ?? (signal ? 128 + (osSignal(signal) ?? 1) : 1)));
  });
}

const SIGNALS: Record<string, number> = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGKILL: 9, SIGTERM: 15, SIGPIPE: 13 };
const osSignal = (s: string) => SIGNALS[s];
