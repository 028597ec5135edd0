/**
 * `cfgu rollback`: give a set's keys back the values they had right after an earlier revision, as a new revision
 * (recorded like any write), validated against the schema exactly as `cfgu upsert` validates.
 */
import { planRollback, parseSet } from '../../core/index.js';
import { GLOBAL_HELP, list, parseCommandLine, rejectPositionals, str } from '../args.js';
import { flagError } from '../errors.js';
import { processIO, type CommandIO } from '../io.js';
import { keyProblem } from '../../core/names.js';
import { loadSchemas } from '../schema-files.js';
import { runCommand } from '../session.js';
import { serverTarget, serverWrite } from '../write-client.js';
import { ALLOW_BREAKING_HELP, SERVER_HELP, serverWriteBody, WRITE_HELP, WRITE_OPTIONS, wholeNumber, writeFlags } from '../write-flags.js';
import { localWrite, openWritable } from '../write-local.js';
import { writeLines, type WriteAnswer } from '../write-output.js';

export const rollbackUsage = `Usage: cfgu rollback --store NAME --set PATH --to REV --schema FILE [--key KEY]... [options]

Give the keys of a set the values they had right after revision REV (see \`cfgu history\`), as a
new revision. Every key changed since REV is restored, or only the --key ones. The values are
validated against the schema as \`cfgu upsert\` validates them; nothing is written unless all pass,
and nothing if the set changed meanwhile.

Options:
  --store NAME        a store declared in .configu (default: its default store)
  --set PATH          the config set, e.g. prod/eu (default: the root set)
  --to REV            the revision to go back to (0: before cfgu first wrote the set)
  --schema FILE       a *.cfgu.json|yaml|yml file, a quoted glob, or a name from .configu's
                      \`schemas\` (or, with --server, of the server's); repeatable
  -k, --key KEY       restore only this key; repeatable
${WRITE_HELP}
${SERVER_HELP}
${ALLOW_BREAKING_HELP}

${GLOBAL_HELP}

Examples:
  cfgu rollback --store main --set prod --to 4 --schema app.cfgu.json --preview
  cfgu rollback --set prod --to 4 --key PORT --schema app.cfgu.json --message "undo the port change"

The message recorded is "rollback to revision REV" unless --message is given.

Exit codes: 0 success, 1 validation failed, the set changed meanwhile, or the store (or server) is
unavailable, 2 usage error (also: REV is not in the set's history).`;

const OPTIONS = {
  store: { type: 'string' },
  set: { type: 'string' },
  to: { type: 'string' },
  schema: { type: 'string', multiple: true },
  key: { type: 'string', short: 'k', multiple: true },
  ...WRITE_OPTIONS,
} as const;

export function rollbackCommand(argv: string[], io: CommandIO = processIO()): Promise<number> {
  return runCommand('rollback', argv, async (session) => {
    const { values: v, positionals } = parseCommandLine('rollback', argv, OPTIONS);
    if (v.help) {
      session.io.stdout.write(`${rollbackUsage}\n`);
      return 0;
    }
    rejectPositionals(positionals);
    const to = wholeNumber('--to', str(v.to));
    if (to === undefined) throw flagError('--to is required: the revision to go back to (see `cfgu history`)');
    const keys = list(v.key);
    for (const k of keys) {
      const problem = keyProblem(k);
      if (problem) throw flagError(`--key: ${problem}`);
    }
    const flags = writeFlags(v);
    const message = flags.message ?? `rollback to revision ${to}`;
    const set = str(v.set) ?? '';
    const parsed = parseSet(set);
    if ('problem' in parsed) throw flagError(`--set "${set}": ${parsed.problem}`);
    const target = serverTarget(str(v.server), str(v.token), session.io.env);
    let answer: WriteAnswer;
    if (target) {
      const body = { ...serverWriteBody(v, session), toRevision: to, message, ...(keys.length ? { keys } : {}) };
      answer = await session.progress(`sending to ${target.url.origin}`, () => serverWrite(target, 'rollback', body));
    } else {
      if (v['allow-breaking']) throw flagError('--allow-breaking is for --server (a local write is never refused for its impact)');
      const configuration = (await session.configuration(str(v.config), true))!;
      const { schema } = loadSchemas(list(v.schema), session.io.cwd, configuration);
      const { underlying } = await openWritable(session, configuration, str(v.store));
      const plan = await planRollback(underlying, parsed.path, to, keys.length ? keys : undefined);
      const expectedRevision = flags.expectedRevision ?? plan.current;
      answer = await localWrite(session, configuration, { store: str(v.store), set: parsed.path, schema, values: plan.values, dryRun: flags.dryRun, expectedRevision, message });
    }
    session.io.stdout.write(`${writeLines(answer, ` (back to revision ${to}${answer.dryRun || answer.revision === undefined ? '' : `, now revision ${answer.revision}`})`).join('\n')}\n`);
    return 0;
  }, io);
}
