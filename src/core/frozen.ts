/**
 * Deep-frozen inputs. An object frozen here can never change, so anything derived from it may be cached by its
 * identity: `prepareSchema` skips re-serialising a schema it has seen, which matters for large schemas (the server
 * hands the engine frozen request bodies from its body cache). Objects frozen some other way are not trusted.
 */
import { STEP, runAtOnce, type Steps } from './slices.js';

const frozen = new WeakSet<object>();

/**
 * Freeze a JSON-like value and everything inside it; returns it. Objects down to `recordDepth` levels below `value`
 * (the value itself is level 0) are recorded as deep-frozen, so isDeepFrozen knows them; deeper ones are frozen all
 * the same but not recorded. Recording costs a weak-set entry per object, which garbage collection pays for again
 * and again: a request body records only the levels the engine caches by identity (pipeline, command, schema, keys,
 * declaration), not the hundreds of thousands of arrays an override may nest. With a finite `recordDepth` the value
 * must be a tree (what JSON.parse makes): a cycle below that depth would be walked for ever.
 */
export function freezeDeep<T>(value: T, recordDepth = Number.POSITIVE_INFINITY): T {
  runAtOnce(walkFreezing(value, recordDepth, undefined));
  return value;
}

/**
 * freezeDeep, also counting what it walks: the objects and arrays frozen here, and their own properties and elements
 * (slots). The counts come from the walk freezing does anyway; the caches estimate a body's memory from them
 * (cache-budget.ts).
 */
export function freezeCounting(value: unknown, recordDepth = Number.POSITIVE_INFINITY): FreezeCounts {
  return runAtOnce(freezeCountingSteps(value, recordDepth));
}

/**
 * freezeCounting in steps (slices.ts): a checkpoint every STEP objects. Until the last step the value is partly
 * frozen: the caller hands it to no one before then.
 */
export function* freezeCountingSteps(value: unknown, recordDepth = Number.POSITIVE_INFINITY): Steps<FreezeCounts> {
  const counts = { objects: 0, slots: 0, atRecordDepth: 0 };
  yield* walkFreezing(value, recordDepth, counts);
  return counts;
}

/** What freezeCounting walked: objects and arrays, their own properties and elements, and the objects at `recordDepth`. */
export interface FreezeCounts {
  objects: number;
  slots: number;
  atRecordDepth: number;
}

function* walkFreezing(value: unknown, recordDepth: number, counts: FreezeCounts | undefined): Steps<void> {
  if (value === null || typeof value !== 'object' || frozen.has(value as object)) return;
  const stack: object[] = [value as object];
  const depths: number[] = [0];
  let walked = 0;
  while (stack.length) {
    if (++walked % STEP === 0) yield;
    const o = stack.pop()!;
    const depth = depths.pop()!;
    if (depth <= recordDepth) {
      if (frozen.has(o)) continue;
      frozen.add(o);
    }
    Object.freeze(o);
    const keys = Object.keys(o);
    if (counts) {
      counts.objects++;
      counts.slots += keys.length;
      if (depth === recordDepth) counts.atRecordDepth++;
    }
    for (const k of keys) {
      const v = (o as Record<string, unknown>)[k];
      if (v !== null && typeof v === 'object' && !frozen.has(v)) {
        stack.push(v);
        depths.push(depth + 1);
      }
    }
  }
}

/** True when `value` was deep-frozen by freezeDeep. */
export function isDeepFrozen(value: unknown): boolean {
  return value !== null && typeof value === 'object' && frozen.has(value);
}

const keyCounts = new WeakMap<object, number>();

/**
 * How many own enumerable keys `value` has. A deep-frozen object's count is kept by identity: the server counts a
 * schema's keys for its limit and again for its metrics, and a body from the body cache comes back request after
 * request (a 1,000-key schema cost about 30 µs a count).
 */
export function keyCount(value: object): number {
  if (!frozen.has(value)) return Object.keys(value).length;
  let n = keyCounts.get(value);
  if (n === undefined) keyCounts.set(value, (n = Object.keys(value).length));
  return n;
}
