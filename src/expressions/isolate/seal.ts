import { O, freeze, defineProperty, getOwnPropertyDescriptor, getPrototypeOf, ownKeys, apply, StringCtor, MapCtor, SetCtor, WeakMapCtor, WeakSetCtor } from './intrinsics.js';

// ---------------------------------------------------------------------------------------------------------------
// Sealing
// ---------------------------------------------------------------------------------------------------------------

/** Containers whose contents are internal slots (freezing does not protect them): replaced by per-job copies. */
type Cell = { epoch: number; value: unknown; original: unknown };
let epoch = 0;
const resettableRegExps: RegExp[] = [];

function cloneSlotObject(original: unknown): unknown {
  if (original instanceof MapCtor) return new MapCtor(original as Map<unknown, unknown>);
  if (original instanceof SetCtor) return new SetCtor(original as Set<unknown>);
  if (original instanceof WeakMapCtor) return new WeakMapCtor();
  if (original instanceof WeakSetCtor) return new WeakSetCtor();
  if (original instanceof Date) return new Date((original as Date).getTime());
  if (original instanceof ArrayBuffer) return (original as ArrayBuffer).slice(0);
  if (ArrayBuffer.isView(original)) {
    const v = original as unknown as { constructor: new (x: unknown) => unknown };
    return new v.constructor(original);
  }
  return original;
}

function hasMutableSlots(value: unknown): boolean {
  // Most values the freeze walks are primitives or functions: answered before the seven prototype checks.
  if (value === null || typeof value !== 'object') return false;
  return (
    value instanceof MapCtor ||
    value instanceof SetCtor ||
    value instanceof WeakMapCtor ||
    value instanceof WeakSetCtor ||
    value instanceof Date ||
    value instanceof ArrayBuffer ||
    ArrayBuffer.isView(value)
  );
}

/**
 * The legacy RegExp statics (`RegExp.input`, `$_`, `lastMatch`, `$1`..`$9`, `leftContext`, ...) are realm-wide state
 * that freezing does not protect: they hold the subject of the last successful match, which may be another request's
 * value (a `pattern` check, `validator.*`) or the trusted `.configu` render. A match of the empty string clears them.
 */
const CLEAR_MATCH = /(?:)/;
const regExpExec = RegExp.prototype.exec;

export function beginJob(): void {
  epoch++;
  for (const re of resettableRegExps) re.lastIndex = 0;
  apply(regExpExec, CLEAR_MATCH, ['']);
}

/** Names that code commonly assigns on instances; on frozen prototypes they become accessors (the override mistake). */
const OVERRIDABLE = new SetCtor<PropertyKey>([
  'constructor',
  'toString',
  'toLocaleString',
  'valueOf',
  'toJSON',
  'name',
  'message',
  'hasOwnProperty',
  'isPrototypeOf',
  'propertyIsEnumerable',
  'then',
  'catch',
  'finally',
  'stack',
  'cause',
  'code',
]);

/**
 * Functions the sealing itself creates (accessors). Expressions reach them through property descriptors, so they are
 * frozen like everything else (a property written on a shared getter would be read back by the next job).
 */
function installed<T extends object>(fn: T): T {
  return freeze(fn);
}

function makeOverridable(proto: object, key: PropertyKey): void {
  const desc = getOwnPropertyDescriptor(proto, key);
  if (!desc || !('value' in desc) || !desc.configurable) return;
  const value = desc.value;
  // Method definitions: unlike function expressions they have no `prototype` object to freeze as well.
  const accessors = {
    get(): unknown {
      return value;
    },
    set(this: unknown, next: unknown): void {
      if (this === proto || this === null || (typeof this !== 'object' && typeof this !== 'function')) {
        throw new TypeError(`Cannot assign to read only property '${StringCtor(key)}'`);
      }
      defineProperty(this, key, { value: next, writable: true, enumerable: true, configurable: true });
    },
  };
  defineProperty(proto, key, { configurable: false, enumerable: desc.enumerable, get: installed(accessors.get), set: installed(accessors.set) });
}

/** Report of sealing, for tests and diagnostics. */
export const sealReport = {
  frozen: 0,
  cells: 0,
  regexps: 0,
  unfixable: [] as string[],
  unsealed: [] as string[],
  ms: {} as Record<string, number>,
  /** How the zod warm-up ran (warm-zod.ts). */
  warm: '' as 'full' | 'plan' | '',
};
const mapForEach = Map.prototype.forEach;
const setForEach = Set.prototype.forEach;
const isFrozen = Object.isFrozen;
const isExtensible = Object.isExtensible;

/**
 * The one walk over the object graph, as an expression could walk it: every object or function reachable from
 * `roots` through prototypes, own property values and both accessor functions, each met once (depth first, on an
 * explicit stack: the realm is too deep for recursion). `object(obj)` is called when an object is first met;
 * `property(obj, key, desc, visit)` for each of its own properties, and returns true when it has followed (or
 * deliberately not followed) that property's edges itself; otherwise the value, or the getter and setter, are
 * followed.
 */
export function walkReachable(
  roots: unknown[],
  object: (obj: object) => void,
  property: (obj: object, key: PropertyKey, desc: PropertyDescriptor, visit: (v: unknown) => void) => boolean = () => false,
): void {
  const seen = new SetCtor<object>();
  const stack: unknown[] = roots.slice();
  const visit = (v: unknown): void => {
    if (v !== null && (typeof v === 'object' || typeof v === 'function') && !seen.has(v as object)) stack.push(v);
  };
  while (stack.length) {
    const obj = stack.pop() as object;
    if (seen.has(obj)) continue;
    seen.add(obj);
    object(obj);
    visit(getPrototypeOf(obj));
    for (const key of ownKeys(obj)) {
      const desc = getOwnPropertyDescriptor(obj, key);
      if (!desc || property(obj, key, desc, visit)) continue;
      if ('value' in desc) visit(desc.value);
      else {
        visit(desc.get);
        visit(desc.set);
      }
    }
  }
}

/**
 * After the freeze: walk everything reachable again (walkReachable) and list what is still writable. Per-job
 * containers and regexps (whose `lastIndex` is writable and reset before each job) are the only exceptions.
 */
export function verifySealed(roots: unknown[]): string[] {
  const unsealed: string[] = [];
  walkReachable(
    roots,
    (obj) => {
      if (obj instanceof RegExp) {
        if (isExtensible(obj)) unsealed.push('an extensible RegExp');
      } else if (!isFrozen(obj)) {
        unsealed.push(`${typeof obj} ${apply(O.prototype.toString, obj, [])} with keys ${ownKeys(obj).slice(0, 5).map(StringCtor).join(', ')}`);
      }
    },
    (obj, key, desc) => {
      if ('value' in desc && obj instanceof RegExp && key !== 'lastIndex' && (desc.writable || desc.configurable)) {
        unsealed.push(`RegExp property ${StringCtor(key)}`);
      }
      return false;
    },
  );
  return unsealed;
}

export function deepFreeze(roots: unknown[]): void {
  const order: object[] = [];
  walkReachable(
    roots,
    (obj) => order.push(obj),
    (obj, key, desc, visit) => {
      if ('value' in desc) {
        const value = desc.value;
        if (!hasMutableSlots(value)) return false;
        if (desc.configurable) {
          const cell: Cell = { epoch: -1, value: undefined, original: value };
          defineProperty(obj, key, {
            configurable: false,
            enumerable: desc.enumerable,
            get: installed(
              {
                get(): unknown {
                  if (cell.epoch !== epoch) {
                    cell.epoch = epoch;
                    cell.value = cloneSlotObject(cell.original);
                  }
                  return cell.value;
                },
              }.get,
            ),
          });
          sealReport.cells++;
          // A per-job copy is shallow: what the container holds is shared, so it is frozen too.
          if (value instanceof MapCtor) apply(mapForEach, value, [(v: unknown, k: unknown) => (visit(k), visit(v))]);
          else if (value instanceof SetCtor) apply(setForEach, value, [(v: unknown) => visit(v)]);
        } else {
          sealReport.unfixable.push(StringCtor(key));
        }
        return true;
      }
      // Values behind module-namespace getters (enumerable, non-configurable, read-only: esbuild's exports) are part
      // of the reachable realm too. Other getters are not called: lazy getters would rewrite themselves.
      if (desc.get && desc.enumerable && !desc.configurable && !desc.set) {
        try {
          visit(apply(desc.get, obj, []));
        } catch {
          /* a getter that needs another receiver */
        }
      }
      return false;
    },
  );
  for (const obj of order) {
    if (obj instanceof RegExp) {
      // lastIndex must stay writable (String.prototype.replace writes it): no new properties, reset before each job.
      for (const key of ownKeys(obj)) {
        if (key === 'lastIndex') continue;
        const d = getOwnPropertyDescriptor(obj, key);
        if (d && d.configurable) defineProperty(obj, key, { configurable: false, ...('value' in d ? { writable: false } : {}) });
      }
      O.preventExtensions(obj);
      resettableRegExps.push(obj);
      sealReport.regexps++;
      continue;
    }
    if (typeof obj === 'object' || typeof obj === 'function') {
      // Prototype objects: keep commonly overridden names assignable on instances.
      const ctor = getOwnPropertyDescriptor(obj, 'constructor');
      if (ctor && 'value' in ctor && typeof ctor.value === 'function' && (ctor.value as { prototype?: unknown }).prototype === obj) {
        for (const key of ownKeys(obj)) if (OVERRIDABLE.has(key)) makeOverridable(obj, key);
      }
    }
  }
  for (const obj of order) {
    if (obj instanceof RegExp) continue;
    try {
      freeze(obj);
      sealReport.frozen++;
    } catch {
      sealReport.unfixable.push(O.prototype.toString.call(obj));
    }
  }
}
