/**
 * `cfgu health [--config PATH] [--port N] [--host ADDR] [--path /live|/ready]`: ask a running proxy on this machine
 * whether it is alive (or ready), for container health checks where no curl is installed. The port, the address and
 * TLS come from the same places as `cfgu serve`'s (flags, environment, the .configu's interface.proxy), so the check
 * follows the server's configuration. Exit 0 when the answer is 200, 1 otherwise (with one line on stderr).
 */
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { findConfigFile, loadConfiguration } from '../../config/index.js';
import { resolveSettings, type SettingsFlags } from '../../server/process/resolve-settings.js';
import type { ServerSettings } from '../../server/process/settings.js';
import { EXIT_FAILED, EXIT_OK, EXIT_USAGE } from '../../core/error-catalogue.js';
import { parseFlags, rejectPositionals } from '../args.js';
import { errorLines, flagError, flagErrorLines, UsageError } from '../errors.js';
import { processIO, type CommandIO } from '../io.js';

export const healthUsage = `Usage: cfgu health [options]

Check a proxy running on this machine: GET /live (or --path /ready) on its configured port,
over HTTPS when its TLS is on. Exit 0 when it answers 200, 1 otherwise.

Options:
  --config PATH   the .configu the server uses (default: $CONFIGU_CONFIG, $CONFIGU_CONFIGURATION,
                  else the nearest .configu); only its interface.proxy settings are read
  --port N        the server's port (default: as cfgu serve finds it)
  --host ADDR     the address to ask (default: 127.0.0.1 when the server listens on every address)
  --path PATH     /live (default) or /ready
  -h, --help      show this help`;

const OPTIONS = {
  config: { type: 'string' },
  port: { type: 'string' },
  host: { type: 'string' },
  path: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

const PATHS = ['/live', '/ready'];
/** A check that gets no answer within this time fails (a hung server is not healthy). */
const ANSWER_MS = 5000;

export async function healthCommand(argv: string[], io: CommandIO = processIO()): Promise<number> {
  let v;
  try {
    const parsed = parseFlags(argv, OPTIONS);
    rejectPositionals(parsed.positionals);
    v = parsed.values;
    if (v.path !== undefined && !PATHS.includes(v.path)) throw flagError(`--path must be one of ${PATHS.join(', ')}`);
  } catch (e) {
    io.stderr.write(`${(e instanceof UsageError ? flagErrorLines('health', e) : errorLines('health', e)).join('\n')}\n`);
    return EXIT_USAGE;
  }
  if (v.help) {
    io.stdout.write(`${healthUsage}\n`);
    return EXIT_OK;
  }
  const flags: SettingsFlags = { ...(v.port !== undefined ? { port: v.port } : {}) };
  let settings: ServerSettings;
  try {
    settings = await settingsOf(v.config, flags, io);
  } catch (e) {
    io.stderr.write(`cfgu health: ${(e as Error).message}\n`);
    return EXIT_USAGE;
  }
  const listening = settings.http.host;
  const host = v.host ?? (listening === '0.0.0.0' || listening === '::' || listening === '' ? '127.0.0.1' : listening);
  const path = v.path ?? '/live';
  const tls = settings.http.tls.enabled;
  const status = await new Promise<number | string>((resolve) => {
    // The certificate names the service, not the loopback address: this check is about the process answering.
    const options = { host, port: settings.http.port, path, method: 'GET', timeout: ANSWER_MS, rejectUnauthorized: false };
    const req = (tls ? httpsRequest : httpRequest)(options, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${ANSWER_MS} ms`)));
    req.on('error', (e) => resolve((e as NodeJS.ErrnoException).code ?? e.message));
    req.end();
  });
  const url = `${tls ? 'https' : 'http'}://${host.includes(':') ? `[${host}]` : host}:${settings.http.port}${path}`;
  if (status === 200) {
    io.stdout.write(`${url}: 200\n`);
    return EXIT_OK;
  }
  io.stderr.write(`cfgu health: ${url}: ${typeof status === 'number' ? `status ${status}` : status}\n`);
  return EXIT_FAILED;
}

/** The server's settings from the flags, the environment and (when one is found and loads) the .configu. */
async function settingsOf(config: string | undefined, flags: SettingsFlags, io: CommandIO): Promise<ServerSettings> {
  const file = findConfigFile({ explicit: config, env: io.env, cwd: io.cwd });
  let fileSettings: unknown;
  let loadedFile: string | undefined;
  if (file) {
    // Variables only (no sandbox): a health check must stay cheap. A file that needs more is left out, and the
    // environment and flags decide (the image sets the port and TLS through the environment).
    const loaded = await loadConfiguration({ file, env: io.env, cwd: io.cwd }).catch(() => undefined);
    fileSettings = (loaded?.interface as Record<string, unknown> | undefined)?.proxy;
    loadedFile = loaded?.file ?? file;
  }
  return resolveSettings({ flags, env: io.env, fileSettings, file: loadedFile, cwd: io.cwd });
}
