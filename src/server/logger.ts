/**
 * The server's pino logger: JSON lines on stdout. Request lines carry only method, path, status, duration and the
 * request id; bodies, values, overrides and headers are never logged, and `authorization` is redacted wherever it
 * might appear (defence in depth for anything that logs a request object).
 */
import { pino, type Logger } from 'pino';
import type { ServerSettings } from './settings.js';

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

export function createLogger(settings: Pick<ServerSettings, 'log'>, bindings: Record<string, unknown> = {}): Logger {
  return pino({
    // Disabled logging silences request lines and routine messages; warnings and errors still reach the operator.
    level: settings.log.enabled ? 'info' : 'warn',
    base: { pid: process.pid, ...bindings },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    formatters: { level: (label) => ({ level: label }) },
  });
}
