import _ from 'lodash';
import validator from 'validator';
import * as zod from 'zod';
// @ts-expect-error chai 6 ships no type declarations (and @types/chai is not installed)
import * as chai from 'chai';
import { O, getOwnPropertyDescriptor, getPrototypeOf, ownKeys, apply, MapCtor, SetCtor, type SetType } from './intrinsics.js';
import { messageOf } from './messages.js';
import { validateJsonSchema } from './json-schema.js';

/**
 * One call of the warm-up that found a schema type not seen before: a factory of the `zod` namespace (or of its `iso`
 * / `coerce` namespaces) called with the warm-up's argument list number `arg`, or a method of the `rep`-th such schema
 * (in the order they were found) called with it. The calls that found nothing new are not recorded.
 */
export type WarmStep = [kind: 'f', namespace: '' | 'iso' | 'coerce', name: string, arg: number] | [kind: 'm', rep: number, name: string, arg: number];

/** How the warm-up ran: every candidate call (`full`), or only the recorded productive ones (`plan`). */
export interface WarmResult {
  /** The `_zod` internals prototypes met, to be frozen with the rest. */
  protos: object[];
  used: 'full' | 'plan';
  /** With `record`: the productive calls of this full warm-up, in order. */
  steps?: WarmStep[];
}

type ZodSchemaLike = { _zod: object; safeParse(x: unknown): unknown };
type Fn = (...a: unknown[]) => unknown;

const isSchema = (v: unknown): v is ZodSchemaLike => v !== null && typeof v === 'object' && typeof (v as { _zod?: unknown })._zod === 'object';

/** Read every property of an object and of its prototypes: a getter that installs members lazily runs. */
function touch(inst: object): void {
  for (let p: object | null = inst; p && p !== O.prototype; p = getPrototypeOf(p)) {
    for (const key of ownKeys(p)) {
      try {
        void (inst as Record<PropertyKey, unknown>)[key];
      } catch {
        /* ignore */
      }
    }
  }
}

/**
 * The shared function behind a schema method. Zod installs each method on every schema prototype as a getter that
 * binds one shared function to the instance, and hands out that function itself for a null receiver.
 */
function methodOf(inst: object, name: string): unknown {
  for (let p: object | null = getPrototypeOf(inst); p && p !== O.prototype; p = getPrototypeOf(p)) {
    const desc = getOwnPropertyDescriptor(p, name);
    if (!desc) continue;
    if ('value' in desc) return desc.value;
    try {
      return apply(desc.get!, undefined, []);
    } catch {
      return undefined;
    }
  }
  return undefined;
}

/** The names of a schema's methods: the string keys of its prototypes, but private ones and the constructor. */
function methodNames(inst: object): SetType<string> {
  const names = new SetCtor<string>();
  for (let p: object | null = getPrototypeOf(inst); p && p !== O.prototype; p = getPrototypeOf(p)) {
    for (const key of ownKeys(p)) if (typeof key === 'string' && !key.startsWith('_') && key !== 'constructor') names.add(key);
  }
  return names;
}

/** One warm-up (see warmZod): what it has found so far. */
class ZodWarmUp {
  /** The argument lists every factory and method is tried with (a recorded step names one by its index). */
  private readonly argList: unknown[][] = [
    [],
    ['a'],
    [1],
    [['a', 'b']],
    [zod.string()],
    [{ a: zod.string() }],
    [[zod.string(), zod.number()]],
    [zod.string(), zod.number()],
    ['k', [zod.object({ k: zod.literal('a') }), zod.object({ k: zod.literal('b') })]],
    [(x: unknown): unknown => x],
    [/a/],
    [{ message: 'm' }],
  ];
  private readonly skip = new SetCtor(['promise', 'config', 'setErrorMap', 'getErrorMap', 'registry', 'globalRegistry', 'meta', 'register']);
  private readonly inputs: unknown[] = [undefined, 'a', 1, {}, ['a']];
  /** The `_zod` internals prototypes met, in order. */
  readonly protos: object[] = [];
  private readonly seenProtos = new SetCtor<object>();
  /** One representative per (schema prototype, internals prototype): that is the granularity of the lazy installs. */
  private readonly kinds = new MapCtor<object, SetType<object>>();
  /** Representatives not yet exercised. */
  readonly fresh: object[] = [];
  /** Every schema kept, in the order found: a recorded method step names its receiver by its index here. */
  private readonly reps: object[] = [];
  /**
   * Shared methods that already returned a schema: the type a method builds does not depend on the receiver (they
   * wrap it or clone it), so each is called on the first schema it works on only. This cuts the warm-up (and so the
   * start-up of every sandbox) about fivefold and finds the same types.
   */
  private readonly called = new SetCtor<unknown>();

  constructor(readonly steps: WarmStep[] | undefined) {}

  /** Install what a schema installs lazily (its members, its parsing) and note its internals prototypes. */
  exercise(inst: object): void {
    if (!isSchema(inst)) return;
    touch(inst);
    touch(inst._zod);
    for (const x of this.inputs) {
      try {
        inst.safeParse(x);
      } catch {
        /* ignore */
      }
    }
    for (let p: object | null = getPrototypeOf(inst._zod); p && p !== O.prototype; p = getPrototypeOf(p)) {
      if (!this.seenProtos.has(p)) {
        this.seenProtos.add(p);
        this.protos.push(p);
      }
    }
  }

  /** Keep `r` when it is a schema of a type not seen before (and record the step that made it); false otherwise. */
  keep(r: unknown, step?: WarmStep): boolean {
    if (!isSchema(r)) return false;
    const a = getPrototypeOf(r) as object;
    const b = getPrototypeOf(r._zod) as object;
    let set = this.kinds.get(a);
    if (!set) this.kinds.set(a, (set = new SetCtor()));
    if (set.has(b)) return false;
    set.add(b);
    this.fresh.push(r);
    this.reps.push(r);
    if (this.steps && step) this.steps.push(step);
    return true;
  }

  /** Every factory of a namespace (and of its `iso` / `coerce` namespaces) with every argument list. */
  collect(ns: Record<string, unknown>, path: '' | 'iso' | 'coerce'): void {
    for (const name of O.keys(ns)) {
      if (this.skip.has(name) || /Async$|^spa$/.test(name)) continue;
      const f = ns[name];
      if (typeof f === 'function' && /^[a-z]/.test(name)) {
        const args = this.argList;
        for (let i = 0; i < args.length; i++) {
          try {
            this.keep(apply(f as Fn, ns, args[i]!), ['f', path, name, i]);
          } catch {
            /* wrong arguments for this factory */
          }
        }
      } else if (path === '' && f && typeof f === 'object' && !isSchema(f) && (name === 'iso' || name === 'coerce')) {
        this.collect(f as Record<string, unknown>, name);
      }
    }
  }

  /** Every method of a schema with every argument list (a shared method already seen to build a schema: skipped). */
  callMethods(inst: object): void {
    for (const name of methodNames(inst)) {
      if (this.skip.has(name) || name === 'describe' || /Async$|^spa$/.test(name)) continue;
      const shared = methodOf(inst, name);
      if (typeof shared === 'function' && this.called.has(shared)) continue;
      let m: unknown;
      try {
        m = (inst as Record<string, unknown>)[name];
      } catch {
        continue;
      }
      if (typeof m !== 'function') continue;
      let built = false;
      const args = this.argList;
      const rep = this.reps.indexOf(inst);
      for (let i = 0; i < args.length; i++) {
        try {
          const r = apply(m as Fn, inst, args[i]!);
          built = built || isSchema(r);
          this.keep(r, ['m', rep, name, i]);
        } catch {
          /* ignore */
        }
      }
      if (built && typeof shared === 'function') this.called.add(shared);
    }
  }

  /**
   * The recorded calls, each expected to find a new type again (true), else false, having done what it could: the
   * caller then runs the full search, which keeps what this found and finds the rest.
   */
  replay(plan: WarmStep[]): boolean {
    const namespaces: Record<string, Record<string, unknown>> = {
      '': zod as unknown as Record<string, unknown>,
      iso: (zod as unknown as Record<string, Record<string, unknown>>).iso!,
      coerce: (zod as unknown as Record<string, Record<string, unknown>>).coerce!,
    };
    const args = this.argList;
    for (const step of plan) {
      try {
        let r: unknown;
        if (step[0] === 'f') {
          const ns = namespaces[step[1]];
          r = apply(ns![step[2]] as Fn, ns, args[step[3]]!);
        } else {
          const inst = this.reps[step[1]] as Record<string, unknown>;
          r = apply(inst[step[2]] as Fn, inst, args[step[3]]!);
        }
        if (!this.keep(r)) return false;
      } catch {
        return false;
      }
    }
    return true;
  }

  /** Exercise every representative found so far (after a replay that found them all). */
  exerciseAll(): void {
    for (const inst of this.reps) this.exercise(inst);
  }
}

/**
 * Zod 4 installs members on its prototypes lazily, at the first construction / first read of each schema type. Every
 * factory and every method is exercised once here, before the freeze, so nothing is left to install afterwards. The
 * `_zod` internals prototypes reached this way are returned so that they are frozen too.
 *
 * The full search tries every factory and method with a dozen argument lists (~7,500 calls, most failing or finding
 * a type already seen): about half of a sandbox's start-up. The build records the calls that found a new type
 * (`record`) and checks that replaying only those leaves the realm exactly as the full search does (the sealed
 * realm's fingerprint, child/prepare.ts); a child then replays that plan. A plan step that does not find the new
 * type it found at record time (another zod, a changed bundle) makes the warm-up run the full search after all.
 */
export function warmZod(mode: 'full' | 'record' | WarmStep[] = 'full'): WarmResult {
  const w = new ZodWarmUp(mode === 'record' ? [] : undefined);
  if (typeof mode === 'object' && w.replay(mode)) {
    w.exerciseAll();
    return { protos: w.protos, used: 'plan' };
  }
  w.collect(zod as unknown as Record<string, unknown>, '');
  // Methods of every schema type, until no new type appears (bounded).
  for (let round = 0; round < 3 && w.fresh.length; round++) {
    for (const inst of w.fresh.splice(0)) {
      w.exercise(inst);
      w.callMethods(inst);
    }
  }
  for (const inst of w.fresh) w.exercise(inst);
  return { protos: w.protos, used: 'full', ...(w.steps ? { steps: w.steps } : {}) };
}

export function warmUp(): void {
  // Exercise lazy caches so they are created before the realm is frozen.
  const schema = zod.object({ a: zod.string().min(1), b: zod.number().int().optional(), c: zod.array(zod.enum(['x', 'y'])) });
  schema.safeParse({ a: 'x', c: ['x'] });
  schema.safeParse({ a: 1 });
  zod.string().email().safeParse('a@b.co');
  try {
    zod.number().parse('x');
  } catch (e) {
    messageOf(e);
  }
  validateJsonSchema({ type: 'object', properties: { a: { type: 'string', format: 'email' } } }, { a: 'a@b.co' });
  try {
    validateJsonSchema({ type: 'number' }, 'x');
  } catch {
    /* expected */
  }
  chai.expect('x').to.be.a('string');
  chai.assert.isString('x');
  try {
    chai.expect(1).to.equal(2);
  } catch {
    /* expected */
  }
  _.get({ a: [{ b: 1 }] }, 'a[0].b');
  _.template('<%= a %>')({ a: 1 });
  validator.isEmail('a@b.co');
  'x'.match(/x/);
}
