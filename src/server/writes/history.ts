/**
 * A set's history as the server answers it (GET /history) and as a rollback reads it. Values are masked for a caller
 * that may not read the key, or (without full access) when one of the server's named schemas declares the key
 * `hidden`.
 */
import { ForbiddenError, InputError, ErrorCodes, parseSet, prepareSchema, type HistoryQuery, type RevisionRecord, type StoreRevisions } from '../../core/index.js';
import { mayReadSet } from '../access/write-access.js';
import type { Principal } from '../access/scopes.js';
import type { NamedSchemas } from '../schemas/registry.js';
import type { ShownChange } from '../../core/index.js';
import { show, valueShown, writeStore, type WriteContext } from './write-service.js';

export interface ShownRecord {
  revision: number;
  time: string;
  subject: string | null;
  requestId: string | null;
  message: string | null;
  recorded: boolean;
  changes: ShownChange[];
}

export interface HistoryAnswer {
  store: string;
  set: string;
  records: ShownRecord[];
  next?: number;
}

export interface HistoryRequest {
  store?: string;
  set?: string;
  key?: string;
  since?: string;
  until?: string;
  before?: number;
  limit?: number;
}

/** Keys some named schema of the server declares `hidden`. */
export function hiddenKeys(schemas: NamedSchemas): (key: string) => boolean {
  const hidden = new Set<string>();
  for (const s of schemas.all()) for (const k of prepareSchema(s.schema).keys) if (k.hidden) hidden.add(k.key);
  return (key) => hidden.has(key);
}

/** The store's revisions (every kind keeps them); a store without: 400. */
export function revisionsOf(store: { name: string; revisions?: StoreRevisions }): StoreRevisions {
  if (store.revisions) return store.revisions;
  throw new InputError(ErrorCodes.INVALID_INPUT, `store "${store.name}" keeps no history`, [{ path: '/store', message: 'keeps no history' }]);
}

/** The set in normal form, or 400. */
export function setPath(set: string | undefined, path: string): string {
  const parsed = parseSet(set ?? '');
  if ('problem' in parsed) throw new InputError(ErrorCodes.INVALID_SET, parsed.problem, [{ path, message: parsed.problem }]);
  return parsed.path;
}

const isoTime = (value: string | undefined, path: string): void => {
  if (value !== undefined && Number.isNaN(Date.parse(value))) {
    throw new InputError(ErrorCodes.INVALID_INPUT, `${path.slice(1)} must be a time in ISO 8601 (e.g. 2026-01-31T12:00:00Z)`, [{ path, message: 'is not an ISO 8601 time' }]);
  }
};

/** One page of a set's history, newest first, masked for the caller. */
export async function readHistory(ctx: WriteContext, principal: Principal, req: HistoryRequest): Promise<HistoryAnswer> {
  const store = writeStore(ctx.registry, req.store, principal);
  const set = setPath(req.set, '/set');
  isoTime(req.since, '/since');
  isoTime(req.until, '/until');
  if (!mayReadSet(principal, store.name, set)) throw new ForbiddenError([{ command: 0, store: store.name, set }], 1);
  const query: HistoryQuery = { set };
  if (req.key !== undefined) query.key = req.key;
  if (req.since !== undefined) query.since = new Date(req.since).toISOString();
  if (req.until !== undefined) query.until = new Date(req.until).toISOString();
  if (req.before !== undefined) query.before = req.before;
  if (req.limit !== undefined) query.limit = req.limit;
  const page = await revisionsOf(store).history(query);
  const shown = valueShown(principal, store.name, set, hiddenKeys(ctx.schemas));
  return { store: store.name, set, records: page.records.map((r) => showRecord(r, shown)), ...(page.next !== undefined ? { next: page.next } : {}) };
}

function showRecord(r: RevisionRecord, shown: (key: string) => boolean): ShownRecord {
  return {
    revision: r.revision,
    time: r.time,
    subject: r.subject,
    requestId: r.requestId,
    message: r.message,
    recorded: r.recorded,
    changes: r.changes.map((c) => ({ key: c.key, before: show(c.before, shown(c.key)), after: show(c.after, shown(c.key)) })),
  };
}
