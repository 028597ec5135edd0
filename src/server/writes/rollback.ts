/**
 * POST /rollback: the values of a set as they were right after revision `toRevision`, for every key its history
 * changed since (or only `keys`), written as a new revision through the same checks as POST /upsert.
 */
import { ErrorCodes, InputError, type ConfigSchema, type RevisionRecord } from '../../core/index.js';
import { revisionsOf, setPath } from './history.js';
import { performWrite, writeStore, type Caller, type WriteAnswer, type WriteContext } from './write-service.js';

export interface RollbackRequest {
  store?: string;
  set?: string;
  schema: ConfigSchema | string;
  toRevision: number;
  keys?: string[];
  expectedRevision?: number;
  message?: string;
  dryRun?: boolean;
  allowBreaking?: boolean;
}

/** Most history records a rollback reads (pages of 1000). */
export const MAX_ROLLBACK_RECORDS = 100_000;

/** The records of a set newer than `toRevision`, newest first, and whether `toRevision` itself was found. */
async function recordsSince(ctx: WriteContext, caller: Caller, req: RollbackRequest, set: string): Promise<RevisionRecord[]> {
  const store = writeStore(ctx.registry, req.store, caller.principal);
  const revisions = revisionsOf(store);
  const newer: RevisionRecord[] = [];
  let before: number | undefined;
  for (;;) {
    const page = await revisions.history({ set, limit: 1000, ...(before !== undefined ? { before } : {}) });
    for (const r of page.records) {
      if (r.revision === req.toRevision) return newer;
      if (r.revision < req.toRevision) break;
      newer.push(r);
    }
    const oldest = page.records[page.records.length - 1];
    // Revision 0 (before cfgu's first write) is reached once the history holds revision 1.
    if (req.toRevision === 0 && oldest?.revision === 1) return newer;
    if (page.next === undefined || (oldest && oldest.revision < req.toRevision) || newer.length > MAX_ROLLBACK_RECORDS) break;
    before = page.next;
  }
  const current = (await revisions.revision(set)).revision;
  throw new InputError(
    ErrorCodes.INVALID_INPUT,
    `set "${set}" of store "${store.name}" has no revision ${req.toRevision} in its history (its current revision is ${current})`,
    [{ path: '/toRevision', message: `is not a revision of set "${set}"` }],
  );
}

/** Restore the set's values as of `toRevision` (a preview with `dryRun`). */
export async function performRollback(ctx: WriteContext, caller: Caller, req: RollbackRequest): Promise<WriteAnswer> {
  const set = setPath(req.set, '/set');
  const newer = await recordsSince(ctx, caller, req, set);
  // Oldest last: each key ends with the value before the first change after `toRevision`.
  const restored = new Map<string, string | null>();
  for (const r of newer) for (const c of r.changes) restored.set(c.key, c.before);
  if (req.keys) for (const k of [...restored.keys()]) if (!req.keys.includes(k)) restored.delete(k);
  const values = Object.fromEntries(restored);
  return performWrite(ctx, caller, {
    ...(req.store !== undefined ? { store: req.store } : {}),
    set,
    schema: req.schema,
    values,
    ...(req.expectedRevision !== undefined ? { expectedRevision: req.expectedRevision } : {}),
    message: req.message ?? `rollback to revision ${req.toRevision}`,
    ...(req.dryRun !== undefined ? { dryRun: req.dryRun } : {}),
    ...(req.allowBreaking !== undefined ? { allowBreaking: req.allowBreaking } : {}),
  });
}
