/**
 * One watched pipeline of one client: its commands, the sets of each store it reads, its current answer, and the
 * streams and long polls waiting on it. It is evaluated once at first, then once per change notice that concerns
 * it (notices within `debounceMs` coalesced); each new answer goes to the watchers that have not seen it.
 */
import { Debouncer, exportPipelineJson, setsRead } from '../../core/index.js';
import type { EvalCommandInput } from '../../core/types.js';
import { schemaNamesOf, type WireCommand } from '../schemas/resolve.js';
import type { StoreResolver } from '../../core/ports.js';
import type { ServerSettings } from '../process/settings.js';
import { answerState, markOf, type Poll, type ProblemState, type State, type Stream } from './state.js';

/** What a pipeline needs of the hub that keeps it (../watch/hub.ts). */
export interface PipelineOwner {
  readonly registry: StoreResolver;
  readonly settings: ServerSettings;
  readonly stats: { evaluations: number };
  readonly closed: boolean;
  evaluate(commands: readonly WireCommand[], client: string, watchers: number): ReturnType<typeof exportPipelineJson>;
  problemState(e: unknown, message: string): ProblemState;
  /** A pipeline's answer went from `before` to `after` (undefined: none). */
  held(before: State | undefined, after: State | undefined): void;
  /** Send `state` to a stream once its credential is checked again. */
  deliver(s: Stream, state: State): void;
}

export class Pipeline {
  state: State | undefined;
  first: Promise<void>;
  readonly streams = new Set<Stream>();
  readonly polls = new Set<Poll>();
  /** Store name -> the sets of it this pipeline reads (each command's set and its ancestors). */
  readonly reads: Map<string, Set<string>>;
  /** The names of the server's schemas the pipeline names (a change of one re-evaluates it). */
  readonly schemaNames: ReadonlySet<string>;
  readonly debouncer: Debouncer;

  constructor(
    readonly hub: PipelineOwner,
    readonly key: string,
    readonly commands: WireCommand[],
    readonly client: string,
  ) {
    // Stores and sets are read from the commands as they came (a schema name changes neither).
    this.reads = setsRead(commands as EvalCommandInput[], hub.registry);
    this.schemaNames = schemaNamesOf(commands);
    this.debouncer = new Debouncer(() => this.evaluate(), hub.settings.watch.debounceMs);
    this.first = this.debouncer.run();
  }

  get watchers(): number {
    return this.streams.size + this.polls.size;
  }

  private async evaluate(): Promise<void> {
    this.hub.stats.evaluations++;
    let state: State;
    try {
      const { text: body, keys, backupStores } = await this.hub.evaluate(this.commands, this.client, this.watchers);
      state = answerState(body, keys, backupStores);
    } catch (e) {
      state = this.hub.problemState(e, 'watched pipeline evaluation failed');
    }
    if (!this.hub.closed) this.publish(state);
  }

  /** Make `state` current and tell every watcher that has not seen it yet. */
  publish(state: State): void {
    this.hub.held(this.state, state);
    this.state = state;
    this.tell(state);
    for (const p of [...this.polls]) {
      if (state.kind === 'answer' && p.tag === state.etag) continue;
      p.finish(state);
    }
  }

  /**
   * Send `state` to every stream that has not seen it last. A feed error (the store is down) goes to the streams only:
   * it is no answer, so it does not change `state` or answer long polls.
   */
  tell(state: State): void {
    if (!this.streams.size) return;
    const mark = markOf(state);
    for (const s of this.streams) {
      if (s.last === mark) continue;
      s.last = mark;
      // Each delivery checks the stream's credential first (../access/watch-credentials.ts).
      this.hub.deliver(s, state);
    }
  }

  stop(): void {
    this.debouncer.stop();
  }
}
