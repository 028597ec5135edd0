/**
 * Deep-frozen inputs. An object frozen here can never change, so anything derived from it may be cached by its
 * identity: `prepareSchema` skips re-serialising a schema it has seen, which matters for large schemas (the server
 * hands the engine frozen request bodies from its body cache). Objects frozen some other way are not trusted.
 */
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
  if (value === null || typeof value !== 'object' || frozen.has(value as object)) return value;
  const stack: object[] = [value as object];
  const depths: number[] = [0];
  while (stack.length) {
    const o = stack.pop()!;
    const depth = depths.pop()!;
    if (depth <= recordDepth) {
      if (frozen.has(o)) continue;
      frozen.add(o);
    }
    Object.freeze(o);
    for (const k of Object.keys(o)) {
      const v = (o as Record<string, unknown>)[k];
      if (v !== null && typeof v === 'object' && !frozen.has(v)) {
        stack.push(v);
        depths.push(depth + 1);
      }
    }
  }
  return value;
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
