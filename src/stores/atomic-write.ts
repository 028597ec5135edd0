/**
 * Replace a file atomically: write a temporary file `.<name>.<pid>.<random>.tmp` in the same folder (the name
 * `sweepLeftovers` in file-lock.ts recognises), fsync it, rename it over the target, fsync the folder. A crash at any
 * point leaves either the old or the new file, never a partial one. Used by the json-file store and `cfgu export --out`.
 */
import { randomBytes } from 'node:crypto';
import { open, rename, stat, unlink } from 'node:fs/promises';
import type { BigIntStats } from 'node:fs';
import { basename, dirname, join } from 'node:path';

export interface AtomicWriteOptions {
  /** Mode of the new file; by default the mode of the file it replaces, or 0o644 for a new file. */
  mode?: number;
  /** Runs once the data is on disk, before the rename (e.g. to check a lock is still held); a throw aborts the write. */
  beforeRename?: () => Promise<void>;
}

/** Returns the new file's stats (taken before the rename: same inode, size and mtime). The temporary file never outlives a failure. */
export async function writeFileAtomic(file: string, text: string, options: AtomicWriteOptions = {}): Promise<BigIntStats> {
  const dir = dirname(file);
  const tmp = join(dir, `.${basename(file)}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`);
  let mode = options.mode;
  if (mode === undefined) mode = await stat(file).then((st) => st.mode & 0o777, () => 0o644);
  let stats: BigIntStats;
  try {
    const fh = await open(tmp, 'wx', mode);
    try {
      await fh.writeFile(text, 'utf8');
      await fh.sync();
      stats = await fh.stat({ bigint: true });
    } finally {
      await fh.close();
    }
    await options.beforeRename?.();
    await rename(tmp, file);
  } catch (e) {
    await unlink(tmp).catch(() => undefined);
    throw e;
  }
  try {
    const d = await open(dir, 'r');
    try {
      await d.sync();
    } finally {
      await d.close();
    }
  } catch {
    /* some file systems cannot fsync a folder; the rename is still atomic */
  }
  return stats;
}
