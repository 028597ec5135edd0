// Distinct large schemas against the real binary (issue 31, "Memory has a ceiling"): N distinct schemas of about
// 650 KB (keys with a description and an enum each; one key in the store with a `test`, so the whole schema goes to
// the sandbox as a static half) are sent one after another to a server started from each `--bin` given (one server
// at a time, same bodies), and the resident memory of its server process and of its sandbox children is read from
// /proc (bench/proc-memory.mjs) before, every 10 schemas, and after. Prints one line per sample and a JSON summary.
//
//   node bench/large-schemas.mjs [--schemas 100] [--bin PATH]... [--heap MB] [--env NAME=VALUE]...
//
// --bin: a build's bin/cfgu.js (default this checkout's); give it twice to compare two checkouts in the same run.
// --heap: runs the servers with --max-old-space-size=MB.
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { freePort } from './harness.mjs';
import { memory } from './proc-memory.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({
  options: {
    schemas: { type: 'string', default: '100' },
    bin: { type: 'string', multiple: true, default: [join(root, 'bin', 'cfgu.js')] },
    heap: { type: 'string' },
    env: { type: 'string', multiple: true, default: [] },
  },
});
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function send(port, method, path, body) {
  return new Promise((resolve) => {
    const r = request({ host: '127.0.0.1', port, method, path, agent: false, headers: body ? { 'content-type': 'application/json' } : {} }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode, text }));
    });
    r.on('error', () => resolve({ status: 0, text: '' }));
    r.end(body);
  });
}

/** About 650 KB: 3,800 keys with a description and an enum each, and A (in the store) with a test. */
function body(i) {
  const keys = { A: { test: '$.value.length > 0' } };
  for (let k = 0; k < 3800; k++) {
    keys[`SERVICE_${i}_KEY_${String(k).padStart(5, '0')}`] = {
      description: `Key ${k} of schema ${i}: the address the service connects to, with its port`,
      enum: ['alpha', 'beta', 'gamma', `delta${k}`, 'epsilon'],
    };
  }
  return JSON.stringify([{ store: 'main', set: '', schema: { keys } }]);
}

const dir = join(root, 'bench', '.tmp', 'large-schemas');
mkdirSync(dir, { recursive: true });
writeFileSync(join(dir, 'data.json'), JSON.stringify([{ set: '', key: 'A', value: 'a' }]));
writeFileSync(join(dir, '.configu'), JSON.stringify({ stores: { main: { type: 'json-file', configuration: { path: 'data.json' } } } }));
const n = Number(args.schemas);
const extraEnv = Object.fromEntries(args.env.map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]));
const fmt = (m) => `server ${m.server.toFixed(0)} MB, sandbox ${m.sandbox.toFixed(0)} MB (${m.sandboxes} children, largest ${m.maxSandbox.toFixed(0)} MB)`;
const summary = [];

for (const bin of args.bin) {
  const port = await freePort();
  const node = args.heap ? [`--max-old-space-size=${args.heap}`] : [];
  const server = spawn(process.execPath, [...node, bin, 'serve', '--config', join(dir, '.configu'), '--port', String(port), '--host', '127.0.0.1', '--workers', '1'], {
    env: { ...process.env, CONFIGU_LOG_ENABLED: 'false', CONFIGU_SHUTDOWN_DRAIN_SECONDS: '0', ...extraEnv },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  for (;;) {
    if ((await send(port, 'GET', '/ready')).status === 200) break;
    await sleep(100);
  }
  const before = memory(server.pid);
  console.log(`${bin}: before: ${fmt(before)}`);
  const samples = [];
  const statuses = {};
  let peak = before;
  for (let i = 0; i < n; i++) {
    const r = await send(port, 'POST', '/export', body(i));
    statuses[r.status] = (statuses[r.status] ?? 0) + 1;
    const m = memory(server.pid);
    if (m.server > peak.server) peak = m;
    if (i % 10 === 9) {
      samples.push({ after: i + 1, server: Math.round(m.server), sandbox: Math.round(m.sandbox) });
      console.log(`  after ${i + 1}: ${fmt(m)}`);
    }
  }
  const metrics = (await send(port, 'GET', '/metrics')).text;
  const caches = metrics.split('\n').filter((l) => /^(cfgu_cache_(bytes|entries|limit_bytes)|nodejs_heap_size_(used|total)_bytes) /.test(l) || /^cfgu_cache_(bytes|entries)\{/.test(l));
  const after = memory(server.pid);
  console.log(`  after: ${fmt(after)}; peak server ${peak.server.toFixed(0)} MB; statuses ${JSON.stringify(statuses)}`);
  if (caches.length) console.log(`  ${caches.join('\n  ')}`);
  summary.push({ bin, before: { server: Math.round(before.server), sandbox: Math.round(before.sandbox) }, after: { server: Math.round(after.server), sandbox: Math.round(after.sandbox) }, peakServer: Math.round(peak.server), samples, statuses });
  server.kill('SIGTERM');
  await new Promise((r) => server.once('exit', r));
}
console.log(JSON.stringify(summary));
