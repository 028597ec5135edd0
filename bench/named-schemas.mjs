// A named schema against the same schema inline (docs/server.md, "Named schemas"), on one server of this build:
// W10 and W100 of bench/fixture.mjs, each sent inline (the body of every other benchmark) and by name (`"schema":
// "w10"`, the same keys in a file that `.configu`'s `schemas` names). Both variants of a workload are measured in the
// same run, in alternating rounds (the order flipped every round, so that the machine's load, which moves, falls on
// both alike). The figure is CPU time (user + system) of the server's whole process tree (the worker and its sandbox
// children) per request, read from /proc around each round of `--seconds` of load, as bench/ab-builds.mjs does; best
// and median round, and
// the bytes of each request body.
//
//   node bench/named-schemas.mjs [--rounds 6] [--seconds 8] [--connections 10] [--workloads w10,w100] [--padded] [--bin bin/cfgu.js]
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isDeepStrictEqual, parseArgs } from 'node:util';
import { workloads, writeFixture } from './fixture.mjs';
import { cpuSeconds, freePort, load, waitReady } from './harness.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '6' },
    seconds: { type: 'string', default: '8' },
    connections: { type: 'string', default: '10' },
    workloads: { type: 'string', default: 'w10,w100' },
    bin: { type: 'string', default: join(here, '..', 'bin', 'cfgu.js') },
    padded: { type: 'boolean', default: false },
  },
});
const byName = { w10: workloads[1], w100: workloads[2], w1000: workloads[4] };

// The fixture, with each chosen workload's schema also in a file of its own, named in `.configu`.
const dir = join(here, '.tmp', 'named-schemas');
const config = writeFixture(dir);
const configu = JSON.parse(readFileSync(config, 'utf8'));
configu.schemas = {};
const variants = [];
for (const id of args.workloads.split(',')) {
  const w = byName[id];
  if (!w) throw new Error(`unknown workload ${id} (w10, w100, w1000)`);
  writeFileSync(join(dir, `${id}.cfgu.json`), JSON.stringify(w.body[0].schema, null, 2));
  configu.schemas[id] = `${id}.cfgu.json`;
  const named = w.body.map((c) => ({ ...c, schema: id }));
  variants.push({ id, variant: 'inline', body: JSON.stringify(w.body), expected: w.expected });
  variants.push({ id, variant: 'named', body: JSON.stringify(named), expected: w.expected });
  // The same named body padded with spaces to 256 bytes, the body cache's smallest entry (src/server/http/body/
  // body-cache.ts): parsed, frozen and checked once, as the inline bodies are.
  if (args.padded) variants.push({ id, variant: 'named-padded', body: JSON.stringify(named).padEnd(256, ' '), expected: w.expected });
}
writeFileSync(config, JSON.stringify(configu, null, 2));

const port = await freePort();
const base = `http://127.0.0.1:${port}`;
const server = spawn(process.execPath, [resolve(args.bin), 'serve', '--config', config, '--port', String(port), '--host', '127.0.0.1', '--workers', '1'], {
  env: { ...process.env, CONFIGU_LOG_ENABLED: 'false' },
  stdio: ['ignore', 'ignore', 'inherit'],
});
const median = (xs) => [...xs].sort((x, y) => x - y)[xs.length >> 1];
try {
  await waitReady(base);
  const results = new Map();
  for (const v of variants) {
    const res = await fetch(`${base}/export`, { method: 'POST', body: v.body, headers: { 'content-type': 'application/json' } });
    const body = await res.json();
    if (res.status !== 200 || !isDeepStrictEqual(body, v.expected)) throw new Error(`${v.id} ${v.variant}: ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
    // Warm up: JIT, caches, sandbox children.
    await load({ url: `${base}/export`, method: 'POST', body: v.body, connections: 4, duration: 2 });
    results.set(`${v.id}:${v.variant}`, []);
  }
  for (let round = 0; round < Number(args.rounds); round++) {
    const order = round % 2 === 0 ? variants : [...variants].reverse();
    for (const v of order) {
      const before = cpuSeconds(server.pid);
      const r = await load({ url: `${base}/export`, method: 'POST', body: v.body, connections: Number(args.connections), duration: Number(args.seconds) });
      const cpuMs = ((cpuSeconds(server.pid) - before) * 1000) / r.total;
      if (r.errors || r.non2xx) throw new Error(`${v.id} ${v.variant}: ${r.errors} errors, ${r.non2xx} non-2xx of ${r.total}`);
      results.get(`${v.id}:${v.variant}`).push(cpuMs);
      process.stderr.write(`${v.id} ${v.variant} round ${round + 1}: ${cpuMs.toFixed(4)} ms CPU/request, ${r.rps.toFixed(0)} req/s\n`);
    }
  }
  console.log(`${args.rounds} rounds x ${args.seconds} s, ${args.connections} connections, one worker (${resolve(args.bin)})`);
  console.log('| workload | variant | body bytes | CPU ms/req best | median | vs inline (best) | vs inline (median) |');
  console.log('|---|---|---|---|---|---|---|');
  const pct = (x, y) => `${((y / x - 1) * 100).toFixed(1)}%`;
  for (const v of variants) {
    const inline = results.get(`${v.id}:inline`);
    const mine = results.get(`${v.id}:${v.variant}`);
    console.log(
      `| ${v.id} | ${v.variant} | ${Buffer.byteLength(v.body)} | ${Math.min(...mine).toFixed(4)} | ${median(mine).toFixed(4)} | ${pct(Math.min(...inline), Math.min(...mine))} | ${pct(median(inline), median(mine))} |`,
    );
  }
} finally {
  server.kill('SIGTERM');
}
