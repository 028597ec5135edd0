/**
 * Private database servers for tests that must stop, restart or fill a server: each one runs from a temporary folder
 * on a free loopback port, and only that process is ever signalled. The machine's own services are never touched.
 *
 *   const redis = await startPrivate(t, 'redis');      // undefined when redis-server is missing (skipped loudly)
 *   if (!redis) return;
 *   ... redis.port ...
 *   await redis.stop();  await redis.start();           // an outage, same data folder and port
 *   await redis.destroy();                              // stop and remove the folder (also done at process exit)
 *
 * Every server is started through `setpriv --pdeathsig KILL` when setpriv exists, so it dies with the test process
 * even when that process is killed; a process-exit hook kills whatever is left and removes the folders.
 * PostgreSQL refuses to run as root: as root, initdb and postgres run as `nobody`, in a folder owned by `nobody`.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { accessSync, chmodSync, chownSync, constants, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { homedir, tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import type { TestContext } from 'node:test';
import { requireOrSkip } from './services.js';

export type PrivateKind = 'redis' | 'postgresql' | 'mariadb' | 'etcd';

export interface PrivateServer {
  kind: PrivateKind;
  host: '127.0.0.1';
  port: number;
  /** The data folder (kept across stop/start). */
  dir: string;
  /** Client URL (etcd) or a description. */
  url: string;
  /** Start the server again (after stop) on the same port with the same data; resolves when it accepts clients. */
  start(): Promise<void>;
  /** Stop the server (clients are disconnected) and wait for the process to exit. */
  stop(): Promise<void>;
  /** Stop and remove the data folder. */
  destroy(): Promise<void>;
  running(): boolean;
  /** What the server printed (for failure messages). */
  log(): string;
}

// ------------------------------------------------------------------------------------------------ finding binaries

/** An executable by name on PATH or in the usual system folders (sbin is often not on a user's PATH). */
export function findBinary(names: string[], extraDirs: string[] = []): string | undefined {
  const dirs = [...extraDirs, ...(process.env.PATH ?? '').split(delimiter), '/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin'];
  for (const name of names) {
    for (const d of dirs) {
      if (!d) continue;
      const p = join(d, name);
      try {
        accessSync(p, constants.X_OK);
        return p;
      } catch {
        /* next */
      }
    }
  }
  return undefined;
}

/** The newest PostgreSQL server binaries folder (Debian keeps them out of PATH). */
function postgresBinDir(): string | undefined {
  const fromEnv = process.env.CFGU_TEST_PG_BIN;
  if (fromEnv) return fromEnv;
  try {
    const versions = readdirSync('/usr/lib/postgresql').filter((v) => /^\d+$/.test(v)).sort((a, b) => Number(b) - Number(a));
    for (const v of versions) if (existsSync(join('/usr/lib/postgresql', v, 'bin', 'initdb'))) return join('/usr/lib/postgresql', v, 'bin');
  } catch {
    /* not Debian's layout */
  }
  const initdb = findBinary(['initdb']);
  return initdb ? join(initdb, '..') : undefined;
}

// ------------------------------------------------------------------------------------------------ ports, users

/** A port that was free a moment ago on 127.0.0.1 (the server binds it itself; start() retries on a clash). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const a = srv.address();
      const port = typeof a === 'object' && a ? a.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

const isRoot = () => typeof process.getuid === 'function' && process.getuid() === 0;

function nobody(): { uid: number; gid: number } {
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('nobody:'));
  const [, , uid, gid] = (line ?? 'nobody:x:65534:65534').split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

const SETPRIV = findBinary(['setpriv']);

/** argv prefix: die with this process, and (for PostgreSQL as root) drop to `nobody`. */
function wrapper(asNobody: boolean): string[] {
  if (!SETPRIV) {
    if (asNobody) throw new Error('running as root and setpriv is missing: cannot start PostgreSQL as an unprivileged user');
    return [];
  }
  const w = [SETPRIV, '--pdeathsig', 'KILL'];
  if (asNobody) {
    const u = nobody();
    w.push(`--reuid=${u.uid}`, `--regid=${u.gid}`, '--clear-groups');
  }
  return w;
}

// ------------------------------------------------------------------------------------------------ one process

const live = new Set<ChildProcess>();
const folders = new Set<string>();

process.on('exit', () => {
  for (const c of live) c.kill('SIGKILL');
  for (const d of folders) rmSync(d, { recursive: true, force: true });
});

interface Recipe {
  /** argv (binary first) to run the server. */
  argv: string[];
  /** A line of its output that means it accepts clients. */
  ready: RegExp;
  /** The signal that stops it with clients disconnected. */
  stopSignal: NodeJS.Signals;
  asNobody: boolean;
}

/** Hang guard only (a server that never becomes ready); not a timing goal. */
const HANG_GUARD_MS = 120_000;

function runServer(recipe: Recipe, onOutput: (s: string) => void): Promise<ChildProcess> {
  const [bin, ...args] = [...wrapper(recipe.asNobody), ...recipe.argv];
  const child = spawn(bin!, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  live.add(child);
  child.unref();
  let seen = '';
  return new Promise((resolve, reject) => {
    const guard = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${recipe.argv[0]} did not report ready:\n${seen.slice(-3000)}`));
    }, HANG_GUARD_MS);
    const onData = (d: Buffer) => {
      const s = d.toString('utf8');
      seen += s;
      onOutput(s);
      if (recipe.ready.test(seen)) {
        clearTimeout(guard);
        resolve(child);
      }
    };
    for (const stream of [child.stdout!, child.stderr!]) {
      stream.on('data', onData);
      (stream as unknown as { unref?: () => void }).unref?.();
    }
    child.once('error', (e) => {
      clearTimeout(guard);
      live.delete(child);
      reject(e);
    });
    child.once('exit', (code, signal) => {
      live.delete(child);
      clearTimeout(guard);
      reject(new Error(`${recipe.argv[0]} exited (${code ?? signal}) before it was ready:\n${seen.slice(-3000)}`));
    });
  });
}

function stopProcess(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    // A server that ignores its stop signal for long is killed (hang guard); the timer also keeps the loop alive.
    const guard = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.once('exit', () => {
      clearTimeout(guard);
      live.delete(child);
      resolve();
    });
    child.kill(signal);
  });
}

function tempFolder(kind: string, asNobody: boolean): string {
  const dir = mkdtempSync(join(tmpdir(), `cfgu-private-${kind}-`));
  folders.add(dir);
  if (asNobody) {
    const u = nobody();
    chownSync(dir, u.uid, u.gid);
    chmodSync(dir, 0o700);
  }
  return dir;
}

function runSetup(argv: string[], asNobody: boolean, what: string): void {
  const [bin, ...args] = [...wrapper(asNobody), ...argv];
  const r = spawnSync(bin!, args, { encoding: 'utf8', cwd: tmpdir() });
  if (r.status !== 0) throw new Error(`${what} failed (${r.status ?? r.signal ?? r.error?.message}):\n${r.stdout}\n${r.stderr}`.slice(0, 4000));
}

// ------------------------------------------------------------------------------------------------ the kinds

interface Plan {
  missing?: string;
  asNobody: boolean;
  /** Prepare the folder once (initdb, install-db). */
  prepare?(dir: string): void;
  recipe(dir: string, port: number, peerPort: number): Recipe;
  url(port: number): string;
}

function plan(kind: PrivateKind): Plan {
  switch (kind) {
    case 'redis': {
      const bin = findBinary(['redis-server']);
      return {
        missing: bin ? undefined : 'redis-server is not installed',
        asNobody: false,
        recipe: (dir, port) => ({
          argv: [bin!, '--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--daemonize', 'no', '--logfile', ''],
          ready: /Ready to accept connections/,
          stopSignal: 'SIGTERM',
          asNobody: false,
        }),
        url: (port) => `redis://127.0.0.1:${port}`,
      };
    }
    case 'postgresql': {
      const binDir = postgresBinDir();
      const ok = binDir && existsSync(join(binDir, 'initdb')) && existsSync(join(binDir, 'postgres'));
      const asNobody = isRoot();
      return {
        missing: ok ? (asNobody && !SETPRIV ? 'running as root without setpriv (PostgreSQL refuses root)' : undefined) : 'PostgreSQL server binaries (initdb, postgres) are not installed',
        asNobody,
        prepare: (dir) =>
          runSetup([join(binDir!, 'initdb'), '-D', join(dir, 'data'), '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8', '--locale=C'], asNobody, 'initdb'),
        recipe: (dir, port) => ({
          // -k: the socket in our folder (the system's socket folder may not be writable); fsync off: test data.
          argv: [join(binDir!, 'postgres'), '-D', join(dir, 'data'), '-p', String(port), '-h', '127.0.0.1', '-k', dir, '-c', 'fsync=off', '-c', 'logging_collector=off'],
          ready: /database system is ready to accept connections/,
          // SIGINT: "fast" shutdown, clients are disconnected (SIGTERM would wait for them).
          stopSignal: 'SIGINT',
          asNobody,
        }),
        url: (port) => `postgres://postgres@127.0.0.1:${port}/postgres`,
      };
    }
    case 'mariadb': {
      const server = findBinary(['mariadbd', 'mysqld']);
      const install = findBinary(['mariadb-install-db', 'mysql_install_db']);
      const user = isRoot() ? 'root' : undefined;
      return {
        missing: server && install ? undefined : 'MariaDB server binaries (mariadbd, mariadb-install-db) are not installed',
        asNobody: false,
        prepare: (dir) =>
          runSetup(
            [install!, '--no-defaults', `--datadir=${join(dir, 'data')}`, '--auth-root-authentication-method=normal', '--skip-test-db', ...(user ? [`--user=${user}`] : [])],
            false,
            'mariadb-install-db',
          ),
        recipe: (dir, port) => ({
          argv: [
            server!,
            '--no-defaults',
            `--datadir=${join(dir, 'data')}`,
            `--port=${port}`,
            '--bind-address=127.0.0.1',
            `--socket=${join(dir, 'sock')}`,
            `--pid-file=${join(dir, 'pid')}`,
            '--skip-grant-tables',
            '--skip-log-bin',
            '--innodb-buffer-pool-size=16M',
            ...(user ? [`--user=${user}`] : []),
          ],
          ready: /ready for connections/,
          stopSignal: 'SIGTERM',
          asNobody: false,
        }),
        url: (port) => `mysql://root@127.0.0.1:${port}/`,
      };
    }
    case 'etcd': {
      // scripts/test-setup-etcd.sh unpacks Debian's etcd into a user cache folder when it is not installed.
      const cache = join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'cfgu-test', 'etcd', 'usr', 'bin');
      const bin = process.env.CFGU_TEST_ETCD ?? findBinary(['etcd'], [cache]);
      return {
        missing: bin ? undefined : 'etcd is not installed (scripts/test-setup-etcd.sh installs it)',
        asNobody: false,
        recipe: (dir, port, peer) => ({
          argv: [
            bin!,
            '--name', 'cfgu-test',
            '--data-dir', join(dir, 'data'),
            '--listen-client-urls', `http://127.0.0.1:${port}`,
            '--advertise-client-urls', `http://127.0.0.1:${port}`,
            '--listen-peer-urls', `http://127.0.0.1:${peer}`,
            '--initial-advertise-peer-urls', `http://127.0.0.1:${peer}`,
            '--initial-cluster', `cfgu-test=http://127.0.0.1:${peer}`,
          ],
          ready: /ready to serve client requests/,
          stopSignal: 'SIGTERM',
          asNobody: false,
        }),
        url: (port) => `http://127.0.0.1:${port}`,
      };
    }
  }
}

/** Why a private server of `kind` cannot be started here, or undefined when it can. */
export function privateMissing(kind: PrivateKind): string | undefined {
  return plan(kind).missing;
}

/**
 * Start a private server (no test context: throws when it cannot). `extraArgs` are appended to the server's command
 * line on every start (e.g. `['--notify-keyspace-events', 'KA']` for redis).
 */
export async function launchPrivate(kind: PrivateKind, extraArgs: readonly string[] = []): Promise<PrivateServer> {
  const p = plan(kind);
  if (p.missing) throw new Error(`cannot start a private ${kind}: ${p.missing}`);
  const dir = tempFolder(kind, p.asNobody);
  p.prepare?.(dir);
  let output = '';
  let child: ChildProcess | undefined;
  let port = 0;
  let peerPort = 0;
  const boot = async () => {
    const recipe = p.recipe(dir, port, peerPort);
    recipe.argv.push(...extraArgs);
    child = await runServer(recipe, (s) => (output = (output + s).slice(-20_000)));
  };
  // The port is chosen free, then bound by the server: another process may take it in between; try again.
  for (let attempt = 1; ; attempt++) {
    port = await freePort();
    peerPort = await freePort();
    try {
      await boot();
      break;
    } catch (e) {
      if (attempt >= 3 || !/address already in use|EADDRINUSE|bind/i.test(String(e))) throw e;
    }
  }
  const server: PrivateServer = {
    kind,
    host: '127.0.0.1',
    port,
    dir,
    url: p.url(port),
    running: () => !!child && child.exitCode === null && child.signalCode === null,
    log: () => output,
    async start() {
      if (server.running()) return;
      await boot();
    },
    async stop() {
      if (child) await stopProcess(child, p.recipe(dir, port, peerPort).stopSignal);
    },
    async destroy() {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
      folders.delete(dir);
    },
  };
  return server;
}

/**
 * A private server of `kind` for test `t`, destroyed when the test ends. When it cannot be started here (binary
 * missing), the test is skipped loudly, or fails under CI=true; then resolves undefined.
 */
export async function startPrivate(t: TestContext, kind: PrivateKind, extraArgs: readonly string[] = []): Promise<PrivateServer | undefined> {
  const missing = privateMissing(kind);
  if (missing && !requireOrSkip(t, `a private ${kind} server`, missing)) return undefined;
  const server = await launchPrivate(kind, extraArgs);
  t.after(() => server.destroy());
  return server;
}

const shared = new Map<PrivateKind, Promise<PrivateServer>>();

/** One private server of `kind` for this test process (started on first use, stopped when the process exits). */
export function sharedPrivate(kind: PrivateKind): Promise<PrivateServer> {
  let s = shared.get(kind);
  if (!s) {
    s = launchPrivate(kind);
    shared.set(kind, s);
  }
  return s;
}
