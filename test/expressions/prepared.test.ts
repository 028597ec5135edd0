// The build's sandbox start-up aids (src/expressions/child/prepared.ts): the zod warm-up plan and the code cache. The plan
// leaves the sealed realm exactly as the full warm-up does, and the check that says so notices a plan missing a step;
// a child uses both; a plan recorded on another bundle, a plan that breaks, and a code cache V8 rejects each leave the
// child warming up the full way and working.
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type IVM from 'isolated-vm';
import { loadSandboxBuild } from '../../src/expressions/isolated-vm.js';
import { bundleDigest, preparedPaths, type WarmPlanFile } from '../../src/expressions/child/prepared.js';
import { SANDBOX_FILENAME } from '../../src/expressions/wire/protocol.js';
import { removeTempDirs, tempDir } from '../server/helpers.js';

const DIST = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'dist');
const BUNDLE = join(DIST, 'sandbox', 'libraries.js');
const CHILD = join(DIST, 'sandbox-child.js');
if (!existsSync(BUNDLE)) throw new Error('dist/sandbox/libraries.js is missing: run `node scripts/build.mjs` first');
const source = readFileSync(BUNDLE, 'utf8');
const builtPlan = (): WarmPlanFile => JSON.parse(readFileSync(preparedPaths(BUNDLE).plan, 'utf8')) as WarmPlanFile;

after(() => removeTempDirs());

/** A sealed isolate of the bundle in this process: how its warm-up ran, and its realm's fingerprint. */
function sealed(warm: string): { warm: string; unsealed: string[]; fingerprint: string } {
  const { ivm } = loadSandboxBuild();
  const isolate = new ivm.Isolate({ memoryLimit: 128 });
  try {
    const context = isolate.createContextSync();
    isolate.compileScriptSync(source, { filename: SANDBOX_FILENAME }).runSync(context);
    const runtime = context.global.getSync('__cfguRuntime', { reference: true }) as IVM.Reference<Record<string, unknown>>;
    const seal = runtime.getSync('seal', { reference: true }) as IVM.Reference<(warm: string) => string>;
    const fingerprint = runtime.getSync('fingerprint', { reference: true }) as IVM.Reference<() => string>;
    const report = JSON.parse(seal.applySync(undefined, [warm], { timeout: 120_000 }) as string) as { warm: string; unsealed: string[] };
    return { warm: report.warm, unsealed: report.unsealed, fingerprint: fingerprint.applySync(undefined, [], { timeout: 120_000 }) as string };
  } finally {
    isolate.dispose();
  }
}

/** A sandbox child on `bundle`: its ready line, then the answer to one job that needs zod, chai and lodash. */
async function childOn(bundle: string): Promise<{ ready: Record<string, any>; answer: Record<string, any> }> {
  const config = JSON.stringify({ bundle, timeoutMs: 10_000, memoryMb: 64, retireHeapMb: 32 });
  const child = spawn(process.execPath, ['--no-node-snapshot', CHILD, config], { stdio: ['pipe', 'pipe', 'ignore'], env: {} });
  try {
    const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
    const next = async (): Promise<Record<string, any>> => JSON.parse((await lines.next()).value as string) as Record<string, any>;
    const ready = await next();
    const expression = "z.object({ port: z.number().int().optional(), tags: z.array(z.enum(['a', 'b'])).default([]) }).safeParse({ tags: ['a'] }).success && expect(_.trim(' x ')).to.equal('x') !== undefined";
    child.stdin.write(`${JSON.stringify({ t: 'bool', expression, context: null })}\n`);
    return { ready, answer: await next() };
  } finally {
    child.kill('SIGKILL');
  }
}

/** A copy of the bundle in a folder of its own, with the given plan file and code cache file (or none). */
function bundleCopy(plan?: string, cache?: Buffer): string {
  const bundle = join(tempDir('cfgu-prepared-'), 'libraries.js');
  copyFileSync(BUNDLE, bundle);
  if (plan !== undefined) writeFileSync(preparedPaths(bundle).plan, plan);
  if (cache) writeFileSync(preparedPaths(bundle).cache, cache);
  return bundle;
}

describe('the sandbox warm-up plan and code cache', () => {
  it('the build made a plan for this very bundle, and a code cache', () => {
    const plan = builtPlan();
    assert.equal(plan.bundle, bundleDigest(source));
    assert.ok(plan.steps.length > 50, `a plan of ${plan.steps.length} steps`);
    assert.ok(readFileSync(preparedPaths(BUNDLE).cache).length > 100_000);
  });

  it('the plan leaves the realm the full warm-up leaves; a plan missing a step does not', () => {
    const plan = builtPlan();
    const full = sealed('full');
    const replayed = sealed(JSON.stringify(plan.steps));
    assert.equal(full.warm, 'full');
    assert.equal(replayed.warm, 'plan');
    assert.deepEqual([full.unsealed, replayed.unsealed], [[], []]);
    // Compared within one process: the realm's shape depends on the process's V8 flags (the build's step runs with
    // --no-node-snapshot, as children do; this test process does not), so the file's fingerprint is not this one.
    assert.equal(replayed.fingerprint, full.fingerprint);
    // Leaving a factory step out (the first) or the last step (a method): the check sees the difference.
    for (const drop of [0, plan.steps.length - 1]) {
      const partial = sealed(JSON.stringify(plan.steps.filter((_, i) => i !== drop)));
      assert.notEqual(partial.fingerprint, full.fingerprint, `without step ${drop} (${JSON.stringify(plan.steps[drop])})`);
    }
  });

  /** The child on the built bundle: the reference of the cases below. */
  let reference: Promise<{ ready: Record<string, any>; answer: Record<string, any> }> | undefined;
  const built = () => (reference ??= childOn(BUNDLE));

  it('a child uses both: warm-up by plan, code cache accepted, and it evaluates', async () => {
    const { ready, answer } = await built();
    assert.equal(ready.t, 'ready');
    assert.equal(ready.seal.warm, 'plan');
    assert.equal(ready.codeCache, 'accepted');
    assert.deepEqual(ready.seal.unsealed, []);
    assert.deepEqual({ ...answer, cpu: undefined }, { t: 'value', ok: true, value: true, cpu: undefined });
  });

  it('a plan of another bundle, a plan that breaks half-way, steps that are not a list, and a rejected code cache: the full warm-up, and it works', async () => {
    const plan = builtPlan();
    const broken = plan.steps.slice();
    broken[Math.floor(broken.length / 2)] = ['f', '', 'noSuchFactory', 0];
    const cases: Array<[string, string | undefined, Buffer | undefined, string, string]> = [
      ['another bundle', JSON.stringify({ ...plan, bundle: bundleDigest(`${source}\n`) }), undefined, 'full', 'none'],
      ['a broken step', JSON.stringify({ ...plan, steps: broken }), undefined, 'full', 'none'],
      ['steps that are not a list', JSON.stringify({ ...plan, steps: { 0: plan.steps[0] } }), undefined, 'full', 'none'],
      ['a code cache of other bytes', JSON.stringify(plan), Buffer.alloc(4096, 7), 'plan', 'rejected'],
    ];
    const frozen = (await built()).ready.seal.frozen as number;
    for (const [name, planText, cache, warm, codeCache] of cases) {
      const { ready, answer } = await childOn(bundleCopy(planText, cache));
      assert.equal(ready.seal.warm, warm, name);
      assert.equal(ready.codeCache, codeCache, name);
      assert.deepEqual(ready.seal.unsealed, [], name);
      assert.equal(ready.seal.frozen, frozen, name);
      assert.deepEqual({ ...answer, cpu: undefined }, { t: 'value', ok: true, value: true, cpu: undefined }, name);
    }
  });
});
