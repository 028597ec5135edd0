/**
 * `cfgu upsert`: validate values against a schema and write them to a store at a set. Values come from `--kv KEY=VALUE`
 * and from `-k KEY -v VALUE` pairs; a `-k` without its `-v` (and `--kv KEY=`) deletes the stored value. Every failure
 * is listed; on success a summary of what changed (key, before, after) is printed.
 */
import type { UpsertChange } from '../../core/index.js';
import { keyProblem, setOwn } from '../../core/names.js';
import { GLOBAL_HELP, list, parseCommandLine, rejectPositionals, removedFlag, splitKeyValue, str } from '../args.js';
import { flagError } from '../errors.js';
import { processIO, type CommandIO } from '../io.js';
import { loadSchemas } from '../schema-files.js';
import { runCommand } from '../session.js';
import { serverTarget, serverWrite } from '../write-client.js';
import { ALLOW_BREAKING_HELP, SERVER_HELP, serverWriteBody, WRITE_HELP, WRITE_OPTIONS, writeFlags } from '../write-flags.js';
import { localWrite } from '../write-local.js';
import { changeLine, maskChanges, writeLines, type WriteAnswer } from '../write-output.js';

export const upsertUsage = `Usage: cfgu upsert --store NAME --set PATH --schema FILE [--kv KEY=VALUE]... [-k KEY [-v VALUE]]... [options]

Validate values against a schema and write them to a store at a set. Every failure is listed
and nothing is written unless all values pass. Prints what changed: key, value before, value
after; the values of keys the schema declares \`hidden\` are printed as [hidden], and hidden
values are redacted from failure messages.

Options:
  --store NAME        a store declared in .configu (default: its default store)
  --set PATH          the config set, e.g. prod/eu (default: the root set)
  --schema FILE       a *.cfgu.json|yaml|yml file, a quoted glob, or a name from .configu's
                      \`schemas\`; repeatable (the keys are merged)
  --kv KEY=VALUE      set KEY to VALUE; repeatable; \`--kv KEY=\` deletes KEY's stored value
  -k, --key KEY       a key, paired with the -v that follows it (before the next -k);
  -v, --value VALUE   a -k without a -v deletes that key's stored value
${WRITE_HELP}
${SERVER_HELP}
${ALLOW_BREAKING_HELP}

${GLOBAL_HELP}

Examples:
  cfgu upsert --store main --set prod --schema app.cfgu.json --kv PORT=8080 --kv HOST=db.internal
  cfgu upsert --set prod --schema app.cfgu.json -k GREETING -v "hello, world" -k OLD_KEY
  cfgu upsert --schema app.cfgu.json --kv 'FEATURES=["a","b"]'
  cfgu upsert --set prod --schema app.cfgu.json --kv PORT=9090 --preview
  cfgu upsert --set prod --schema app --kv PORT=9090 --message "bigger pool" --server https://cfgu.internal --token "$T"

Exit codes: 0 success, 1 validation failed, the set is at another revision than --expect-revision, or the\nstore (or server) is unavailable, 2 usage error (also: refused by the server for lack of rights).`;

const OPTIONS = {
  store: { type: 'string' },
  set: { type: 'string' },
  schema: { type: 'string', multiple: true },
  kv: { type: 'string', multiple: true },
  key: { type: 'string', short: 'k', multiple: true },
  value: { type: 'string', short: 'v', multiple: true },
  ...WRITE_OPTIONS,
} as const;

const REMOVED = [removedFlag('--import', '--import was removed in v1: write the values with --kv KEY=VALUE or -k KEY -v VALUE')];

/**
 * Values from `--kv` and `-k`/`-v` tokens, in the order given. A key given twice, or a name no store can hold as a key
 * (not a ConfigKey, or a reserved word), is a usage error. `__proto__`, `constructor` and the like are ordinary keys
 * (docs/engine.md) and are kept as own properties, never dropped.
 */
export function collectValues(tokens: ReadonlyArray<{ kind: string; name?: string; value?: string | undefined }>): Record<string, string> {
  const values: Record<string, string> = {};
  const put = (key: string, value: string, how: string) => {
    const problem = keyProblem(key);
    if (problem) throw flagError(`${how}: ${problem}`);
    if (Object.prototype.hasOwnProperty.call(values, key)) throw flagError(`key "${key}" is given twice (${how})`);
    setOwn(values, key, value);
  };
  let pending: string | undefined;
  for (const t of tokens) {
    if (t.kind !== 'option') continue;
    if (t.name === 'key') {
      if (pending !== undefined) put(pending, '', '-k');
      pending = t.value ?? '';
      if (pending === '') throw flagError('-k/--key needs a key name');
    } else if (t.name === 'value') {
      // The value is not echoed: it may be a secret.
      if (pending === undefined) throw flagError('a -v/--value has no -k/--key before it');
      put(pending, t.value ?? '', '-k');
      pending = undefined;
    } else if (t.name === 'kv') {
      const [key, value] = splitKeyValue('--kv', t.value ?? '');
      put(key, value, '--kv');
    }
  }
  if (pending !== undefined) put(pending, '', '-k');
  return values;
}

/** The summary lines of an upsert. The values of `hidden` keys are masked: `[hidden]`, without quotes. */
export function changeLines(changes: UpsertChange[], hidden: ReadonlySet<string> = new Set()): string[] {
  return maskChanges(changes, hidden).map(changeLine);
}

export function upsertCommand(argv: string[], io: CommandIO = processIO()): Promise<number> {
  return runCommand('upsert', argv, async (session) => {
    const { values: v, positionals, tokens } = parseCommandLine('upsert', argv, OPTIONS, REMOVED);
    if (v.help) {
      session.io.stdout.write(`${upsertUsage}\n`);
      return 0;
    }
    rejectPositionals(positionals);
    const values = collectValues(tokens as Parameters<typeof collectValues>[0]);
    if (Object.keys(values).length === 0) throw flagError('nothing to upsert: give values with --kv KEY=VALUE or -k KEY -v VALUE');
    const write = writeFlags(v);
    const target = serverTarget(str(v.server), str(v.token), session.io.env);
    let answer: WriteAnswer;
    if (target) {
      const body = { ...serverWriteBody(v, session), values: Object.fromEntries(Object.entries(values).map(([k, x]) => [k, x === '' ? null : x])) };
      answer = await session.progress(`sending to ${target.url.origin}`, () => serverWrite(target, 'upsert', body));
    } else {
      if (v['allow-breaking']) throw flagError('--allow-breaking is for --server (a local write is never refused for its impact)');
      const configuration = (await session.configuration(str(v.config), true))!;
      const { schema } = loadSchemas(list(v.schema), session.io.cwd, configuration);
      answer = await localWrite(session, configuration, { store: str(v.store), set: str(v.set) ?? '', schema, values, ...write });
    }
    session.io.stdout.write(`${writeLines(answer).join('\n')}\n`);
    return 0;
  }, io);
}
