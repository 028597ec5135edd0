/**
 * The cross-process write lock of the `json-file` store: a lock file beside the data file, kept alive by its holder.
 *
 * Taking it: the holder writes a private draft (its token and its stale age) and hard-links it to the lock name; the
 * link fails with EEXIST exactly like an O_EXCL create, so the lock appears with its content in one step and can never
 * be seen empty. Holding it: the holder keeps the draft's file open and refreshes the file's mtime through it every
 * quarter of the stale age (a heartbeat), however long the write takes; the lock is still its own while the lock name
 * is that file (the same inode: a takeover replaces it). Judging it: a lock whose mtime is older than the stale age
 * its holder declared is abandoned (its holder died or hangs) and is taken over.
 *
 * Taking, checking and releasing the lock are synchronous file calls on a few bytes (open, write, link, stat,
 * unlink): microseconds each, where each asynchronous call would cost a thread-pool round trip; waiting for a lock
 * held by another writer sleeps asynchronously.
 *
 * Why a heartbeat and not the holder's pid: pids are per namespace. Two containers sharing a volume see each other's
 * pid as dead (or as some unrelated process of their own), so "is that pid alive?" would break live locks. The mtime
 * is a property of the shared file itself, readable the same way from every process that can see the file. Node has
 * no OS advisory lock (flock/fcntl) without a native add-on, and those are unreliable on the network file systems
 * where a shared volume is most often found anyway.
 */
import { randomBytes } from 'node:crypto';
import { closeSync, fstatSync, futimes, linkSync, openSync, statSync, unlinkSync, writeSync } from 'node:fs';
import { link, mkdir, readdir, readFile, rename, stat, unlink } from 'node:fs/promises';
import { hostname } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { StoreUnavailableError } from '../core/errors.js';
import { uniqueSuffix } from './atomic-write.js';
import { reasonOf } from './common.js';

export interface FileLockOptions {
  /** Path of the lock file. */
  path: string;
  /** Store name, for error messages. */
  store: string;
  /** Give up waiting after this long (ms). */
  timeoutMs: number;
  /** A lock not refreshed for this long is abandoned (ms). Also declared in the lock, so others judge it by ours. */
  staleMs: number;
}

/** A held lock. */
export interface HeldLock {
  /** Throws StoreUnavailableError when the lock is no longer ours (it was taken over as abandoned). */
  check(): Promise<void>;
  /** Stop the heartbeat and remove the lock if it is still ours. Never throws. */
  release(): Promise<void>;
}

/** For whoever looks at a lock file (never used to judge it): read once. */
const HOST = hostname();

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const isCode = (e: unknown, ...codes: string[]) => codes.includes((e as NodeJS.ErrnoException)?.code ?? '');

/** The stale age a lock's content declares (a lock written by an earlier version or another tool declares none). */
function declaredStaleMs(content: string): number | undefined {
  try {
    const v = (JSON.parse(content) as { staleMs?: unknown }).staleMs;
    return typeof v === 'number' && Number.isFinite(v) && v > 0 ? v : undefined;
  } catch {
    return undefined;
  }
}

const ageOf = async (path: string): Promise<number> => Date.now() - (await stat(path)).mtimeMs;

function closeQuietly(fd: number): void {
  try {
    closeSync(fd);
  } catch {
    /* closed */
  }
}

export class FileLock {
  constructor(private readonly options: FileLockOptions) {}

  /** Wait for the lock (breaking an abandoned one); resolves once held. Throws StoreUnavailableError. */
  async acquire(): Promise<HeldLock> {
    const { path, store, timeoutMs, staleMs } = this.options;
    const content = JSON.stringify({
      token: uniqueSuffix(),
      staleMs,
      // For whoever looks at the file; never used to judge the lock.
      host: HOST,
      pid: process.pid,
      since: new Date().toISOString(),
    });
    const deadline = Date.now() + timeoutMs;
    let madeDir = false;
    for (;;) {
      const draft = `${path}.${process.pid}.${uniqueSuffix()}`;
      // Metadata calls on a few bytes, made synchronously (microseconds; no thread-pool round trip per call).
      let fd: number | undefined;
      try {
        fd = openSync(draft, 'wx', 0o644);
        writeSync(fd, content);
        try {
          linkSync(draft, path);
        } finally {
          try {
            unlinkSync(draft);
          } catch {
            /* gone */
          }
        }
        return this.held(fd);
      } catch (e) {
        if (fd !== undefined) closeQuietly(fd);
        if (isCode(e, 'ENOENT') && !madeDir) {
          madeDir = true;
          await mkdir(dirname(path), { recursive: true }).catch(() => undefined);
          continue;
        }
        if (!isCode(e, 'EEXIST')) throw new StoreUnavailableError(store, `cannot take the write lock: ${reasonOf(e)}`);
      }
      if (await this.breakAbandoned(staleMs)) continue;
      if (Date.now() > deadline) throw new StoreUnavailableError(store, 'timed out waiting for the write lock held by another process', 1);
      await sleep(3 + Math.random() * 12);
    }
  }

  /**
   * The lock is ours while the lock name is our file: the inode we hold open (so its number cannot be reused), which
   * a takeover replaces, and a takeover that is undone (the lock put back by a hard link) restores.
   */
  private held(fd: number): HeldLock {
    const { path, store, staleMs } = this.options;
    const ino = fstatSync(fd).ino;
    // The descriptor is the lock file's own inode: refreshing through it can never touch a lock someone else took since.
    let beating: Promise<unknown> = Promise.resolve();
    const timer = setInterval(() => {
      const now = new Date();
      beating = new Promise((done) => futimes(fd, now, now, done));
    }, Math.max(5, Math.floor(staleMs / 4)));
    timer.unref();
    const ours = (): boolean => {
      try {
        return statSync(path).ino === ino;
      } catch {
        return false;
      }
    };
    return {
      async check() {
        if (!ours()) {
          throw new StoreUnavailableError(store, 'the write lock was taken over while writing (the writer stalled past staleLockMs); nothing was written', 1);
        }
      },
      async release() {
        clearInterval(timer);
        await beating;
        try {
          if (ours()) unlinkSync(path);
        } catch {
          /* already gone */
        } finally {
          closeQuietly(fd);
        }
      },
    };
  }

  /**
   * Remove the lock when it is abandoned: not refreshed for the stale age its holder declared (ours, for a lock that
   * declares none). True when the caller should try again at once.
   */
  private async breakAbandoned(ownStaleMs: number): Promise<boolean> {
    const { path } = this.options;
    let content: string;
    let age: number;
    try {
      content = await readFile(path, 'utf8');
      age = await ageOf(path);
    } catch (e) {
      return isCode(e, 'ENOENT');
    }
    const limit = declaredStaleMs(content) ?? ownStaleMs;
    if (age < limit) return false;
    // Move it aside atomically, then make sure we moved the one we judged, still not refreshed (its holder may have
    // beaten in between, or another writer may have taken a fresh lock): otherwise put it back.
    const aside = `${path}.stale-${randomBytes(6).toString('hex')}`;
    try {
      await rename(path, aside);
    } catch {
      return true;
    }
    try {
      const same = (await readFile(aside, 'utf8')) === content && (await ageOf(aside)) >= limit;
      if (!same) await link(aside, path).catch(() => undefined);
    } catch {
      /* gone meanwhile */
    } finally {
      await unlink(aside).catch(() => undefined);
    }
    return true;
  }
}

/**
 * Delete what killed writers left beside `file`: temporary files `.<name>.*.tmp`, lock drafts `<name>.lock.*` and
 * lock files moved aside. Only files not modified for `staleMs` go: a live writer's files are younger (and a live
 * writer's temporary file exists only under the lock, which the caller holds). Best effort; never throws.
 */
export async function sweepLeftovers(file: string, staleMs: number): Promise<void> {
  const dir = dirname(file);
  const tmpPrefix = `.${basename(file)}.`;
  const lockPrefix = `${basename(file)}.lock.`;
  try {
    for (const f of await readdir(dir)) {
      if (!((f.startsWith(tmpPrefix) && f.endsWith('.tmp')) || f.startsWith(lockPrefix))) continue;
      const p = join(dir, f);
      if ((await ageOf(p).catch(() => 0)) >= staleMs) await unlink(p).catch(() => undefined);
    }
  } catch {
    /* best effort */
  }
}
