/**
 * `--watch` of `cfgu eval` and `cfgu export` (docs/cli.md, "Watching for changes"):
 *   - watchStore: evaluate again after each change notice of the store (ResolvedStore.watch, or a periodic check for a
 *     kind without a feed), debounced, until a signal or a closed output stops it;
 *   - readDocuments: split standard input into the JSON documents an upstream `eval --watch` writes one after another;
 *   - ChildSupervisor: run `--run CMD`, restarting it with a new environment (SIGTERM, a grace period, SIGKILL).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { constants } from 'node:os';
import { Debouncer, noticeConcerns } from '../core/index.js';
import type { ChangeFeed, ResolvedStore } from '../core/ports.js';
import type { CommandIO } from './io.js';

/** Debounce of change notices (the server's default): a burst of writes is evaluated once. */
export const WATCH_DEBOUNCE_MS = 20;
/** For a store kind without a change feed: how often to evaluate again. */
export const WATCH_POLL_MS = 5000;

/** Resolves when the process gets SIGINT or SIGTERM (the listeners are removed by `dispose`). */
export function stopSignal(): { stopped: Promise<NodeJS.Signals>; dispose(): void } {
  let resolve!: (s: NodeJS.Signals) => void;
  const stopped = new Promise<NodeJS.Signals>((r) => (resolve = r));
  const on = (s: NodeJS.Signals) => resolve(s);
  process.on('SIGINT', on);
  process.on('SIGTERM', on);
  return {
    stopped,
    dispose: () => {
      process.off('SIGINT', on);
      process.off('SIGTERM', on);
    },
  };
}

/** Resolves when standard output is closed by its reader (EPIPE): nobody reads the next document. */
export function outputClosed(io: CommandIO): Promise<void> {
  const out = io.stdout as Partial<NodeJS.WritableStream>;
  if (typeof out.once !== 'function') return new Promise(() => undefined);
  return new Promise((resolve) => {
    out.once!('error', () => resolve());
    out.once!('close', () => resolve());
  });
}

export interface StoreWatch {
  store: ResolvedStore;
  /** The sets the evaluation reads from the store (its set and the ancestors). */
  sets: ReadonlySet<string>;
  /** Evaluate again; resolves with the text to write. */
  evaluate(): Promise<string>;
  /** The text written last (the first evaluation's). */
  last: string;
  write(text: string): void;
  /** A failed evaluation or a feed error: reported, and the watch goes on. */
  report(error: unknown): void;
  /** Resolves when the watch must end. */
  until: Promise<unknown>;
}

/** Write the evaluation again after each change that alters it, until `until` resolves. */
export async function watchStore(w: StoreWatch): Promise<void> {
  let last = w.last;
  const debouncer = new Debouncer(async () => {
    try {
      const text = await w.evaluate();
      if (text !== last) {
        last = text;
        w.write(text);
      }
    } catch (e) {
      w.report(e);
    }
  }, WATCH_DEBOUNCE_MS);
  let feed: ChangeFeed;
  const listener = {
    change: (notice: { sets?: string[] }) => {
      if (noticeConcerns(w.sets, notice)) debouncer.schedule();
    },
    error: (e: Error) => w.report(e),
  };
  if (w.store.watch) feed = w.store.watch(listener);
  else {
    const timer = setInterval(() => debouncer.schedule(), WATCH_POLL_MS);
    feed = { close: async () => clearInterval(timer) };
  }
  // Feeds may run on unreferenced handles: keep the process alive while watching.
  const alive = setInterval(() => undefined, 1 << 30);
  try {
    await w.until;
  } finally {
    clearInterval(alive);
    debouncer.stop();
    await feed.close();
  }
}

/**
 * The JSON documents of a stream, one by one: values written back to back (pretty-printed or not, with or without
 * whitespace between them), as `cfgu eval --watch` writes them. A document is yielded once its closing bracket arrives.
 */
export async function* readDocuments(input: NodeJS.ReadableStream | string): AsyncGenerator<string> {
  let depth = 0;
  let inString = false;
  let escaped = false;
  let doc = '';
  const chunks: AsyncIterable<string | Buffer> | string[] = typeof input === 'string' ? [input] : (input as AsyncIterable<string | Buffer>);
  const decoder = new TextDecoder();
  for await (const chunk of chunks) {
    const text = typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true });
    let start = 0;
    for (let i = 0; i < text.length; i++) {
      const c = text[i]!;
      if (inString) {
        if (escaped) escaped = false;
        else if (c === '\\') escaped = true;
        else if (c === '"') inString = false;
        continue;
      }
      if (c === '"') inString = true;
      else if (c === '{' || c === '[') depth++;
      else if (c === '}' || c === ']') {
        depth--;
        if (depth <= 0) {
          depth = 0;
          const whole = doc + text.slice(start, i + 1);
          doc = '';
          start = i + 1;
          if (whole.trim() !== '') yield whole;
        }
      }
    }
    doc += text.slice(start);
  }
  if (doc.trim() !== '') yield doc; // an unfinished document: the caller reports it
}

const SHELL_WORDS = new Set(['if', 'then', 'else', 'elif', 'fi', 'do', 'done', 'case', 'esac', 'while', 'until', 'for', 'in', '{', '}', '!', 'exec', 'time', 'function']);

/**
 * The command as the shell should run it: a simple command (one program and its arguments, no operator, no leading
 * assignment or keyword outside quotes) gets `exec`, so the shell becomes the program: signals reach it alone and its
 * exit code is the child's. Anything else runs as written, the shell staying its parent.
 */
export function execForm(command: string): string {
  let quote: string | undefined;
  for (let i = 0; i < command.length; i++) {
    const c = command[i]!;
    if (quote) {
      if (c === quote) quote = undefined;
      else if (c === '\\' && quote === '"') i++;
      continue;
    }
    if (c === '\\') i++;
    else if (c === "'" || c === '"') quote = c;
    else if (';&|()<>`\n'.includes(c) || (c === '$' && command[i + 1] === '(')) return command;
  }
  const first = command.trim().split(/\s+/)[0] ?? '';
  if (first === '' || quote || SHELL_WORDS.has(first) || /^[A-Za-z_][A-Za-z0-9_]*=/.test(first)) return command;
  return `exec ${command.trim()}`;
}

/** Exit code of a child that ended by `signal`: 128 + its number, as shells report it. */
const signalCode = (signal: NodeJS.Signals): number => 128 + (constants.signals[signal] ?? 1);

/**
 * Runs `command` through the shell in a process group of its own, so that stopping it reaches whatever the shell
 * started. `restart` stops the running child (SIGTERM to the group, then SIGKILL after `graceMs`) and starts a new one.
 */
export class ChildSupervisor {
  private child: ChildProcess | undefined;
  private exit: Promise<number> | undefined;
  /** Set when a child ended on its own (not stopped by us): the watch ends with its code. */
  readonly ended: Promise<number>;
  private endedResolve!: (code: number) => void;
  private stopping = false;

  constructor(
    private readonly command: string,
    private readonly io: CommandIO,
    private readonly graceMs: number,
  ) {
    this.ended = new Promise((r) => (this.endedResolve = r));
  }

  start(env: NodeJS.ProcessEnv): void {
    const own = this.io.stdout === process.stdout && this.io.stderr === process.stderr;
    // Standard input is the stream of documents: the child gets none.
    const child = spawn(execForm(this.command), { shell: true, detached: true, stdio: ['ignore', own ? 'inherit' : 'pipe', own ? 'inherit' : 'pipe'], env, cwd: this.io.cwd });
    child.stdout?.setEncoding('utf8').on('data', (text: string) => this.io.stdout.write(text));
    child.stderr?.setEncoding('utf8').on('data', (text: string) => this.io.stderr.write(text));
    this.child = child;
    this.stopping = false;
    this.exit = new Promise((resolve) => {
      child.on('error', (e) => {
        this.io.stderr.write(`cfgu export: --run: ${e.message}\n`);
        resolve(127);
      });
      child.on('close', (code, signal) => resolve(code ?? (signal ? signalCode(signal) : 1)));
    });
    void this.exit.then((code) => {
      if (this.child === child && !this.stopping) this.endedResolve(code);
    });
  }

  private signal(sig: NodeJS.Signals): void {
    const pid = this.child?.pid;
    if (pid === undefined) return;
    try {
      process.kill(-pid, sig);
    } catch {
      /* already gone */
    }
  }

  /** Stop the child (SIGTERM, then SIGKILL after the grace period); resolves with its exit code. */
  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<number> {
    if (!this.exit) return 0;
    this.stopping = true;
    const exit = this.exit;
    this.signal(signal);
    const timer = setTimeout(() => this.signal('SIGKILL'), this.graceMs);
    try {
      return await exit;
    } finally {
      clearTimeout(timer);
    }
  }

  /** The running child's exit, once it exits by itself. */
  wait(): Promise<number> {
    return this.exit ?? Promise.resolve(0);
  }
}
