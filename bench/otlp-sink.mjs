// An OTLP/HTTP traces sink in a process of its own (receiving spans is the collector's cost, not the server's): it
// prints its loopback port on the first line, answers every export (protobuf or JSON, bench/otlp.mjs), counts the
// spans, and prints `spans N` when sent SIGTERM.
//   node bench/otlp-sink.mjs
import { createServer } from 'node:http';
import { sinkHandler } from './otlp.mjs';

let spans = 0;
const server = createServer(sinkHandler((n) => (spans += n)));
server.listen(0, '127.0.0.1', () => console.log(server.address().port));
process.on('SIGTERM', () => {
  console.log(`spans ${spans}`);
  process.exit(0);
});
