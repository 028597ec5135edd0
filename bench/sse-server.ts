// The server of bench/sse-watchers.mjs: the app built from src/ as `cfgu serve` builds it (one process, logging off),
// listening on a free loopback port. Prints `{"port"}` once listening; then, for each `stats` line on standard input,
// one line with the watch counters and the process's memory. Ends when standard input ends.
//
//   tsx bench/sse-server.ts CONFIGU_FILE MAX_WATCHERS
import { createInterface } from 'node:readline';
import { loadConfiguration } from '../src/config/index.js';
import { createStoreRegistry } from '../src/stores/index.js';
import { buildServer, settingsWith } from '../src/server/index.js';

const [file, maxWatchers] = process.argv.slice(2);
const registry = createStoreRegistry(await loadConfiguration({ file: file! }), { logger: { warn: () => undefined } });
await registry.init();
const app = await buildServer({
  registry,
  settings: settingsWith({ log: { enabled: false }, watch: { maxWatchers: Number(maxWatchers) } }),
  logger: false,
  ready: true,
});
await app.listen({ port: 0, host: '127.0.0.1', backlog: 4096 });
process.stdout.write(`${JSON.stringify({ port: (app.server.address() as { port: number }).port })}\n`);

const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  if (line.trim() !== 'stats') continue;
  const hub = app.cfgu.watch;
  const m = process.memoryUsage();
  process.stdout.write(`${JSON.stringify({ ...hub.stats, watchers: hub.watchers, rss: m.rss, heapUsed: m.heapUsed })}\n`);
}
await app.close();
await registry.close();
