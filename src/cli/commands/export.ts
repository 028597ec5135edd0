/**
 * `cfgu export`: read an eval result (the eval format) from standard input, leave out hidden keys, keep the keys
 * every `--filter` accepts, coerce the values as `POST /export` does, and write them in a format (`--format`), through
 * a template (`--template`), to a file (`--out`, atomically) or into a command's environment (`--run`).
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { exportResult, redactorForResult, viewOf, type EvalResult, type ExportedConfigs, type JsonValue } from '../../core/index.js';
import { setOwn } from '../../core/names.js';
import { writeFileAtomic } from '../../stores/atomic-write.js';
import { GLOBAL_HELP, list, parseCommandLine, rejectPositionals, removedFlag, str, type RemovedFlag } from '../args.js';
import { EXIT_USAGE, ExitError, UsageError, errorLines, flagError } from '../errors.js';
import { parseEvalResult } from '../eval-format.js';
import { applyFilters } from '../export-filter.js';
import { FORMATS, K8S_NAME, formatConfigs, textOf, type Format } from '../export-formats.js';
import { processIO, readInput, type CommandIO } from '../io.js';
import { displayPath } from '../paths.js';
import { runWithEnv } from '../run-with-env.js';
import { runCommand, type Session } from '../session.js';
import { ChildSupervisor, readDocuments, stopSignal } from '../watch.js';

export const exportUsage = `Usage: cfgu export [--filter EXPR]... [--format FORMAT | --template FILE] [--out FILE | --run CMD] [options]

Read the output of \`cfgu eval\` from standard input and export it: hidden keys are left out,
then only the keys every --filter accepts are kept, and each value is coerced as the proxy's
POST /export does (numbers, booleans, objects and arrays from their JSON text).

Options:
  --filter EXPR       keep a key only when EXPR is truthy; repeatable (all must hold). EXPR runs
                      in the expression sandbox with $.key, $.value, $.storedValue, $.origin,
                      $.cfgu, $.labels and $.configs (every evaluated key, hidden ones too)
  --format FORMAT     json (default), dotenv, yaml, ini, properties, tfvars, configmap, secret
  --name NAME         metadata.name of the configmap / secret manifest (required for those)
  --template FILE     render FILE instead of a format: its {{ expr }} parts see $.configs.KEY.value
                      (and .storedValue, .origin, .cfgu, .labels) of the exported keys
  --out FILE          write to FILE atomically (default: standard output)
  --run CMD           run CMD through the shell with the exported values added to its
                      environment; its exit code is cfgu's exit code
  --watch             read one document after another from standard input (the output of
                      \`cfgu eval --watch\`) and export each: rewrite --out, write a new document
                      on standard output, or restart the --run command with the new values
                      (only when they changed)
  --grace SECONDS     with --watch --run: how long a restarted or stopped command may take to
                      end after SIGTERM before it gets SIGKILL (default 10)

${GLOBAL_HELP}

Examples:
  cfgu eval --set prod --schema app.cfgu.json | cfgu export --format dotenv --out .env
  cfgu eval --schema app.cfgu.json | cfgu export --filter '$.labels.includes("db")' --format yaml
  cfgu eval --schema app.cfgu.json | cfgu export --filter '$.origin !== "default"'
  cfgu eval --schema app.cfgu.json | cfgu export --format secret --name app-secrets
  cfgu eval --schema app.cfgu.json | cfgu export --template nginx.conf.tmpl --out nginx.conf
  cfgu eval --schema app.cfgu.json | cfgu export --run 'node server.js'
  cfgu eval --watch --schema app.cfgu.json | cfgu export --watch --format dotenv --out .env
  cfgu eval --watch --schema app.cfgu.json | cfgu export --watch --run 'node server.js'

Exit codes: 0 success (with --run: the command's exit code), 1 a --filter or --template failed
to evaluate, 2 usage error.`;

const OPTIONS = {
  filter: { type: 'string', multiple: true },
  format: { type: 'string' },
  name: { type: 'string' },
  template: { type: 'string' },
  out: { type: 'string' },
  run: { type: 'string' },
  watch: { type: 'boolean' },
  grace: { type: 'string' },
} as const;

const PICK_OMIT = /^--(pick|omit)-/;
const REMOVED: RemovedFlag[] = [
  removedFlag('--template-input', '--template-input was removed in v1: a --template sees $.configs of the exported keys'),
  {
    match: (a) => PICK_OMIT.test(a),
    message:
      'the --pick-* and --omit-* flags were removed in v1: use --filter EXPR, e.g. --filter \'$.labels.includes("db")\', --filter \'$.key !== "DEBUG"\', --filter \'$.origin !== "empty"\'',
  },
];

interface WatchExport {
  render(result: EvalResult): Promise<{ configs: ExportedConfigs; output: string }>;
  write(output: string): Promise<void>;
  run: string | undefined;
  graceMs: number;
}

/**
 * `--watch`: export every document of standard input. A document that cannot be read or exported is reported and
 * skipped. With --run, the command restarts only when the values change; cfgu ends with the exit code of the last
 * command: when it ends by itself, when cfgu gets SIGINT/SIGTERM (the command is stopped), or after standard input
 * ends (the command keeps running until it exits).
 */
async function watchExport(session: Session, input: NodeJS.ReadableStream | string, w: WatchExport): Promise<number> {
  const signal = stopSignal();
  const child = w.run === undefined ? undefined : new ChildSupervisor(w.run, session.io, w.graceMs);
  let last: string | undefined;
  let started = false;
  const report = (e: unknown) => session.io.stderr.write(`${errorLines('export', e).join('\n')}\n`);
  const consume = (async () => {
    for await (const text of readDocuments(input)) {
      try {
        const { configs, output } = await w.render(parseEvalResult(text));
        if (child) {
          const env: NodeJS.ProcessEnv = { ...session.io.env };
          for (const [k, v] of Object.entries(configs)) setOwn(env, k, textOf(v));
          const key = JSON.stringify(configs);
          if (key === last) continue;
          last = key;
          if (started) await child.stop();
          child.start(env);
          started = true;
        } else {
          if (output === last) continue;
          last = output;
          await w.write(output);
        }
      } catch (e) {
        report(e);
      }
    }
    return 'end' as const;
  })();
  try {
    const first = await Promise.race([consume, signal.stopped, ...(child ? [child.ended] : [])]);
    if (!child) return 0;
    if (!started) return 0;
    if (typeof first === 'number') return first; // the command ended by itself
    if (first === 'end') return await Promise.race([child.wait(), signal.stopped.then(() => child.stop())]);
    return await child.stop();
  } finally {
    signal.dispose();
  }
}


/** The flags of `cfgu export`, checked against each other (every refusal a usage error, exit 2). */
function exportFlags(v: ReturnType<typeof parseCommandLine>['values'], cwd: string) {
  const formatName = str(v.format);
  const template = str(v.template);
  const out = str(v.out);
  const run = str(v.run);
  const name = str(v.name);
  if (formatName !== undefined && !(FORMATS as readonly string[]).includes(formatName)) {
    throw flagError(`unknown --format "${formatName}"; formats: ${FORMATS.join(', ')}`);
  }
  const format = (formatName ?? 'json') as Format;
  if (template !== undefined && formatName !== undefined) throw flagError('--template and --format cannot be combined');
  if (run !== undefined && (out !== undefined || template !== undefined || formatName !== undefined)) {
    throw flagError('--run passes the values in the environment: it cannot be combined with --out, --format or --template');
  }
  if ((format === 'configmap' || format === 'secret') && name === undefined) {
    throw flagError(`--format ${format} needs --name NAME (the manifest's metadata.name)`);
  }
  if (name !== undefined) {
    if (format !== 'configmap' && format !== 'secret') throw flagError('--name is for --format configmap or secret');
    if (!K8S_NAME.test(name) || name.length > 253) {
      throw flagError(`--name "${name}" is not a valid Kubernetes name (lower-case letters, digits, '-' and '.', at most 253 characters)`);
    }
  }
  const watch = v.watch === true;
  const graceText = str(v.grace);
  if (graceText !== undefined && (!watch || run === undefined)) throw flagError('--grace is for --watch --run');
  if (graceText !== undefined && !/^\d{1,5}(\.\d+)?$/.test(graceText)) throw flagError(`--grace "${graceText}" must be a number of seconds`);
  const graceMs = graceText === undefined ? 10_000 : Math.round(Number(graceText) * 1000);
  let templateText: string | undefined;
  if (template !== undefined) {
    try {
      templateText = readFileSync(resolve(cwd, template), 'utf8');
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      throw new UsageError(`--template ${template}: ${code === 'ENOENT' ? 'no such file' : (e as Error).message}`);
    }
  }
  return { format, template, templateText, out, run, name, watch, graceMs };
}

export function exportCommand(argv: string[], io: CommandIO = processIO()): Promise<number> {
  return runCommand('export', argv, async (session) => {
    const { values: v, positionals } = parseCommandLine('export', argv, OPTIONS, REMOVED);
    if (v.help) {
      session.io.stdout.write(`${exportUsage}\n`);
      return 0;
    }
    rejectPositionals(positionals);
    const { format, template, templateText, out, run, name, watch, graceMs } = exportFlags(v, session.io.cwd);

    // The sandbox takes a moment to start: start it while standard input arrives (the upstream eval is still running).
    if (list(v.filter).length || templateText !== undefined) session.evaluator.warm();


    /** The exported values of one eval result, and their text in the chosen format or template (unless --run). */
    const render = async (result: EvalResult): Promise<{ configs: ExportedConfigs; output: string }> => {
      // Hidden keys are left out first: a filter cannot bring them back (they stay visible to filters via $.configs).
      const visible = Object.keys(result).filter((k) => result[k]!.cfgu.hidden !== true);
      const kept = await applyFilters(session, result, visible, list(v.filter));
      const all = exportResult(result);
      const configs: ExportedConfigs = {};
      for (const k of kept) setOwn(configs, k, all[k] as JsonValue); // `__proto__` is an ordinary key
      if (run !== undefined) return { configs, output: '' };
      if (templateText === undefined) return { configs, output: formatConfigs(format, configs, name) };
      const context = { configs: Object.fromEntries(kept.map((k) => [k, viewOf(result[k]!)])) };
      try {
        return { configs, output: await session.progress('rendering the template', () => session.evaluator.renderTemplate(templateText!, context)) };
      } catch (e) {
        if (e instanceof UsageError) throw e;
        // The template sees only exported keys, but a const computed from a hidden key is one of them.
        throw new ExitError(1, `--template ${template}: ${redactorForResult(result).redact((e as Error)?.message ?? String(e))}`);
      }
    };
    const write = async (output: string): Promise<void> => {
      if (out === undefined) {
        session.io.stdout.write(output);
        return;
      }
      const file = resolve(session.io.cwd, out);
      try {
        // 0600: an export usually holds secrets.
        await writeFileAtomic(file, output, { mode: 0o600 });
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        throw new ExitError(1, `--out ${displayPath(file, session.io.cwd)}: cannot write${code ? ` (${code})` : ''}: ${(e as Error).message}`);
      }
    };

    if (watch) {
      if (session.io.stdin === null) {
        throw new ExitError(EXIT_USAGE, 'export --watch reads the output of `cfgu eval --watch` from standard input, e.g.: cfgu eval --watch --schema app.cfgu.json | cfgu export --watch');
      }
      return watchExport(session, session.io.stdin, { render, write, run, graceMs });
    }
    const text = await readInput(session.io);
    if (text === undefined) {
      throw new ExitError(
        EXIT_USAGE,
        'export reads the output of `cfgu eval` from standard input, e.g.: cfgu eval --schema app.cfgu.json | cfgu export',
      );
    }
    if (text.trim() === '') throw new ExitError(EXIT_USAGE, 'standard input is empty: pipe the output of `cfgu eval` into `cfgu export`');
    const { configs, output } = await render(parseEvalResult(text));
    if (run !== undefined) return runWithEnv(run, configs, session.io);
    await write(output);
    return 0;
  }, io);
}
