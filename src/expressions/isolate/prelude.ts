/**
 * Runs first inside the isolate, before any library module: minimal stand-ins for the web globals the bundled
 * libraries touch at load time. Chai 6 creates `new EventTarget()` and subclasses `Event` for its plugin events; the
 * stand-in below keeps no listeners once the sandbox is sealed, so it can never carry state from one job to the next.
 */

const state = { sealed: false, clockOrChance: false };

class SandboxEvent {
  readonly type: string;
  constructor(type: string) {
    this.type = String(type);
  }
}

class SandboxEventTarget {
  addEventListener(): void {
    if (state.sealed) throw new TypeError('event listeners are not available in the sandbox');
  }
  removeEventListener(): void {}
  dispatchEvent(): boolean {
    return true;
  }
}

const g = globalThis as Record<string, unknown>;
if (typeof g.EventTarget !== 'function') g.EventTarget = SandboxEventTarget;
if (typeof g.Event !== 'function') g.Event = SandboxEvent;

/** Called by the runtime when it seals the sandbox. */
export function sealPrelude(): void {
  state.sealed = true;
}

// ---------------------------------------------------------------------------------------------------------------
// Clock and chance: the only inputs of an expression besides its job
// ---------------------------------------------------------------------------------------------------------------
// The realm is sealed and keeps nothing from one job to the next, WeakRef, FinalizationRegistry and shared memory are
// removed, and there are no timers: an expression's outcome is a function of its job, except through the clock
// (`Date.now()`, `new Date()` and `Date()` without a date, `Intl.DateTimeFormat#format` and `#formatToParts`, which
// format the current time when given none), `Math.random()`, and lodash's `_.uniqueId` counter (wrapped before the
// seal, noteClockOrChance; the other state libraries keep between jobs is handled in library-state.ts and
// json-schema.ts, docs/expressions.md "State the libraries keep"). These stand-ins note that a job read one of them, and the host keeps the answer of a job
// only when none was read (host/kept-answers.ts). They are installed before any library loads, so
// lodash (`_.now`, `_.random`, `_.shuffle`, `_.sample`) and the others capture them.

const touch = (): void => {
  state.clockOrChance = true;
};

const RealDate = Date;
const realNow = RealDate.now;
function SandboxDate(this: unknown, ...args: unknown[]): unknown {
  if (new.target === undefined) {
    touch();
    return RealDate();
  }
  if (args.length === 0) touch();
  return Reflect.construct(RealDate, args, new.target);
}
Object.defineProperty(SandboxDate, 'length', { value: RealDate.length });
Object.defineProperty(SandboxDate, 'name', { value: 'Date' });
Object.defineProperty(SandboxDate, 'prototype', { value: RealDate.prototype, writable: false, enumerable: false, configurable: false });
Object.defineProperty(RealDate.prototype, 'constructor', { value: SandboxDate, writable: true, enumerable: false, configurable: true });
/** A method like the built-ins' own (not enumerable, writable, configurable until the seal freezes it). */
const method = (holder: object, name: string, value: unknown): void => {
  Object.defineProperty(holder, name, { value, writable: true, enumerable: false, configurable: true });
};
method(SandboxDate, 'parse', RealDate.parse);
method(SandboxDate, 'UTC', RealDate.UTC);
// Object literals give the stand-ins the originals' names (`Date.now.name === 'now'`).
method(SandboxDate, 'now', {
  now(): number {
    touch();
    return realNow();
  },
}.now);
g.Date = SandboxDate;

const realRandom = Math.random;
method(Math, 'random', {
  random(): number {
    touch();
    return realRandom();
  },
}.random);

if (typeof Intl === 'object' && typeof Intl.DateTimeFormat === 'function') {
  const proto = Intl.DateTimeFormat.prototype as unknown as Record<string, unknown>;
  const format = Object.getOwnPropertyDescriptor(proto, 'format');
  if (format?.get) {
    const get = format.get;
    Object.defineProperty(proto, 'format', {
      ...format,
      get(this: unknown) {
        const bound = get.call(this) as (date?: unknown) => string;
        return (date?: unknown) => {
          if (date === undefined) touch();
          return bound(date);
        };
      },
    });
  }
  const formatToParts = proto.formatToParts as ((date?: unknown) => unknown) | undefined;
  if (typeof formatToParts === 'function') {
    method(proto, 'formatToParts', {
      formatToParts(this: unknown, date?: unknown): unknown {
        if (date === undefined) touch();
        return formatToParts.call(this, date);
      },
    }.formatToParts);
  }
}

/**
 * For the runtime: note a read of state that outlives a job. lodash's `_.uniqueId` counts on in a closure across
 * jobs, so its answer depends on the child's history; library-state.ts wraps it with this before sealing.
 */
export function noteClockOrChance(): void {
  touch();
}

/** Called by the runtime before each request: forget what the last one read. */
export function beginClockWatch(): void {
  state.clockOrChance = false;
}

/** Whether the request since beginClockWatch read the clock, Math.random or `_.uniqueId`. */
export function readClockOrChance(): boolean {
  return state.clockOrChance;
}
