/**
 * The runtime that lives INSIDE the isolate (bundled with the libraries by scripts/build-sandbox.mjs into
 * dist/sandbox/libraries.js). It installs the expression globals, seals the realm (deep freeze, no timers, no shared
 * memory, no WebAssembly), and evaluates requests: one JSON line in, one JSON line out. The parts are beside it in
 * isolate/: prelude (clock and chance stand-ins, loaded first), intrinsics, json-schema (JSONSchema.validate), compile
 * (expression cache and evaluation), import-scan, jobs, seal (deep freeze, per-job state), library-state and warm-zod
 * (warm-up before the freeze).
 *
 * Nothing here can reach the host: the isolate has no host objects at all. What this file guards is the other half
 * of the contract: no state survives from one job to the next, and no expression can disturb the runtime itself.
 */
// The prelude first: its stand-ins must exist before the libraries load.
import { sealPrelude } from './prelude.js';
import _ from 'lodash';
import validator from 'validator';
import * as zod from 'zod';
// @ts-expect-error chai 6 ships no type declarations (and @types/chai is not installed)
import * as chai from 'chai';
import { O, ArrayIsArray, defineProperty, getOwnPropertyDescriptor, ownKeys, JSONparse, JSONstringify, StringCtor } from './intrinsics.js';
import { JSONSchema, generation, generations, lastAjv, metaAjv, setValidatorCacheBytes } from './json-schema.js';
import { cache, setCompileCacheBytes } from './compile.js';
import { handle, partial } from './jobs.js';
import { deepFreeze, sealReport, verifySealed, walkReachable } from './seal.js';
import { warmUp, warmZod, type WarmStep } from './warm-zod.js';
import { guardLodash, validatorDefaults } from './library-state.js';

/** Numbers for tests (through the runtime object, which expressions cannot reach). */
function stats(): string {
  let scopeValues = 0;
  const values = lastAjv?.scope._values ?? {};
  for (const k of O.keys(values)) scopeValues += values[k]!.size;
  return JSONstringify({
    generations,
    compiles: generation.compiles,
    bytes: generation.bytes,
    cached: generation.compiled.size,
    // What the instance of the last compile holds (each compile has its own, json-schema.ts).
    ajvScopeValues: scopeValues,
    ajvRefs: lastAjv ? O.keys(lastAjv.refs).length : 0,
    ajvSchemas: lastAjv ? O.keys(lastAjv.schemas).length : 0,
    // What the meta-schema checker holds: the same from the first job to the last.
    metaRefs: O.keys(metaAjv.refs).length,
    metaSchemas: O.keys(metaAjv.schemas).length,
    expressionCache: { entries: cache.size, bytes: cache.bytes, limit: cache.maxBytes },
    validatorLimit: validatorLimit,
  });
}

let validatorLimit = 0;
/**
 * Bound the caches inside the isolate from its memory limit (the child calls it once, after `seal`): compiled
 * validators and expressions an eighth of it each, trusted templates (.configu) a sixteenth. Together 5/16 of the
 * limit, under the half that makes a child renew its isolate after a job (retireHeapMb): full caches alone never
 * make it renew, and they leave a job most of the heap.
 */
function limits(memoryMb: number): void {
  const bytes = memoryMb * 1024 * 1024;
  validatorLimit = Math.floor(bytes / 8);
  setValidatorCacheBytes(validatorLimit);
  setCompileCacheBytes(Math.floor(bytes / 8), Math.floor(bytes / 16));
}

let sealed = false;
/** The roots of the sealed realm (set by `seal`): what `fingerprint` walks. */
let sealedRoots: unknown[] = [];

/**
 * Seal the realm once. `warm` says how the zod warm-up runs (warm-zod.ts): `full` (the default), `record` (full, and
 * the report carries the productive calls as `plan`), or a recorded plan as JSON text.
 */
function seal(warm = 'full'): string {
  if (sealed) return JSONstringify(sealReport);
  sealed = true;
  const g = globalThis as Record<string, unknown>;
  const should = chai.should();
  const t0 = Date.now();
  // The warm-up provokes thousands of errors on purpose (factories tried with wrong arguments); their stack traces
  // are never read, and capturing them was most of the cost.
  const stackTraceLimit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  warmUp();
  const t1 = Date.now();
  let plan: WarmStep[] | undefined;
  if (warm !== 'full' && warm !== 'record') {
    try {
      const parsed: unknown = JSONparse(warm);
      plan = ArrayIsArray(parsed) ? (parsed as WarmStep[]) : undefined;
    } catch {
      plan = undefined;
    }
  }
  const warmed = warmZod(plan ?? (warm === 'record' ? 'record' : 'full'));
  const zodInternals = warmed.protos;
  Error.stackTraceLimit = stackTraceLimit;
  const t2 = Date.now();
  // Remove what an expression must never have: shared memory, WebAssembly, deferred callbacks.
  for (const name of ['SharedArrayBuffer', 'Atomics', 'WebAssembly', 'FinalizationRegistry', 'WeakRef', '__cfguRuntime']) {
    delete g[name];
  }
  // State the libraries keep in their closures (library-state.ts): lodash's counters, validator's shared defaults.
  guardLodash();
  const sharedDefaults = validatorDefaults();
  const globals: Record<string, unknown> = {
    _,
    validator,
    JSONSchema,
    jsonschema: JSONSchema,
    z: zod,
    assert: chai.assert,
    expect: chai.expect,
    should,
  };
  for (const [name, value] of O.entries(globals)) {
    defineProperty(g, name, { value, writable: false, enumerable: false, configurable: false });
  }
  sealPrelude();
  // chai's namespace (config, util) is frozen too, although only assert/expect/should are exposed.
  const roots = [globalThis, runtime, chai, zod, ...zodInternals, ...sharedDefaults];
  deepFreeze(roots);
  const t3 = Date.now();
  sealReport.unsealed = verifySealed(roots);
  sealReport.ms = { warmUp: t1 - t0, warmZod: t2 - t1, freeze: t3 - t2, verify: Date.now() - t3 };
  sealReport.warm = warmed.used;
  sealedRoots = roots;
  return JSONstringify(warmed.steps ? { ...sealReport, plan: warmed.steps } : sealReport);
}

/**
 * A digest of the sealed realm's shape, for the build's check that a recorded warm-up plan leaves the realm as the
 * full warm-up does: every object reachable from the roots contributes its own property names, each with the kind of
 * its descriptor (data or accessor) and the type of its value. The signatures are sorted, so the walk's order (which
 * depends on the order the internals prototypes were found in) does not matter.
 */
function fingerprint(): string {
  const signatures: string[] = [];
  walkReachable(sealedRoots, (obj) => {
    const parts: string[] = [typeof obj];
    for (const key of ownKeys(obj)) {
      const desc = getOwnPropertyDescriptor(obj, key)!;
      parts.push(`${typeof key === 'symbol' ? `@${StringCtor(key.description)}` : key}:${'value' in desc ? typeof desc.value : 'accessor'}`);
    }
    signatures.push(parts.sort().join(','));
  });
  signatures.sort();
  // FNV-1a over the sorted signatures: two realms of the same shape give the same text.
  let hash = 0x811c9dc5;
  for (const sig of signatures) {
    for (let i = 0; i < sig.length; i++) hash = Math.imul(hash ^ sig.charCodeAt(i), 0x01000193) >>> 0;
    hash = Math.imul(hash ^ 10, 0x01000193) >>> 0;
  }
  return JSONstringify({ objects: signatures.length, hash: hash.toString(16) });
}

const runtime = { seal, handle, partial, stats, fingerprint, limits };
(globalThis as Record<string, unknown>).__cfguRuntime = runtime;
