// The long fuzz campaign (the short one runs in `npm test`: test/fuzz/fuzz.test.ts). Same generator and oracle.
//
//   node scripts/fuzz.mjs [--seed N] [--requests M] [--url URL] [--profile full|quick] [--concurrency C]
//                         [--resend SHARE] [--workers W] [--timeout MS] [--out DIR] [--minimize] [--bin PATH]
//   node scripts/fuzz.mjs --replay FILE [--url URL]
//
// Without --url it starts `cfgu serve` on a fixture (a free port), and for the order check a second, fresh one.
// Prints a summary by class (oracle check @ generator family), the server's memory before and after, and writes one
// replayable case file per class into --out (default fuzz-out/). Exit code 1 when the oracle found anything.
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { register } from 'tsx/esm/api';
import { memory } from '../bench/proc-memory.mjs';

register();
const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const fuzz = await import('../test/fuzz/campaign.ts');

const { values: args } = parseArgs({
  options: {
    seed: { type: 'string', default: '1' },
    requests: { type: 'string', default: '20000' },
    url: { type: 'string' },
    profile: { type: 'string', default: 'full' },
    concurrency: { type: 'string', default: '4' },
    resend: { type: 'string', default: '0.2' },
    workers: { type: 'string', default: '2' },
    timeout: { type: 'string', default: '30000' },
    out: { type: 'string', default: 'fuzz-out' },
    minimize: { type: 'boolean', default: false },
    replay: { type: 'string' },
    bin: { type: 'string' },
  },
});
// --bin: serve with another build's bin/cfgu.js (an older checkout), same generator and oracle.
if (args.bin) process.env.CFGU_FUZZ_BIN = resolve(args.bin);

const mb = (megabytes) => `${megabytes.toFixed(0)} MB`;

if (args.replay) {
  const file = fuzz.readCaseFile(resolve(args.replay));
  console.log(`replaying ${args.replay}: ${file.class}, ${file.sequence.length} request(s)${file.compareAlone && !args.url ? '; on a second server, the last one first, then the rest in reverse' : ''}`);
  const r = await fuzz.replay(file, { url: args.url, timeoutMs: Number(args.timeout) });
  r.answers.forEach((a, i) => console.log(`  #${i} ${a.error ?? a.status} ${a.body.slice(0, 300)}`));
  if (r.alone) console.log(`  last case first, second server: ${r.alone.error ?? r.alone.status} ${r.alone.body.slice(0, 300)}`);
  for (const f of r.findings) console.log(`FAIL ${fuzz.classOf(f)}: ${f.message}`);
  console.log(r.findings.length ? `${r.findings.length} oracle failure(s)` : 'oracle: pass');
  process.exit(r.findings.length ? 1 : 0);
}

const options = {
  seed: Number(args.seed),
  requests: Number(args.requests),
  profile: args.profile,
  concurrency: Number(args.concurrency),
  resendShare: Number(args.resend),
  freshServer: !args.url,
  timeoutMs: Number(args.timeout),
  workers: Number(args.workers),
  url: args.url,
  log: (l) => console.log(l),
};
const mem = {};
let sampler;
options.onServer = (server, phase) => {
  mem[phase] = memory(server.pid);
  if (phase === 'start') {
    mem.peak = mem.start;
    sampler = setInterval(() => {
      const m = memory(server.pid);
      if (m.server + m.sandbox > mem.peak.server + mem.peak.sandbox) mem.peak = m;
    }, 2000);
  } else clearInterval(sampler);
};
console.log(`fuzz: seed ${options.seed}, ${options.requests} requests, profile ${options.profile}, concurrency ${options.concurrency}, ${options.url ?? `cfgu serve --workers ${options.workers}`}`);
const result = await fuzz.runCampaign(options);
clearInterval(sampler);

const groups = fuzz.groupFindings(result.findings);
const latencies = result.answers.filter((a) => !a.error).map((a) => a.ms).sort((a, b) => a - b);
const pct = (p) => latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))]?.toFixed(1);
console.log(`\n${result.cases.length} cases in ${(result.ms / 1000).toFixed(1)} s; statuses ${JSON.stringify(result.statusCounts)}`);
console.log(`latency of first answers: p50 ${pct(50)} ms, p99 ${pct(99)} ms, max ${latencies[latencies.length - 1]?.toFixed(0)} ms`);
if (mem.start && mem.end) {
  const total = (m) => m.server + m.sandbox;
  console.log(
    `memory (RSS): start ${mb(mem.start.server)} server + ${mb(mem.start.sandbox)} sandbox; end ${mb(mem.end.server)} + ${mb(mem.end.sandbox)}; ` +
      `peak ${mb(total(mem.peak))}; growth ${(((total(mem.end) - total(mem.start)) / total(mem.start)) * 100).toFixed(0)}%`,
  );
}
console.log(`\n${groups.size} class(es) of findings:`);
const outDir = resolve(root, args.out);
for (const [cls, fs] of groups) {
  const f = fs[0];
  let prefix;
  if (args.minimize && f.check.startsWith('nondeterministic') && f.check !== 'nondeterministic-limit-kind') {
    const target = result.cases[f.index];
    const window = 3000;
    const before = result.cases.slice(Math.max(0, f.index - window), f.index);
    const after = result.orders.fresh.filter((i) => i > f.index).reverse().slice(0, window).map((i) => result.cases[i]);
    console.log(`  minimizing ${cls} (case ${f.index})`);
    const culprit =
      (await fuzz.findCulprit(target, before, { timeoutMs: options.timeoutMs, workers: options.workers, log: console.log })) ??
      (await fuzz.findCulprit(target, after, { timeoutMs: options.timeoutMs, workers: options.workers, log: console.log }));
    if (culprit) prefix = [culprit];
  }
  // without a single culprit, the replay carries what the server saw just before (at most 500 cases)
  if (!prefix && f.check.startsWith('nondeterministic')) prefix = result.cases.slice(Math.max(0, f.index - 500), f.index);
  const path = fuzz.writeCaseFile(outDir, fuzz.caseFile(f, result, options.profile, prefix));
  console.log(`- ${cls}: ${fs.length}x, first case ${f.index}: ${f.message.slice(0, 240)}\n  ${path}`);
}
if (result.serverOutput.includes('"level":50')) console.log('\nthe server logged errors (level 50): see a replay with log lines on');
process.exit(groups.size ? 1 : 0);
