/**
 * The sandbox child process (bundled to dist/sandbox-child.js). It owns ONE isolated-vm isolate at a time with the
 * library bundle loaded and sealed, and evaluates one request at a time: a JSON line on stdin, a JSON line on stdout.
 *
 * The process exists so that a V8 fatal error inside the isolate (some out-of-memory paths ignore the isolate's
 * memory limit and abort the whole process) kills this child, never the server. The host replaces a dead child.
 * An isolate that dies cleanly (disposed at its memory limit) or is left with too full a heap is replaced in this
 * process instead ("renewal"): no process start-up, and the bundle's compiled code is reused.
 *
 * argv[2]: JSON `{ bundle, timeoutMs, memoryMb, retireHeapMb }`. The environment is empty (the host passes none).
 */
import {
  FLUSH_LINE,
  IMPORT_MESSAGE,
  WALL_FACTORS,
  failureResponse,
  memoryLimitMessage,
  timeLimitMessage,
  withCpu,
  type SandboxRequest,
} from '../wire/protocol.js';
import { loadSandboxBuild } from '../isolated-vm.js';
import { ChildStatics, childStaticLimit, unknownLine } from '../wire/job-wire.js';
import { SandboxMaker } from './sandbox.js';

interface ChildOptions {
  bundle: string;
  /** The CPU-time budget of one request, in ms. */
  timeoutMs: number;
  memoryMb: number;
  /** Renew the isolate after an answer that leaves more than this much heap in use (MB). */
  retireHeapMb: number;
}

// The isolated-vm build that matches this Node (src/expressions/isolated-vm.ts).
const { ivm } = loadSandboxBuild();
const options = JSON.parse(process.argv[2] ?? '{}') as ChildOptions;
const TIMED_OUT = 'Script execution timed out.';
const maker = new SandboxMaker(ivm, options);
let sandbox = maker.create();
/** Isolates this process has made after its first. */
let renewals = 0;

/**
 * Set from the moment the isolate is given up (disposed at its memory limit, or its heap left too full) until the
 * host's flush line: every job line read meanwhile was written before the host learnt of the renewal, never ran
 * here, and was re-queued by the host. They are dropped unanswered.
 */
let draining = false;

function reply(line: string, then?: () => void): void {
  process.stdout.write(line + '\n', then);
}

function parseRequest(line: string): SandboxRequest {
  try {
    return JSON.parse(line) as SandboxRequest;
  } catch {
    return { t: 'bool', expression: '', context: null };
  }
}

function clip(text: string): string {
  return text.length > 300 ? `${text.slice(0, 297)}...` : text;
}

/**
 * This process's CPU time so far (ns): user plus system time of all its threads, from the kernel's accounting.
 *
 * Not isolated-vm's `isolate.cpuTime`: while a run is in progress (and, measured, also for a finished run on Linux)
 * that clock advances with the wall clock, so on a loaded machine a job was charged for the time its thread waited
 * for a CPU and valid jobs hit the time limit. The kernel counts only the time a thread actually ran. This process
 * runs one job at a time and does nothing else meanwhile (stdin is not read during a job), so the difference around
 * a job is that job's cost: its own thread plus the V8 work it causes on helper threads (garbage collection).
 */
function cpuNow(): bigint {
  const { user, system } = process.cpuUsage();
  return BigInt(user + system) * 1000n;
}

const budgetNs = BigInt(options.timeoutMs) * 1_000_000n;

/** The memory-limit answer, then a new isolate: a disposed one cannot run another job. */
function dieOfMemory(line: string, cpuMs: number): void {
  const text = JSON.stringify(failureResponse(parseRequest(line), 'memory-limit', memoryLimitMessage(options.memoryMb)));
  reply(withCpu(text, cpuMs));
  renew();
}

function evaluate(line: string): void {
  const jobStart = cpuNow();
  const { isolate, handle, partial } = sandbox;
  // CPU time of every attempt so far (ms).
  const spent = (): number => Number(cpuNow() - jobStart) / 1e6;
  for (let attempt = 0; ; attempt++) {
    const attemptStart = cpuNow();
    const wall = WALL_FACTORS[attempt]! * options.timeoutMs;
    try {
      const out = handle.applySync(undefined, [line], { timeout: wall }) as string;
      if (attempt > 0 && cpuNow() - attemptStart >= budgetNs) {
        // Finished only because its wall allowance was extended: its CPU time is over the budget all the same.
        reply(withCpu(JSON.stringify(failureResponse(parseRequest(line), 'time-limit', timeLimitMessage(options.timeoutMs))), spent()));
      } else {
        reply(withCpu(out, spent()));
      }
      return;
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      if (isolate.isDisposed) return dieOfMemory(line, spent());
      const timedOut = message === TIMED_OUT;
      // Cut by the wall clock before its own CPU time reached the budget: the host was busy, not the job. Run it again;
      // after the last allowance, say so rather than blame the job.
      if (timedOut && cpuNow() - attemptStart < budgetNs) {
        if (attempt + 1 < WALL_FACTORS.length) continue;
        reply(withCpu(JSON.stringify({ t: 'overloaded' }), spent()));
        return;
      }
      const kind = timedOut ? 'time-limit' : 'error';
      const text = timedOut
        ? timeLimitMessage(options.timeoutMs)
        : message === 'Not supported'
          ? IMPORT_MESSAGE
          : clip(message.split('\n')[0] ?? 'the expression failed');
      try {
        reply(withCpu(partial.applySync(undefined, [kind, text], { timeout: Math.max(50, options.timeoutMs) }) as string, spent()));
      } catch {
        if (isolate.isDisposed) return dieOfMemory(line, spent());
        reply(withCpu(JSON.stringify(failureResponse(parseRequest(line), kind, text)), spent()));
      }
      return;
    }
  }
}

/**
 * Give up the isolate and make a new one in this process. The answers of the old one are all out; the `renew` notice
 * follows them, so the host knows that no job written after the last answer ran, and writes the flush line that ends
 * the draining. The host does not send jobs until the next `ready`.
 */
function renew(): void {
  draining = true;
  reply(JSON.stringify({ t: 'renew' }));
  try {
    if (!sandbox.isolate.isDisposed) sandbox.isolate.dispose();
  } catch {
    /* already gone */
  }
  renewals++;
  // Synchronous: stdin is read again only once the new isolate is sealed.
  sandbox = maker.create();
  ready();
}

/**
 * After each answer: a heap this full (garbage included) could make the NEXT job, however light, hit the memory
 * limit. Renew the isolate instead (the answer is out).
 */
function renewIfHeapFull(): void {
  let used: number;
  try {
    used = sandbox.isolate.getHeapStatisticsSync().used_heap_size;
  } catch {
    return;
  }
  if (used >= options.retireHeapMb * 1024 * 1024) renew();
}

function ready(): void {
  reply(
    JSON.stringify({
      t: 'ready',
      startupMs: Math.round(sandbox.startupMs),
      renewals,
      heapMb: Math.round(sandbox.isolate.getHeapStatisticsSync().used_heap_size / 2 ** 20),
      cpuMs: Math.round((process.cpuUsage().user + process.cpuUsage().system) / 1000),
      codeCache: sandbox.codeCache,
      seal: JSON.parse(sandbox.sealReport),
    }),
  );
}

/** Static halves of jobs sent by the host (wire/job-wire.ts): schema text only, kept across isolate renewals. */
const statics = new ChildStatics(childStaticLimit(options.memoryMb));

// The host pipelines several jobs to a child; they are answered strictly in order, one line each.
let buffer = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk: string) => {
  buffer += chunk;
  let nl: number;
  while ((nl = buffer.indexOf('\n')) !== -1) {
    const line = buffer.slice(0, nl);
    buffer = buffer.slice(nl + 1);
    if (line === FLUSH_LINE) draining = false;
    else if (line) {
      const request = statics.decode(line);
      // A static half is kept even while draining: it is schema text only, and the host counts it as held.
      if ('kept' in request || draining) continue;
      if ('unknown' in request) {
        reply(unknownLine(request.unknown));
        continue;
      }
      evaluate(request.line);
      if (!draining) renewIfHeapFull();
    }
  }
});
// The host closed our stdin: it is shutting down (or died).
process.stdin.on('end', () => process.exit(0));

ready();
