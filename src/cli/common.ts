/**
 * What every `cfgu` sub-command of the command line (`upsert`, `eval`, `export`) shares:
 *
 * - argument parsing (`node:util` parseArgs, strict) with the global flags `--config PATH`, `--debug`, `--help`, and
 *   clear messages for the flags v1 removed or renamed;
 * - a session: the `.configu` file (found by `--config`, `$CONFIGU_CONFIG`, or walking up from the working folder),
 *   its store registry (only the stores a command uses are connected) and the expression sandbox (started lazily:
 *   only when a schema, a `.configu` template, a `--filter` or a `--template` needs it);
 * - schema files (`*.cfgu.json|yaml|yml`, several files or globs merged into one `keys` map, or a name from
 *   `.configu`'s `schemas`);
 * - error printing and exit codes: 0 success, 1 validation failure / store or sandbox unavailable, 2 usage error
 *   (bad flags, unknown store, bad schema, bad `.configu`). No stack trace unless `--debug`;
 * - a progress indicator on standard error for steps that take over a second (only when standard error is a TTY).
 */
import { fstatSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import YAML from 'yaml';
import {
  ConfigurationError,
  InputError,
  LimitError,
  SandboxUnavailableError,
  StoreUnavailableError,
  UnknownStoreError,
  ValidationError,
  isCfguError,
  prepareSchema,
} from '../core/index.js';
import type { Cfgu, ConfigSchema, EvalResult, EvaluatedConfig, Origin } from '../core/index.js';
import { createStoreRegistry, findConfigFile, loadConfiguration } from '../config/index.js';
import { onlyVariableNames, renderVariables } from '../config/render.js';
import type { LoadedConfiguration, StoreRegistry } from '../config/types.js';
import { createSandboxEvaluator, expressionOptionsFromEnv } from '../expressions/index.js';
import type { ExpressionEvaluator, ExpressionJob, ExpressionResult } from '../expressions/types.js';
import type { ResolvedStore } from '../stores/types.js';

// ------------------------------------------------------------------------------------------------ exit codes

export const EXIT_OK = 0;
/** Validation failed, or a store / the sandbox is unavailable. */
export const EXIT_FAILED = 1;
/** Bad flags, unknown store, bad schema, bad `.configu`. */
export const EXIT_USAGE = 2;

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

/** The exit code for an error (docs/cli.md, "Exit codes"). */
export function exitCodeOf(e: unknown): number {
  if (e instanceof ExitError) return e.exitCode;
  if (e instanceof UsageError) return EXIT_USAGE;
  if (e instanceof InputError || e instanceof UnknownStoreError || e instanceof LimitError || e instanceof ConfigurationError) return EXIT_USAGE;
  if (e instanceof ValidationError || e instanceof StoreUnavailableError || e instanceof SandboxUnavailableError) return EXIT_FAILED;
  if (isCfguError(e)) return EXIT_FAILED;
  return EXIT_FAILED;
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

/** A path as the user would like to read it: relative to the working folder when inside it. */
export function displayPath(file: string, cwd = process.cwd()): string {
  const rel = relative(cwd, file);
  return rel && !rel.startsWith('..') && !isAbsolute(rel) ? rel : file;
}

// ------------------------------------------------------------------------------------------------ arguments

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
  try {
    const parsed = parseArgs({ args: argv, options: { ...GLOBAL_OPTIONS, ...options }, strict: true, allowPositionals: true, tokens: true });
    return parsed as unknown as ParsedCommandLine<Record<string, string | boolean | string[] | boolean[] | undefined>>;
  } catch (e) {
    throw flagError(parseArgsMessage(e as Error));
  }
}

function parseArgsMessage(e: Error & { code?: string }): string {
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
  if (at <= 0) throw flagError(`${flag} "${text}" must be KEY=VALUE`);
  return [text.slice(0, at), text.slice(at + 1)];
}

const existsFile = (p: string): boolean => {
  try {
    return statSync(p).isFile();
  } catch {
    return false;
  }
};

// ------------------------------------------------------------------------------------------------ running a command

export interface CommandIO {
  stdout: NodeJS.WritableStream & { isTTY?: boolean };
  stderr: NodeJS.WritableStream & { isTTY?: boolean };
  env: NodeJS.ProcessEnv;
  cwd: string;
}

export const processIO = (): CommandIO => ({ stdout: process.stdout, stderr: process.stderr, env: process.env, cwd: process.cwd() });

/**
 * Run a command body: print errors (stack only with `--debug`), map them to exit codes, always close the session.
 * `argv` is only inspected for `--debug`, so even a parse error honours it.
 */
export async function runCommand(command: string, argv: string[], body: (session: Session) => Promise<number>, io: CommandIO = processIO()): Promise<number> {
  const end = argv.indexOf('--');
  const debug = (end === -1 ? argv : argv.slice(0, end)).includes('--debug');
  const session = new Session(command, io, debug);
  let code: number;
  try {
    code = await body(session);
  } catch (e) {
    code = exitCodeOf(e);
    const lines = errorLines(command, e);
    if (e instanceof UsageError && e.showHelp) lines.push(`Run "cfgu ${command} --help" for usage.`);
    if (debug && e instanceof Error && e.stack) lines.push(e.stack);
    if (lines.length) io.stderr.write(`${lines.join('\n')}\n`);
  }
  // Closing waits for child processes and connections whose handles may be unref'd: keep the event loop alive
  // meanwhile (else the process could end before the exit code is known), for at most 5 s.
  const hold = setInterval(() => undefined, 1000);
  try {
    await Promise.race([session.close(), new Promise((r) => setTimeout(r, 5000).unref())]);
  } catch (e) {
    if (debug) io.stderr.write(`cfgu ${command}: while closing: ${(e as Error)?.stack ?? String(e)}\n`);
  } finally {
    clearInterval(hold);
  }
  return code;
}

// ------------------------------------------------------------------------------------------------ progress

const FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/**
 * Run `step`; if it is still running after `delayMs`, show a spinner line with `label` on `stream` until it ends,
 * then erase the line. Silent when `stream` is not a TTY.
 */
export async function withProgress<T>(
  label: string,
  step: () => Promise<T>,
  stream: NodeJS.WritableStream & { isTTY?: boolean } = process.stderr,
  delayMs = 1000,
): Promise<T> {
  if (!stream.isTTY) return step();
  const started = Date.now();
  let frame = 0;
  let shown = false;
  let interval: NodeJS.Timeout | undefined;
  const draw = () => {
    const seconds = Math.floor((Date.now() - started) / 1000);
    stream.write(`\r\x1b[2K${FRAMES[frame++ % FRAMES.length]} ${label}… ${seconds}s`);
  };
  const timer = setTimeout(() => {
    shown = true;
    draw();
    interval = setInterval(draw, 80);
    interval.unref();
  }, delayMs);
  timer.unref();
  try {
    return await step();
  } finally {
    clearTimeout(timer);
    if (interval) clearInterval(interval);
    if (shown) stream.write('\r\x1b[2K');
  }
}

// ------------------------------------------------------------------------------------------------ the sandbox, lazily

type TrustedEvaluator = ExpressionEvaluator & { renderTrusted?: (template: string, vars: Record<string, unknown>) => unknown };

/** The expression sandbox, started on first use only (a spawn costs ~150 ms). */
export class LazyEvaluator implements ExpressionEvaluator {
  private started: Promise<TrustedEvaluator> | undefined;
  constructor(
    private readonly env: NodeJS.ProcessEnv,
    private readonly progress: <T>(label: string, step: () => Promise<T>) => Promise<T>,
  ) {}

  get isStarted(): boolean {
    return this.started !== undefined;
  }

  private sandbox(): Promise<TrustedEvaluator> {
    // One command line evaluates one thing at a time: one sandbox process is enough (unless the environment says).
    this.started ??= Promise.resolve().then(
      async () => (await createSandboxEvaluator({ workers: 1, ...expressionOptionsFromEnv(this.env) })) as TrustedEvaluator,
    );
    return this.started;
  }

  /** Start the sandbox now, without waiting (it takes a moment; overlap it with other work). */
  warm(): void {
    this.sandbox().catch(() => undefined);
  }

  async run(job: ExpressionJob): Promise<ExpressionResult> {
    const s = await this.progress('starting the expression sandbox', () => this.sandbox());
    return s.run(job);
  }

  async renderTemplate(template: string, context: unknown): Promise<string> {
    return (await this.sandbox()).renderTemplate(template, context);
  }

  async evaluateBoolean(expression: string, context: unknown): Promise<boolean> {
    return (await this.sandbox()).evaluateBoolean(expression, context);
  }

  /** Render a trusted template (`.configu`): bare variable names on the host, anything else in the sandbox. */
  async renderTrusted(template: string, vars: Record<string, unknown>): Promise<string> {
    if (onlyVariableNames(template)) return renderVariables(template, vars);
    const s = await this.sandbox();
    if (!s.renderTrusted) throw new SandboxUnavailableError('the expression sandbox cannot render trusted templates');
    return String(await s.renderTrusted(template, vars));
  }

  async close(): Promise<void> {
    if (!this.started) return;
    const s = await this.started.catch(() => undefined);
    await s?.close();
  }
}

// ------------------------------------------------------------------------------------------------ the session

/** What a command has opened: `.configu`, the store registry, the sandbox. Closed by runCommand. */
export class Session {
  readonly evaluator: LazyEvaluator;
  private loaded: LoadedConfiguration | undefined;
  private loadedFrom: string | undefined;
  private registry: StoreRegistry | undefined;
  private readonly initialised = new Map<string, Promise<void>>();

  constructor(
    readonly command: string,
    readonly io: CommandIO,
    readonly debug: boolean,
  ) {
    this.evaluator = new LazyEvaluator(io.env, (label, step) => this.progress(label, step));
  }

  progress<T>(label: string, step: () => Promise<T>): Promise<T> {
    return withProgress(label, step, this.io.stderr);
  }

  /**
   * Load `.configu` (once). With `required`, a missing file is a usage error; otherwise undefined is returned.
   * `explicit` is the `--config` flag.
   */
  async configuration(explicit: string | undefined, required: boolean): Promise<LoadedConfiguration | undefined> {
    if (this.loaded) return this.loaded;
    const file = findConfigFile({ explicit, env: this.io.env, cwd: this.io.cwd });
    if (!file) {
      if (!required) return undefined;
      throw new UsageError(
        'no .configu file found: pass --config PATH, set CONFIGU_CONFIG, or create a .configu in this folder or a parent',
      );
    }
    if (!existsFile(file)) {
      const from = explicit ? '--config' : this.io.env.CONFIGU_CONFIG ? 'CONFIGU_CONFIG' : 'CONFIGU_CONFIGURATION';
      throw new UsageError(`${displayPath(file, this.io.cwd)}: no such file (given by ${from})`);
    }
    const render = (text: string, vars: Record<string, unknown>) => this.evaluator.renderTrusted(text, vars);
    this.loaded = await loadConfiguration({ file, env: this.io.env, cwd: this.io.cwd, render } as Parameters<typeof loadConfiguration>[0]);
    this.loadedFrom = file;
    return this.loaded;
  }

  /** The `.configu` file that was loaded, if any. */
  get configurationFile(): string | undefined {
    return this.loaded?.file ?? this.loadedFrom;
  }

  /**
   * The store a command names (the default store when `name` is undefined), connected. Only this store is
   * initialised, so a command never waits for stores it does not use. Throws UnknownStoreError,
   * StoreUnavailableError, ConfigurationError.
   */
  async store(configuration: LoadedConfiguration, name: string | undefined): Promise<{ registry: StoreRegistry; store: ResolvedStore }> {
    const warn = (_details: Record<string, unknown>, message: string) => this.io.stderr.write(`cfgu ${this.command}: warning: ${message}\n`);
    this.registry ??= await createStoreRegistry(configuration, { logger: { warn } });
    const store = this.registry.resolve(name);
    let init = this.initialised.get(store.name);
    if (!init) {
      const underlying = this.registry.store(store.name);
      const connect = async () => {
        try {
          await (underlying ? underlying.init() : this.registry!.init());
        } catch (e) {
          if (isCfguError(e)) throw e;
          throw new StoreUnavailableError(store.name, (e as Error)?.message ?? String(e));
        }
      };
      init = this.progress(`connecting to store "${store.name}"`, connect);
      this.initialised.set(store.name, init);
    }
    await init;
    return { registry: this.registry, store };
  }

  async close(): Promise<void> {
    const r = this.registry;
    this.registry = undefined;
    await Promise.allSettled([r?.close(), this.evaluator.close()]);
  }
}

// ------------------------------------------------------------------------------------------------ schema files

const SCHEMA_FILE = /\.cfgu\.(json|ya?ml)$/;
const MAGIC = /[*?[{]/;

/** Expand `{a,b}` alternatives (nested allowed) into separate patterns. */
export function expandBraces(pattern: string): string[] {
  let depth = 0;
  let open = -1;
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '{') {
      if (depth === 0) open = i;
      depth++;
    } else if (c === '}' && depth > 0) {
      depth--;
      if (depth === 0) {
        const inner = pattern.slice(open + 1, i);
        const alternatives: string[] = [];
        let d = 0;
        let from = 0;
        for (let j = 0; j < inner.length; j++) {
          if (inner[j] === '{') d++;
          else if (inner[j] === '}') d--;
          else if (inner[j] === ',' && d === 0) {
            alternatives.push(inner.slice(from, j));
            from = j + 1;
          }
        }
        alternatives.push(inner.slice(from));
        if (alternatives.length < 2) continue;
        const head = pattern.slice(0, open);
        const tail = pattern.slice(i + 1);
        return alternatives.flatMap((a) => expandBraces(head + a + tail));
      }
    }
  }
  return [pattern];
}

/** A regular expression for one path segment with `*`, `?` and `[...]` (`[!...]` negates). */
export function segmentRegExp(segment: string): RegExp {
  let re = '';
  for (let i = 0; i < segment.length; i++) {
    const c = segment[i]!;
    if (c === '*') re += '[^/]*';
    else if (c === '?') re += '[^/]';
    else if (c === '[') {
      const close = segment.indexOf(']', i + 2);
      if (close === -1) re += '\\[';
      else {
        let body = segment.slice(i + 1, close);
        const negate = body[0] === '!' || body[0] === '^';
        if (negate) body = body.slice(1);
        re += `[${negate ? '^' : ''}${body.replace(/[\\\]]/g, '\\$&')}]`;
        i = close;
      }
    } else re += c.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
  }
  return new RegExp(`^${re}$`);
}

/**
 * Files matching a glob (`*`, `?`, `[...]`, `{a,b}`, and `**` for any number of folders), sorted. Relative patterns
 * resolve against `cwd`. Names starting with `.` match only a segment that starts with `.`; `**` does not descend into
 * `node_modules` or hidden folders.
 */
export function expandGlob(pattern: string, cwd: string): string[] {
  const found = new Set<string>();
  for (const p of expandBraces(pattern)) {
    const abs = resolve(cwd, p);
    const segments = abs.split(sep).filter((s, i) => s !== '' || i === 0);
    let base = segments[0] === '' ? sep : segments[0]!;
    let i = 1;
    while (i < segments.length && !MAGIC.test(segments[i]!)) base = join(base, segments[i++]!);
    walkGlob(base, segments, i, found);
  }
  return [...found].sort();
}

function listDir(dir: string) {
  try {
    return readdirSync(dir, { withFileTypes: true });
  } catch {
    return [];
  }
}

function walkGlob(path: string, segments: string[], i: number, found: Set<string>): void {
  if (i === segments.length) {
    if (existsFile(path)) found.add(path);
    return;
  }
  const segment = segments[i]!;
  if (segment === '**') {
    walkGlob(path, segments, i + 1, found);
    for (const entry of listDir(path)) {
      if (entry.isDirectory() && !entry.name.startsWith('.') && entry.name !== 'node_modules') walkGlob(join(path, entry.name), segments, i, found);
    }
    return;
  }
  if (!MAGIC.test(segment)) {
    walkGlob(join(path, segment), segments, i + 1, found);
    return;
  }
  const re = segmentRegExp(segment);
  for (const entry of listDir(path)) {
    if (entry.name.startsWith('.') && !segment.startsWith('.')) continue;
    if (re.test(entry.name)) walkGlob(join(path, entry.name), segments, i + 1, found);
  }
}

/** A schema read from one file. */
export interface SchemaFile {
  file: string;
  keys: Record<string, Cfgu | null>;
}

/** Read and validate one schema file. Throws UsageError naming the file, with one line per problem. */
export function readSchemaFile(file: string, cwd: string): SchemaFile {
  const shown = displayPath(file, cwd);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new UsageError(`schema file ${shown}: ${code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'is a folder' : (e as Error).message}`);
  }
  const doc = YAML.parseDocument(text, { prettyErrors: true, uniqueKeys: true });
  if (doc.errors.length) {
    const err = doc.errors[0]!;
    const where = err.linePos?.[0] ? `line ${err.linePos[0].line}, column ${err.linePos[0].col}: ` : '';
    const what = err.message.split('\n')[0]!.replace(/ at line \d+, column \d+:?$/, '');
    throw new UsageError(`schema file ${shown}: ${where}not valid ${/\.json$/.test(file) ? 'JSON' : 'YAML'}: ${what}`);
  }
  const data = doc.toJS({ maxAliasCount: 1000 }) as unknown;
  try {
    prepareSchema(data);
  } catch (e) {
    if (!(e instanceof InputError)) throw e;
    const issues = e.issues.length ? e.issues : [{ path: '', message: e.message }];
    if (issues.length === 1) throw new UsageError(`schema file ${shown}: ${issues[0]!.path ? `${issues[0]!.path}: ` : ''}${issues[0]!.message}`);
    throw new UsageError(
      `schema file ${shown}: ${issues.length} problems:`,
      issues.map((i) => `  ${i.path ? `${i.path}: ` : ''}${i.message}`),
    );
  }
  return { file, keys: (data as ConfigSchema).keys };
}

/** True when evaluating the schema runs expressions (`const`, `test`) or sandboxed checks (`pattern`, `schema`). */
export function schemaNeedsSandbox(schema: ConfigSchema): boolean {
  return Object.values(schema.keys).some(
    (c) => !!c && (c.const !== undefined || c.test !== undefined || c.pattern !== undefined || c.schema !== undefined),
  );
}

export interface ResolvedSchemas {
  schema: ConfigSchema;
  files: string[];
}

/**
 * Resolve `--schema` values (files, globs, or names of `.configu`'s `schemas`) and merge them into one `keys` map, in
 * the order given. A key declared by two files is an error naming both.
 */
export function loadSchemas(specs: string[], cwd: string, configuration: LoadedConfiguration | undefined): ResolvedSchemas {
  if (!specs.length) throw flagError('--schema is required: a *.cfgu.json|yaml|yml file, a glob, or a name from .configu\'s `schemas`');
  const files: string[] = [];
  for (const spec of specs) {
    let pattern = spec;
    let base = cwd;
    const named = configuration?.schemas && Object.prototype.hasOwnProperty.call(configuration.schemas, spec) ? configuration.schemas[spec] : undefined;
    if (named !== undefined) {
      pattern = named;
      base = configuration!.file ? dirname(configuration!.file) : cwd;
    }
    if (MAGIC.test(pattern)) {
      const matches = expandGlob(pattern, base).filter((f) => SCHEMA_FILE.test(basename(f)));
      if (!matches.length) throw new UsageError(`--schema "${spec}": no *.cfgu.json|yaml|yml file matches`);
      files.push(...matches);
      continue;
    }
    const file = resolve(base, pattern);
    if (!existsFile(file)) {
      const looksLikeName = named === undefined && !/[/\\.]/.test(spec);
      if (looksLikeName) {
        const names = Object.keys(configuration?.schemas ?? {});
        throw new UsageError(
          `--schema "${spec}": no such file, and ${configuration ? `.configu declares no schema named "${spec}" (declared: ${names.length ? names.map((n) => `"${n}"`).join(', ') : 'none'})` : 'no .configu file was found to look up a schema name'}`,
        );
      }
      throw new UsageError(`--schema "${spec}": ${displayPath(file, cwd)}: no such file`);
    }
    if (!SCHEMA_FILE.test(basename(file))) {
      throw new UsageError(`--schema "${spec}": schema files are named *.cfgu.json, *.cfgu.yaml or *.cfgu.yml`);
    }
    files.push(file);
  }
  const unique = [...new Set(files)];
  const keys: Record<string, Cfgu | null> = {};
  const owner = new Map<string, string>();
  for (const file of unique) {
    const s = readSchemaFile(file, cwd);
    for (const [key, cfgu] of Object.entries(s.keys)) {
      const first = owner.get(key);
      if (first !== undefined) {
        throw new UsageError(`key "${key}" is declared in both ${displayPath(first, cwd)} and ${displayPath(file, cwd)}`);
      }
      owner.set(key, file);
      keys[key] = cfgu;
    }
  }
  return { schema: { keys }, files: unique };
}

// ------------------------------------------------------------------------------------------------ the eval format

const ORIGINS: readonly Origin[] = ['empty', 'store', 'override', 'default', 'const'];

/**
 * The `cfgu eval` output format (docs/cli.md, "The eval format"): a JSON object, key -> `{ key, value, origin, cfgu,
 * set }`, exactly the engine's EvalResult. `value` is the stored (string) form.
 */
export function formatEvalResult(result: EvalResult): string {
  return `${JSON.stringify(result, null, 2)}\n`;
}

/** Parse and check an eval result (standard input of `eval` and `export`). Throws UsageError saying what is wrong. */
export function parseEvalResult(text: string, source = 'standard input'): EvalResult {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch {
    throw new UsageError(`${source} is not the JSON output of \`cfgu eval\` (not valid JSON)`);
  }
  const bad = (why: string) => new UsageError(`${source} is not the JSON output of \`cfgu eval\`: ${why}`);
  if (!data || typeof data !== 'object' || Array.isArray(data)) throw bad('expected an object of key -> { key, value, origin, cfgu, set }');
  const result: EvalResult = {};
  for (const [name, entry] of Object.entries(data as Record<string, unknown>)) {
    if (!entry || typeof entry !== 'object' || Array.isArray(entry)) throw bad(`"${name}" is not an object`);
    const e = entry as Record<string, unknown>;
    if (e.key !== name) throw bad(`"${name}".key must be "${name}"`);
    if (typeof e.value !== 'string') throw bad(`"${name}".value must be a string`);
    if (typeof e.origin !== 'string' || !ORIGINS.includes(e.origin as Origin)) throw bad(`"${name}".origin must be one of ${ORIGINS.join(', ')}`);
    const cfgu = e.cfgu ?? {};
    if (typeof cfgu !== 'object' || Array.isArray(cfgu)) throw bad(`"${name}".cfgu must be an object`);
    if (e.set !== undefined && typeof e.set !== 'string') throw bad(`"${name}".set must be a string`);
    const config: EvaluatedConfig = { key: name, value: e.value, origin: e.origin as Origin, cfgu: cfgu as Cfgu, set: (e.set as string | undefined) ?? '' };
    result[name] = config;
  }
  return result;
}

/** True when standard input may carry data (a pipe, a file, a socket), false for a terminal or nothing. */
export function stdinHasData(): boolean {
  if (process.stdin.isTTY) return false;
  try {
    const st = fstatSync(0);
    return st.isFIFO() || st.isFile() || st.isSocket();
  } catch {
    return false;
  }
}

/** Read all of standard input. */
export async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer));
  return Buffer.concat(chunks).toString('utf8');
}

/** The flag value(s) as a list (repeatable string flags). */
export const list = (v: unknown): string[] => (v === undefined ? [] : Array.isArray(v) ? (v as string[]) : [v as string]);
export const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
