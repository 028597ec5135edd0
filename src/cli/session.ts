/**
 * Running a `cfgu` sub-command: a session holds what the command opened (the `.configu` file, found by `--config`,
 * `$CONFIGU_CONFIG` or walking up from the working folder; its store registry, of which only the stores a command uses
 * are connected; the lazily started sandbox), and runCommand turns the command's errors into messages and exit codes.
 */
import { StoreUnavailableError, isCfguError } from '../core/index.js';
import { NO_CONFIG_FILE, findConfigFile, loadConfiguration } from '../config/index.js';
import { createStoreRegistry, type StoreRegistry } from '../stores/index.js';
import type { LoadedConfiguration } from '../config/types.js';
import type { ResolvedStore } from '../core/ports.js';
import { errorLines, exitCodeOf, flagErrorLines, UsageError } from './errors.js';
import { processIO, type CommandIO } from './io.js';
import { LazyEvaluator } from './lazy-evaluator.js';
import { displayPath, existsFile } from './paths.js';
import { withProgress } from './progress.js';

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
    const lines = e instanceof UsageError ? flagErrorLines(command, e) : errorLines(command, e);
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
    this.evaluator = new LazyEvaluator(io.env, (label, step) => this.progress(label, step), io.sandbox);
  }

  progress<T>(label: string, step: () => Promise<T>): Promise<T> {
    return withProgress(label, step, { write: (text) => this.io.stderr.write(text), isTTY: this.io.isTTY });
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
      throw new UsageError(NO_CONFIG_FILE);
    }
    if (!existsFile(file)) {
      const from = explicit ? '--config' : this.io.env.CONFIGU_CONFIG ? 'CONFIGU_CONFIG' : 'CONFIGU_CONFIGURATION';
      throw new UsageError(`${displayPath(file, this.io.cwd)}: no such file (given by ${from})`);
    }
    const render = (text: string, vars: Record<string, unknown>) => this.evaluator.renderTrusted(text, vars);
    this.loaded = await loadConfiguration({ file, env: this.io.env, cwd: this.io.cwd, render } as Parameters<typeof loadConfiguration>[0]);
    this.loadedFrom = file;
    for (const notice of this.loaded.notices ?? []) this.io.stderr.write(`cfgu ${this.command}: warning: ${displayPath(file, this.io.cwd)}: ${notice}\n`);
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
