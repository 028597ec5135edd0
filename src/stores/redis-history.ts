/**
 * Revisions and history of the `redis` kind (docs/stores.md, "Revisions and history"), under reserved names
 * (key-value.ts RESERVED_PREFIX), of types the configuration's layout never has:
 *
 *   cfgu:rev:<set>    a hash: `revision`, and `snapshot` (the set's values as the last revision left them, JSON)
 *   cfgu:hist:<set>   a sorted set: one member per record (its JSON), scored by its revision
 *
 * get() and list() read storage keys with MGET, which answers nil for a hash or a sorted set, and no set path or key
 * name can begin with `cfgu:`; so neither can be read as configuration.
 *
 * A write is an optimistic transaction, like set(): WATCH the revision hash and the storage keys the write changes,
 * read them, decide (history.ts planWrite; a stale expected revision ends here, UNWATCH), then MULTI: the data, the
 * revision hash, the records (ZADD), the retention (ZREMRANGEBYSCORE), the change notice (PUBLISH); EXEC. When any
 * watched key changed meanwhile EXEC does nothing and the write starts over (and may then find a conflict). The
 * root set's storage keys are spread over the key space: the keys its snapshot names and the written ones are read.
 */
import type { Redis } from 'ioredis';
import { StoreUnavailableError } from '../core/errors.js';
import { setsOf } from './feed.js';
import {
  decodeRecord,
  decodeSnapshot,
  encodeRecord,
  encodeSnapshot,
  HistoryPager,
  planWrite,
  type CheckedQuery,
  type HistorySettings,
  type SetState,
  type Snapshot,
  type WritePlan,
} from './history.js';
import { applyKeyValueWrites, RESERVED_PREFIX, setValuesOf } from './key-value.js';
import type { ConfigChange, HistoryPage, WriteOptions } from '../core/ports.js';

const MAX_WRITE_ATTEMPTS = 50;
/** Oldest records looked at per write for retention by age (the rest go at later writes). */
const AGE_SCAN = 100;

export const revisionKey = (set: string): string => `${RESERVED_PREFIX}rev:${set}`;
export const historyKey = (set: string): string => `${RESERVED_PREFIX}hist:${set}`;

/** The state of a set from its revision hash's `revision` and `snapshot` fields. */
function stateOf(revision: string | null | undefined, snapshot: string | null | undefined): SetState {
  return { revision: revision ? Number(revision) : 0, snapshot: decodeSnapshot(snapshot ?? undefined) };
}

/** The set's current values and the raw values of the storage keys read for them. */
async function readSet(c: Redis, set: string, state: SetState, more: readonly string[]): Promise<{ current: Snapshot; raw: Map<string, string | undefined> }> {
  const keys = set === '' ? [...new Set([...(state.snapshot?.keys() ?? []), ...more])] : [set];
  const raw = new Map<string, string | undefined>();
  if (keys.length) {
    const values = await c.mget(...keys);
    keys.forEach((k, i) => raw.set(k, values[i] ?? undefined));
  }
  if (set !== '') return { current: setValuesOf(raw.get(set)), raw };
  const current: Snapshot = new Map();
  for (const [k, v] of raw) if (v !== undefined && v !== '') current.set(k, v);
  return { current, raw };
}

export class RedisHistory {
  constructor(
    private readonly store: string,
    private readonly settings: HistorySettings,
    private readonly channel: (c: Redis) => string,
  ) {}

  async revision(c: Redis, set: string): Promise<{ state: SetState; current: Snapshot }> {
    const [revision, snapshot] = await c.hmget(revisionKey(set), 'revision', 'snapshot');
    const state = stateOf(revision, snapshot);
    return { state, current: (await readSet(c, set, state, [])).current };
  }

  /** One write; the caller serialises the writes of its connection (WATCH state is per connection). */
  async write(c: Redis, set: string, changes: readonly ConfigChange[], options: WriteOptions | undefined): Promise<WritePlan> {
    const written = set === '' ? changes.map((ch) => ch.key) : [set];
    for (let attempt = 0; attempt < MAX_WRITE_ATTEMPTS; attempt++) {
      await c.watch(revisionKey(set), ...written);
      let plan: WritePlan;
      let multi: ReturnType<Redis['multi']>;
      try {
        const [revision, snapshot] = await c.hmget(revisionKey(set), 'revision', 'snapshot');
        const state = stateOf(revision, snapshot);
        const { current, raw } = await readSet(c, set, state, written);
        plan = planWrite({ store: this.store, set, current, state, changes, options, history: this.settings });
        const configs = [...plan.upserts, ...plan.deletes.map((d) => ({ ...d, value: '' }))];
        multi = c.multi();
        for (const [k, v] of applyKeyValueWrites(configs, raw)) {
          if (v === null) multi.del(k);
          else multi.set(k, v);
        }
        multi.hset(revisionKey(set), 'revision', String(plan.revision));
        if (plan.state.snapshot) multi.hset(revisionKey(set), 'snapshot', encodeSnapshot(plan.state.snapshot));
        else multi.hdel(revisionKey(set), 'snapshot');
        for (const r of plan.records) multi.zadd(historyKey(set), String(r.revision), encodeRecord(r));
        if (plan.records.length) await this.prune(c, multi, set, plan);
        multi.publish(this.channel(c), JSON.stringify(setsOf(configs)));
      } catch (e) {
        await c.unwatch().catch(() => undefined);
        throw e;
      }
      const result = await multi.exec();
      if (result === null) continue; // a watched key changed: read again
      const failed = result.find(([err]) => err);
      if (failed) throw failed[0];
      return plan;
    }
    throw new StoreUnavailableError(this.store, 'too many concurrent writers; try again', 1);
  }

  /** Retention, inside the MULTI: by count in one command; by age, the oldest AGE_SCAN records looked at now. */
  private async prune(c: Redis, multi: ReturnType<Redis['multi']>, set: string, plan: WritePlan): Promise<void> {
    let through = plan.pruneThrough;
    if (plan.pruneBefore !== undefined) {
      const oldest = await c.zrange(historyKey(set), '0', String(AGE_SCAN - 1));
      for (const text of oldest) {
        const r = decodeRecord(text);
        if (Date.parse(r.time) >= plan.pruneBefore || r.revision >= plan.revision) break;
        through = Math.max(through, r.revision);
      }
    }
    if (through > 0) multi.zremrangebyscore(historyKey(set), '-inf', String(through));
  }

  /** Newest first, in batches, until the page is full. */
  async history(c: Redis, q: CheckedQuery): Promise<HistoryPage> {
    const pager = new HistoryPager(q);
    let before = q.before;
    let more = true;
    while (more && !pager.done) {
      const batch = Math.max(200, q.limit + 1);
      const max = Number.isFinite(before) ? `(${before}` : '+inf';
      const texts = await c.zrevrangebyscore(historyKey(q.set), max, '-inf', 'LIMIT', 0, batch);
      const records = texts.map(decodeRecord);
      let i = 0;
      for (; i < records.length && !pager.done; i++) pager.add(records[i]!);
      more = i < records.length || records.length === batch;
      before = records.at(-1)?.revision ?? 0;
    }
    return pager.page(more);
  }
}
