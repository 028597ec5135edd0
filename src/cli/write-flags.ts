/**
 * The flags `cfgu upsert` and `cfgu rollback` share: `--message`, `--expect-revision`, `--preview`, and the `--server`
 * ones (`--server`, `--token`, `--allow-breaking`; `cfgu history` takes the first two).
 */
import { MAX_MESSAGE_LENGTH } from './write-output.js';
import { flagError } from './errors.js';
import { list, str } from './args.js';
import { MAGIC } from './glob.js';
import { existsFile } from './paths.js';
import { loadSchemas } from './schema-files.js';
import type { Session } from './session.js';

export const SERVER_OPTIONS = {
  server: { type: 'string' },
  token: { type: 'string' },
} as const;

export const WRITE_OPTIONS = {
  message: { type: 'string', short: 'm' },
  'expect-revision': { type: 'string' },
  preview: { type: 'boolean' },
  'allow-breaking': { type: 'boolean' },
  ...SERVER_OPTIONS,
} as const;

export const WRITE_HELP = `  -m, --message TEXT  why: recorded with the write in the set's history (at most ${MAX_MESSAGE_LENGTH} characters)
  --expect-revision N write only if the set is at revision N (see \`cfgu history\`); else exit 1
  --preview           write nothing: print the changes and their impact on the named schemas
                      of .configu (\`schemas\`) over the set and the sets under it`;

export const SERVER_HELP = `  --server URL        send the command to a running cfgu server instead of opening the store
                      here (the server's own rights and checks apply)
  --token TOKEN       the bearer token for --server (default: $CFGU_TOKEN)`;

export const ALLOW_BREAKING_HELP = `  --allow-breaking    with --server: write even when a named schema of the server would then
                      fail (the token needs the right to)`;

type Values = Record<string, string | boolean | string[] | boolean[] | undefined>;

/** A whole number of 0 or more given to `flag`. */
export function wholeNumber(flag: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  if (!/^\d{1,15}$/.test(text)) throw flagError(`${flag} "${text}" must be a whole number of 0 or more`);
  return Number(text);
}

/** `--preview`, `--expect-revision`, `--message`, checked. */
export function writeFlags(v: Values): { dryRun: boolean; expectedRevision?: number; message?: string } {
  const message = str(v.message);
  if (message !== undefined && message.length > MAX_MESSAGE_LENGTH) throw flagError(`--message is ${message.length} characters long: at most ${MAX_MESSAGE_LENGTH}`);
  const expectedRevision = wholeNumber('--expect-revision', str(v['expect-revision']));
  return { dryRun: v.preview === true, ...(expectedRevision === undefined ? {} : { expectedRevision }), ...(message === undefined ? {} : { message }) };
}

/**
 * `--schema` for a server: a schema file (or glob) here is read and sent whole; any other single value is sent as the
 * name of one of the server's schemas.
 */
export function serverSchema(specs: string[], session: Session): unknown {
  if (!specs.length) throw flagError('--schema is required: a *.cfgu.json|yaml|yml file, a glob, or the name of a schema of the server');
  const local = specs.length > 1 || specs.some((s) => MAGIC.test(s) || existsFile(s) || existsFile(`${session.io.cwd}/${s}`));
  return local ? loadSchemas(specs, session.io.cwd, undefined).schema : specs[0];
}

/** The parts of a POST /upsert or /rollback body the flags give (not the values). */
export function serverWriteBody(v: Values, session: Session): Record<string, unknown> {
  const { dryRun, expectedRevision, message } = writeFlags(v);
  const body: Record<string, unknown> = { set: str(v.set) ?? '', schema: serverSchema(list(v.schema), session) };
  const store = str(v.store);
  if (store !== undefined) body.store = store;
  if (expectedRevision !== undefined) body.expectedRevision = expectedRevision;
  if (message !== undefined) body.message = message;
  if (dryRun) body.dryRun = true;
  if (v['allow-breaking'] === true) body.allowBreaking = true;
  return body;
}
