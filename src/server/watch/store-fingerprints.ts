/**
 * What the change streams of a store without a change feed compare (./store-streams.ts): at each tick of the store's
 * periodic re-check (every `watch.pollMs`), a digest of every set's keys and values, from one listing of the whole
 * store (ResolvedStore.list, bounded by its default limits: 1000 sets, 100,000 keys) and one read of what it lists. The
 * sets whose digest moved (written, added or emptied) make one notice; a look that finds nothing moved says nothing.
 * A store that cannot be listed or read is an outage: one error (the 503 store-unavailable problem), and the first
 * look that succeeds after it a notice "any set". A store without a listing is never compared: only the feeds of the
 * other kinds announce its changes. Values are only hashed here, never kept or sent.
 */
import { createHash } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import { StoreUnavailableError } from '../../core/errors.js';
import type { ChangeNotice, ResolvedStore, SetListing } from '../../core/ports.js';
import { problemState, type ProblemState } from './state.js';

/** Where a look's findings go. */
export interface FingerprintSink {
  change(notice: ChangeNotice): void;
  error(state: ProblemState): void;
}

export class SetFingerprints {
  /** Settles once the first look (the baseline later looks compare with) is over, whatever it found. */
  readonly ready: Promise<void>;
  private last: Map<string, string> | undefined;
  /** The problem of the outage while it lasts. */
  private down: ProblemState | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;

  constructor(
    private readonly store: ResolvedStore,
    private readonly sink: FingerprintSink,
    private readonly log: FastifyBaseLogger,
  ) {
    this.ready = this.look();
  }

  /** Look now, unless a look is running (then that one answers). Never rejects. */
  look(): Promise<void> {
    this.running ??= this.compare().finally(() => (this.running = undefined));
    return this.running;
  }

  /** The problem of the store's outage while it lasts, else undefined. */
  get outage(): ProblemState | undefined {
    return this.down;
  }

  stop(): void {
    this.stopped = true;
  }

  private async compare(): Promise<void> {
    const store = this.store;
    const list = store.list ? (prefix: string) => store.list!(prefix) : undefined;
    if (!list || this.stopped) return;
    let now: Map<string, string>;
    try {
      now = await digests(store, await list(''));
    } catch (e) {
      if (this.stopped || this.down) return;
      const error = e instanceof StoreUnavailableError ? e : new StoreUnavailableError(store.name, (e as Error)?.message ?? String(e));
      this.down = problemState(this.log, error, 'store change check failed');
      this.sink.error(this.down);
      return;
    }
    const before = this.last;
    this.last = now;
    if (this.stopped) return;
    if (this.down) {
      this.down = undefined;
      this.sink.change({}); // back after an outage: anything may have changed meanwhile
      return;
    }
    if (!before) return; // the baseline
    const sets: string[] = [];
    for (const [set, digest] of now) if (before.get(set) !== digest) sets.push(set);
    for (const set of before.keys()) if (!now.has(set)) sets.push(set);
    if (sets.length) this.sink.change({ sets });
  }
}

/** Set -> a digest of its keys and values (the listing's sets, read in one batch). */
async function digests(store: ResolvedStore, listing: SetListing): Promise<Map<string, string>> {
  const queries = listing.sets.flatMap((s) => s.keys.map((key) => ({ set: s.set, key })));
  const { configs, fromBackup } = queries.length ? await store.read(queries) : { configs: [], fromBackup: false };
  if (fromBackup) throw new StoreUnavailableError(store.name, 'only its backup answered');
  const bySet = new Map<string, Array<[string, string]>>();
  for (const c of configs) {
    if (c.value === '') continue;
    let entries = bySet.get(c.set);
    if (!entries) bySet.set(c.set, (entries = []));
    entries.push([c.key, c.value]);
  }
  const out = new Map<string, string>();
  for (const [set, entries] of bySet) {
    entries.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
    out.set(set, createHash('sha256').update(JSON.stringify(entries)).digest('base64url'));
  }
  return out;
}
