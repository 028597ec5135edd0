/**
 * Revisions and history of the `json-file` kind (docs/stores.md, "Revisions and history"): a sidecar file
 * `<path>.history.json` beside the data file (Configu's tools read the data file only), in JSON lines: a base, then
 * one line per write (the format and the rule that tells whether a write landed: json-file-history-log.ts).
 *
 * A write holds the store's file lock throughout: it appends its line to the sidecar and fsyncs it, then the store
 * replaces the data file (atomic-write.ts). A crash between the two leaves a line naming the data file that is still
 * there: every reader leaves it out, and the next write, which names the same data file, leaves it out for good. A
 * crash in the middle of the append leaves a torn last line (no newline at its end, or not JSON): every reader ignores
 * it and the next write cuts it off before appending. So a crash leaves both or neither, as every reader sees it. One
 * case it cannot tell: a crash between the append and the rename followed by an edit of the data file before cfgu
 * writes again: the write that never landed then stays in the history, and the next write records the edit's
 * difference from it as not recorded.
 *
 * Compaction: when the lines outnumber both 1,000 and the records the sets hold, a write replaces the file (atomically)
 * with a new base of the settled sets, retention applied, followed by its own line. The first write to a sidecar of
 * the earlier one-document format converts it in the same way.
 *
 * The fold is kept in memory with the file's identity (inode, size, modification time) and the byte it reaches: a look
 * costs one stat when the file is unchanged, and reads only the lines appended since (another process's writes)
 * when it grew; any other change (a compaction elsewhere, a torn line cut off) reads it whole again.
 */
import { randomBytes } from 'node:crypto';
import { closeSync, constants, fstatSync, openSync, statSync, truncateSync } from 'node:fs';
import { open, readFile } from 'node:fs/promises';
import { StoreUnavailableError } from '../core/errors.js';
import { fsyncAsync, writeAll, writeFileAtomic } from './atomic-write.js';
import { Mutex, reasonOf } from './common.js';
import { HistoryPager, planWrite, type CheckedQuery, type HistorySettings, type SetState, type Snapshot, type WritePlan } from './history.js';
import { applyLine, HistoryLog, parseLine, type WriteLine } from './json-file-history-log.js';
import { fileIdentity } from './json-file-format.js';
import type { Config, ConfigChange, HistoryPage, WriteOptions } from '../core/ports.js';

/** A set's values in a data file's configs. */
export function valuesOf(configs: Iterable<Config>, set: string): Snapshot {
  const out: Snapshot = new Map();
  for (const c of configs) if (c.set === set && c.value !== '') out.set(c.key, c.value);
  return out;
}

/** Compact when the lines outnumber this and the records the sets hold. */
export const COMPACT_LINES = 1000;

const newEpoch = (): string => randomBytes(6).toString('hex');

/** The fold of the file as read, and where the read stopped. */
interface Cached {
  log: HistoryLog;
  /** `ino:size:mtimeNs` of the file as read ("missing": none). */
  identity: string;
  ino: bigint;
  /** Bytes folded: the end of the last complete line. */
  offset: number;
  /** Bytes after `offset` that are not a complete line (a torn line). */
  torn: boolean;
}

const NEWLINE = 0x0a;

/** O_DSYNC where the platform has it (else an fsync follows the write). */
const DSYNC_FLAG = typeof constants.O_DSYNC === 'number' ? constants.O_DSYNC : 0;

export class JsonFileHistory {
  readonly path: string;
  private cached: Cached | undefined;
  /** Looks at the file and the writes' appends, one at a time (both update `cached`). */
  private readonly serial = new Mutex();

  constructor(
    dataPath: string,
    private readonly store: string,
    private readonly settings: HistorySettings,
    private readonly compactLines = COMPACT_LINES,
  ) {
    this.path = `${dataPath}.history.json`;
  }

  private invalid(): StoreUnavailableError {
    return new StoreUnavailableError(this.store, 'the history file is not valid; not writing over it');
  }

  /** The fold brought up to date with the file. Throws StoreUnavailableError when unreadable or not ours. */
  private async look(): Promise<Cached> {
    let st;
    try {
      st = statSync(this.path, { bigint: true, throwIfNoEntry: false });
    } catch (e) {
      throw new StoreUnavailableError(this.store, `cannot read the history file: ${reasonOf(e)}`);
    }
    if (st === undefined) {
      if (this.cached?.identity !== 'missing') this.cached = { log: HistoryLog.empty(newEpoch()), identity: 'missing', ino: -1n, offset: 0, torn: false };
      return this.cached!;
    }
    const identity = fileIdentity(st);
    const c = this.cached;
    if (c && c.identity === identity && !c.torn) return c;
    if (c && c.ino === st.ino && c.log.epoch !== undefined && Number(st.size) > c.offset) {
      const grown = await this.readFrom(c);
      if (grown) return grown;
    }
    let bytes: Buffer;
    try {
      bytes = await readFile(this.path);
    } catch (e) {
      throw new StoreUnavailableError(this.store, `cannot read the history file: ${reasonOf(e)}`);
    }
    this.cached = this.fold(bytes, identity, st.ino);
    return this.cached;
  }

  /** The whole file folded. */
  private fold(bytes: Buffer, identity: string, ino: bigint): Cached {
    const first = bytes.indexOf(NEWLINE);
    if (bytes.length === 0) return { log: HistoryLog.empty(newEpoch()), identity, ino, offset: 0, torn: false };
    // A one-document sidecar of the earlier format may lack its final newline.
    const log = HistoryLog.fromBase(bytes.toString('utf8', 0, first < 0 ? bytes.length : first));
    if (!log) throw this.invalid();
    if (first < 0) return { log, identity, ino, offset: bytes.length, torn: false };
    const cached: Cached = { log, identity, ino, offset: first + 1, torn: false };
    this.foldLines(cached, bytes, first + 1);
    return cached;
  }

  /** Read the bytes from `c.offset` to the end and fold their lines; undefined when they are not lines of this base. */
  private async readFrom(c: Cached): Promise<Cached | undefined> {
    let fh;
    try {
      fh = await open(this.path, 'r');
      // The identity first: bytes appended after it are read at the next look.
      const st = await fh.stat({ bigint: true });
      if (st.ino !== c.ino || Number(st.size) <= c.offset) return undefined;
      const bytes = Buffer.alloc(Number(st.size) - c.offset);
      const { bytesRead } = await fh.read(bytes, 0, bytes.length, c.offset);
      const next: Cached = { log: c.log, identity: fileIdentity(st), ino: st.ino, offset: c.offset, torn: false };
      // Lines of another base (a compaction elsewhere whose file took this inode number) read the file whole.
      if (!this.foldLines(next, bytes.subarray(0, bytesRead), 0, c.log.epoch)) return undefined;
      this.cached = next;
      return next;
    } catch (e) {
      if (e instanceof StoreUnavailableError) throw e;
      return undefined;
    } finally {
      await fh?.close().catch(() => undefined);
    }
  }

  /**
   * Fold the complete lines of `bytes` from `start` into `c` (advancing `c.offset`); a last line without its newline,
   * or not valid, is torn and left out. False (nothing folded) when a line belongs to another base than `epoch`.
   */
  private foldLines(c: Cached, bytes: Buffer, start: number, epoch = c.log.epoch): boolean {
    if (start < bytes.length && epoch === undefined) throw this.invalid(); // an earlier-format document has no lines
    const lines: WriteLine[] = [];
    let at = start;
    let folded = 0;
    while (at < bytes.length) {
      const end = bytes.indexOf(NEWLINE, at);
      const line = end < 0 ? undefined : parseLine(bytes.toString('utf8', at, end));
      if (!line) {
        // Only the last line may be torn (a crash in the middle of an append); anything else is damage.
        if (end >= 0 && end + 1 < bytes.length) throw this.invalid();
        c.torn = true;
        break;
      }
      if (line.epoch !== epoch) return false;
      lines.push(line);
      folded += end + 1 - at;
      at = end + 1;
    }
    for (const line of lines) c.log.push(line);
    c.offset += folded;
    return true;
  }

  /** A set's state, as the data file (`file`: its identity now) makes it true. */
  async state(set: string, file: string): Promise<SetState> {
    const entry = (await this.serial.run(() => this.look())).log.entry(set, file);
    return entry ? { revision: entry.revision, snapshot: entry.snapshot } : { revision: 0, snapshot: undefined };
  }

  async history(q: CheckedQuery, file: string): Promise<HistoryPage> {
    const records = (await this.serial.run(() => this.look())).log.entry(q.set, file)?.records ?? [];
    const pager = new HistoryPager(q);
    let i = records.length - 1;
    for (; i >= 0 && !pager.done; i--) pager.add(records[i]!);
    return pager.page(i >= 0);
  }

  /**
   * Under the store's lock, with the data file's identity and configs just read: decide, append the write's line (or
   * compact, with the line after the new base), and return the plan; the caller then writes the data file.
   */
  prepare(
    set: string,
    file: string,
    data: Map<string, Config>,
    changes: readonly ConfigChange[],
    options: WriteOptions | undefined,
    stillLocked: () => Promise<void>,
  ): Promise<WritePlan> {
    return this.serial.run(async () => {
      const c = await this.look();
      // Under the lock no write is under way: the last line is settled for good by the data file as it is.
      c.log.settle(file);
      const entry = c.log.sets.get(set);
      const state: SetState = entry ? { revision: entry.revision, snapshot: entry.snapshot } : { revision: 0, snapshot: undefined };
      const plan = planWrite({ store: this.store, set, current: valuesOf(data.values(), set), state, changes, options, history: this.settings });
      try {
        await this.append(c, set, file, plan, stillLocked);
      } catch (e) {
        this.cached = undefined; // the file may hold part of the line: read it again next time
        if (e instanceof StoreUnavailableError) throw e;
        throw new StoreUnavailableError(this.store, `cannot write the history file: ${reasonOf(e)}`);
      }
      return plan;
    });
  }

  /** Append the plan's line (fsynced), or compact when due; `cached` follows the file. */
  private async append(c: Cached, set: string, file: string, plan: WritePlan, stillLocked: () => Promise<void>): Promise<void> {
    // A new file (or an empty one: no base yet), the earlier format, or lines outnumbering what they hold: compact.
    const compact = c.offset === 0 || c.log.epoch === undefined || c.log.lines >= Math.max(this.compactLines, c.log.records());
    const epoch = compact ? newEpoch() : c.log.epoch!;
    const line: WriteLine = { epoch, set, revision: plan.revision, file, prune: [plan.pruneThrough, plan.pruneBefore ?? null], records: plan.records };
    const lineText = `${JSON.stringify(line)}\n`;
    // The same fold every reader makes of the line (json-file-history-log.ts).
    const entry = applyLine(c.log.sets.get(set), line);
    if (compact) {
      const base = `${c.log.baseText(epoch)}\n`;
      const st = await writeFileAtomic(this.path, base + lineText, { beforeRename: stillLocked });
      const log = HistoryLog.fromBase(base)!;
      log.push(line, entry);
      this.cached = { log, identity: fileIdentity(st), ino: st.ino, offset: Number(st.size), torn: false };
      return;
    }
    // A torn last line (a crash in the middle of an append) is cut off first.
    if (c.torn) truncateSync(this.path, c.offset);
    await stillLocked();
    // O_DSYNC: the write returns once the line (and the file's new size) is on disk, as a write and an fdatasync would;
    // it is the one call made in the thread pool (atomic-write.ts says why the others are synchronous).
    const fd = openSync(this.path, constants.O_WRONLY | constants.O_APPEND | DSYNC_FLAG);
    try {
      await writeAll(fd, Buffer.from(lineText, 'utf8'));
      if (!DSYNC_FLAG) await fsyncAsync(fd);
      const st = fstatSync(fd, { bigint: true });
      c.log.push(line, entry);
      this.cached = { log: c.log, identity: fileIdentity(st), ino: st.ino, offset: Number(st.size), torn: false };
    } finally {
      closeSync(fd);
    }
  }
}
