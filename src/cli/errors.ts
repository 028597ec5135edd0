/**
 * Exit codes and error printing of the `cfgu` sub-commands: 0 success, 1 validation failure / store or sandbox
 * unavailable, 2 usage error (bad flags, unknown store, bad schema, bad `.configu`). No stack trace unless `--debug`.
 */
import { cliLinesOf, EXIT_USAGE, exitCodeFor, oneLine } from '../core/index.js';
import { displayPath } from './paths.js';

export { EXIT_OK, EXIT_FAILED, EXIT_USAGE, failureLines } from '../core/index.js';

/** A problem with how the command was called (exit 2). `lines` are printed under the message. */
export class UsageError extends Error {
  readonly lines: string[];
  /** Point at `--help` (for mistakes in the flags themselves). */
  readonly showHelp: boolean;
  constructor(message: string, lines: string[] = [], showHelp = false) {
    super(message);
    this.name = 'UsageError';
    this.lines = lines;
    this.showHelp = showHelp;
  }
}

/** A mistake in the flags: the message is followed by a pointer to `--help`. */
export const flagError = (message: string) => new UsageError(message, [], true);

/** Leave the command with this exit code after printing `message` (if any) to standard error. */
export class ExitError extends Error {
  readonly exitCode: number;
  readonly lines: string[];
  constructor(exitCode: number, message: string, lines: string[] = []) {
    super(message);
    this.name = 'ExitError';
    this.exitCode = exitCode;
    this.lines = lines;
  }
}

/** The exit code for an error (docs/cli.md, "Exit codes"): cfgu's own errors take theirs from the catalogue. */
export function exitCodeOf(e: unknown): number {
  if (e instanceof ExitError) return e.exitCode;
  if (e instanceof UsageError) return EXIT_USAGE;
  return exitCodeFor(e);
}

/** The lines printed to standard error for an error (without the stack). The first is prefixed `cfgu <command>: `. */
export function errorLines(command: string, e: unknown): string[] {
  const prefix = `cfgu ${command}: `;
  if (e instanceof UsageError || e instanceof ExitError) {
    const out = e.message ? [prefix + e.message] : [];
    return [...out, ...e.lines];
  }
  // cfgu's own errors: the lines of the catalogue's row of the code.
  const own = cliLinesOf(e, (file) => displayPath(file));
  if (own) return [prefix + own[0], ...own.slice(1)];
  const err = e as Error & { code?: string };
  const text = err?.message ? oneLine(err.message) : String(e);
  return [`${prefix}${text}${err?.code && !text.includes(err.code) ? ` (${err.code})` : ''}`];
}

/** The lines for an error in a command's flags: its lines, then a pointer to the command's `--help`. */
export function flagErrorLines(command: string, e: UsageError): string[] {
  const lines = errorLines(command, e);
  if (e.showHelp) lines.push(`Run "cfgu ${command} --help" for usage.`);
  return lines;
}
