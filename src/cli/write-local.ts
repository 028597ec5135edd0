/**
 * Writes made here (no `--server`): the store opened from `.configu`, the values validated by the engine's upsert and
 * written through the store's `write()` so that each is recorded in the set's history, with the local user as its
 * subject; a preview adds the impact on `.configu`'s named schemas.
 */
import { userInfo } from 'node:os';
import { impactOf, isRevisioned, upsert, type ConfigSchema, type RevisionedStore } from '../core/index.js';
import type { LoadedConfiguration } from '../config/types.js';
import { ExitError } from './errors.js';
import { EXIT_USAGE } from '../core/index.js';
import { loadSchemas, schemaNeedsSandbox } from './schema-files.js';
import type { Session } from './session.js';
import { maskChanges, type WriteAnswer } from './write-output.js';

/** Who writes, as the history records it: `CFGU_SUBJECT`, else the user name of this process. */
export function localSubject(env: NodeJS.ProcessEnv): string {
  if (env.CFGU_SUBJECT) return env.CFGU_SUBJECT;
  try {
    return userInfo().username;
  } catch {
    return 'unknown';
  }
}

/** The keys a schema declares `hidden`. */
export function hiddenKeys(schema: ConfigSchema): Set<string> {
  const keys = schema.keys ?? {};
  return new Set(Object.keys(keys).filter((k) => keys[k]?.hidden === true));
}

/** The named store, connected, with its revisioned side (every kind has one). */
export async function openWritable(session: Session, configuration: LoadedConfiguration, name: string | undefined) {
  const { registry, store } = await session.store(configuration, name);
  const underlying = registry.store(store.name);
  if (!underlying || !isRevisioned(underlying)) throw new ExitError(EXIT_USAGE, `store "${store.name}" (${store.type}) keeps no revisions or history`);
  return { store, underlying: underlying as RevisionedStore };
}

export interface LocalWrite {
  store: string | undefined;
  set: string;
  schema: ConfigSchema;
  values: Record<string, string>;
  dryRun: boolean;
  expectedRevision?: number;
  message?: string;
}

/** Validate and write (or preview) values; the answer as the server's POST /upsert gives it. */
export async function localWrite(session: Session, configuration: LoadedConfiguration, w: LocalWrite): Promise<WriteAnswer> {
  if (schemaNeedsSandbox(w.schema)) session.evaluator.warm();
  const { store } = await openWritable(session, configuration, w.store);
  const { changes, revision } = await session.progress(`${w.dryRun ? 'checking' : 'writing to'} store "${store.name}"`, () =>
    upsert({
      store,
      set: w.set,
      schema: w.schema,
      values: w.values,
      expressions: session.evaluator,
      subject: localSubject(session.io.env),
      ...(w.expectedRevision !== undefined ? { expectedRevision: w.expectedRevision } : {}),
      ...(w.message !== undefined ? { message: w.message } : {}),
      dryRun: w.dryRun,
    }),
  );
  const answer: WriteAnswer = { store: store.name, set: w.set, dryRun: w.dryRun, revision, changes: maskChanges(changes, hiddenKeys(w.schema)) };
  if (w.dryRun) {
    const schemas = Object.keys(configuration.schemas ?? {}).map((name) => ({ name, schema: loadSchemas([name], session.io.cwd, configuration).schema }));
    if (schemas.some((s) => schemaNeedsSandbox(s.schema))) session.evaluator.warm();
    const { impact, truncated } = await session.progress('evaluating the impact', () =>
      impactOf({ store, set: w.set, changes, schemas, expressions: session.evaluator, maxSets: 100 }),
    );
    answer.impact = impact;
    answer.impactTruncated = truncated;
  }
  return answer;
}
