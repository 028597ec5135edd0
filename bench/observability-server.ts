// One server of the observability benchmark (bench/observability.mjs starts one per variant): the real app, engine,
// stores and sandbox in one process, with metrics, traces and the request log set as the variant says.
//   tsx bench/observability-server.ts '{"config":"...","port":1234,"metrics":true,"tracing":"http://127.0.0.1:4318/v1/traces","protocol":"http/protobuf","log":"off|sync|async","probes":true}'
import { pino, type Logger } from 'pino';
import { loadConfiguration } from '../src/config/index.js';
import { createStoreRegistry } from '../src/stores/index.js';
import { createSandboxEvaluator } from '../src/expressions/index.js';
import { buildServer, settingsWith } from '../src/server/index.js';
import { createLogger, REDACT_PATHS } from '../src/server/observe/logger.js';
import { startTracing } from '../src/server/observe/tracing.js';

const v = JSON.parse(process.argv[2]!) as { config: string; port: number; metrics: boolean; tracing?: string; protocol?: string; log: 'off' | 'sync' | 'async'; probes?: boolean };

const tracing = v.tracing
  ? startTracing({
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: v.tracing,
      ...(v.protocol ? { OTEL_EXPORTER_OTLP_PROTOCOL: v.protocol } : {}),
      OTEL_TRACES_SAMPLER: 'always_on',
      // The batch processor's defaults, as an operator runs it (bench/observability.mjs counts what arrives).
    })
  : undefined;

const settings = settingsWith({ metrics: { enabled: v.metrics }, log: { enabled: v.log !== 'off', probes: v.probes ?? false } });
// `sync`: pino's synchronous stdout writer (what the server used before); `async`: createLogger's buffered one.
const logger: Logger =
  v.log === 'sync'
    ? pino(
        {
          level: 'info',
          base: { pid: process.pid },
          timestamp: pino.stdTimeFunctions.isoTime,
          redact: { paths: REDACT_PATHS, censor: '[redacted]' },
          formatters: { level: (label) => ({ level: label }) },
        },
        pino.destination({ dest: 1, sync: true }),
      )
    : createLogger(settings);

const configuration = await loadConfiguration({ file: v.config });
const registry = createStoreRegistry(configuration, { logger });
await registry.init();
const evaluator = createSandboxEvaluator({ workers: 1 });
await evaluator.ready();
const app = await buildServer({ registry, evaluator, settings, logger, ready: true });
await app.listen({ port: v.port, host: '127.0.0.1', backlog: 4096 });

process.once('SIGTERM', async () => {
  await app.close();
  await Promise.allSettled([registry.close(), evaluator.close(), tracing?.shutdown()]);
  process.exit(0);
});
