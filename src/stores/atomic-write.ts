/**
 * Replace a file atomically: write a temporary file `.<name>.<pid>.<random>.tmp` in the same folder (the name
 * `sweepLeftovers` in file-lock.ts recognises), fsync it, rename it over the target, fsync the folder. A crash at any
 * point leaves either the old or the new file, never a partial one. Used by the json-file store and `cfgu export --out`.
 *
 * What may take long runs in libuv's thread pool: writing the contents (the file is opened for synchronous writes,
 * O_SYNC, so the one write call returns once the data and the file's size are on disk, as a write and an fsync would),
 * the rename (which replaces, and so frees, the old file's blocks: milliseconds on a busy disk) and the folder's
 * fsync. The other calls (stat, open, fstat, close, unlink of the temporary file on failure) are made synchronously:
 * each is one system call of some microseconds, where an asynchronous call costs two thread hand-offs and an
 * event-loop wake-up (the json-file store's per-request check is a synchronous stat for the same reason).
 */
import { randomBytes } from 'node:crypto';
import { closeSync, constants, fstatSync, fsync, openSync, statSync, unlinkSync, write, type BigIntStats } from 'node:fs';
import { rename } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

export interface AtomicWriteOptions {
  /** Mode of the new file; by default the mode of the file it replaces, or 0o644 for a new file. */
  mode?: number;
  /**
   * Runs once the data is on disk, before the rename, with the new file's stats (e.g. to check a lock is still held);
   * a throw aborts the write.
   */
  beforeRename?: (stats: BigIntStats) => Promise<void>;
}

/** Random once per process; with a counter, it makes names and tokens unique without a random draw each time. */
const PROCESS_RANDOM = randomBytes(9).toString('hex');
let made = 0;

/** A string no other call, in this process or another, returns: 18 random hex digits of the process and a counter. */
export const uniqueSuffix = (): string => `${PROCESS_RANDOM}${(made++).toString(36)}`;

/** O_SYNC where the platform has it (else an fsync follows the write). */
const SYNC_FLAG = typeof constants.O_SYNC === 'number' ? constants.O_SYNC : 0;

/** Write all of `bytes` at the descriptor's position, in the thread pool. */
export async function writeAll(fd: number, bytes: Uint8Array): Promise<void> {
  let at = 0;
  while (at < bytes.length) {
    at += await new Promise<number>((done, fail) => write(fd, bytes, at, bytes.length - at, null, (e, n) => (e ? fail(e) : done(n))));
  }
}

/** fsync in the thread pool. */
export const fsyncAsync = (fd: number): Promise<void> => new Promise((done, fail) => fsync(fd, (e) => (e ? fail(e) : done())));

function closeQuietly(fd: number): void {
  try {
    closeSync(fd);
  } catch {
    /* closed */
  }
}

/** Returns the new file's stats (taken before the rename: same inode, size and mtime). The temporary file never outlives a failure. */
export async function writeFileAtomic(file: string, text: string, options: AtomicWriteOptions = {}): Promise<BigIntStats> {
  const dir = dirname(file);
  const tmp = join(dir, `.${basename(file)}.${process.pid}.${uniqueSuffix()}.tmp`);
  let mode = options.mode;
  if (mode === undefined) {
    const st = statSync(file, { throwIfNoEntry: false });
    mode = st ? st.mode & 0o777 : 0o644;
  }
  let stats: BigIntStats;
  try {
    const fd = openSync(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | SYNC_FLAG, mode);
    try {
      await writeAll(fd, Buffer.from(text, 'utf8'));
      if (!SYNC_FLAG) await fsyncAsync(fd);
      stats = fstatSync(fd, { bigint: true });
    } finally {
      closeQuietly(fd);
    }
    await options.beforeRename?.(stats);
    await rename(tmp, file);
  } catch (e) {
    try {
      unlinkSync(tmp);
    } catch {
      /* never made, or gone */
    }
    throw e;
  }
  try {
    const d = openSync(dir, 'r');
    try {
      await fsyncAsync(d);
    } finally {
      closeQuietly(d);
    }
  } catch {
    /* some file systems cannot fsync a folder; the rename is still atomic */
  }
  return stats;
}
