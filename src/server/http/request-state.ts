/**
 * What the app hangs on Fastify's objects, with its types: `app.cfgu` (the lifecycle, the settings, the watch hub and
 * the credentials' reload) and the fields every request carries (who it is for, what its audit line says). Declared
 * at the root, so that every route plugin and hook sees them.
 */
import fp from 'fastify-plugin';
import type { Principal } from '../access/scopes.js';
import type { KeyLabels } from '../access/key-labels.js';
import type { Lifecycle } from '../process/lifecycle.js';
import type { ServerSettings } from '../process/settings.js';
import type { WatchHub } from '../watch/hub.js';
import { answerConnect, answerExpectation } from './client-errors.js';

export interface CfguState {
  lifecycle: Lifecycle;
  settings: ServerSettings;
  watch: WatchHub;
  /**
   * Replace the credentials (preshared keys, scoped tokens, JWT settings) without a restart: new requests use
   * them at once, and every open stream and held long poll is checked against them now (one whose credential is
   * gone or out of scope ends). Authentication must stay on. Throws ConfigurationError for unusable settings.
   */
  replaceCredentials(auth: ServerSettings['auth'], keyLabels?: KeyLabels): void;
}

declare module 'fastify' {
  interface FastifyInstance {
    cfgu: CfguState;
  }
  interface FastifyRequest {
    /** Who the request is for (set by authentication; null until then, or when it failed). */
    cfguPrincipal: Principal | null;
    /** Why authentication failed (for the audit line). */
    cfguAuthFailure: string | null;
    /** How many keys the export answered (POST /explain: how many key explanations). */
    cfguKeys: number;
    /** The request's audit line is written (once per request). */
    cfguAudited: boolean;
    /** The client's address as the request arrived (a socket the client closed has none any more). */
    cfguAuditClient: string;
    /** A write route's request, for its audit line (never a value). */
    cfguWrite: WriteAudit | null;
    /** A request to GET /session, /stores or /sets, for its audit line. */
    cfguLookup: LookupAudit | null;
    /** A change stream's request (GET /changes), for its audit line: the store it follows. */
    cfguChanges: { store: string | null } | null;
  }
  interface FastifyContextConfig {
    /**
     * The route reads values: every request routed to it leaves exactly one audit line. `'explain'`: the line says
     * the request asked for an explanation (POST /explain).
     */
    audit?: boolean | 'explain';
  }
}

/**
 * `app.cfgu`, the request fields, and the server's answers to what Node handles before Fastify (`Expect` other than
 * 100-continue, CONNECT). The watch hub closes with the app (its streams ended first).
 */
export const requestState = fp<{ state: CfguState }>(async (app, { state }) => {
  app.decorate('cfgu', state);
  // Closing the app ends its streams and answers its held long polls first (as a shutdown's drain does): the server
  // waits for every open connection before it closes, and a stream's would never end by itself.
  app.addHook('preClose', (done) => {
    state.watch.drain();
    done();
  });
  app.addHook('onClose', () => state.watch.close());
  app.server.on('checkExpectation', answerExpectation);
  app.server.on('connect', answerConnect);
  app.decorateRequest('cfguPrincipal', null);
  app.decorateRequest('cfguAuthFailure', null);
  app.decorateRequest('cfguKeys', 0);
  app.decorateRequest('cfguAudited', false);
  app.decorateRequest('cfguAuditClient', '');
  app.decorateRequest('cfguWatch', null);
  app.decorateRequest('cfguWrite', null);
  app.decorateRequest('cfguLookup', null);
  app.decorateRequest('cfguChanges', null);
});

/** What the audit line of a write route says of the request: never a value. */
export interface WriteAudit {
  route: 'upsert' | 'rollback' | 'history';
  store: string | null;
  set: string;
  /** How many keys the request names (upsert: its values; rollback: its `keys`, 0 for all). */
  keys: number;
  dryRun: boolean;
  /** `written`, `unchanged`, `dry-run`, `read` (history), or `refused` (the status says why). */
  outcome: string;
}

/** What the audit line of GET /session, GET /stores or GET /sets says of the request: names and counts only. */
export interface LookupAudit {
  route: 'session' | 'stores' | 'sets';
  /** GET /sets: the store asked for (the default store's name when none was given; null when there is none). */
  store?: string | null;
  /** GET /stores: how many stores the answer listed; GET /sets: how many sets. */
  listed?: number;
  /** GET /sets: how many sets the caller's scope left out. */
  withheld?: number;
}
