/**
 * The change streams of `GET /changes?store=S` (../http/routes/changes.ts; docs/server.md, "Watching for changes"):
 * a stream per client that says which sets of one store were written, whatever schema the client shows. Per store,
 * one subscription to the store's change feed (./store-feeds.ts, the same feed the watched pipelines of POST /export
 * use) serves every change stream of that store in the process. What a stream carries:
 *
 *   event: ready    data: {"store":"main"}                      first, at once: subscribed; no change after it is missed
 *   event: change   data: {"store":"main","sets":["prod/eu"]}   the sets written (sorted), or "sets": null: any set may
 *                                                               have changed (the feed cannot tell, or came back)
 *   event: error    data: <problem>                             the store's feed lost its source (503 store-unavailable)
 *   event: end      data: <problem>                             the credential no longer admits the stream (401, 403)
 *   : heartbeat                                                 every watch.heartbeatMs
 *
 * Notices that arrive within `debounceMs` of the first make one event (their sets merged; "any set" takes them all).
 * A scoped principal's event leaves out every set it may not read (no grant covers the store and that set), and an
 * event left without a set is not sent: a set's name never reaches a caller outside its scope. "Any set" goes to every
 * stream. A store without a feed is compared set by set at each of its periodic ticks (./store-fingerprints.ts); its
 * streams get `ready` once the first look is taken.
 */
import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from 'fastify';
import type { ChangeNotice, StoreResolver } from '../../core/ports.js';
import type { Principal } from '../access/scopes.js';
import type { WatchCredential } from '../access/watch-credentials.js';
import { mayReadSet } from '../access/write-access.js';
import type { ProblemState, Stream } from './state.js';
import type { StoreFeeds } from './store-feeds.js';
import { SetFingerprints } from './store-fingerprints.js';
import type { Streams } from './streams.js';

/** Who a change stream is for: its client (the watcher count), its principal, and its credential (auth on). */
export interface ChangeStreamContext {
  client: string;
  principal: Principal;
  credential?: WatchCredential;
}

interface Follower {
  s: Stream;
  /** The principal its events are cut for: the one of the credential's last check. */
  principal: () => Principal;
  /** `ready` was sent (a polled store's first look may still run). */
  ready: boolean;
}

interface Group {
  readonly store: string;
  readonly followers: Set<Follower>;
  unsubscribe: () => void;
  /** The problem of the store's outage while it lasts (its feed's, or its periodic look's). */
  outage: () => ProblemState | undefined;
  /** The sets noticed since the last event; `any` when any set may have changed; undefined: nothing pending. */
  pending: Set<string> | 'any' | undefined;
  timer: NodeJS.Timeout | undefined;
  /** A store without a feed: its sets' digests, compared at each tick. */
  fingerprints: SetFingerprints | undefined;
}

export interface StoreStreamsOptions {
  registry: StoreResolver;
  feeds: StoreFeeds;
  /** The process's event streams (./streams.ts): heartbeats, credential checks, drain, slow clients. */
  streams: Streams;
  debounceMs: number;
  log: FastifyBaseLogger;
}

/** The `change` event of `pending` for a principal, or undefined when it may read none of its sets. */
export function changeFrame(store: string, pending: ReadonlySet<string> | 'any', principal: Principal): string | undefined {
  let sets: string[] | null = null;
  if (pending !== 'any') {
    sets = [...pending].filter((set) => mayReadSet(principal, store, set)).sort();
    if (!sets.length) return undefined;
  }
  return `event: change\ndata: ${JSON.stringify({ store, sets })}\n\n`;
}

export class StoreStreams {
  private readonly groups = new Map<string, Group>();

  constructor(private readonly options: StoreStreamsOptions) {}

  /** Make the request a change stream of `store` (a declared name); `release` runs once it is gone. */
  start(request: FastifyRequest, reply: FastifyReply, store: string, context: ChangeStreamContext, release: () => void): FastifyReply {
    const { streams } = this.options;
    const group = this.groupOf(store);
    const follower: Follower = { s: undefined as unknown as Stream, principal: () => context.credential?.principal ?? context.principal, ready: false };
    follower.s = streams.openStream(request, reply, context.credential, () => {
      group.followers.delete(follower);
      release();
      this.forget(group);
    });
    group.followers.add(follower);
    const ready = () => {
      follower.ready = true;
      streams.write(follower.s, `event: ready\ndata: ${JSON.stringify({ store })}\n\n`);
      // Opened during an outage: told at once, as the streams open before it were.
      const outage = group.outage();
      if (outage) streams.write(follower.s, outage.frame);
    };
    if (group.fingerprints) void group.fingerprints.ready.then(ready);
    else ready();
    return reply;
  }

  private groupOf(store: string): Group {
    let group = this.groups.get(store);
    if (group) return group;
    const g: Group = { store, followers: new Set(), unsubscribe: () => undefined, outage: () => undefined, pending: undefined, timer: undefined, fingerprints: undefined };
    const sink = { change: (notice: ChangeNotice) => this.notice(g, notice), error: (state: ProblemState) => this.error(g, state) };
    const subscription = this.options.feeds.subscribe(store, {
      change: (notice, tick) => (tick ? void g.fingerprints?.look() : sink.change(notice)),
      error: sink.error,
    });
    g.unsubscribe = subscription.unsubscribe;
    g.outage = () => subscription.outage() ?? g.fingerprints?.outage;
    if (subscription.polled) g.fingerprints = new SetFingerprints(this.options.registry.resolve(store), sink, this.options.log);
    this.groups.set(store, (group = g));
    return group;
  }

  /** A notice of the store's feed: merged into the pending event, sent `debounceMs` after the first. */
  private notice(group: Group, notice: ChangeNotice): void {
    if (notice.sets === undefined) group.pending = 'any';
    else if (group.pending !== 'any') {
      const pending: Set<string> = group.pending ?? new Set();
      for (const set of notice.sets) pending.add(set);
      group.pending = pending;
    }
    group.timer ??= setTimeout(() => this.flush(group), this.options.debounceMs);
  }

  /** Send the pending event to every stream of the group, cut for its principal once its credential is checked again. */
  private flush(group: Group): void {
    const pending = group.pending;
    group.pending = undefined;
    group.timer = undefined;
    if (!pending) return;
    const { streams } = this.options;
    for (const f of group.followers) {
      if (!f.ready) continue;
      streams.guarded(f.s, () => {
        const frame = changeFrame(group.store, pending, f.principal());
        if (frame && streams.write(f.s, frame)) f.s.record.events++;
      });
    }
  }

  /** The store's feed lost its source: every stream gets the problem at once (once per outage). */
  private error(group: Group, state: ProblemState): void {
    const { streams } = this.options;
    for (const f of group.followers) if (f.ready) streams.guarded(f.s, () => void streams.write(f.s, state.frame));
  }

  /** Drop a group nobody follows any more, with its subscription. */
  private forget(group: Group): void {
    if (group.followers.size || this.groups.get(group.store) !== group) return;
    this.groups.delete(group.store);
    if (group.timer) clearTimeout(group.timer);
    group.fingerprints?.stop();
    group.unsubscribe();
  }

  /** Stop every group (the hub closes; its streams were ended already). */
  close(): void {
    for (const group of [...this.groups.values()]) {
      if (group.timer) clearTimeout(group.timer);
      group.fingerprints?.stop();
      group.unsubscribe();
    }
    this.groups.clear();
  }
}
