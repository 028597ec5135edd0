/**
 * Revisions and history of the `etcd` kind (docs/stores.md, "Revisions and history"), under reserved names
 * (key-value.ts RESERVED_PREFIX) that no set path or key name can take:
 *
 *   cfgu:rev:<set>                    JSON { revision, snapshot } (snapshot: the set's values as the last revision left them)
 *   cfgu:hist:<set>:<revision, 15 digits>   one record (JSON)
 *
 * list() skips them (isReserved); get() never asks for them. A write reads the revision key and the set's storage keys
 * with their mod revisions, decides (history.ts planWrite; a stale expected revision ends here), and commits one
 * transaction whose compares check that the revision key and every written storage key are unchanged, and whose
 * puts write the data, the revision key, the records and the retention's range delete. When another writer got there
 * first the transaction does nothing and the write starts over (and may then find a conflict). One transaction holds
 * at most 128 operations (etcd's default --max-txn-ops): a write of the root set changes at most 100 keys.
 */
import type { Etcd3 } from 'etcd3';
import { LimitError, StoreUnavailableError } from '../core/errors.js';
import { decodeRecord, encodeRecord, encodeSnapshot, HistoryPager, planWrite, type CheckedQuery, type HistorySettings, type SetState, type Snapshot, type WritePlan } from './history.js';
import { applyKeyValueWrites, RESERVED_PREFIX, setValuesOf } from './key-value.js';
import type { ConfigChange, HistoryPage, RevisionRecord, WriteOptions } from '../core/ports.js';

const MAX_WRITE_ATTEMPTS = 50;
const MAX_ROOT_KEYS = 100;
const MAX_OPS_PER_TXN = 128;
const AGE_SCAN = 100;

export const revisionKey = (set: string): string => `${RESERVED_PREFIX}rev:${set}`;
const recordPrefix = (set: string): string => `${RESERVED_PREFIX}hist:${set}:`;
const recordKey = (set: string, revision: number): string => `${recordPrefix(set)}${String(revision).padStart(15, '0')}`;

type Found = Map<string, { value: string; modRevision: string }>;

async function readKeys(c: Etcd3, keys: readonly string[]): Promise<Found> {
  const out: Found = new Map();
  for (let i = 0; i < keys.length; i += MAX_OPS_PER_TXN) {
    const res = await c.kv.txn({ compare: [], success: keys.slice(i, i + MAX_OPS_PER_TXN).map((k) => ({ request_range: { key: Buffer.from(k) } })), failure: [] });
    for (const r of res.responses) for (const kv of r.response_range?.kvs ?? []) out.set(kv.key.toString(), { value: kv.value.toString(), modRevision: String(kv.mod_revision) });
  }
  return out;
}

function stateOf(text: string | undefined): SetState {
  if (text === undefined) return { revision: 0, snapshot: undefined };
  const v = JSON.parse(text) as { revision: number; snapshot: Record<string, string> | null };
  return { revision: v.revision, snapshot: v.snapshot ? new Map(Object.entries(v.snapshot)) : undefined };
}

/** The state, the set's current values, and what was read (with mod revisions). */
async function readSet(c: Etcd3, set: string, more: readonly string[]): Promise<{ state: SetState; current: Snapshot; found: Found }> {
  const first = await readKeys(c, [revisionKey(set), ...(set === '' ? more : [set])]);
  const state = stateOf(first.get(revisionKey(set))?.value);
  let found = first;
  if (set === '' && state.snapshot) {
    const rest = [...state.snapshot.keys()].filter((k) => !first.has(k) && !more.includes(k));
    found = new Map([...first, ...(await readKeys(c, rest))]);
  }
  if (set !== '') return { state, current: setValuesOf(found.get(set)?.value), found };
  const current: Snapshot = new Map();
  for (const [k, v] of found) if (k !== revisionKey(set) && v.value !== '') current.set(k, v.value);
  return { state, current, found };
}

export class EtcdHistory {
  constructor(
    private readonly store: string,
    private readonly settings: HistorySettings,
  ) {}

  async revision(c: Etcd3, set: string): Promise<{ state: SetState; current: Snapshot }> {
    return readSet(c, set, []);
  }

  async write(c: Etcd3, set: string, changes: readonly ConfigChange[], options: WriteOptions | undefined): Promise<WritePlan> {
    if (set === '' && changes.length > MAX_ROOT_KEYS) {
      throw new LimitError(`a write to the root set of etcd store "${this.store}" changes at most ${MAX_ROOT_KEYS} keys (one etcd transaction)`);
    }
    const written = set === '' ? changes.map((ch) => ch.key) : [set];
    for (let attempt = 0; attempt < MAX_WRITE_ATTEMPTS; attempt++) {
      const { state, current, found } = await readSet(c, set, written);
      const plan = planWrite({ store: this.store, set, current, state, changes, options, history: this.settings });
      const raw = new Map<string, string | undefined>(written.map((k) => [k, found.get(k)?.value]));
      const data = applyKeyValueWrites([...plan.upserts, ...plan.deletes.map((d) => ({ ...d, value: '' }))], raw);
      const watched = [revisionKey(set), ...written];
      const snapshot = plan.state.snapshot ? (JSON.parse(encodeSnapshot(plan.state.snapshot)) as Record<string, string>) : null;
      const success = [
        ...[...data].map(([k, v]) =>
          v === null ? { request_delete_range: { key: Buffer.from(k) } } : { request_put: { key: Buffer.from(k), value: Buffer.from(v) } },
        ),
        { request_put: { key: Buffer.from(revisionKey(set)), value: Buffer.from(JSON.stringify({ revision: plan.revision, snapshot })) } },
        ...plan.records.map((r) => ({ request_put: { key: Buffer.from(recordKey(set, r.revision)), value: Buffer.from(encodeRecord(r)) } })),
      ];
      const through = plan.records.length ? await this.pruneThrough(c, set, plan) : 0;
      if (through > 0) success.push({ request_delete_range: { key: Buffer.from(recordPrefix(set)), range_end: Buffer.from(recordKey(set, through + 1)) } } as never);
      const res = await c.kv.txn({
        compare: watched.map((k) => ({ key: Buffer.from(k), target: 'Mod' as const, result: 'Equal' as const, mod_revision: found.get(k)?.modRevision ?? '0' })),
        success,
        failure: [],
      });
      if (res.succeeded) return plan;
      await new Promise((r) => setTimeout(r, Math.random() * 5 * (attempt + 1)));
    }
    throw new StoreUnavailableError(this.store, 'too many concurrent writers; try again', 1);
  }

  /** Retention: by count; by age, the oldest AGE_SCAN records looked at now (the rest go at later writes). */
  private async pruneThrough(c: Etcd3, set: string, plan: WritePlan): Promise<number> {
    let through = plan.pruneThrough;
    if (plan.pruneBefore !== undefined) {
      const res = await c.kv.range({ key: Buffer.from(recordPrefix(set)), range_end: Buffer.from(recordKey(set, plan.revision)), limit: AGE_SCAN });
      for (const kv of res.kvs) {
        const r = decodeRecord(kv.value.toString());
        if (Date.parse(r.time) >= plan.pruneBefore) break;
        through = Math.max(through, r.revision);
      }
    }
    return through;
  }

  /** Newest first (a descending range over the record keys), in batches, until the page is full. */
  async history(c: Etcd3, q: CheckedQuery): Promise<HistoryPage> {
    const pager = new HistoryPager(q);
    let before = q.before;
    let more = true;
    while (more && !pager.done) {
      const batch = Math.max(200, q.limit + 1);
      const end = Number.isFinite(before) ? recordKey(q.set, before) : `${recordPrefix(q.set).slice(0, -1)};`;
      const res = await c.kv.range({ key: Buffer.from(recordPrefix(q.set)), range_end: Buffer.from(end), limit: batch, sort_order: 'Descend', sort_target: 'Key' });
      const records: RevisionRecord[] = res.kvs.map((kv) => decodeRecord(kv.value.toString()));
      let i = 0;
      for (; i < records.length && !pager.done; i++) pager.add(records[i]!);
      more = i < records.length || res.more;
      before = records.at(-1)?.revision ?? 0;
    }
    return pager.page(more);
  }
}
