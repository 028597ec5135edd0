/**
 * The server's pino logger: JSON lines on stdout. Request lines carry only method, path, status, duration and the
 * request id; bodies, values, overrides and headers are never logged, and `authorization` is redacted wherever it
 * might appear (defence in depth for anything that logs a request object).
 */
import { pino, type Logger } from 'pino';
import type { ServerSettings } from '../process/settings.js';

export const REDACT_PATHS = [
  'authorization',
  'headers.authorization',
  'req.headers.authorization',
  'request.headers.authorization',
  '*.headers.authorization',
  'headers.cookie',
  'req.headers.cookie',
  'body',
  'req.body',
  'configs',
  'presharedKeys',
];

/**
 * Lines go to stdout through an asynchronous buffered writer (pino's sonic-boom with `sync: false`): a request does
 * not wait for its line to be written, and lines written meanwhile leave together. Measured in bench/RESULTS.md
 * ("Observability overhead"). What is still buffered is flushed when the process exits, also after a fatal error;
 * only a SIGKILL can lose the last lines. When stdout does not drain, at most 16 MiB wait; later lines are dropped.
 */
export function createLogger(settings: Pick<ServerSettings, 'log'>, bindings: Record<string, unknown> = {}): Logger {
  return pino(
    {
    // Disabled logging silences request lines and routine messages; warnings and errors still reach the operator.
    level: settings.log.enabled ? 'info' : 'warn',
    base: { pid: process.pid, ...bindings },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    formatters: { level: (label) => ({ level: label }) },
    },
    stdoutDestination(),
  );
}

let stdout: ReturnType<typeof pino.destination> | undefined;

/**
 * The process's one writer on stdout, asynchronous and bounded: when stdout stops draining (a stalled collector),
 * lines beyond 16 MiB are dropped instead of memory growing or the event loop blocking on a write. Every logger that
 * writes to stdout (the server log, the audit lines when they have no file) shares it: one buffer, so their lines
 * reach stdout whole and in the order they were made. What is buffered is written when the process exits.
 */
export function stdoutDestination(): ReturnType<typeof pino.destination> {
  return (stdout ??= pino.destination({ dest: 1, sync: false, maxLength: 16 * 1024 * 1024 }));
}

/**
 * SIGUSR2: request lines off when they are on and on when they are off, without a restart (the level switches
 * between `info` and `warn`; warnings and errors are written either way). Returns the new level.
 */
export function toggleRequestLines(logger: Logger): string {
  logger.level = logger.isLevelEnabled('info') ? 'warn' : 'info';
  const on = logger.level === 'info';
  logger.warn({ requestLines: on }, on ? 'request lines on (SIGUSR2)' : 'request lines off (SIGUSR2)');
  return logger.level;
}
