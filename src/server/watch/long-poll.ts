/**
 * Long polls of `POST /export` (`Prefer: wait=N` with `If-None-Match`): answered at once when the current answer
 * differs from the client's tag; else held until it does (200 with the new answer), until N seconds pass (304), until
 * shutdown (304), or until the request's credential no longer admits it (401 or 403, the answer a plain request
 * would get; a JWT's expiry answers at that instant). A new answer goes out only if the credential still admits it.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { CredentialVerdict, WatchCredential } from '../access/watch-credentials.js';
import { noneMatchHits, sendAnswer, sendProblemText } from './etags.js';
import type { Pipeline } from './pipeline.js';
import { bodyOf, isVerdict, MAX_TIMER_MS, type Poll, type PollOutcome, type State, type WatchRecord } from './state.js';

/** `Prefer: wait=N` (RFC 7240) in seconds, cut to `max`; undefined when absent or malformed. */
export function preferredWait(prefer: string | string[] | undefined, max: number): number | undefined {
  const text = Array.isArray(prefer) ? prefer.join(',') : prefer;
  if (typeof text !== 'string') return undefined;
  for (const part of text.split(',')) {
    const m = /^\s*wait\s*=\s*"?(\d{1,10})"?\s*(;.*)?$/i.exec(part);
    if (m) return Math.min(Number(m[1]), max);
  }
  return undefined;
}

export interface HoldInput {
  request: FastifyRequest;
  reply: FastifyReply;
  pipeline: Pipeline;
  /** The pipeline's current state. */
  state: State;
  /** Seconds to hold at most. */
  wait: number;
  credential: WatchCredential | undefined;
  /** The watcher is gone (answered): release its place and drop the pipeline if nobody else watches it. */
  done: () => void;
}

/** Hold a long poll until the answer differs from the client's tag, or `wait` seconds pass; resolves once answered. */
export function holdPoll(input: HoldInput): Promise<void> {
  const { request, reply, pipeline, state, wait, credential, done } = input;
  const tag = String(request.headers['if-none-match']);
  if (state.kind === 'answer' && !noneMatchHits(tag, state.etag)) {
    done();
    request.cfguKeys = state.keys;
    sendAnswer(request, reply, bodyOf(state), state.etag, state.backupStores);
    return Promise.resolve();
  }
  const record: WatchRecord = { kind: 'poll', events: 0, keys: 0, opened: performance.now() };
  request.cfguWatch = record;
  return new Promise<void>((resolve) => {
    const answer = (outcome: PollOutcome): void => {
      answerPoll(request, reply, state, record, outcome);
      resolve();
    };
    const poll: Poll = {
      tag: state.kind === 'answer' ? state.etag : '',
      record,
      finish: (outcome) => {
        if (!pipeline.polls.delete(poll)) return;
        clearTimeout(timer);
        if (expiry) clearTimeout(expiry);
        done();
        // A new answer (or problem) goes out only if the credential still admits it.
        if (credential && outcome !== 'unchanged' && !isVerdict(outcome)) {
          const v = credential.check();
          if (v instanceof Promise) void v.then((r) => answer(r === true ? outcome : r));
          else answer(v === true ? outcome : v);
          return;
        }
        answer(outcome);
      },
      recheck: () => {
        if (!credential) return;
        const v = credential.check();
        const apply = (r: true | CredentialVerdict) => {
          if (r !== true) poll.finish(r);
        };
        if (v instanceof Promise) void v.then(apply);
        else apply(v);
      },
    };
    const timer = setTimeout(() => poll.finish('unchanged'), wait * 1000);
    // A held poll whose token expires is answered 401 at that instant, as a plain request would be.
    let expiry: NodeJS.Timeout | undefined;
    const at = credential?.expiresAt;
    if (at !== undefined) {
      const arm = (): void => {
        expiry = setTimeout(() => (Date.now() < at ? arm() : poll.finish(credential!.expired())), Math.max(0, Math.min(at - Date.now(), MAX_TIMER_MS)));
      };
      arm();
    }
    pipeline.polls.add(poll);
    reply.raw.once('close', () => poll.finish('unchanged'));
  });
}

/** Answer a held poll: 304 (with the tag it held on), the credential's problem, the new problem, or the new answer. */
function answerPoll(request: FastifyRequest, reply: FastifyReply, held: State, record: WatchRecord, outcome: PollOutcome): void {
  if (outcome === 'unchanged') {
    reply.header('cache-control', 'no-store');
    if (held.kind === 'answer') reply.header('etag', held.etag);
    reply.code(304).send();
  } else if (isVerdict(outcome)) {
    record.ended ??= outcome.reason;
    sendProblemText(reply, outcome.status, outcome.text, outcome.headers);
  } else if (outcome.kind === 'problem') {
    sendProblemText(reply, outcome.status, outcome.text, outcome.headers);
  } else {
    request.cfguKeys = outcome.keys;
    sendAnswer(request, reply, bodyOf(outcome), outcome.etag, outcome.backupStores);
  }
}
