// Cost of putting one sandbox job on the wire, before and after the static-half wire (src/expressions/wire/job-wire.ts):
//   npx tsx bench/job-encode.ts [--rounds 7] [--iterations 20000]
// "before": the old line, JSON.stringify({ t: 'job', job: encodeJob(job) }) (protocol.ts), written as it is and handed
// to the isolate as it is by the child. "after": the host's encodeWire + lineFor (the child already holds the static
// half, the steady state; the first job to each child carries it once: "after, first job"), the child's decode (text
// only: it splices the held static half into the isolate's line), and the isolate's decode (JSON.parse of the line it
// gets plus wireJobOf, against JSON.parse of the old line; measured here in Node, outside the isolate). Jobs are shaped as the engine makes them (deep-frozen declarations from a request body, one
// const and two tests in W10; 10 consts and 10 tests in W100). Times are process CPU µs per job (median over rounds).
import { parseArgs } from 'node:util';
import { freezeDeep } from '../src/core/frozen.js';
import { ChildStatics, childStaticLimit, StaticRegistry, childRecord, encodeWire, lineFor } from '../src/expressions/wire/job-wire.js';
import { encodeJob, wireJobOf, type SandboxRequest } from '../src/expressions/wire/protocol.js';
import type { ConfigView, ExpressionJob } from '../src/expressions/index.js';

const { values: args } = parseArgs({ options: { rounds: { type: 'string', default: '7' }, iterations: { type: 'string', default: '20000' } } });
const rounds = Number(args.rounds);
const iterations = Number(args.iterations);

function makeJob(n: number, withTests: number, withConsts: number): ExpressionJob {
  const keys: Record<string, Record<string, unknown>> = {};
  for (let i = 0; i < n; i++) {
    const cfgu: Record<string, unknown> = {};
    if (i < withTests) cfgu.test = i % 2 ? 'Number.isInteger($.value) && $.value > 0' : 'validator.isFQDN($.value) || $.value === "localhost"';
    else if (i < withTests + withConsts) cfgu.const = `postgres://{{ $.configs.K0.value }}@{{ $.configs.K1.value }}:{{ $.configs.K${i}.value }}/app`;
    else if (i % 5 === 0) cfgu.default = 'info';
    keys[`K${i}`] = cfgu;
  }
  freezeDeep(keys);
  const configs: Record<string, ConfigView> = {};
  for (const key of Object.keys(keys)) {
    const v = `value-of-${key}-${Math.random().toString(36).slice(2, 8)}`;
    configs[key] = { key, storedValue: v, value: v, origin: 'store', cfgu: keys[key]!, labels: [] };
  }
  const consts = freezeDeep(
    Object.keys(keys)
      .filter((k) => keys[k]!.const)
      .map((key) => ({ key, template: keys[key]!.const as string })),
  );
  const tests = Object.keys(keys)
    .filter((k) => keys[k]!.test)
    .map((key) => freezeDeep({ key, expressions: [keys[key]!.test as string] }));
  return {
    input: { store: { type: 'json-file' }, set: { path: 'prod/eu', hierarchy: ['', 'prod', 'prod/eu'] }, schema: { keys } },
    configs,
    consts,
    tests,
  };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;

function time(fn: () => unknown): number {
  const per: number[] = [];
  for (let r = 0; r < rounds; r++) {
    // CPU time of this thread's process (user + system), not wall time: the machine is shared.
    const start = process.cpuUsage();
    for (let i = 0; i < iterations; i++) fn();
    const used = process.cpuUsage(start);
    per.push((used.user + used.system) / iterations);
  }
  return median(per);
}

console.log('| job | form | host encode µs | child decode µs | isolate parse + decode µs | bytes written per job |');
console.log('|---|---|---|---|---|---|');
for (const [name, job] of [
  ['10 keys (2 tests, 1 const)', makeJob(10, 2, 1)],
  ['100 keys (10 tests, 10 consts)', makeJob(100, 10, 10)],
] as const) {
  let sink = 0;
  const legacy = JSON.stringify({ t: 'job', job: encodeJob(job) });
  const before = time(() => (sink += JSON.stringify({ t: 'job', job: encodeJob(job) }).length));
  const parseBefore = time(() => (sink += Object.keys((JSON.parse(legacy) as { job: { configs: object } }).job.configs).length));
  console.log(`| ${name} | before: whole job as an object | ${before.toFixed(2)} | 0 (passed through) | ${parseBefore.toFixed(2)} | ${legacy.length + 1} |`);

  const registry = new StaticRegistry();
  const held = childRecord(childStaticLimit(64));
  const child = new ChildStatics(childStaticLimit(64));
  const full = lineFor(encodeWire(job, registry), held);
  const byId = lineFor(encodeWire(job, registry), held);
  const [staticLine] = full.split('\n');
  child.decode(staticLine!);
  const isolateLine = (child.decode(byId) as { line: string }).line;
  const isolateJob = () => {
    const r = JSON.parse(isolateLine) as SandboxRequest & { t: 'j' };
    return wireJobOf(r.s, r.d);
  };
  if (JSON.stringify(isolateJob()) !== JSON.stringify(encodeJob(job))) throw new Error('the wire does not give the isolate the same job');
  const after = time(() => (sink += lineFor(encodeWire(job, registry), held).length));
  const decode = time(() => (sink += (child.decode(byId) as { line: string }).line.length));
  const parseAfter = time(() => (sink += Object.keys(isolateJob().configs).length));
  console.log(`| ${name} | after: by id (steady state) | ${after.toFixed(2)} | ${decode.toFixed(2)} | ${parseAfter.toFixed(2)} | ${byId.length + 1} |`);
  console.log(`| ${name} | after: first job to a child (static half included) | — | — | — | ${full.length + 1} |`);
  if (sink < 0) console.log(sink);
}
