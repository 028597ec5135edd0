/**
 * `cfgu matrix` (one schema at many sets, a cell per key and set) and `cfgu diff` (the keys on which two sets differ,
 * side by side): the engine's matrixOf (core/matrix.ts) over a store of `.configu`, printed as a table or as JSON
 * (docs/cli.md; docs/explain.md, "Comparing sets").
 */
import { matrixOf, parseSet, type Matrix, type MatrixRequest } from '../../core/index.js';
import { setOwn } from '../../core/names.js';
import { GLOBAL_HELP, list, parseCommandLine, rejectPositionals, splitKeyValue, str } from '../args.js';
import { flagError } from '../errors.js';
import { processIO, type CommandIO } from '../io.js';
import { diffOf, formatDiffTable, formatMatrixTable } from '../matrix-format.js';
import { loadSchemas, schemaNeedsSandbox } from '../schema-files.js';
import { runCommand, type Session } from '../session.js';

const COMMON_HELP = `  --store NAME        a store declared in .configu (default: its default store)
  --schema FILE       a *.cfgu.json|yaml|yml file, a quoted glob, or a name from .configu's
                      \`schemas\`; repeatable (the keys are merged)
  --override KEY=VALUE
                      use VALUE for KEY at every set; repeatable
  --format table|json a table for the terminal (default) or JSON (the shape of POST /matrix,
                      docs/server.md)
  --reveal-hidden     show the values of hidden keys (default: "(hidden)")`;

export const matrixUsage = `Usage: cfgu matrix --schema FILE [--store NAME] (--prefix PATH | --set PATH...) [options]

Evaluate a schema at many sets and print a row per key and a column per set: each value, where
it came from when not its own set ("(from prod)", "(default)", "(const)", "(override)"), and
"✘ <rule>" when the key fails the schema there (missing, test, enum, pattern, schema, const).

Options:
  --prefix PATH       every set the store holds under PATH ("" for every set)
  --set PATH          a set to compare; repeatable (instead of --prefix)
${COMMON_HELP}

${GLOBAL_HELP}

Examples:
  cfgu matrix --store main --schema app.cfgu.json --prefix prod
  cfgu matrix --schema app.cfgu.yaml --set staging --set prod --format json

Exit codes: 0 the matrix was printed (failing cells included), 1 a store is unavailable, 2 usage error.`;

export const diffUsage = `Usage: cfgu diff SET SET --schema FILE [--store NAME] [options]

Evaluate a schema at two sets and print only the keys that differ (their value, or whether
they pass the schema), side by side. Hidden values are compared but not shown.

Options:
${COMMON_HELP}

${GLOBAL_HELP}

Examples:
  cfgu diff prod prod/eu --store main --schema app.cfgu.json
  cfgu diff staging prod --schema app.cfgu.yaml --format json

Exit codes: 0 the differences were printed (none included), 1 a store is unavailable, 2 usage error.`;

const COMMON = {
  store: { type: 'string' },
  schema: { type: 'string', multiple: true },
  override: { type: 'string', multiple: true },
  format: { type: 'string' },
  'reveal-hidden': { type: 'boolean' },
} as const;

type Values = Record<string, string | boolean | string[] | boolean[] | undefined>;

/** Read the flags both commands take and evaluate the matrix (hidden values revealed when `revealAll`). */
async function evaluate(session: Session, v: Values, sets: Pick<MatrixRequest, 'sets' | 'prefix'>, revealAll: boolean): Promise<Matrix> {
  const format = str(v.format);
  if (format !== undefined && format !== 'table' && format !== 'json') throw flagError(`--format must be table or json, not "${format}"`);
  const configs: Record<string, string> = {};
  for (const text of list(v.override)) {
    const [key, value] = splitKeyValue('--override', text);
    if (Object.prototype.hasOwnProperty.call(configs, key)) throw flagError(`--override ${key} is given twice`);
    setOwn(configs, key, value);
  }
  const configuration = await session.configuration(str(v.config), true);
  const { schema } = loadSchemas(list(v.schema), session.io.cwd, configuration);
  if (schemaNeedsSandbox(schema)) session.evaluator.warm();
  const { registry } = await session.store(configuration!, str(v.store));
  const request: MatrixRequest = { ...(v.store !== undefined ? { store: str(v.store) } : {}), schema, ...sets, configs };
  return session.progress('evaluating', () => matrixOf(request, { stores: registry, expressions: session.evaluator }, { revealHidden: revealAll }));
}

export function matrixCommand(argv: string[], io: CommandIO = processIO()): Promise<number> {
  return runCommand('matrix', argv, async (session) => {
    const { values: v, positionals } = parseCommandLine('matrix', argv, { ...COMMON, prefix: { type: 'string' }, set: { type: 'string', multiple: true } });
    if (v.help) {
      session.io.stdout.write(`${matrixUsage}\n`);
      return 0;
    }
    rejectPositionals(positionals);
    const prefix = str(v.prefix);
    const sets = list(v.set);
    if (prefix === undefined && !sets.length) throw flagError('give --prefix PATH or at least one --set PATH');
    if (prefix !== undefined && sets.length) throw flagError('--prefix and --set cannot be combined: give one or the other');
    const m = await evaluate(session, v, prefix !== undefined ? { prefix } : { sets }, v['reveal-hidden'] === true);
    session.io.stdout.write(str(v.format) === 'json' ? `${JSON.stringify(m, null, 2)}\n` : formatMatrixTable(m));
    return 0;
  }, io);
}

export function diffCommand(argv: string[], io: CommandIO = processIO()): Promise<number> {
  return runCommand('diff', argv, async (session) => {
    const { values: v, positionals } = parseCommandLine('diff', argv, COMMON);
    if (v.help) {
      session.io.stdout.write(`${diffUsage}\n`);
      return 0;
    }
    if (positionals.length !== 2) throw flagError(`give two sets to compare, e.g. \`cfgu diff prod prod/eu\` (got ${positionals.length})`);
    const [a, b] = positionals.map((p) => parseSet(p)) as [ReturnType<typeof parseSet>, ReturnType<typeof parseSet>];
    if (!('problem' in a) && !('problem' in b) && a.path === b.path) throw flagError(`the two sets are the same set ("${a.path}"): give two different sets`);
    // Hidden values are compared (so a changed secret shows as a difference) and withheld from the output by diffOf.
    const m = await evaluate(session, v, { sets: positionals }, true);
    const d = diffOf(m, v['reveal-hidden'] === true);
    session.io.stdout.write(str(v.format) === 'json' ? `${JSON.stringify(d, null, 2)}\n` : formatDiffTable(d));
    return 0;
  }, io);
}
