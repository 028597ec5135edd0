/**
 * The watchers of one process, counted for the limits of docs/server.md ("Watching for changes", Limits): at most
 * `maxWatchers` in all (503 beyond), and at most `maxWatchersPerClient` per client identity (429 beyond; one client
 * holding its maximum leaves the rest of the server's watchers to the others). Streams and held long polls of
 * POST /export and the change streams of GET /changes count alike.
 */
import { httpProblem } from '../http/problem.js';

/** A refused watcher: the answer to send. */
export interface Refusal {
  status: number;
  text: string;
  headers: Record<string, string>;
}

export class WatcherSlots {
  /** Watchers (and watchers being set up) per client identity. */
  private readonly perClient = new Map<string, number>();
  private reserved = 0;

  constructor(private readonly settings: { readonly maxWatchers: number; readonly maxWatchersPerClient: number }) {}

  /** Every watcher of the process (and those being set up). */
  get total(): number {
    return this.reserved;
  }

  of(client: string): number {
    return this.perClient.get(client) ?? 0;
  }

  /** A place for a watcher of `client` (its release, idempotent), or the refusal. */
  reserve(client: string): (() => void) | Refusal {
    const max = this.settings.maxWatchers;
    if (this.reserved >= max) {
      const body = httpProblem(503, `this server already serves its maximum of ${max} watchers; retry later or elsewhere`);
      return { status: 503, text: JSON.stringify(body), headers: { 'retry-after': '5' } };
    }
    const perClient = this.settings.maxWatchersPerClient;
    const held = this.of(client);
    if (held >= perClient) {
      const body = httpProblem(429, `this client already holds its maximum of ${perClient} watchers (streams and long polls); close one, or retry later`);
      return { status: 429, text: JSON.stringify(body), headers: { 'retry-after': '5' } };
    }
    this.reserved++;
    this.perClient.set(client, held + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.reserved--;
      const n = this.of(client) - 1;
      if (n > 0) this.perClient.set(client, n);
      else this.perClient.delete(client);
    };
  }
}
