/**
 * Build step (bundled to dist/sandbox-prepare.js; scripts/build.mjs runs it with `--no-node-snapshot` after the
 * bundles): makes the warm-up plan and the code cache that let a sandbox start faster (prepared.ts says what they are).
 *
 * 1. An isolate loads the bundle and seals with the full zod warm-up, recording its productive calls; the sealed
 *    realm's fingerprint is taken. The bundle is then compiled again in that isolate: V8 finds it in the isolate's
 *    compilation cache with every function start-up ran already compiled, and the code cache made from it holds them.
 * 2. A second isolate compiles with that code cache and seals with the recorded plan. The plan is kept only when this
 *    realm's fingerprint is the first one's and the plan ran to its end; otherwise no plan file is left, and sandboxes
 *    warm up the full way.
 *
 * `node dist/sandbox-prepare.js [BUNDLE]` (default: dist/sandbox/libraries.js) prints one JSON line: what it made and
 * the start-up times of both isolates. Exit 1 when the bundle cannot be loaded at all.
 */
import { readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type IVM from 'isolated-vm';
import { loadSandboxBuild } from '../isolated-vm.js';
import { bundleDigest, preparedPaths, type WarmPlanFile } from './prepared.js';
import { SANDBOX_FILENAME } from '../wire/protocol.js';

const { ivm } = loadSandboxBuild();
const bundle = process.argv[2] ?? join(dirname(fileURLToPath(import.meta.url)), 'sandbox', 'libraries.js');
const source = readFileSync(bundle, 'utf8');
const paths = preparedPaths(bundle);

interface Sealed {
  isolate: IVM.Isolate;
  report: { warm: string; plan?: unknown[]; unsealed: string[] };
  fingerprint: string;
  ms: number;
  cache: 'none' | 'accepted' | 'rejected';
}

function sealWith(warm: string, cachedData?: ArrayBuffer): Sealed {
  const started = performance.now();
  const isolate = new ivm.Isolate({ memoryLimit: 256 });
  const context = isolate.createContextSync();
  const script = isolate.compileScriptSync(source, { filename: SANDBOX_FILENAME, ...(cachedData ? { cachedData: new ivm.ExternalCopy(cachedData) } : {}) }) as IVM.Script & {
    cachedDataRejected?: boolean;
  };
  const cache = cachedData ? (script.cachedDataRejected ? 'rejected' : 'accepted') : 'none';
  script.runSync(context);
  const runtime = context.global.getSync('__cfguRuntime', { reference: true }) as IVM.Reference<Record<string, unknown>>;
  const seal = runtime.getSync('seal', { reference: true }) as IVM.Reference<(warm: string) => string>;
  const fingerprint = runtime.getSync('fingerprint', { reference: true }) as IVM.Reference<() => string>;
  const report = JSON.parse(seal.applySync(undefined, [warm], { timeout: 120_000 }) as string) as Sealed['report'];
  const ms = performance.now() - started;
  return { isolate, report, fingerprint: fingerprint.applySync(undefined, [], { timeout: 120_000 }) as string, ms, cache };
}

/** Written next to the bundle under a temporary name, then renamed: a reader sees the old file or the new one. */
function put(file: string, data: string | Buffer): void {
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, data);
  renameSync(tmp, file);
}

rmSync(paths.plan, { force: true });
rmSync(paths.cache, { force: true });
const full = sealWith('record');
if (full.report.unsealed.length || !Array.isArray(full.report.plan)) {
  console.log(JSON.stringify({ plan: false, cache: false, why: 'the full warm-up did not seal cleanly' }));
  process.exit(0);
}
const again = full.isolate.compileScriptSync(source, { filename: SANDBOX_FILENAME, produceCachedData: true });
const produced = (again as IVM.Script & IVM.CachedDataResult).cachedData;
const cacheBytes = produced ? produced.copy() : undefined;
full.isolate.dispose();
if (cacheBytes) put(paths.cache, Buffer.from(cacheBytes));

const replayed = sealWith(JSON.stringify(full.report.plan), cacheBytes);
replayed.isolate.dispose();
const same = replayed.report.warm === 'plan' && replayed.fingerprint === full.fingerprint && replayed.report.unsealed.length === 0;
if (same) {
  const file: WarmPlanFile = { bundle: bundleDigest(source), steps: full.report.plan, fingerprint: full.fingerprint };
  put(paths.plan, `${JSON.stringify(file)}\n`);
}
console.log(
  JSON.stringify({
    plan: same ? full.report.plan.length : false,
    ...(same ? {} : { why: `the plan left the realm ${replayed.fingerprint} instead of ${full.fingerprint} (${replayed.report.warm})` }),
    cache: cacheBytes ? { bytes: cacheBytes.byteLength, secondIsolate: replayed.cache } : false,
    startupMs: { full: Math.round(full.ms), prepared: Math.round(replayed.ms) },
  }),
);
