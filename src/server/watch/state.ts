/**
 * What watchers are told, and what is kept of it. A pipeline's current answer is kept once, as the UTF-8 bytes of
 * its SSE event (`id: <tag>\ndata: <answer>\n\n`), which every stream writes as is (a socket that cannot take it at
 * once holds a reference, not a copy), and from which a long poll answers the `<answer>` slice. Also here: what the
 * audit line of a watch request says about it (`request.cfguWatch`), and the records of a stream and of a long poll.
 */
import type { FastifyBaseLogger, FastifyReply } from 'fastify';
import type { CredentialVerdict, WatchCredential } from '../access/watch-credentials.js';
import { toProblem } from '../http/problem.js';
import type { WatchEndReason } from '../observe/observation.js';
import { etagOf } from './etags.js';

/** What the audit line of a watch request says about the watch (set by the hub, read by the app's audit). */
export interface WatchRecord {
  kind: 'stream' | 'poll';
  /** Answer events a stream delivered (error events and comments not counted). */
  events: number;
  /** Keys of the last answer a stream delivered. */
  keys: number;
  /** Why the server ended the watch (unset: answered as usual, or, for a stream, the client went away). */
  ended?: WatchEndReason;
  /** performance.now() when the stream opened. */
  opened: number;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set when the request became a watch (a stream, or a long poll that was held). */
    cfguWatch: WatchRecord | null;
  }
}

/** The current answer of a pipeline (see the module comment), or the problem its evaluation ended with. */
export type State =
  | { kind: 'answer'; frame: Buffer; dataStart: number; etag: string; backupStores: string[]; keys: number }
  | { kind: 'problem'; status: number; text: string; headers: Record<string, string>; error?: unknown; frame: Buffer };

export type AnswerState = Extract<State, { kind: 'answer' }>;
export type ProblemState = Extract<State, { kind: 'problem' }>;

/**
 * The event bytes of each answer in use, by its tag: pipelines of different clients whose evaluations produced the
 * same bytes (the same SHA-256) keep one Buffer between them. Nothing is shared but memory: each client's answer is
 * still its own evaluation, and it gets exactly the bytes that evaluation produced.
 */
const frames = new Map<string, WeakRef<Buffer>>();
const framesFreed = new FinalizationRegistry<string>((etag) => {
  if (frames.get(etag)?.deref() === undefined) frames.delete(etag);
});

export function answerState(body: string, keys: number, backupStores: string[]): AnswerState {
  const etag = etagOf(body);
  const head = `id: ${etag}\ndata: `;
  // Built every time, kept only when no equal one is in use: whether another client holds the same answer does not
  // change the work (or its time) of this evaluation.
  let frame: Buffer = Buffer.from(`${head}${body}\n\n`, 'utf8');
  const kept = frames.get(etag)?.deref();
  if (kept) frame = kept;
  else {
    frames.set(etag, new WeakRef(frame));
    framesFreed.register(frame, etag);
  }
  return { kind: 'answer', frame, dataStart: Buffer.byteLength(head), etag, backupStores, keys };
}

/** The problem state of an error (logged as toProblem says), with its `error` event. */
export function problemState(log: FastifyBaseLogger, e: unknown, message: string): ProblemState {
  const { problem, headers, log: level } = toProblem(e, 'watch');
  if (level === 'error') log.error({ err: e }, message);
  else if (level === 'warn') log.warn({ err: { type: (e as Error)?.name, message: (e as Error)?.message } }, message);
  const text = JSON.stringify(problem);
  return { kind: 'problem', status: problem.status, text, headers: headers ?? {}, error: e, frame: Buffer.from(`event: error\ndata: ${text}\n\n`, 'utf8') };
}

/** The answer's JSON bytes (a view of the event's bytes). */
export const bodyOf = (s: AnswerState): Buffer => s.frame.subarray(s.dataStart, s.frame.length - 2);

/** What a watcher last received: the answer's ETag, or the text of the error event. */
export const markOf = (s: State): string => (s.kind === 'answer' ? s.etag : `problem:${s.text}`);

/** An open SSE stream. */
export interface Stream {
  res: FastifyReply['raw'];
  last: string;
  record: WatchRecord;
  credential: WatchCredential | undefined;
  /** The expiry timer of a credential that expires. */
  timer?: NodeJS.Timeout;
  /** Deliveries waiting for an asynchronous credential check, in order. */
  chain?: Promise<void>;
  closed: boolean;
}

/** How a held long poll ends: a new state, no change (304), or its credential's verdict. */
export type PollOutcome = State | 'unchanged' | CredentialVerdict;

/** A held long poll. */
export interface Poll {
  tag: string;
  record: WatchRecord;
  finish(outcome: PollOutcome): void;
  /** Check the credential again (a reload of the credentials); answers the poll when it no longer admits it. */
  recheck(): void;
}

export const isVerdict = (o: PollOutcome): o is CredentialVerdict => typeof o === 'object' && 'reason' in o;

/** The longest delay setTimeout takes (about 24.8 days); a later expiry re-arms the timer. */
export const MAX_TIMER_MS = 2 ** 31 - 1;
