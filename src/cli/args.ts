/**
 * Argument parsing of the `cfgu` sub-commands (`node:util` parseArgs, strict) with the global flags `--config PATH`,
 * `--debug`, `--help`, and clear messages for the flags v1 removed or renamed.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { flagError } from './errors.js';
import { existsFile } from './paths.js';

type Options = NonNullable<ParseArgsConfig['options']>;

/** The flags every command takes. */
export const GLOBAL_OPTIONS = {
  config: { type: 'string' },
  debug: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const satisfies Options;

export const GLOBAL_HELP = `Global options:
  --config PATH   the .configu file (default: $CONFIGU_CONFIG, else the nearest .configu
                  walking up from the current folder)
  --debug         print stack traces of errors
  -h, --help      show this help`;

/** A flag removed or renamed in v1: matched against each argument (before `--`), with the message to print. */
export interface RemovedFlag {
  match: (arg: string) => boolean;
  message: string;
}

const flagName = (arg: string) => arg.split('=')[0]!;

/** Flags removed by v1, shared by the commands. */
export const removedFlag = (name: string, message: string): RemovedFlag => ({ match: (a) => flagName(a) === name, message });

const KV_LIKE = /^[A-Za-z0-9_-]+=/;

export interface ParsedCommandLine<V> {
  values: V;
  positionals: string[];
  tokens: NonNullable<ReturnType<typeof parseArgs>['tokens']>;
}

/**
 * Parse a command's arguments (its own options plus the global ones). Throws UsageError with a message naming the
 * flag, and for v1's removed flags the replacement.
 */
export function parseCommandLine<O extends Options>(
  command: string,
  argv: string[],
  options: O,
  removed: RemovedFlag[] = [],
): ParsedCommandLine<Record<string, string | boolean | string[] | boolean[] | undefined>> {
  const end = argv.indexOf('--');
  const flags = end === -1 ? argv : argv.slice(0, end);
  for (let i = 0; i < flags.length; i++) {
    const arg = flags[i]!;
    if (!arg.startsWith('-')) continue;
    for (const r of removed) if (r.match(arg)) throw flagError(r.message);
    // v0's `--config KEY=VALUE` / `-c KEY=VALUE` became `--kv`; v1's `--config` is the .configu path.
    if (arg === '-c' || arg.startsWith('-c=')) {
      throw flagError('`-c KEY=VALUE` was removed in v1: use `--kv KEY=VALUE` (`--config PATH` now selects the .configu file)');
    }
    if (flagName(arg) === '--config') {
      const value = arg.includes('=') ? arg.slice(arg.indexOf('=') + 1) : flags[i + 1];
      if (value !== undefined && KV_LIKE.test(value) && !existsFile(value)) {
        throw flagError(
          `--config "${value}" looks like KEY=VALUE: in v1 \`--kv KEY=VALUE\` replaced \`--config KEY=VALUE\`; \`--config PATH\` selects the .configu file`,
        );
      }
    }
  }
  const parsed = parseFlags(argv, { ...GLOBAL_OPTIONS, ...options });
  return parsed as unknown as ParsedCommandLine<Record<string, string | boolean | string[] | boolean[] | undefined>>;
}

/**
 * Parse exactly these flags (strict, positionals allowed), without the global options or the checks for v1's removed
 * flags; for the commands that take no `--debug` (serve, health). A mistake throws UsageError naming the flag.
 */
export function parseFlags<O extends Options>(argv: string[], options: O) {
  try {
    return parseArgs({ args: argv, options, strict: true, allowPositionals: true, tokens: true });
  } catch (e) {
    throw flagError(parseArgsMessage(e as Error));
  }
}

export function parseArgsMessage(e: Error & { code?: string }): string {
  const first = (e.message ?? String(e)).split('\n')[0]!;
  const unknown = /^Unknown option '([^']+)'/.exec(first);
  if (unknown) return `unknown option ${unknown[1]}`;
  const missing = /^Option '([^']+)' argument missing/.exec(first);
  if (missing) return `option ${missing[1]!.replace(/ <value>$/, '')} needs a value`;
  const noValue = /^Option '([^']+)' does not take an argument/.exec(first);
  if (noValue) return `option ${noValue[1]} does not take a value`;
  return first.replace(/\.$/, '');
}

/** Reject positional arguments, with a hint when the shell expanded a glob given to `--schema`. */
export function rejectPositionals(positionals: string[]): void {
  if (!positionals.length) return;
  const p = positionals[0]!;
  const hint = /\.cfgu\.(json|ya?ml)$/.test(p) ? ` (did the shell expand a glob? quote it: --schema '*.cfgu.json', or repeat --schema)` : '';
  throw flagError(`unexpected argument "${p}"${hint}`);
}

/** `KEY=VALUE` -> [KEY, VALUE]. Throws UsageError naming the flag. */
export function splitKeyValue(flag: string, text: string): [string, string] {
  const at = text.indexOf('=');
  // Without a key, the text is a value: not echoed (it may be a secret).
  if (at === 0) throw flagError(`${flag} has a value but no key: it must be KEY=VALUE`);
  if (at < 0) throw flagError(`${flag} "${text}" must be KEY=VALUE`);
  return [text.slice(0, at), text.slice(at + 1)];
}

/** The flag value(s) as a list (repeatable string flags). */
export const list = (v: unknown): string[] => (v === undefined ? [] : Array.isArray(v) ? (v as string[]) : [v as string]);
export const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
