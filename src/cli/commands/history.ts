/**
 * `cfgu history`: the revisions of one set of a store, newest first: who wrote what, when and why. Locally the values
 * are shown (the person at this machine already holds the store), except those of keys a `--schema` declares
 * `hidden`; through `--server` the server masks what the token may not see.
 */
import { GLOBAL_HELP, list, parseCommandLine, rejectPositionals, str } from '../args.js';
import { flagError } from '../errors.js';
import { processIO, type CommandIO } from '../io.js';
import { loadSchemas } from '../schema-files.js';
import { runCommand } from '../session.js';
import { serverHistory, serverTarget } from '../write-client.js';
import { SERVER_HELP, SERVER_OPTIONS, wholeNumber } from '../write-flags.js';
import { hiddenKeys, openWritable } from '../write-local.js';
import { historyLines, maskChanges, type HistoryAnswer } from '../write-output.js';
import { parseSet } from '../../core/index.js';

export const historyUsage = `Usage: cfgu history --store NAME --set PATH [--key KEY] [--limit N] [--since ISO] [options]

Print the history of one set of a store, newest first: each revision with its time, who wrote it,
the message given, and what changed (key, value before, value after). Changes made by other tools
are shown as "outside cfgu (not recorded)" where cfgu found them.

Options:
  --store NAME        a store declared in .configu (default: its default store)
  --set PATH          the config set, e.g. prod/eu (default: the root set)
  --key KEY           only the revisions that changed this key
  --since ISO         only revisions written at or after this time (ISO 8601)
  --until ISO         only revisions written before this time (ISO 8601)
  --before N          only revisions below N (the next page: the "add --before N" line)
  --limit N           at most N revisions (1 to 1000; default 20)
  --schema FILE       mask the values of the keys it declares \`hidden\` (repeatable); without it,
                      values are shown as stored
  --format FORMAT     text (default) or json ({ store, set, records, next? }, as GET /history)
${SERVER_HELP}

${GLOBAL_HELP}

Examples:
  cfgu history --store main --set prod
  cfgu history --set prod --key PORT --limit 5 --format json
  cfgu history --set prod --server https://cfgu.internal --token "$T"

Exit codes: 0 success, 1 the store (or server) is unavailable, 2 usage error.`;

const OPTIONS = {
  store: { type: 'string' },
  set: { type: 'string' },
  key: { type: 'string' },
  since: { type: 'string' },
  until: { type: 'string' },
  before: { type: 'string' },
  limit: { type: 'string' },
  schema: { type: 'string', multiple: true },
  format: { type: 'string' },
  ...SERVER_OPTIONS,
} as const;

function isoTime(flag: string, text: string | undefined): string | undefined {
  if (text === undefined) return undefined;
  if (!/^\d{4}-\d{2}-\d{2}(T[\d:.]+(Z|[+-]\d{2}:?\d{2})?)?$/.test(text) || Number.isNaN(Date.parse(text))) {
    throw flagError(`${flag} "${text}" must be an ISO 8601 time, e.g. 2026-05-01 or 2026-05-01T12:00:00Z`);
  }
  return new Date(text).toISOString();
}

export function historyCommand(argv: string[], io: CommandIO = processIO()): Promise<number> {
  return runCommand('history', argv, async (session) => {
    const { values: v, positionals } = parseCommandLine('history', argv, OPTIONS);
    if (v.help) {
      session.io.stdout.write(`${historyUsage}\n`);
      return 0;
    }
    rejectPositionals(positionals);
    const format = str(v.format) ?? 'text';
    if (format !== 'text' && format !== 'json') throw flagError(`--format "${format}" is not one of text, json`);
    const limit = wholeNumber('--limit', str(v.limit)) ?? 20;
    if (limit < 1 || limit > 1000) throw flagError(`--limit ${limit} must be between 1 and 1000`);
    const before = wholeNumber('--before', str(v.before));
    const query = { key: str(v.key), since: isoTime('--since', str(v.since)), until: isoTime('--until', str(v.until)), before, limit };
    const set = str(v.set) ?? '';
    const parsed = parseSet(set);
    if ('problem' in parsed) throw flagError(`--set "${set}": ${parsed.problem}`);
    const target = serverTarget(str(v.server), str(v.token), session.io.env);
    let answer: HistoryAnswer;
    if (target) {
      if (v.schema !== undefined) throw flagError('--schema is not taken with --server: the server masks what the token may not see');
      answer = await session.progress(`asking ${target.url.origin}`, () => serverHistory(target, { store: str(v.store), set: parsed.path, ...query }));
    } else {
      const configuration = (await session.configuration(str(v.config), true))!;
      const hidden = v.schema === undefined ? new Set<string>() : hiddenKeys(loadSchemas(list(v.schema), session.io.cwd, configuration).schema);
      const { store, underlying } = await openWritable(session, configuration, str(v.store));
      const page = await session.progress(`reading the history of store "${store.name}"`, () => underlying.history({ set: parsed.path, ...query }));
      answer = {
        store: store.name,
        set: page.set,
        records: page.records.map(({ set: _set, changes, ...r }) => ({ ...r, changes: maskChanges(changes, hidden) })),
        ...(page.next === undefined ? {} : { next: page.next }),
      };
    }
    session.io.stdout.write(format === 'json' ? `${JSON.stringify(answer, null, 2)}\n` : `${historyLines(answer).join('\n')}\n`);
    return 0;
  }, io);
}
