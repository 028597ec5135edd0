/**
 * Parsing a large request body in slices of the event loop. `JSON.parse` is one call that cannot be interrupted: a
 * 400 kB body declaring 10,000 keys took 5-10 ms, a 1 MiB body of 90,000 short declarations about 30 ms, and the
 * loop served nothing else meanwhile. A body longer than LARGE_BODY is parsed here instead, in steps
 * (core/slices.ts): the arrays and objects whose text is longer than LEAF are opened and built member by member, and
 * every value whose text is at most LEAF characters (a declaration, an override, a key name) is parsed by one call of
 * the server's own JSON parser (`leaf`, Fastify's with its prototype-poisoning guard). The outcome is the value
 * `JSON.parse` would make, or the answer the server gives a body that is not JSON or that names a forbidden
 * prototype property (app.ts, jsonParser).
 */
import { STEP, runInSlices, type Steps } from '../../../core/slices.js';

/** Bodies longer than this (characters) are parsed in steps; a shorter one takes at most about a millisecond. */
export const LARGE_BODY = 64 * 1024;

/** Arrays and objects whose text is at most this long are parsed by one call of the leaf parser. */
const LEAF = 4 * 1024;

/** Characters parsed by the leaf parser that count as one unit of work (a member counts one). */
const CHARS_A_UNIT = 32;

/** Why a body was refused: not JSON, or JSON naming a forbidden prototype property (`__proto__`, `constructor.prototype`). */
export class BodyParseError extends Error {
  constructor(readonly kind: 'invalid' | 'forbidden') {
    super(kind === 'invalid' ? 'invalid JSON' : 'forbidden prototype property');
  }
}

const BOM = 0xfeff;
const SPACE = 0x20;
const TAB = 0x09;
const LF = 0x0a;
const CR = 0x0d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;

function skipSpace(text: string, i: number): number {
  for (;;) {
    const c = text.charCodeAt(i);
    if (c !== SPACE && c !== LF && c !== CR && c !== TAB) return i;
    i++;
  }
}

/** Index just after the string that opens at `i` (a quote), or the text's length when it is not closed. */
function stringEnd(text: string, i: number): number {
  const n = text.length;
  for (i++; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === BACKSLASH) i++;
    else if (c === QUOTE) return i + 1;
  }
  return n;
}

/**
 * Index just after the array or object that opens at `i`, if it closes within LEAF characters; -1 when it is longer.
 * Brackets are only counted, not matched: the leaf parser judges the text.
 */
function shortContainerEnd(text: string, i: number): number {
  const n = Math.min(text.length, i + LEAF);
  let depth = 0;
  for (; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) i = stringEnd(text, i) - 1;
    else if (c === OPEN_ARRAY || c === OPEN_OBJECT) depth++;
    else if ((c === CLOSE_ARRAY || c === CLOSE_OBJECT) && --depth === 0) return i + 1;
  }
  return n === text.length ? n : -1;
}

/** Index just after the number or literal (`true`, `false`, `null`) that starts at `i`. */
function scalarEnd(text: string, i: number): number {
  const n = text.length;
  for (; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === COMMA || c === CLOSE_ARRAY || c === CLOSE_OBJECT || c === SPACE || c === LF || c === CR || c === TAB) return i;
  }
  return n;
}

interface Frame {
  /** The array or object being built. */
  value: unknown[] | Record<string, unknown>;
  isArray: boolean;
  /** The key whose value comes next (objects). */
  key: string;
}

/** True when an object has an own `constructor` that is an object with an own `prototype` (what the guard refuses). */
function poisonedConstructor(o: Record<string, unknown>): boolean {
  if (!Object.hasOwn(o, 'constructor')) return false;
  const c = o.constructor;
  return c !== null && typeof c === 'object' && Object.hasOwn(c, 'prototype');
}

/**
 * Parse `text` in steps. `leaf` parses a short text as the server does (throws on anything it refuses). Throws
 * BodyParseError: `invalid` when the text is not JSON; `forbidden` when it is, and names a forbidden property.
 */
export function* parseBodySteps(text: string, leaf: (text: string) => unknown): Steps<unknown> {
  const n = text.length;
  const stack: Frame[] = [];
  let forbidden = false;
  let units = 0;
  const invalid = () => new BodyParseError('invalid');
  /** The leaf parser's value; a text it refuses that JSON.parse accepts named a forbidden property. */
  const parseLeaf = (from: number, to: number): unknown => {
    const part = text.slice(from, to);
    units += part.length / CHARS_A_UNIT;
    // The leaf parser drops a byte order mark that opens its text; JSON allows one only before the whole body.
    if (part.charCodeAt(0) === BOM) throw invalid();
    try {
      return leaf(part);
    } catch {
      try {
        JSON.parse(part);
      } catch {
        throw invalid();
      }
      forbidden = true;
      return null;
    }
  };

  // A byte order mark before the body is dropped, as the server's parser does.
  let i = skipSpace(text, text.charCodeAt(0) === BOM ? 1 : 0);
  // Each turn parses one value at `i`, or opens an array or object; then closes what the value completes.
  for (;;) {
    if (units >= STEP) {
      units = 0;
      yield;
    }
    units++;
    const frame = stack[stack.length - 1];
    if (frame && !frame.isArray) {
      // A member's key, then its colon.
      if (text.charCodeAt(i) !== QUOTE) throw invalid();
      const end = stringEnd(text, i);
      const key = parseLeaf(i, end);
      if (typeof key !== 'string') throw invalid();
      frame.key = key;
      i = skipSpace(text, end);
      if (text.charCodeAt(i) !== COLON) throw invalid();
      i = skipSpace(text, i + 1);
    }
    const c = text.charCodeAt(i);
    let value: unknown;
    if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
      const end = shortContainerEnd(text, i);
      if (end === -1) {
        // Longer than LEAF: built here, member by member.
        const isArray = c === OPEN_ARRAY;
        i = skipSpace(text, i + 1);
        if (text.charCodeAt(i) !== (isArray ? CLOSE_ARRAY : CLOSE_OBJECT)) {
          stack.push({ value: isArray ? [] : {}, isArray, key: '' });
          continue;
        }
        value = isArray ? [] : {};
        i++;
      } else {
        value = parseLeaf(i, end);
        i = end;
      }
    } else if (c === QUOTE) {
      const end = stringEnd(text, i);
      value = parseLeaf(i, end);
      i = end;
    } else {
      const end = scalarEnd(text, i);
      if (end === i) throw invalid();
      value = parseLeaf(i, end);
      i = end;
    }
    // Store the value in its container; close every container it completes.
    for (;;) {
      const top = stack[stack.length - 1];
      i = skipSpace(text, i);
      if (!top) {
        if (i !== n) throw invalid();
        if (forbidden) throw new BodyParseError('forbidden');
        return value;
      }
      if (top.isArray) (top.value as unknown[]).push(value);
      else if (top.key === '__proto__') forbidden = true;
      else (top.value as Record<string, unknown>)[top.key] = value;
      const next = text.charCodeAt(i);
      if (next === COMMA) {
        i = skipSpace(text, i + 1);
        break;
      }
      if (next !== (top.isArray ? CLOSE_ARRAY : CLOSE_OBJECT)) throw invalid();
      i++;
      stack.pop();
      if (!top.isArray && poisonedConstructor(top.value as Record<string, unknown>)) forbidden = true;
      value = top.value;
    }
  }
}

/** A content-type parser as Fastify calls it (its default JSON parser among them). */
type BodyParser = (request: never, body: string, done: (error: Error | null, value?: unknown) => void) => void;

/**
 * Parse a large body in slices of the event loop, each value of at most LEAF characters by `parser` (the server's JSON
 * parser, so that it judges every part as it would the whole). Throws BodyParseError.
 */
export function parseLargeBody(text: string, parser: BodyParser, request: unknown): Promise<unknown> {
  const leaf = (part: string): unknown => {
    let failed: Error | null = null;
    let out: unknown;
    parser(request as never, part, (error, value) => {
      failed = error;
      out = value;
    });
    if (failed) throw failed;
    return out;
  };
  return runInSlices(parseBodySteps(text, leaf));
}
