/**
 * `cfgu eval`: evaluate one command (store, set, schema, overrides) and print the result in the eval format
 * (docs/cli.md, "The eval format") on standard output. When standard input is a pipe carrying an earlier eval's
 * output, that result is the pipe of this command, so `cfgu eval ... | cfgu eval ... | cfgu export` is a pipeline.
 */
import { evaluatePipeline, explainPipeline, setsRead, type EvalCommandInput, type EvalResult } from '../../core/index.js';
import { setOwn } from '../../core/names.js';
import { GLOBAL_HELP, list, parseCommandLine, rejectPositionals, splitKeyValue, str } from '../args.js';
import { EXIT_FAILED, ExitError, errorLines, flagError } from '../errors.js';
import { formatEvalResult, parseEvalResult } from '../eval-format.js';
import { formatExplanationJson, formatExplanationTree } from '../explain-format.js';
import { processIO, readInput, type CommandIO } from '../io.js';
import { loadSchemas, schemaNeedsSandbox } from '../schema-files.js';
import { runCommand } from '../session.js';
import { outputClosed, stopSignal, watchStore } from '../watch.js';

export const evalUsage = `Usage: cfgu eval --schema FILE [--store NAME] [--set PATH] [--override KEY=VALUE]... [options]

Evaluate a schema's keys against a store at a set and print the result as JSON (the eval
format, docs/cli.md) on standard output. When standard input is a pipe carrying the output of
an earlier \`cfgu eval\`, that result is piped into this evaluation, so evaluations compose:
  cfgu eval ... | cfgu eval ... | cfgu export

Options:
  --store NAME        a store declared in .configu (default: its default store)
  --set PATH          the config set, e.g. prod/eu (default: the root set)
  --schema FILE       a *.cfgu.json|yaml|yml file, a quoted glob ('schemas/**/*.cfgu.yaml'),
                      or a name from .configu's \`schemas\`; repeatable (the keys are merged;
                      a key declared twice is an error)
  --override KEY=VALUE
                      use VALUE for KEY whatever the store says; repeatable
  --defaults          evaluate defaults, overrides, the pipe and consts without reading any
                      store (no .configu needed unless --schema names one of its schemas)
  --no-stdin          do not read a pipe from standard input
  --watch             keep running: after each change in the store that alters the result,
                      print the new result (one JSON document after another; pipe them into
                      \`cfgu export --watch\`); stops on SIGINT/SIGTERM
  --explain           instead of the result, print why each value is what it is: origin, the
                      set that supplied it, every value down the set hierarchy (which won, which
                      it shadowed), override, default, a const's template and the keys it read,
                      each test with ✔/✘ (docs/explain.md). For reading, not for piping into
                      \`cfgu export\`. Exit 1 when validation fails (the explanation is printed
                      all the same)
  --format tree|json  with --explain: a tree (default) or JSON (the shape in docs/explain.md)
  --reveal-hidden     with --explain: show the values of hidden keys (default: "(hidden)")

${GLOBAL_HELP}

Examples:
  cfgu eval --store main --set prod --schema app.cfgu.json
  cfgu eval --schema app.cfgu.yaml --override PORT=9090 --defaults
  cfgu eval --set prod --schema base.cfgu.json | cfgu eval --set prod/eu --schema eu.cfgu.json | cfgu export
  cfgu eval --set prod --schema base.cfgu.json | cfgu eval --set prod/eu --schema eu.cfgu.json --explain

Exit codes: 0 success, 1 validation failed or a store is unavailable, 2 usage error.`;

const OPTIONS = {
  store: { type: 'string' },
  set: { type: 'string' },
  schema: { type: 'string', multiple: true },
  override: { type: 'string', multiple: true },
  defaults: { type: 'boolean' },
  'no-stdin': { type: 'boolean' },
  watch: { type: 'boolean' },
  explain: { type: 'boolean' },
  format: { type: 'string' },
  'reveal-hidden': { type: 'boolean' },
} as const;

export function evalCommand(argv: string[], io: CommandIO = processIO()): Promise<number> {
  return runCommand('eval', argv, async (session) => {
    const { values: v, positionals } = parseCommandLine('eval', argv, OPTIONS);
    if (v.help) {
      session.io.stdout.write(`${evalUsage}\n`);
      return 0;
    }
    rejectPositionals(positionals);
    const configs: Record<string, string> = {};
    for (const text of list(v.override)) {
      const [key, value] = splitKeyValue('--override', text);
      // An own-property check: `__proto__`, `toString` and the like are ordinary keys, not given twice.
      if (Object.prototype.hasOwnProperty.call(configs, key)) throw flagError(`--override ${key} is given twice`);
      setOwn(configs, key, value);
    }
    const defaultsOnly = v.defaults === true;
    if (defaultsOnly && v.store !== undefined) throw flagError('--defaults reads no store: leave out --store');
    if (defaultsOnly && v.watch === true) throw flagError('--watch follows a store: it cannot be combined with --defaults');
    const explain = v.explain === true;
    const format = str(v.format);
    if (!explain && format !== undefined) throw flagError('--format chooses how --explain prints: give --explain too');
    if (!explain && v['reveal-hidden'] === true) throw flagError('--reveal-hidden shows hidden values in --explain: give --explain too');
    if (format !== undefined && format !== 'tree' && format !== 'json') throw flagError(`--format must be tree or json, not "${format}"`);
    if (explain && v.watch === true) throw flagError('--explain prints one explanation: it cannot be combined with --watch');

    const configuration = await session.configuration(str(v.config), !defaultsOnly);
    const { schema } = loadSchemas(list(v.schema), session.io.cwd, configuration);
    // The sandbox takes a moment to start: start it now, while the pipe is read and the store is queried.
    if (schemaNeedsSandbox(schema)) session.evaluator.warm();

    // The pipe: read before any store is touched, so a bad pipe is reported first.
    let pipe: EvalResult | undefined;
    if (v['no-stdin'] !== true) {
      const text = await readInput(session.io);
      if (text !== undefined && text.trim() !== '') pipe = parseEvalResult(text, 'standard input (the pipe)');
    }

    const opened = defaultsOnly ? undefined : await session.store(configuration!, str(v.store));
    const stores = opened?.registry;
    const commands: EvalCommandInput[] = [{ ...(v.store !== undefined ? { store: str(v.store) } : {}), set: str(v.set) ?? '', schema, configs }];
    if (explain) {
      const deps = { stores, expressions: session.evaluator, defaultsOnly };
      const outcome = await session.progress('evaluating', () => explainPipeline(commands, deps, { pipe, revealHidden: v['reveal-hidden'] === true }));
      session.io.stdout.write(format === 'json' ? formatExplanationJson(outcome) : formatExplanationTree(outcome));
      if (outcome.ok) return 0;
      const n = outcome.failures.length;
      throw new ExitError(EXIT_FAILED, `validation failed: ${n} failure${n === 1 ? '' : 's'} (explained on standard output)`);
    }
    const evaluate = async () => formatEvalResult((await evaluatePipeline(commands, { stores, expressions: session.evaluator, defaultsOnly }, { pipe })).result);
    const text = await session.progress('evaluating', evaluate);
    session.io.stdout.write(text);
    if (v.watch !== true || !opened) return 0;

    const signal = stopSignal();
    try {
      await watchStore({
        store: opened.store,
        sets: setsRead(commands, opened.registry).get(opened.store.name) ?? new Set(),
        evaluate,
        last: text,
        write: (t) => session.io.stdout.write(t),
        report: (e) => session.io.stderr.write(`${errorLines('eval', e).join('\n')}\n`),
        until: Promise.race([signal.stopped, outputClosed(session.io)]),
      });
    } finally {
      signal.dispose();
    }
    return 0;
  }, io);
}
