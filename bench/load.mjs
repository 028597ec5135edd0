// Load generator, run as its own process so it does not share a CPU budget with the server's event loop:
//   node bench/load.mjs '<json options>'  -> prints one JSON line with the autocannon result summary.
import autocannon from 'autocannon';

const opts = JSON.parse(process.argv[2]);
const result = await autocannon({
  url: opts.url,
  method: opts.method,
  body: opts.body,
  headers: { ...(opts.body ? { 'content-type': 'application/json' } : {}), ...opts.headers },
  connections: opts.connections,
  duration: opts.duration,
  pipelining: 1,
});
process.stdout.write(
  JSON.stringify({
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    max: result.latency.max,
    errors: result.errors + result.timeouts,
    non2xx: result.non2xx,
    total: result.requests.total,
  }) + '\n',
);
