/**
 * Running the BUILT `cfgu` binary as a user would: `node bin/cfgu.js ...` in a temporary working folder with real
 * files. `sh()` runs a shell command line in which `cfgu` is the built binary (a shim on PATH), for pipelines.
 * `runCli()` runs the same commands in this process through their injectable I/O (no process start-up per run).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ini from 'ini';
import type { CommandIO } from '../../src/cli/io.js';
import type { TrustedEvaluator } from '../../src/cli/lazy-evaluator.js';
import { main } from '../../src/cli/main.js';
import { killGroups, signalGroup, spawnGroup } from '../helpers/process-groups.js';
import { record } from '../helpers/capture.js';
import { createSandboxEvaluator, expressionOptionsFromEnv, type SandboxEvaluator } from '../../src/expressions/index.js';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
/** The binary under test (CFGU_CLI_BIN may point at another build of it). */
export const BIN = process.env.CFGU_CLI_BIN ?? join(ROOT, 'bin', 'cfgu.js');

if (!process.env.CFGU_CLI_BIN && !existsSync(join(ROOT, 'dist', 'cli.js'))) throw new Error('dist/cli.js is missing: run `node scripts/build.mjs` first (npm test does)');

const dirs: string[] = [];

/** A fresh temporary folder, removed by `removeTempDirs()`. */
export function tempDir(prefix = 'cfgu-cli-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(dir);
  return dir;
}

export function removeTempDirs(): void {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
}

/** Write a file (creating folders); objects are written as JSON. Returns the path. */
export function write(path: string, content: unknown): string {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, typeof content === 'string' ? content : `${JSON.stringify(content, null, 2)}\n`);
  return path;
}

export interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface RunOptions {
  cwd: string;
  /** Written to standard input (which is then closed). Without it, standard input is closed at once. */
  input?: string;
  /** `ignore`: standard input is /dev/null (not a pipe). */
  stdin?: 'pipe' | 'ignore';
  env?: Record<string, string | undefined>;
  timeoutMs?: number;
}

/** The environment of a spawned cfgu: no CONFIGU_* leaking from the developer's shell, no CI spinner. */
function childEnv(extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const k of Object.keys(env)) if (k.startsWith('CONFIGU_')) delete env[k];
  return { ...env, ...extra };
}

const children = new Set<ChildProcess>();

/** What a command printed, for the whole-suite scan (test/helpers/capture.ts; the `cfgu eval` format is by design). */
function captured(stdout: string, stderr: string): void {
  record('cli-stdout', stdout);
  record('cli-stderr', stderr);
}

function collect(child: ChildProcess, options: RunOptions, group = false): Promise<Ran> {
  children.add(child);
  let stdout = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8').on('data', (d) => (stdout += d));
  child.stderr!.setEncoding('utf8').on('data', (d) => (stderr += d));
  child.stdin?.on('error', () => undefined);
  child.stdin?.end(options.input ?? '');
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      if (group) signalGroup(child.pid!);
      reject(new Error(`timed out after ${options.timeoutMs ?? 120_000} ms\nstdout: ${stdout}\nstderr: ${stderr}`));
    }, options.timeoutMs ?? 120_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      children.delete(child);
      captured(stdout, stderr);
      resolve({ code, stdout, stderr });
    });
  });
}

/** `node bin/cfgu.js ...args` in `cwd`. */
export function cfgu(args: string[], options: RunOptions): Promise<Ran> {
  const child = spawn(process.execPath, [BIN, ...args], {
    cwd: options.cwd,
    env: childEnv(options.env),
    stdio: [options.stdin ?? 'pipe', 'pipe', 'pipe'],
  });
  return collect(child, options);
}

// ------------------------------------------------------------------------------------------------ in-process runs

let sandboxStarted: SandboxEvaluator | undefined;
const sandboxNow = (): SandboxEvaluator =>
  (sandboxStarted ??= createSandboxEvaluator({ workers: 1, spares: 0, ...expressionOptionsFromEnv(childEnv()) }));

/**
 * One expression sandbox shared by the in-process runs of a test file, started on first use (as a command starts its
 * own) and stopped by `closeSandbox()`.
 */
const sharedSandbox: TrustedEvaluator = {
  run: (job, context) => sandboxNow().run(job, context),
  renderTemplate: (template, context) => sandboxNow().renderTemplate(template, context),
  evaluateBoolean: (expression, context) => sandboxNow().evaluateBoolean(expression, context),
  renderTrusted: (template, variables) => sandboxNow().renderTrusted(template, variables as Record<string, string>),
  close: async () => undefined,
};

/** Stop the sandbox shared by in-process runs (call it in `after`). */
export async function closeSandbox(): Promise<void> {
  const s = sandboxStarted;
  sandboxStarted = undefined;
  await s?.close();
}

export interface CliOptions {
  cwd: string;
  /** Standard input's text (a pipe); null: none (a terminal or /dev/null). Default: an empty pipe, as `cfgu()` gives. */
  stdin?: string | null;
  env?: Record<string, string | undefined>;
}

/**
 * `cfgu ...args` in this process, through the dispatcher with injected I/O: the same code as the binary minus the
 * process start-up (bin.ts: exit code from main). Standard error is not a terminal.
 */
export async function runCli(args: string[], options: CliOptions): Promise<Ran> {
  let stdout = '';
  let stderr = '';
  const io: CommandIO = {
    stdin: options.stdin === undefined ? '' : options.stdin,
    stdout: { write: (text: string) => (stdout += text) },
    stderr: { write: (text: string) => (stderr += text) },
    env: childEnv(options.env),
    cwd: options.cwd,
    isTTY: false,
    sandbox: sharedSandbox,
  };
  const code = await main(args, io);
  captured(stdout, stderr);
  return { code, stdout, stderr };
}

let shimDir: string | undefined;

/** A folder holding a `cfgu` shim that runs the built binary with this Node. */
function shim(): string {
  if (shimDir) return shimDir;
  shimDir = tempDir('cfgu-cli-bin-');
  const file = join(shimDir, 'cfgu');
  writeFileSync(file, `#!/bin/sh\nexec "${process.execPath}" "${BIN}" "$@"\n`);
  chmodSync(file, 0o755);
  return shimDir;
}

/** Run a shell command line (bash, `set -o pipefail`) where `cfgu` is the built binary. */
export function sh(script: string, options: RunOptions): Promise<Ran> {
  const env = childEnv(options.env);
  env.PATH = `${shim()}:${env.PATH ?? ''}`;
  // Its own process group, so a timeout or killChildren() also stops what the script started in the background.
  const child = spawnGroup('bash', ['-c', `set -o pipefail\n${script}`], { cwd: options.cwd, env, stdio: 'pipe' });
  return collect(child, options, true).finally(() => signalGroup(child.pid!));
}

export function killChildren(): void {
  for (const c of children) c.kill('SIGKILL');
  children.clear();
  killGroups();
}

/** A project folder: a json-file store `main` (data.json) and a `.configu`, plus the given files. */
export function project(files: Record<string, unknown> = {}, configu: Record<string, unknown> | undefined = undefined): string {
  const dir = tempDir();
  write(join(dir, '.configu'), configu ?? { stores: { main: { type: 'json-file', configuration: { path: 'data.json' } } } });
  for (const [name, content] of Object.entries(files)) write(join(dir, name), content);
  return dir;
}

/**
 * Parse `.env` text as dotenv-style readers do: bare values, single-quoted literals (which may span lines), and
 * double-quoted values with the escapes \\ \" \$ \n \r.
 */
export function parseDotenv(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  let i = 0;
  while (i < text.length) {
    const eol = text.indexOf('\n', i);
    const lineEnd = eol === -1 ? text.length : eol;
    const line = text.slice(i, lineEnd);
    if (!line.trim() || line.startsWith('#')) {
      i = lineEnd + 1;
      continue;
    }
    const m = /^([A-Za-z0-9_-]+)=/.exec(line);
    if (!m) throw new Error(`bad dotenv line: ${line}`);
    const key = m[1]!;
    let at = i + m[0].length;
    const quote = text[at];
    if (quote === "'") {
      const close = text.indexOf("'", at + 1);
      if (close === -1) throw new Error(`unterminated value of ${key}`);
      out[key] = text.slice(at + 1, close);
      at = close + 1;
    } else if (quote === '"') {
      let v = '';
      at++;
      for (;;) {
        const c = text[at];
        if (c === undefined) throw new Error(`unterminated value of ${key}`);
        if (c === '"') break;
        if (c === '\\') {
          const n = text[at + 1]!;
          v += n === 'n' ? '\n' : n === 'r' ? '\r' : n;
          at += 2;
        } else {
          v += c;
          at++;
        }
      }
      out[key] = v;
      at++;
    } else {
      out[key] = line.slice(m[0].length);
      at = lineEnd;
    }
    if (text[at] !== '\n' && at < text.length) throw new Error(`junk after the value of ${key}`);
    i = at + 1;
  }
  return out;
}

/** Parse section-less INI, values as text. */
export function parseIni(text: string): Record<string, string> {
  // The `ini` package (a dependency); it reads bare true/false as booleans: everything back to text.
  return Object.fromEntries(Object.entries(ini.parse(text)).map(([k, v]) => [k, String(v)]));
}

/** Parse Java .properties (the escapes a writer uses: \\ \n \r \t \f \= \: \# \! \  \uXXXX). */
export function parseProperties(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  const unescape = (s: string) =>
    s.replace(/\\(u[0-9a-fA-F]{4}|.)/g, (_, c: string) =>
      c.length === 5 ? String.fromCharCode(parseInt(c.slice(1), 16)) : c === 'n' ? '\n' : c === 'r' ? '\r' : c === 't' ? '\t' : c === 'f' ? '\f' : c,
    );
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^((?:\\.|[^=:\\])*)[=:](.*)$/.exec(line);
    if (!m) throw new Error(`bad properties line: ${line}`);
    out[unescape(m[1]!)] = unescape(m[2]!);
  }
  return out;
}
