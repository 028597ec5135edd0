/**
 * The audit log: one line per request to a route that reads values (POST /export: plain, streamed or long-polled;
 * POST /explain; the write routes; the change streams of GET /changes), whatever its outcome, saying who asked (the
 * credential's name, the JWT's `sub`, `preshared:<n>` for the n-th preshared key, null without authentication), from
 * where, for which store and set of each command, how many keys were answered and the status. Never a value, an override, a token or a message: the line is built from the
 * command's store and set only.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { pino, type Logger } from 'pino';
import { stdoutDestination } from '../observe/logger.js';
import type { EvalCommandInput, StoreResolver } from '../../core/index.js';
import type { LookupAudit, WriteAudit } from '../http/request-state.js';
import type { AuditSettings } from './access-settings.js';
import { ANONYMOUS } from './credentials.js';

export interface AuditRecord {
  requestId: string;
  subject: string | null;
  /** `preshared`, `credential`, `jwt` or `anonymous`; null when authentication failed. */
  auth: string | null;
  client: string;
  commands: Array<{ store: string | null; set: string }>;
  keys: number;
  status: number;
  /** Why authentication failed (401 only). */
  reason?: string;
  /** The request asked for an explanation (POST /explain), which answers the values of every command's keys. */
  explain?: true;
  /** A watch request: an SSE stream, or a long poll that was held. */
  watch?: 'stream' | 'poll';
  /** A stream: how many answer events it delivered. */
  events?: number;
  /** A stream: how long it was open, in ms. */
  ms?: number;
  /**
   * Why the request ended otherwise than with an answer its client read: `client` (it hung up; a stream: it closed
   * the stream), `shutdown`, `slow_client`, or its credential (`expired`, `revoked`, `scope`).
   */
  ended?: string;
  /** A write route (POST /upsert, POST /rollback, GET /history): the store, set, number of keys, dry run, outcome. */
  write?: WriteAudit;
  /** GET /session, GET /stores, GET /sets: the route, the store and what the answer listed. */
  lookup?: LookupAudit;
  /** A change stream (GET /changes): the store it follows (as asked for, until the route resolved it). */
  changes?: { store: string | null };
}

/** The audit destination: a file of its own, or the server's logger, or stdout. */
export function createAuditLogger(settings: AuditSettings, serverLogger: Logger | false | undefined): Logger | undefined {
  if (!settings.enabled) return undefined;
  const options = {
    level: 'info',
    base: { pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label: string) => ({ level: label }) },
  };
  if (settings.file) return pino(options, pino.destination({ dest: settings.file, mkdir: true, sync: false }));
  // A server built without a logger, or with a silent one (tests, embedding), writes no audit line unless it has a file of its own.
  if (serverLogger === false || serverLogger?.level === 'silent') return undefined;
  // The server log's writer (so the lines keep their order), through a logger of the audit's own: the audit follows
  // neither log.enabled nor SIGUSR2, which switch the server logger's level (a pino child would follow it).
  const stream = serverLogger ? (serverLogger as unknown as Record<symbol, pino.DestinationStream | undefined>)[pino.symbols.streamSym] : undefined;
  // Without a server logger: stdout, through the server log's asynchronous writer.
  return pino(options, stream ?? stdoutDestination());
}

export const MAX_AUDITED_COMMANDS = 100;

/** The default store's name, or undefined when there is none (fixed for a registry's life: read once per server). */
export function defaultStoreName(registry: StoreResolver): string | undefined {
  try {
    return registry.resolve(undefined).name;
  } catch {
    return undefined;
  }
}

/** The store and set of each command, as far as the body says (the store a command without one reads: the default). */
export function auditCommands(body: unknown, defaultStore: string | undefined): AuditRecord['commands'] {
  // POST /matrix: its store at each given set, or at its prefix.
  if (body && typeof body === 'object' && !Array.isArray(body)) {
    const m = body as { store?: unknown; sets?: unknown; prefix?: unknown };
    const sets = Array.isArray(m.sets) ? m.sets : typeof m.prefix === 'string' ? [m.prefix] : [];
    return auditCommands(sets.map((set: unknown) => ({ store: m.store, set })), defaultStore);
  }
  if (!Array.isArray(body)) return [];
  // A pipeline refused for its size (413) may be long: the line lists its first commands only.
  return body.slice(0, MAX_AUDITED_COMMANDS).map((c: Partial<EvalCommandInput> | null) => {
    const store = c && typeof c.store === 'string' ? c.store.slice(0, 200) : defaultStore ?? null;
    const set = c && typeof c.set === 'string' ? c.set.trim().replace(/^\/|\/$/g, '').slice(0, 500) : '';
    return { store, set };
  });
}

export interface AuditHooksOptions {
  auditLogger: Logger;
  /** Authentication is on (a request without a principal is then one that failed it). */
  authOn: () => boolean;
  defaultStore: string | undefined;
}

/**
 * The audit: one line per request routed to a route marked `config: { audit: true }`, whatever its path's spelling
 * (the route that served it decides, not the URL's text) and whatever its outcome. Written once (a per-request flag),
 * at the first of: the response sent (onResponse), or the raw response closing before that (the client hung up: status
 * 499, `ended: "client"`; a stream ended: its events, keys and why it ended). Installed before authentication, so a
 * request refused there, or whose client hangs up while it is checked, has its line too.
 */
export const auditHooks = fp<AuditHooksOptions>(async (app, { auditLogger, authOn, defaultStore }) => {
  const write = (request: FastifyRequest, reply: FastifyReply, closedEarly: boolean): void => {
    if (request.cfguAudited) return;
    request.cfguAudited = true;
    auditLogger.info(auditRecord(request, reply, closedEarly, authOn(), defaultStore), 'audit');
  };
  app.addHook('onRequest', (request, reply, done) => {
    if (request.routeOptions.config.audit) {
      request.cfguAuditClient = request.ip;
      const raw = reply.raw;
      raw.once('close', () => write(request, reply, !raw.writableFinished));
    }
    done();
  });
  app.addHook('onResponse', (request, reply, done) => {
    if (request.routeOptions.config.audit) write(request, reply, false);
    done();
  });
});

/** The audit line of a request. */
function auditRecord(request: FastifyRequest, reply: FastifyReply, closedEarly: boolean, authOn: boolean, defaultStore: string | undefined): AuditRecord {
  const principal = request.cfguPrincipal ?? (authOn ? null : ANONYMOUS);
  const watch = request.cfguWatch;
  const stream = watch?.kind === 'stream';
  // A stream's status is the 200 it opened with; a request whose client hung up before its answer: 499.
  const status = stream ? 200 : closedEarly ? 499 : reply.statusCode;
  const ended = stream ? (watch.ended ?? 'client') : closedEarly ? 'client' : watch?.ended;
  return {
    requestId: request.id,
    subject: principal?.subject ?? null,
    auth: principal?.kind ?? null,
    client: request.cfguAuditClient,
    commands: auditCommands(request.body, defaultStore),
    keys: stream ? watch.keys : status === 200 ? request.cfguKeys : 0,
    status,
    ...(request.cfguAuthFailure ? { reason: request.cfguAuthFailure } : {}),
    ...(request.routeOptions.config.audit === 'explain' ? { explain: true as const } : {}),
    ...(watch ? { watch: watch.kind } : {}),
    ...(stream ? { events: watch.events, ms: Math.round(performance.now() - watch.opened) } : {}),
    ...(ended ? { ended } : {}),
    ...(request.cfguWrite ? { write: request.cfguWrite } : {}),
    ...(request.cfguLookup ? { lookup: request.cfguLookup } : {}),
    ...(request.cfguChanges ? { changes: request.cfguChanges } : {}),
  };
}
