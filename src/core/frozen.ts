/**
 * Deep-frozen inputs. An object frozen here can never change, so anything derived from it may be cached by its
 * identity: `prepareSchema` skips re-serialising a schema it has seen, which matters for large schemas (the server
 * hands the engine frozen request bodies from its body cache). Objects frozen some other way are not trusted.
 */
const frozen = new WeakSet<object>();

/** Freeze a JSON-like value and everything inside it; returns it. */
export function freezeDeep<T>(value: T): T {
  if (value === null || typeof value !== 'object' || frozen.has(value as object)) return value;
  const stack: object[] = [value as object];
  while (stack.length) {
    const o = stack.pop()!;
    if (frozen.has(o)) continue;
    Object.freeze(o);
    frozen.add(o);
    for (const k of Object.keys(o)) {
      const v = (o as Record<string, unknown>)[k];
      if (v !== null && typeof v === 'object' && !frozen.has(v)) stack.push(v);
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
