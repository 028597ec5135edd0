/**
 * Servers and processes a test starts are stopped when that test ends, whatever way it ends: `stopAfter(t, x)`.
 * And `serveInProcess()`: the proxy started in the test's own process (src/server/start.ts, the code `cfgu serve
 * --workers 1` runs), for tests about what the server answers rather than about the binary: no process start-up.
 */
import type { ChildProcess } from 'node:child_process';
import type { TestContext } from 'node:test';
import { prepare, startServer, type RunningServer } from '../../src/server/process/start.js';
import { captureLog, ONE_SANDBOX_CHILD } from '../server/helpers.js';

type Stoppable = ChildProcess | { child: ChildProcess } | { stop(): Promise<unknown> };

/** Stop `target` (SIGKILL for a process, `stop()` for an in-process server) once the test `t` is over. */
export function stopAfter<T extends Stoppable>(t: TestContext, target: T): T {
  t.after(async () => {
    if ('stop' in target) return void (await target.stop());
    const child = ('child' in target ? target.child : target) as ChildProcess;
    if (child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await gone;
  });
  return target;
}

export interface InProcessServer {
  running: RunningServer;
  port: number;
  /** `http://127.0.0.1:PORT` (or https when the .configu turns TLS on). */
  base: string;
  /** Every log line so far. */
  logs(): Array<Record<string, unknown>>;
  /** Shut down (drain, close stores and the sandbox); resolves once stopped. */
  stop(): Promise<number>;
}

export interface InProcessOptions {
  /** The whole environment the server sees, but CONFIGU_* from the test's own environment (not passed on). */
  env?: Record<string, string>;
  cwd?: string;
  /** `cfgu serve` flags; default `--port 0 --host 127.0.0.1` (`{}`: the port and host of the .configu). */
  flags?: { port?: string; host?: string };
}

/**
 * Load `config` and serve it in this process (`--workers 1`), ready once this resolves (its stores answered). The
 * sandbox starts one child and no spare unless `env` says otherwise.
 */
export async function serveInProcess(config: string, options: InProcessOptions = {}): Promise<InProcessServer> {
  const env: NodeJS.ProcessEnv = { ...ONE_SANDBOX_CHILD };
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('CONFIGU_')) env[k] = v;
  Object.assign(env, options.env ?? {});
  const flags = { ...(options.flags ?? { port: '0', host: '127.0.0.1' }), workers: '1' };
  const prepared = await prepare({ config, flags, env, cwd: options.cwd ?? process.cwd() });
  const { logger, lines: logs } = captureLog();
  const running = await startServer(prepared, {}, logger);
  await new Promise<void>((resolve, reject) => {
    const check = () => (running.lifecycle.ready ? resolve() : running.lifecycle.stopping ? reject(new Error('stopped before ready')) : setTimeout(check, 20));
    check();
  });
  const address = running.app.server.address();
  const port = typeof address === 'object' && address ? address.port : prepared.settings.http.port;
  const scheme = prepared.settings.http.tls.enabled ? 'https' : 'http';
  return { running, port, base: `${scheme}://127.0.0.1:${port}`, logs, stop: () => running.shutdown('test over') };
}
