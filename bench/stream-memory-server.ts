// The server of bench/stream-memory.mjs: the app built from src/ as `cfgu serve` builds it (one process, logging and
// the audit off), listening on a free loopback port, run with --expose-gc. Prints `{"port"}` once listening; then,
// for each `stats` line on standard input, one line with the watch counters and the process's memory after two full
// garbage collections. Ends when standard input ends.
//
//   node --expose-gc --import tsx bench/stream-memory-server.ts CONFIGU_FILE
import { createInterface } from 'node:readline';
import { loadConfiguration } from '../src/config/index.js';
import { createStoreRegistry } from '../src/stores/index.js';
import { buildServer, settingsWith } from '../src/server/index.js';

const [file] = process.argv.slice(2);
const registry = createStoreRegistry(await loadConfiguration({ file: file! }), { logger: { warn: () => undefined } });
await registry.init();
const app = await buildServer({
  registry,
  settings: settingsWith({ log: { enabled: false }, audit: { enabled: false }, watch: { maxWatchers: 100_000, maxWatchersPerClient: 100_000, heartbeatMs: 3_600_000 } }),
  logger: false,
  ready: true,
});
await app.listen({ port: 0, host: '127.0.0.1', backlog: 4096 });
process.stdout.write(`${JSON.stringify({ port: (app.server.address() as { port: number }).port })}\n`);

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with node --expose-gc');
const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  if (line.trim() !== 'stats') continue;
  // Two collections and a turn of the event loop between them: what is still reachable is what the streams pin.
  gc();
  await new Promise((r) => setImmediate(r));
  gc();
  const hub = app.cfgu.watch;
  const m = process.memoryUsage();
  process.stdout.write(`${JSON.stringify({ ...hub.stats, watchers: hub.watchers, rss: m.rss, heapUsed: m.heapUsed, external: m.external, arrayBuffers: m.arrayBuffers })}\n`);
}
await app.close();
await registry.close();
