/**
 * Exit codes and error printing of the `cfgu` sub-commands: 0 success, 1 validation failure / store or sandbox
 * unavailable, 2 usage error (bad flags, unknown store, bad schema, bad `.configu`). No stack trace unless `--debug`.
 */
import { ConfigurationError, EXIT_USAGE, InputError, ValidationError, exitCodeFor, isCfguError } from '../core/index.js';
import { displayPath } from './paths.js';

export { EXIT_OK, EXIT_FAILED, EXIT_USAGE } from '../core/index.js';

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

/** One line per validation failure: `command N, key K, rule R: message`. */
export function failureLines(e: ValidationError): string[] {
  return e.failures.map((f) => `command ${f.command}, key ${f.key}, rule ${f.rule}: ${f.message}`);
}

const oneLine = (s: string) => s.replace(/\s*\n\s*/g, '; ');

/** The lines printed to standard error for an error (without the stack). The first is prefixed `cfgu <command>: `. */
export function errorLines(command: string, e: unknown): string[] {
  const prefix = `cfgu ${command}: `;
  if (e instanceof ValidationError) return [`${prefix}${e.message}:`, ...failureLines(e)];
  if (e instanceof UsageError || e instanceof ExitError) {
    const out = e.message ? [prefix + e.message] : [];
    return [...out, ...e.lines];
  }
  if (e instanceof ConfigurationError) {
    let msg = oneLine(e.message);
    if (e.property && !msg.includes(e.property)) msg = `${e.property}: ${msg}`;
    if (e.file && !msg.includes(e.file)) msg = `${displayPath(e.file)}: ${msg}`;
    return [prefix + msg];
  }
  if (e instanceof InputError) {
    const lines = [prefix + oneLine(e.message)];
    if (e.issues.length > 1 || (e.issues.length === 1 && e.issues[0]!.path && e.issues[0]!.message !== e.message)) {
      for (const i of e.issues) lines.push(`  ${i.path ? `${i.path}: ` : ''}${i.message}`);
    }
    return lines;
  }
  if (isCfguError(e)) return [prefix + oneLine(e.message)];
  const err = e as Error & { code?: string };
  const text = err?.message ? oneLine(err.message) : String(e);
  return [`${prefix}${text}${err?.code && !text.includes(err.code) ? ` (${err.code})` : ''}`];
}
