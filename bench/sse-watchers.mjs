// Many SSE watchers on one server process: N clients hold `POST /export` with `Accept: text/event-stream` open on
// the same pipeline; then one change is written to the json-file store by this script (another program: a temporary
// file renamed over the store file, as editors do). Measured: the server's resident memory per watcher (RSS with N
// streams open minus RSS before, over N), the time from the rename to the change event at each client (p50, p99,
// max = all of them), and the number of evaluations the server ran for that change (the goal is 1).
//
//   node bench/sse-watchers.mjs [--watchers 5000] [--changes 3]
//
// The server runs in a child process (tsx bench/sse-server.ts: the app built from src/ exactly as `cfgu serve` builds
// it, plus a line of counters on request), so the clients' own work does not count in its memory. Prints one JSON line.
import { spawn } from 'node:child_process';
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { jsonLines } from './harness.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({ options: { watchers: { type: 'string', default: '5000' }, changes: { type: 'string', default: '3' } } });
const N = Number(args.watchers);
const CHANGES = Number(args.changes);

const dir = join(root, 'bench', '.tmp', `sse-${process.pid}`);
mkdirSync(dir, { recursive: true });
const dataFile = join(dir, 'data.json');
const writeData = (value) => {
  const tmp = `${dataFile}.tmp`;
  writeFileSync(tmp, JSON.stringify([{ set: 'prod', key: 'GREETING', value }, { set: '', key: 'PORT', value: '8080' }]));
  renameSync(tmp, dataFile);
};
writeData('v0');
writeFileSync(join(dir, '.configu'), JSON.stringify({ stores: { main: { type: 'json-file', configuration: { path: dataFile } } } }));

const server = spawn(join(root, 'node_modules', '.bin', 'tsx'), [join(root, 'bench', 'sse-server.ts'), join(dir, '.configu'), String(N + 100)], {
  stdio: ['pipe', 'pipe', 'inherit'],
});
const ask = jsonLines(server);
const { port } = await ask();
const stats = () => ask('stats');

const body = JSON.stringify([{ set: 'prod', schema: { keys: { GREETING: {}, PORT: {} } } }]);
const clients = [];
function open() {
  return new Promise((resolve, reject) => {
    const c = { events: [], arrivals: [] };
    const req = request({ host: '127.0.0.1', port, path: '/export', method: 'POST', agent: false, headers: { 'content-type': 'application/json', accept: 'text/event-stream', 'content-length': Buffer.byteLength(body) } });
    req.on('error', reject);
    req.on('response', (res) => {
      if (res.statusCode !== 200) return reject(new Error(`status ${res.statusCode}`));
      let buf = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => {
        buf += chunk;
        let end;
        while ((end = buf.indexOf('\n\n')) !== -1) {
          const frame = buf.slice(0, end);
          buf = buf.slice(end + 2);
          const data = frame.split('\n').find((l) => l.startsWith('data: '));
          if (data) {
            c.events.push(data.slice(6));
            c.arrivals.push(performance.now());
            if (c.events.length === 1) resolve(c);
          }
        }
      });
    });
    req.end(body);
    c.req = req;
  });
}

const before = await stats();
const t0 = performance.now();
for (let i = 0; i < N; i += 250) {
  const batch = [];
  for (let j = i; j < Math.min(N, i + 250); j++) batch.push(open());
  clients.push(...(await Promise.all(batch)));
}
const connectSeconds = (performance.now() - t0) / 1000;
const open_ = await stats();

const pct = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))];
const changes = [];
for (let k = 1; k <= CHANGES; k++) {
  const evaluations = (await stats()).evaluations;
  const start = performance.now();
  writeData(`v${k}`);
  await new Promise((resolve) => {
    const check = () => (clients.every((c) => c.events.length > k) ? resolve() : setTimeout(check, 5));
    check();
  });
  const lat = clients.map((c) => c.arrivals[k] - start).sort((a, b) => a - b);
  // Let a late second evaluation (there should be none) show in the counter before reading it.
  await new Promise((r) => setTimeout(r, 500));
  const after = await stats();
  const duplicates = clients.filter((c) => c.events.length !== k + 1).length;
  changes.push({
    p50Ms: Math.round(pct(lat, 50)),
    p99Ms: Math.round(pct(lat, 99)),
    allMs: Math.round(lat[lat.length - 1]),
    evaluations: after.evaluations - evaluations,
    clientsWithExtraEvents: duplicates,
  });
}

const result = {
  watchers: N,
  connectSeconds: Math.round(connectSeconds * 10) / 10,
  rssBeforeMB: Math.round(before.rss / 1048576),
  rssOpenMB: Math.round(open_.rss / 1048576),
  rssPerWatcherKB: Math.round((open_.rss - before.rss) / N / 102.4) / 10,
  heapPerWatcherKB: Math.round((open_.heapUsed - before.heapUsed) / N / 102.4) / 10,
  serverWatchers: open_.watchers,
  changes,
};
for (const c of clients) c.req.destroy();
server.stdin.end();
await new Promise((r) => server.on('exit', r));
console.log(JSON.stringify(result));
