/**
 * One sandbox child process as the host sees it (the process itself: child/main.ts, bundled to dist/sandbox-child.js):
 * spawning it, the line protocol (jobs written ahead, answers read in order), the head job's watchdog, and what a
 * renewal or the child's end means for the jobs written to it.
 */
import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import type { Socket } from 'node:net';
import { dirname, join } from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { SandboxUnavailableError } from '../../core/errors.js';
import { childRecord, childStaticLimit, lineFor, staticLinesOf, type UnknownAnswer } from '../wire/job-wire.js';
import {
  FLUSH_LINE,
  cpuWatchdogMs,
  failureResponse,
  memoryLimitMessage,
  timeLimitMessage,
  watchdogMs,
  type AnswerMeta,
  type ChildNotice,
  type OverloadedAnswer,
  type SandboxResponse,
} from '../wire/protocol.js';
import type { Pending } from './scheduler.js';

/** What a child writes: an answer (with its CPU time), a notice, or "unknown static half". */
export type ChildMessage = (SandboxResponse & AnswerMeta) | ChildNotice | OverloadedAnswer | UnknownAnswer;

/** The pool's side of a child: every line it writes, and its end. */
export interface ChildEvents {
  message(child: ChildHandle, msg: ChildMessage): void;
  close(child: ChildHandle, code: number | null): void;
  /** A chunk of the child's stderr (V8's fatal-error reports, start-up failures). */
  stderr(chunk: string): void;
}

/** What a child is started with. */
export interface ChildLimits {
  timeoutMs: number;
  memoryMb: number;
}

/** The built files a child needs: its program (dist/sandbox-child.js) and the isolate's library bundle. */
export interface SandboxFiles {
  childFile: string;
  bundleFile: string;
}

/** The repository / package root: the nearest folder above this module that holds package.json. */
function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    const up = dirname(dir);
    if (up === dir) throw new SandboxUnavailableError('the expression sandbox cannot find its files (package.json not found)');
    dir = up;
  }
}

/** The built files of the sandbox; SandboxUnavailableError when they are not built. */
export function sandboxFiles(): SandboxFiles {
  const root = packageRoot();
  const files = { childFile: join(root, 'dist', 'sandbox-child.js'), bundleFile: join(root, 'dist', 'sandbox', 'libraries.js') };
  if (!existsSync(files.childFile) || !existsSync(files.bundleFile)) {
    throw new SandboxUnavailableError('the expression sandbox is not built (run `npm run build`)');
  }
  return files;
}

type ChildProc = ChildProcessByStdio<Writable, Readable, Readable>;

/**
 * Jobs written ahead to one child. Pipelining removes the idle gap of a round trip between two jobs (measured: with
 * one job per child at a time, two children topped out near 6,000 jobs/s with the CPUs 30% idle).
 */
const PIPELINE_DEPTH = 4;
/**
 * A job is not written behind a head that has already run this long (ms): it waits on the host instead, where the
 * first child to free up takes it, rather than behind a possibly runaway job in one child's pipe.
 */
const SLOW_HEAD_MS = 5;
/** When the watchdog first reads a running head's CPU time (ms of wall time after the head started). */
const FIRST_CPU_LOOK_MS = 50;

/**
 * CPU time of a process so far (ms): user plus system time of all its threads, from /proc/<pid>/stat (fields 14 and
 * 15, in clock ticks of 1/100 s). Undefined where that cannot be read (not Linux, or the process is gone).
 */
function processCpuMs(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    const ms = (Number(fields[11]) + Number(fields[12])) * 10;
    return Number.isFinite(ms) ? ms : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The start of V8's fatal-error reports ("Fatal JavaScript invalid size error", "FATAL ERROR: ... out of memory"). A
 * child that wrote one was aborted by V8 while running its head job, so that job is blamed at once instead of being
 * run again on another child (which would cost a second child for one bomb).
 */
const V8_FATAL = /Fatal JavaScript|FATAL ERROR|Fatal error in/;

export class ChildHandle {
  readonly proc: ChildProc;
  ready = false;
  /** A warm spare: started and sealed, given no job until it replaces a child. */
  spare: boolean;
  /** Said it renews its isolate: its jobs went back to the queue; given none until it is ready again. */
  renewing = false;
  /**
   * Jobs written to this child and not yet answered, oldest first. The child answers strictly in order, so the head
   * is the one running; the others wait in the pipe and go back to the queue if the child ends.
   */
  inflight: Pending[] = [];
  /** When the head job became the head (performance.now()). */
  headSince = 0;
  /** The job answered last: the one to charge when the child then renews its isolate. */
  lastAnswered: Pending | undefined;
  private watchdog: NodeJS.Timeout | undefined;
  /** The child's CPU time (ms, from /proc) at the watchdog's first look at the head job; undefined before it. */
  private headCpuMs: number | undefined;
  private killedForTime = false;
  /** Killed by the watchdog after the head job used more CPU time than any job can (see startHead): it is to blame. */
  private killedForCpu = false;
  /** The child wrote a V8 fatal-error report: the job it was running made V8 abort the process. */
  private fatalReport = false;
  private buffer = '';
  /** The static halves this child holds (wire/job-wire.ts); a new child starts empty. */
  readonly statics: ReturnType<typeof childRecord>;
  /** Lines written to this child in the current tick, sent together in one write (see send). */
  private out = '';

  constructor(files: SandboxFiles, private readonly limits: ChildLimits, spare: boolean, private readonly events: ChildEvents) {
    this.spare = spare;
    this.statics = childRecord(childStaticLimit(limits.memoryMb));
    const config = JSON.stringify({
      bundle: files.bundleFile,
      timeoutMs: limits.timeoutMs,
      memoryMb: limits.memoryMb,
      // Half the heap: a job that leaves more than this behind makes its child renew its isolate, so every job starts with at
      // least half of the limit free.
      retireHeapMb: limits.memoryMb / 2,
    });
    this.proc = spawn(process.execPath, ['--no-node-snapshot', files.childFile, config], {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: {},
      windowsHide: true,
    });
    this.listen();
  }

  private listen(): void {
    const proc = this.proc;
    proc.stdout.setEncoding('utf8');
    // V8 prints its fatal-error report here when an isolate blows up; kept (bounded) for diagnostics only.
    proc.stderr.setEncoding('utf8');
    proc.stderr.on('data', (chunk: string) => {
      this.events.stderr(chunk);
      // Only V8 and the child write here (an expression has no console), so a fatal report is V8's own.
      if (V8_FATAL.test(chunk)) this.fatalReport = true;
    });
    (proc.stderr as unknown as Socket).unref();
    proc.stdout.on('data', (chunk: string) => this.onData(chunk));
    proc.stdin.on('error', () => {
      /* the child died; handled by 'close' */
    });
    proc.on('error', () => {
      /* spawn failure; 'close' follows */
    });
    // 'close', not 'exit': it comes after every line the child wrote was read, so the answers it gave before it
    // ended are taken before deciding which job it was running.
    proc.on('close', (code) => this.events.close(this, code));
    proc.unref();
    (proc.stdout as unknown as Socket).unref();
  }

  private onData(chunk: string): void {
    this.buffer += chunk;
    let nl: number;
    while ((nl = this.buffer.indexOf('\n')) !== -1) {
      const line = this.buffer.slice(0, nl);
      this.buffer = this.buffer.slice(nl + 1);
      let msg: ChildMessage;
      try {
        msg = JSON.parse(line) as ChildMessage;
      } catch {
        continue;
      }
      this.events.message(this, msg);
    }
  }

  /** Whether a job may be written to this child now: it is ready, it takes jobs, its pipe has room, its head is not slow. */
  canTake(now: number): boolean {
    if (!this.ready || this.spare || this.inflight.length >= PIPELINE_DEPTH) return false;
    return !(this.inflight.length > 0 && now - this.headSince > SLOW_HEAD_MS);
  }

  /**
   * Hand a job to the child. The lines of one tick for one child go in one write (one syscall, one read on the other
   * side): the first line schedules the write, later ones join it.
   */
  send(job: Pending): void {
    this.inflight.push(job);
    const line = job.wire ? lineFor(job.wire, this.statics) : job.line;
    if (this.out === '') setImmediate(() => this.flushOut());
    this.out += line + '\n';
    if (this.inflight.length === 1) this.startHead();
  }

  private flushOut(): void {
    if (this.out === '') return;
    const text = this.out;
    this.out = '';
    this.proc.stdin.write(text);
  }

  /** The head job was answered: it leaves the pipe and the next one, if any, starts running. */
  takeHead(): Pending | undefined {
    const job = this.inflight.shift();
    if (!job) return undefined;
    this.stopWatchdog();
    if (this.inflight.length) this.startHead();
    return job;
  }

  private stopWatchdog(): void {
    if (this.watchdog) clearTimeout(this.watchdog);
    this.watchdog = undefined;
  }

  /**
   * The head job starts running now. The child enforces the budget itself; the watchdog only catches a child that
   * does not stop: one whose process has used more CPU time since the head started than any job's attempts can (a
   * builtin that V8 cannot interrupt, such as `new Array(1e9).fill(0)`: measured, it ran 13 s before the wall-clock
   * watchdog, then 13 s more when run again), or, where the CPU time cannot be read or the child does not run at all
   * (a stopped process), one that has not answered within every attempt's wall allowance.
   */
  private startHead(): void {
    if (this.watchdog) clearTimeout(this.watchdog);
    this.headSince = performance.now();
    this.killedForTime = false;
    this.killedForCpu = false;
    // Read lazily: nearly every job is answered long before the first check, and reading /proc costs about 25 µs,
    // which on every job was 8% of a 10-key export's CPU time (profiled). The CPU time counted is the child's from the
    // first check on, which is never more than the job's own: a kill on it is never wrong.
    this.headCpuMs = undefined;
    const wallMs = watchdogMs(this.limits.timeoutMs);
    const cpuMs = cpuWatchdogMs(this.limits.timeoutMs);
    const check = (): void => {
      const ranMs = performance.now() - this.headSince;
      const now = processCpuMs(this.proc.pid);
      if (this.headCpuMs === undefined && now !== undefined && ranMs < wallMs) {
        this.headCpuMs = now;
        this.watchdog = setTimeout(check, Math.min(cpuMs, wallMs - ranMs));
        return;
      }
      const usedMs = now === undefined || this.headCpuMs === undefined ? undefined : now - this.headCpuMs;
      if (usedMs !== undefined && usedMs >= cpuMs) this.killedForCpu = true;
      else if (ranMs < wallMs) {
        // Neither limit reached: look again when the first of them could be.
        const next = Math.min(wallMs - ranMs, usedMs === undefined ? Infinity : cpuMs - usedMs);
        this.watchdog = setTimeout(check, Math.max(20, next));
        return;
      }
      this.killedForTime = true;
      this.proc.kill('SIGKILL');
    };
    this.watchdog = setTimeout(check, Math.min(FIRST_CPU_LOOK_MS, wallMs));
  }

  /**
   * The child gave up its isolate after its last answer and is making a new one. Returns the job answered last (it
   * pays for the renewal) and the jobs written after it, which never ran. Job lines not yet written are not written
   * at all (their jobs go back to the queue); static halves among them still go, before the flush line that tells
   * the child to drop what was written meanwhile, since this child is recorded as holding them. The child becomes a
   * spare until it is ready again.
   */
  renew(): { charged: Pending | undefined; notStarted: Pending[] } {
    this.ready = false;
    this.renewing = true;
    this.stopWatchdog();
    const charged = this.lastAnswered;
    this.lastAnswered = undefined;
    const notStarted = this.inflight.splice(0);
    const halves = staticLinesOf(this.out);
    this.out = '';
    this.proc.stdin.write(halves + FLUSH_LINE + '\n');
    this.spare = true;
    return { charged, notStarted };
  }

  /**
   * The child has ended. Exit code 0: its stdin was closed (it exits between jobs, and never because of one): none of
   * its remaining jobs ran there. Any other end (V8 abort, watchdog kill, killed from outside) hit the head job.
   * Returns that job, if any, and the jobs still waiting in the dead child's pipe, which never started.
   */
  ended(code: number | null): { head: Pending | undefined; notStarted: Pending[] } {
    this.out = '';
    if (this.watchdog) clearTimeout(this.watchdog);
    const head = code === 0 ? undefined : this.inflight.shift();
    return { head, notStarted: this.inflight.splice(0) };
  }

  /**
   * The answer of the head job of a child that ended (see ended): undefined when the child ended without saying why
   * (it may have been stuck or killed for another reason) and the job was never suspected before, so that it runs
   * once more on another child before it is blamed; else its time-limit or memory-limit answer.
   */
  blame(head: Pending): SandboxResponse | undefined {
    if (head.suspect === 0 && !this.fatalReport && !this.killedForCpu) return undefined;
    return this.killedForTime
      ? failureResponse(head.request, 'time-limit', timeLimitMessage(this.limits.timeoutMs))
      : failureResponse(head.request, 'memory-limit', memoryLimitMessage(this.limits.memoryMb));
  }

  /** Fail the jobs written to the child and kill it; resolves when it has exited. */
  kill(error: Error): Promise<void> {
    for (const job of this.inflight.splice(0)) job.reject(error);
    if (this.watchdog) clearTimeout(this.watchdog);
    return new Promise<void>((resolve) => {
      if (this.proc.exitCode !== null || this.proc.signalCode !== null) return resolve();
      this.proc.once('exit', () => resolve());
      this.proc.ref(); // keep the process alive until the child is gone
      this.proc.kill('SIGKILL');
    });
  }
}
