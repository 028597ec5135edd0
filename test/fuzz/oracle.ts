/**
 * The fuzzer's oracle, shared by the `npm test` campaign and `scripts/fuzz.mjs`. An answer fails when:
 * - there is none (timeout, reset) or its status is 500 or a status docs/server.md does not document;
 * - it is an error that is not `application/problem+json` with the same `status` in the body;
 * - it holds a stack frame, a server path, another request's canary or a store value nobody asked for;
 * - the same request gets a different answer at another time or after other requests (compared by `sameAnswer`).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CANARY_PATTERN, type FuzzCase } from './generator.js';

export interface Answer {
  /** Client-side failure: no answer (timeout, reset) or a request node's client refused to send. */
  error?: string;
  /** The client could not even send the request (not the server's fault). */
  clientError?: boolean;
  status: number;
  contentType: string;
  headers: Record<string, string>;
  body: string;
  /** Further responses on the same raw connection (pipelined garbage). */
  more?: Answer[];
  ms: number;
}

export interface Finding {
  check: string;
  index: number;
  family: string;
  message: string;
  /** Index of a case whose answer this one was compared with (nondeterminism), if any. */
  related?: string;
}

/** Written into the fixture store under keys no generated request names: seeing it in an answer is a leak. */
export const STORE_CANARY = 'vaultsecretq7x9k2';

/** The statuses docs/server.md documents: its error table, plus 200. Read from the docs so the two cannot drift. */
export function documentedStatuses(root: string): Set<number> {
  const text = readFileSync(join(root, 'docs', 'server.md'), 'utf8');
  const section = text.slice(text.indexOf('## Errors'), text.indexOf('\n## ', text.indexOf('## Errors') + 5));
  const statuses = new Set<number>([200]);
  for (const line of section.split('\n')) {
    const cells = line.split('|').map((c) => c.trim());
    // | Condition | Status | type | detail |: the status cell starts with the code
    const m = /^(\d{3})\b/.exec(cells[2] ?? '');
    if (m) statuses.add(Number(m[1]));
  }
  return statuses;
}

const STACK = /(?: {4}at |\\n\s+at )\S/;
const PATHS = /(?:file:\/\/|node_modules|(?<![\w.])\/(?:tmp|home|root|usr|work|srv|opt|var|proc|etc|app|dev)\/[\w.@%+-]+|\.(?:ts|js|mjs|cjs):\d+)/g;

export interface OracleContext {
  statuses: Set<number>;
  /** Folders of the server under test (repository, fixture): never named in an answer. */
  secretsPaths: string[];
}

function requestText(c: FuzzCase): string {
  return `${c.path ?? ''} ${c.body ?? ''} ${c.raw ? Buffer.from(c.raw, 'base64').toString('latin1') : ''} ${JSON.stringify(c.headers ?? {})}`;
}

/** Every single-answer check. */
export function checkAnswer(c: FuzzCase, a: Answer, ctx: OracleContext): Finding[] {
  const out: Finding[] = [];
  const add = (check: string, message: string) => out.push({ check, index: c.index, family: c.family, message });
  if (a.clientError) return out;
  if (a.error) {
    add(/timeout/.test(a.error) ? 'no-answer-timeout' : 'no-answer-reset', a.error);
    return out;
  }
  if (c.expect && !c.expect.status.includes(a.status)) add('expectation', `${a.status} where ${c.expect.status.join(' or ')} is right (${c.expect.why}): ${a.body.slice(0, 200)}`);
  const mine = requestText(c);
  for (const r of [a, ...(a.more ?? [])]) {
    if (r.status === 500) add('status-500', `500: ${r.body.slice(0, 200)}`);
    else if (!ctx.statuses.has(r.status)) add('status-undocumented', `status ${r.status} is not in docs/server.md: ${r.body.slice(0, 200)}`);
    const head = c.method === 'HEAD';
    const readyDown = r.status === 503 && r.body === '' && /^\/ready/.test(c.path ?? '');
    if (r.status >= 400 && !readyDown) {
      if (!/^application\/problem\+json/.test(r.contentType)) add('not-problem-json', `${r.status} answered as "${r.contentType}": ${r.body.slice(0, 200)}`);
      else if (!head) {
        let p: Record<string, unknown> | undefined;
        try {
          p = JSON.parse(r.body);
        } catch {
          add('not-problem-json', `${r.status} problem body is not JSON: ${r.body.slice(0, 200)}`);
        }
        if (p) {
          for (const f of ['type', 'title', 'status', 'detail']) if (!(f in p)) add('problem-shape', `${r.status} problem without "${f}": ${r.body.slice(0, 200)}`);
          if ('status' in p && p.status !== r.status) add('problem-status', `HTTP ${r.status} but problem status ${String(p.status)}`);
        }
      }
    }
    const text = `${JSON.stringify(r.headers)}\n${r.body}`;
    if (STACK.test(r.body)) add('stack', `a stack frame in the answer: ${excerpt(r.body, STACK)}`);
    for (const m of text.matchAll(PATHS)) if (!mine.includes(m[0])) add('path', `a server path in the answer: ${m[0]}`);
    for (const p of ctx.secretsPaths) if (p && text.includes(p) && !mine.includes(p)) add('path', `the server's folder in the answer: ${p}`);
    const own = c.canary.toLowerCase();
    for (const m of text.matchAll(CANARY_PATTERN)) if (m[0].toLowerCase() !== own) add('canary-leak', `another request's secret in the answer: ${m[0]} (case ${parseCanary(m[0])})`);
    if (text.toLowerCase().includes(STORE_CANARY)) add('store-canary', 'a store value no request named is in the answer');
  }
  // one finding per check per answer: the first message is enough to group and replay
  const seen = new Set<string>();
  return out.filter((f) => !seen.has(f.check) && !!seen.add(f.check));
}

function excerpt(text: string, re: RegExp): string {
  const i = text.search(re);
  return text.slice(Math.max(0, i - 60), i + 100);
}

/** `cnry<seed>q<index>q...` -> the index of the case it was planted by (base 36 in the text). */
export function parseCanary(canary: string): string {
  const parts = canary.toLowerCase().split('q');
  return parts[1] !== undefined ? String(parseInt(parts[1], 36)) : '?';
}

/** What must be identical between two answers to the same request: status, content type, body (volatile fields out). */
export function normalizeAnswer(a: Answer): string {
  if (a.clientError || a.error) return `error:${a.error ?? 'client'}`;
  const one = (r: Answer) =>
    `${r.status} ${r.contentType.replace(/\s+/g, '')}\n${r.body.replace(/"uptime":[0-9.e+-]+/g, '"uptime":0').replace(/"requestId":"[^"]*"/g, '"requestId":""')}`;
  return [a, ...(a.more ?? [])].map(one).join('\n--\n');
}

export const sameAnswer = (a: Answer, b: Answer) => normalizeAnswer(a) === normalizeAnswer(b);

/** A 503 with Retry-After says "ask again later"; the determinism check asks again before comparing. */
export const isRetryLater = (a: Answer) => a.status === 503 && 'retry-after' in a.headers;
