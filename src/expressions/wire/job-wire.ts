/**
 * The job wire between the pool (host) and a sandbox child: a schema's static half is sent to each child once and
 * named by an id afterwards.
 *
 * A job has two halves. The static half is the command's declarations (`input.schema.keys`), its const templates and
 * its test expressions: schema text only, never a value. The dynamic half is the rest: the store type, the set, and
 * the configs, sent positionally (one entry per declared key, in declaration order) instead of as an object
 * (protocol.ts DynamicHalfJson).
 *
 * - The host interns each static half by its exact JSON text: one id per distinct text, never reused.
 * - Per child, the host remembers (an LRU bounded like the child's: `STATIC_LIMITS` entries and childStaticLimit bytes
 *   of the child's memory limit) which ids that child holds. A job whose id the child
 *   holds goes as one line, `{"t":"j","id":N,"d":[...]}`; otherwise a line `{"t":"s","id":N,"s":[...]}` with the
 *   static half goes first. A new or replaced child starts empty on both sides.
 * - The child keeps the static halves' text in its own LRU with the same bounds, outside the isolate (a renewed
 *   isolate does not lose them). A job naming an id it does not hold is answered `{"t":"unknown","id":N}` without
 *   running; the host forgets the id for that child and sends the job again, static half first.
 * - The child parses nothing: it hands the isolate `{"t":"j","s":<static half>,"d":<dynamic half>}`, which the
 *   isolate decodes (protocol.ts wireJobOf) into the very WireJob the whole-job form gave, so answers do not change.
 *
 * Isolation: the caches hold static halves only (JSON text made from the schema: key names, Cfgu declarations,
 * templates, expressions). Values, origins, the set and the store type travel with every job and are never kept.
 * A job refers to an id only when its own static half has exactly that text.
 *
 * No I/O. Used by the host (host/pool.ts, host/child-handle.ts) and the child (child/main.ts). The two sides stay in
 * one module: they must count and evict the same halves with the same bounds.
 */
import { LRUCache } from 'lru-cache';
import { cacheBudget, estimateStaticBytes, type CacheBudget, type CacheMember } from '../../core/cache-budget.js';
import { isDeepFrozen } from '../../core/frozen.js';
import { encodeJob, type WireJob } from './protocol.js';
import type { ExpressionJob } from '../../core/ports.js';

/** Most entries of every static-half cache (host registry: four times this; host's view of each child; the child's own). */
export const STATIC_LIMITS = { entries: 500 };

/**
 * The bytes a static half takes in a child (its text, one- or two-byte, and the LRU entry): the child and the host's
 * record of the child count with this same function, so they evict the same halves.
 */
export const childStaticBytes = (text: string): number => 2 * text.length + 100;

/**
 * The bytes a child keeps for static halves, from its isolate's memory limit (CONFIGU_EXPRESSION_MEMORY_MB): a
 * quarter of it. The halves live in the child's own heap, outside the isolate; the child's process memory is sized by
 * that same setting (docs/deploy.md), so its caches follow it.
 */
export const childStaticLimit = (memoryMb: number): number => Math.floor((memoryMb * 1024 * 1024) / 4);

/** One interned static half. `text` is `[keys,consts,tests]` as JSON. */
export interface StaticHalf {
  readonly id: number;
  readonly text: string;
  /** Declared key names, in declaration order: the positions of the values. */
  readonly names: readonly string[];
}

/** What the pool keeps of a job: its static half, its dynamic half as JSON text, and what a failure answer needs. */
export interface EncodedJob {
  /** Undefined when the job cannot use the compact form (an input shape other than the engine's): `legacy` is sent. */
  readonly half: StaticHalf | undefined;
  /** `{"t":"j","id":N,"d":[...]` without the closing brace; or the whole legacy line. */
  readonly head: string;
  /** Consts and tests, for failure answers made on the host (protocol.ts failureResponse). */
  readonly job: Pick<WireJob, 'consts' | 'tests'>;
}

const hasOwn = (o: object, k: string): boolean => Object.prototype.hasOwnProperty.call(o, k);

/**
 * JSON text of objects that can never change (deep-frozen by core/frozen.ts), remembered by identity; any other object
 * is stringified each time.
 */
const frozenText = new WeakMap<object, string>();
function textOf(value: object): string {
  let text = frozenText.get(value);
  if (text === undefined) {
    text = JSON.stringify(value);
    if (isDeepFrozen(value)) frozenText.set(value, text);
  }
  return text;
}

/**
 * The host's interned static halves: exact text -> id, counted against the process's cache memory ceiling
 * (core/cache-budget.ts, estimated from the text's length and the names), least recently used evicted first (an
 * evicted text gets a new id if it comes back).
 */
export class StaticRegistry implements CacheMember {
  readonly name = 'static';
  private next = 1;
  private readonly byText = new LRUCache<string, StaticHalf>({ max: STATIC_LIMITS.entries * 4, maxSize: Number.MAX_SAFE_INTEGER });
  readonly unregister: () => void;

  constructor(private readonly budget: CacheBudget = cacheBudget) {
    this.unregister = budget.register(this);
  }

  bytes(): number {
    return this.byText.calculatedSize;
  }

  entries(): number {
    return this.byText.size;
  }

  evictOne(): boolean {
    return this.byText.pop() !== undefined;
  }

  /**
   * The last static half made from each deep-frozen declarations object, with the consts and test items it was made
   * with: a job of the same schema (the engine reuses these objects, src/core/eval.ts) skips building and hashing the
   * text. Identity of deep-frozen objects implies identical text.
   */
  private readonly lastByKeys = new WeakMap<object, { consts: object; tests: readonly object[]; half: StaticHalf }>();

  intern(keys: Record<string, unknown>, consts: ExpressionJob['consts'], tests: ExpressionJob['tests']): StaticHalf {
    const last = this.lastByKeys.get(keys);
    if (last && last.consts === consts && last.tests.length === tests.length && last.tests.every((t, i) => t === tests[i])) return last.half;
    const half = this.internText(keys, consts, tests);
    if (isDeepFrozen(keys) && isDeepFrozen(consts) && tests.every((t) => isDeepFrozen(t))) {
      this.lastByKeys.set(keys, { consts, tests: tests.slice(), half });
    }
    return half;
  }

  private internText(keys: Record<string, unknown>, consts: ExpressionJob['consts'], tests: ExpressionJob['tests']): StaticHalf {
    let testsText = '[';
    for (let i = 0; i < tests.length; i++) testsText += (i ? ',' : '') + textOf(tests[i]!);
    const text = `[${textOf(keys)},${textOf(consts)},${testsText}]]`;
    let half = this.byText.get(text);
    if (!half) {
      half = { id: this.next++, text, names: Object.keys(keys) };
      const size = estimateStaticBytes(text.length, half.names.length);
      if (size <= this.budget.maxEntryBytes) {
        this.byText.set(text, half, { size });
        this.budget.settle();
      }
    }
    return half;
  }

  get size(): number {
    return this.byText.size;
  }

  /** Every static half interned, as text (tests: the isolation check). */
  texts(): string[] {
    return [...this.byText.keys()];
  }
}

/** The input shape the compact form carries: exactly `{ store, set, schema: { keys } }`, in that order. */
function compactInput(input: ExpressionJob['input']): boolean {
  const own = Object.keys(input);
  const isObject = (v: unknown) => v !== null && typeof v === 'object';
  return (
    own.length === 3 &&
    own[0] === 'store' &&
    own[1] === 'set' &&
    own[2] === 'schema' &&
    isObject(input.store) &&
    isObject(input.set) &&
    isObject(input.schema) &&
    Object.keys(input.schema).length === 1 &&
    hasOwn(input.schema, 'keys') &&
    isObject(input.schema.keys)
  );
}

/**
 * Encode a job for the pool. Throws (like JSON.stringify) when something in it cannot be copied. The dynamic half is
 * `[store, set, values, extras, order]`: `values[i]` is the i-th declared key's `[storedValue, origin]` (plus its Cfgu
 * when it is not the declaration's own object, as in protocol.ts), or 0 when the job has no config for it; `extras`
 * are the configs of undeclared keys as `[key, storedValue, origin, cfgu]`; `order` is the configs' key order, sent
 * only when it is not "declared keys, then extras".
 */
export function encodeWire(job: ExpressionJob, registry: StaticRegistry): EncodedJob {
  if (!compactInput(job.input)) {
    const wire = encodeJob(job);
    return { half: undefined, head: JSON.stringify({ t: 'job', job: wire }), job: wire };
  }
  const declared = job.input.schema.keys;
  const half = registry.intern(declared, job.consts, job.tests);
  const configs = job.configs;
  const values: unknown[] = new Array(half.names.length);
  const present: string[] = [];
  for (let i = 0; i < half.names.length; i++) {
    const key = half.names[i]!;
    if (!hasOwn(configs, key)) {
      values[i] = 0;
      continue;
    }
    const v = configs[key]!;
    values[i] = v.cfgu === declared[key] ? [v.storedValue, v.origin] : [v.storedValue, v.origin, v.cfgu];
    present.push(key);
  }
  const keys = Object.keys(configs);
  let extras: unknown = 0;
  let order: unknown = 0;
  if (keys.length !== present.length) {
    const list: unknown[] = [];
    for (const key of keys) {
      if (hasOwn(declared, key)) continue;
      const v = configs[key]!;
      list.push([key, v.storedValue, v.origin, v.cfgu]);
      present.push(key);
    }
    extras = list;
  }
  for (let i = 0; i < keys.length; i++) {
    if (keys[i] !== present[i]) {
      order = keys;
      break;
    }
  }
  const d = JSON.stringify([job.input.store, job.input.set, values, extras, order]);
  return { half, head: `{"t":"j","id":${half.id},"d":${d}`, job: { consts: job.consts, tests: job.tests } };
}

/**
 * The host's record of the static halves one child holds: the child's own LRU (ChildStatics) with the same bounds and
 * sizes, so both evict the same halves. `maxBytes`: childStaticLimit of the pool's memory limit.
 */
export function childRecord(maxBytes: number): LRUCache<number, true> {
  return new LRUCache<number, true>({ max: STATIC_LIMITS.entries, maxSize: maxBytes });
}

/**
 * What to write to one child for an encoded job (without the last newline): the job line alone when `held` says the
 * child has its static half; otherwise the static-half line first, `{"t":"s","id":N,"s":[...]}`, then the job line
 * (and the half is recorded as held). Sizes count the text's length, as the child counts them.
 */
export function lineFor(job: EncodedJob, held: LRUCache<number, true>): string {
  const half = job.half;
  if (!half) return job.head;
  if (held.get(half.id)) return `${job.head}}`;
  held.set(half.id, true, { size: childStaticBytes(half.text) });
  return `{"t":"s","id":${half.id},"s":${half.text}}\n${job.head}}`;
}

/** The child's answer for a job whose static half it does not hold. */
export type UnknownAnswer = { t: 'unknown'; id: number };
export const unknownLine = (id: number): string => `{"t":"unknown","id":${id}}`;

const STATIC_PREFIX = '{"t":"s","id":';

/**
 * The static-half lines of a text of lines about to be discarded (each with its newline). The host recorded each half
 * as held by the child when it queued the line, so the lines must still reach the child (it keeps a half even while
 * draining), or its jobs would come back as `unknown` and be sent again in full.
 */
export function staticLinesOf(text: string): string {
  let kept = '';
  for (const line of text.split('\n')) if (line.startsWith(STATIC_PREFIX)) kept += line + '\n';
  return kept;
}
const JOB_PREFIX = '{"t":"j","id":';

/** The id after a prefix, up to the next comma; NaN when the line is not in the expected shape. */
function idAt(line: string, prefix: string): { id: number; rest: number } {
  const comma = line.indexOf(',', prefix.length);
  return { id: comma === -1 ? NaN : Number(line.slice(prefix.length, comma)), rest: comma };
}

/**
 * The child's side: static halves by id (bounded LRU) as JSON text. Nothing here parses JSON: the job line goes to the
 * isolate as `{"t":"j","s":<static half>,"d":<dynamic half>}` (protocol.ts), which decodes it into the very WireJob the
 * whole-job form gives, so answers are unchanged.
 */
export class ChildStatics {
  private readonly held: LRUCache<number, string>;
  /** The last half too large for the store: kept for its job line only. */
  private oversized: { id: number; text: string } | undefined;

  /** `maxBytes`: childStaticLimit of the child's memory limit (the host's record of this child uses the same). */
  constructor(readonly maxBytes: number) {
    this.held = new LRUCache<number, string>({ max: STATIC_LIMITS.entries, maxSize: maxBytes, sizeCalculation: childStaticBytes });
  }

  /** Estimated bytes held (childStaticBytes of each half). */
  get bytes(): number {
    return this.held.calculatedSize;
  }

  /** How many static halves are held (tests, diagnostics). */
  get size(): number {
    return this.held.size;
  }

  /** Everything this child holds, as text (tests: the isolation check). */
  dump(): string[] {
    return [...this.held.values()];
  }

  /**
   * One line from the host: a static half is kept (`kept`, nothing to answer); a job in the static-half form becomes
   * the isolate's request line, or `unknown` when its id is not held; any other line goes to the isolate unchanged.
   */
  decode(line: string): { line: string } | { unknown: number } | { kept: number } {
    if (line.startsWith(STATIC_PREFIX)) {
      const { id, rest } = idAt(line, STATIC_PREFIX);
      if (Number.isSafeInteger(id) && line.startsWith(',"s":', rest) && line.endsWith('}')) {
        const text = line.slice(rest + 5, -1);
        // A half larger than the whole store is kept for the job line that follows it only (the host's record refuses
        // it too, so the host sends it again before each job that needs it).
        if (childStaticBytes(text) > this.maxBytes) this.oversized = { id, text };
        else this.held.set(id, text);
        return { kept: id };
      }
      return { line };
    }
    if (!line.startsWith(JOB_PREFIX)) return { line };
    const { id, rest } = idAt(line, JOB_PREFIX);
    if (!Number.isSafeInteger(id) || !line.startsWith(',"d":', rest)) return { line };
    const text = this.held.get(id) ?? (this.oversized?.id === id ? this.oversized.text : undefined);
    if (text === undefined) return { unknown: id };
    return { line: `{"t":"j","s":${text},"d":${line.slice(rest + 5)}` };
  }
}
