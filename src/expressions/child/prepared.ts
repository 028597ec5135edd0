/**
 * What the build prepares next to the sandbox's library bundle so that a sandbox starts faster (child/prepare.ts
 * makes both; scripts/build.mjs runs it after bundling). Both are optional: without them a sandbox starts the slow way.
 * - `<bundle>.warm-plan.json`: the calls of the zod warm-up that found a new schema type (isolate/warm-zod.ts). The
 *   build checked that replaying only them leaves the sealed realm in exactly the shape the full warm-up leaves it
 *   in. It names the SHA-256 of the bundle it was recorded on and is used with that bundle only.
 * - `<bundle>.code-cache`: V8's code cache of the bundle, made once the full warm-up had run, so that it holds the
 *   functions start-up runs, not only the top level. V8 checks it against the bundle's text, its own version and its
 *   flags, and compiles the usual way when it does not match. It is compiled code of the bundle, never heap state.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';

export interface WarmPlanFile {
  /** SHA-256 (hex) of the bundle text the plan was recorded on. */
  bundle: string;
  /** The recorded calls (isolate/warm-zod.ts, WarmStep). */
  steps: unknown[];
  /**
   * The sealed realm's fingerprint, the same after the full warm-up and after the plan (checked when made, in the
   * build step's process: the shape of a realm depends on the V8 flags of its process, `--no-node-snapshot` included).
   */
  fingerprint: string;
}

export function preparedPaths(bundle: string): { plan: string; cache: string } {
  const stem = bundle.replace(/\.js$/, '');
  return { plan: `${stem}.warm-plan.json`, cache: `${stem}.code-cache` };
}

export function bundleDigest(source: string): string {
  return createHash('sha256').update(source).digest('hex');
}

/** The plan's steps as JSON text for the runtime's `seal`, when a plan for exactly this bundle text is there. */
export function readWarmPlan(bundle: string, source: string): string | undefined {
  try {
    const file = JSON.parse(readFileSync(preparedPaths(bundle).plan, 'utf8')) as WarmPlanFile;
    if (file.bundle !== bundleDigest(source) || !Array.isArray(file.steps)) return undefined;
    return JSON.stringify(file.steps);
  } catch {
    return undefined;
  }
}

/** The code cache's bytes in an ArrayBuffer of their own (what isolated-vm's `cachedData` copies from). */
export function readCodeCache(bundle: string): ArrayBuffer | undefined {
  try {
    const bytes = readFileSync(preparedPaths(bundle).cache);
    return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
  } catch {
    return undefined;
  }
}
