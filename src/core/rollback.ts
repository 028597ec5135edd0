/**
 * What a rollback writes: the values a set's keys had right after one revision, read from the set's history. The
 * write itself is an ordinary validated upsert (upsert.ts) expecting the revision read here.
 */
import { ErrorCodes, InputError } from './errors.js';
import { setOwn } from './names.js';
import type { RevisionedStore, RevisionRecord } from './ports.js';

export interface RollbackPlan {
  /** The set's current revision (the rollback's expected revision). */
  current: number;
  /** Key -> value right after the target revision ("" where the key was absent), for every key changed since. */
  values: Record<string, string>;
}

/**
 * The values of `set` right after revision `toRevision`: for each key a record after it changed (or only `keys`), the
 * `before` of the oldest such record. Throws InputError (400) when `toRevision` is negative, above the current
 * revision, or no longer in the history (pruned), or when `keys` names a key no record since has changed.
 */
export async function planRollback(store: RevisionedStore, set: string, toRevision: number, keys?: readonly string[]): Promise<RollbackPlan> {
  const bad = (message: string) => new InputError(ErrorCodes.INVALID_INPUT, message, [{ path: '/toRevision', message }]);
  if (!Number.isInteger(toRevision) || toRevision < 0) throw bad(`toRevision must be a whole number of 0 or more, not ${toRevision}`);
  const { revision: current } = await store.revision(set);
  if (toRevision > current) throw bad(`revision ${toRevision} does not exist: set "${set}" is at revision ${current}`);
  // Newest first, every record above the target (and the target's own, to know it is still held).
  const since: RevisionRecord[] = [];
  let before: number | undefined;
  let reached = toRevision === 0;
  for (;;) {
    const page = await store.history({ set, before, limit: 1000 });
    for (const r of page.records) {
      if (r.revision > toRevision) since.push(r);
      else if (r.revision === toRevision) reached = true;
    }
    const oldest = page.records[page.records.length - 1]?.revision;
    if (page.next === undefined || oldest === undefined || oldest <= toRevision) break;
    before = page.next;
  }
  const first = since[since.length - 1];
  if (!reached || (toRevision === 0 && current > 0 && first?.revision !== 1)) {
    throw bad(`revision ${toRevision} of set "${set}" is no longer in its history`);
  }
  const values: Record<string, string> = {};
  const wanted = keys && new Set(keys);
  // Oldest record last: walking newest to oldest, the last `before` seen for a key is the oldest one.
  for (const r of since) for (const c of r.changes) if (!wanted || wanted.has(c.key)) setOwn(values, c.key, c.before ?? '');
  for (const k of wanted ?? []) {
    if (Object.prototype.hasOwnProperty.call(values, k)) continue;
    const message = `key "${k}" did not change in set "${set}" since revision ${toRevision}`;
    throw new InputError(ErrorCodes.INVALID_INPUT, message, [{ path: '/keys', message }]);
  }
  return { current, values };
}
