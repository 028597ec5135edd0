/**
 * Entity tags of `POST /export` answers and the conditional answers made with them: a 200 carries the ETag of its
 * exact bytes, and a request whose `If-None-Match` names it gets 304 without a body (docs/server.md, "Watching for
 * changes"). Used by plain requests (../http/routes/export.ts) and by every kind of watcher.
 */
import { createHash } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { PROBLEM_CONTENT_TYPE } from '../http/problem.js';

/** A strong entity tag of an answer: a digest of its exact bytes. */
export function etagOf(body: string): string {
  return `"${createHash('sha256').update(body, 'utf8').digest('base64url')}"`;
}

/** `If-None-Match` (a list of tags, or `*`) matches `etag`, by the weak comparison RFC 9110 prescribes for it. */
export function noneMatchHits(header: string | undefined, etag: string): boolean {
  if (typeof header !== 'string' || header === '') return false;
  if (header.trim() === '*') return true;
  const opaque = etag.replace(/^W\//, '');
  return header.split(',').some((t) => t.trim().replace(/^W\//, '') === opaque);
}

/** Answer a 200 with its ETag, or 304 without a body when `If-None-Match` names it. */
export function sendAnswer(request: FastifyRequest, reply: FastifyReply, body: string | Buffer, etag: string, backupStores: readonly string[]): FastifyReply {
  if (backupStores.length) reply.header('x-configu-backup', headerSafe(backupStores));
  reply.header('cache-control', 'no-store');
  reply.header('etag', etag);
  if (noneMatchHits(request.headers['if-none-match'], etag)) return reply.code(304).send();
  reply.type('application/json; charset=utf-8');
  return reply.send(body);
}

/** A header-safe rendering of store names (names come from the operator's file, but be strict anyway). */
export const headerSafe = (names: readonly string[]): string =>
  names.map((n) => (/^[\x21-\x7e]+$/.test(n) && !n.includes(',') ? n : encodeURIComponent(n))).join(', ');

/** A problem answer whose body is already JSON text (a watcher's answer is kept as text). */
export function sendProblemText(reply: FastifyReply, status: number, text: string, headers: Record<string, string>): FastifyReply {
  reply.code(status).type(PROBLEM_CONTENT_TYPE).headers(headers);
  return reply.send(text);
}
