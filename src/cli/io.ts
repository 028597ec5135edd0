/**
 * What a command reads and writes, injectable so a command can run in-process (tests) as well as in the binary:
 * standard input, output and error, the environment, the working folder, and whether standard error is a terminal.
 */
import { fstatSync } from 'node:fs';
import type { TrustedEvaluator } from './lazy-evaluator.js';

export interface Writer {
  write(text: string): unknown;
}

export interface CommandIO {
  /**
   * Standard input when it may carry data (a pipe, a file, a socket): its text or a stream of it; null for a terminal
   * or nothing.
   */
  readonly stdin: NodeJS.ReadableStream | string | null;
  stdout: Writer;
  stderr: Writer;
  env: NodeJS.ProcessEnv;
  cwd: string;
  /** Standard error is a terminal: steps slower than a second show a progress line there. */
  isTTY: boolean;
  /** A sandbox already started, used instead of starting one and left open when the command ends (tests share one). */
  sandbox?: TrustedEvaluator;
}

/** True when the process's standard input may carry data (a pipe, a file, a socket), false for a terminal or nothing. */
export function stdinHasData(): boolean {
  if (process.stdin.isTTY) return false;
  try {
    const st = fstatSync(0);
    return st.isFIFO() || st.isFile() || st.isSocket();
  } catch {
    return false;
  }
}

/** The process's own streams, environment and working folder. Standard input is only opened when read. */
export const processIO = (): CommandIO => ({
  get stdin() {
    return stdinHasData() ? process.stdin : null;
  },
  stdout: process.stdout,
  stderr: process.stderr,
  env: process.env,
  cwd: process.cwd(),
  isTTY: process.stderr.isTTY === true,
});

/** All of standard input as text; undefined when there is none (a terminal or nothing). */
export async function readInput(io: CommandIO): Promise<string | undefined> {
  const input = io.stdin;
  if (input === null) return undefined;
  if (typeof input === 'string') return input;
  const chunks: Buffer[] = [];
  for await (const chunk of input) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer));
  return Buffer.concat(chunks).toString('utf8');
}
