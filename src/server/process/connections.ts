/**
 * Open files and connections. Every connection holds a file descriptor, and a process has a soft limit of them (often
 * 1,024 in a container or a systemd unit). One client holding about a thousand slow connections used to exhaust it:
 * the server then reset every new connection, health probes included, until the request timeout cut the slow ones.
 *
 * Node raises its own soft limit to the hard limit when it starts; the server says in its log which limits it runs
 * with. Then:
 *   - the whole server accepts at most (soft limit - RESERVED_FILES) connections, so the files that stores, logs
 *     and sandbox pipes need are never taken by sockets (`server.maxConnections`; Node closes the ones beyond);
 *   - one client address holds at most `maxConnectionsPerClient` of them (by default a quarter of that room), so the
 *     rest stays for other clients and for probes. A connection beyond a client's share is closed at once.
 */
import { readFileSync } from 'node:fs';
import type { Server } from 'node:net';

/** Descriptors kept out of the connections' reach: store connections, the sandbox's pipes, logs, the backup file. */
export const RESERVED_FILES = 64;
/**
 * The process's limits of open files, from /proc (Linux); undefined elsewhere or when unreadable. Node has already
 * raised the soft limit to the hard one when it started (on Linux and macOS), so this is the raised value.
 */
export function openFileLimits(): { soft: number; hard: number } | undefined {
  try {
    const line = readFileSync('/proc/self/limits', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('Max open files'));
    const m = line && /^Max open files\s+(\d+|unlimited)\s+(\d+|unlimited)/.exec(line);
    if (!m) return undefined;
    const n = (s: string) => (s === 'unlimited' ? Number.POSITIVE_INFINITY : Number(s));
    return { soft: n(m[1]!), hard: n(m[2]!) };
  } catch {
    return undefined;
  }
}

/** A client's share when none is set: a quarter of the connections the limit leaves room for (at least 16). */
export function defaultConnectionsPerClient(softLimit: number): number {
  if (!Number.isFinite(softLimit)) return 4096;
  return Math.max(16, Math.floor((softLimit - RESERVED_FILES) / 4));
}

/** The address a connection counts against (an IPv4 client seen through an IPv6 socket counts as its IPv4 address). */
const clientOf = (address: string | undefined): string => (address?.startsWith('::ffff:') ? address.slice(7) : address ?? '');

export interface ConnectionGuard {
  /** Open connections per client address (for tests and metrics). */
  readonly open: ReadonlyMap<string, number>;
  /** Connections closed because their client already held its share. */
  refused: number;
}

/**
 * Cap the connections of `server`: at most `total` in all, at most `perClient` from one address (0: no per-client
 * cap). Installed before the server listens or right after; counts connections from then on.
 */
export function guardConnections(server: Server, total: number | undefined, perClient: number, onRefused?: (client: string) => void): ConnectionGuard {
  if (total !== undefined && Number.isFinite(total)) server.maxConnections = Math.max(1, total);
  const open = new Map<string, number>();
  const guard: ConnectionGuard = { open, refused: 0 };
  if (perClient <= 0) return guard;
  server.on('connection', (socket) => {
    const client = clientOf(socket.remoteAddress);
    const held = open.get(client) ?? 0;
    if (held >= perClient) {
      guard.refused++;
      onRefused?.(client);
      socket.destroy();
      return;
    }
    open.set(client, held + 1);
    socket.once('close', () => {
      const n = (open.get(client) ?? 1) - 1;
      if (n <= 0) open.delete(client);
      else open.set(client, n);
    });
  });
  return guard;
}
