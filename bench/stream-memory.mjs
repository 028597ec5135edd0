// What SSE streams pin in the server's memory. For each scenario a fresh server process (bench/stream-memory-server.ts,
// the app built from src/, run with --expose-gc) serves a json-file store whose answer is `--answer-kb` KiB; this
// script opens `--streams` SSE streams of POST /export, waits until each has its first event, and asks the server for
// its memory after two full garbage collections (RSS, V8 heap used, external memory). Scenarios:
//   baseline   no stream (one plain request made, so the evaluation path is warm)
//   same       N streams from one client (one address), all of the same body
//   distinct   N streams from one client, each of a different body (so N pipelines, N answers)
//   clients    N streams from N clients (addresses 127.0.0.2 ... 127.0.0.N+1), all of the same body
// With --paused the clients never read after the response headers (slow readers): what the server buffers for them
// counts too. Prints one JSON line per scenario, then a Markdown table (per-stream figures: minus the baseline, / N).
//
//   node bench/stream-memory.mjs [--streams 50] [--answer-kb 1024] [--paused]
import { spawn } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { jsonLines } from './harness.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({
  options: { streams: { type: 'string', default: '50' }, 'answer-kb': { type: 'string', default: '1024' }, paused: { type: 'boolean', default: false } },
});
const N = Number(args.streams);
const ANSWER_KB = Number(args['answer-kb']);
const KEYS = 16;

const dir = join(root, 'bench', '.tmp', `stream-memory-${process.pid}`);
mkdirSync(dir, { recursive: true });
const valueBytes = Math.max(1, Math.floor((ANSWER_KB * 1024) / KEYS));
const data = [];
for (let k = 0; k < KEYS; k++) data.push({ set: '', key: `K${k}`, value: String.fromCharCode(97 + (k % 26)).repeat(valueBytes) });
writeFileSync(join(dir, 'data.json'), JSON.stringify(data));
writeFileSync(join(dir, '.configu'), JSON.stringify({ stores: { main: { type: 'json-file', configuration: { path: join(dir, 'data.json') } } } }));

/** The body of stream `i`: the same keys, and in `distinct` a different (absent) extra key per stream. */
const bodyOf = (distinct, i) => {
  const keys = Object.fromEntries(data.map((d) => [d.key, {}]));
  if (distinct) keys[`EXTRA_${i}`] = {};
  return JSON.stringify([{ store: 'main', set: '', schema: { keys } }]);
};

async function startServer() {
  const server = spawn(process.execPath, ['--expose-gc', '--import', 'tsx', join(root, 'bench', 'stream-memory-server.ts'), join(dir, '.configu')], {
    cwd: root,
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const ask = jsonLines(server);
  const { port } = await ask();
  return {
    port,
    stats: () => ask('stats'),
    stop: async () => {
      server.stdin.end();
      await new Promise((r) => server.on('exit', r));
    },
  };
}

function post(port, body, stream, localAddress = '127.0.0.1') {
  return new Promise((resolve, reject) => {
    const headers = { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...(stream ? { accept: 'text/event-stream' } : {}) };
    const req = request({ host: '127.0.0.1', port, localAddress, path: '/export', method: 'POST', agent: false, headers });
    req.on('error', reject);
    req.on('response', (res) => {
      if (res.statusCode !== 200) return reject(new Error(`status ${res.statusCode}`));
      if (!stream) {
        res.resume();
        res.on('end', () => resolve(req));
        return;
      }
      if (args.paused) {
        // A slow reader: reads the first bytes (the stream is open), then nothing more.
        res.once('data', () => {
          res.pause();
          resolve(req);
        });
        return;
      }
      let seen = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => {
        if (seen === null) return;
        seen += chunk;
        if (seen.includes('\n\n')) {
          seen = null;
          resolve(req);
        }
      });
    });
    req.end(body);
  });
}

const scenarios = {
  baseline: () => [],
  same: () => Array.from({ length: N }, () => ({ body: bodyOf(false, 0) })),
  distinct: () => Array.from({ length: N }, (_, i) => ({ body: bodyOf(true, i) })),
  clients: () => Array.from({ length: N }, (_, i) => ({ body: bodyOf(false, 0), localAddress: `127.0.0.${i + 2}` })),
};

const results = [];
for (const [name, plan] of Object.entries(scenarios)) {
  const server = await startServer();
  await post(server.port, bodyOf(false, 0), false);
  const before = await server.stats();
  const open = await Promise.all(plan().map((s) => post(server.port, s.body, true, s.localAddress)));
  const after = await server.stats();
  results.push({
    scenario: name,
    streams: open.length,
    watchers: after.watchers,
    evaluations: after.evaluations,
    rssMB: Math.round(after.rss / 1048576 * 10) / 10,
    heapMB: Math.round(after.heapUsed / 1048576 * 10) / 10,
    externalMB: Math.round(after.external / 1048576 * 10) / 10,
    rssBeforeMB: Math.round(before.rss / 1048576 * 10) / 10,
    heapBeforeMB: Math.round(before.heapUsed / 1048576 * 10) / 10,
    externalBeforeMB: Math.round(before.external / 1048576 * 10) / 10,
  });
  console.log(JSON.stringify(results.at(-1)));
  for (const req of open) req.destroy();
  await server.stop();
}
rmSync(dir, { recursive: true, force: true });

const base = results[0];
const per = (r, k) => (r.streams ? Math.round(((r[k] - base[k]) * 1024) / r.streams) : 0);
console.log(`\nanswer ${ANSWER_KB} KiB, ${N} streams, clients ${args.paused ? 'not reading (paused)' : 'reading'}\n`);
console.log('| scenario | streams | evaluations | RSS MB | heap MB | external MB | RSS KB/stream | heap KB/stream | external KB/stream |');
console.log('|---|---|---|---|---|---|---|---|---|');
for (const r of results) {
  console.log(`| ${r.scenario} | ${r.streams} | ${r.evaluations} | ${r.rssMB} | ${r.heapMB} | ${r.externalMB} | ${per(r, 'rssMB')} | ${per(r, 'heapMB')} | ${per(r, 'externalMB')} |`);
}
