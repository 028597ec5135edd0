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
import { readFileSync } from 'node:fs';
import type IVM from 'isolated-vm';
import {
  FLUSH_LINE,
  SANDBOX_FILENAME,
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
import { readCodeCache, readWarmPlan } from './prepared.js';

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
const source = readFileSync(options.bundle, 'utf8');
/** The build's warm-up plan for this bundle (prepared.ts), as the runtime's `seal` takes it; else the full warm-up. */
const warmPlan = readWarmPlan(options.bundle, source) ?? 'full';

interface Sandbox {
  isolate: IVM.Isolate;
  handle: IVM.Reference<(line: string) => string>;
  partial: IVM.Reference<(kind: string, message: string) => string>;
  sealReport: string;
  startupMs: number;
  /** Whether V8 took the code cache it was given ('none' when there was none). */
  codeCache: 'accepted' | 'rejected' | 'none';
}

/**
 * V8's compiled code for the bundle: the build's (prepared.ts), else made by this process's first isolate before any
 * job ran; later isolates of this process reuse it. It is code derived from the bundle's text only (V8 checks it
 * against the source), never heap state.
 */
const builtCodeCache = readCodeCache(options.bundle);
let codeCache: IVM.ExternalCopy<ArrayBuffer> | undefined = builtCodeCache ? new ivm.ExternalCopy(builtCodeCache) : undefined;

/** A fresh isolate with the bundle loaded and the realm sealed. */
function createSandbox(): Sandbox {
  const started = performance.now();
  const isolate = new ivm.Isolate({ memoryLimit: options.memoryMb });
  const context = isolate.createContextSync();
  const given = codeCache;
  // With both options, V8 makes a cache only when it did not take the one given (another Node's, say).
  const script = isolate.compileScriptSync(source, {
    filename: SANDBOX_FILENAME,
    produceCachedData: true,
    ...(given ? { cachedData: given } : {}),
  }) as IVM.Script & IVM.CachedDataResult & { cachedDataRejected?: boolean };
  const cacheUse = given ? (script.cachedDataRejected ? 'rejected' : 'accepted') : 'none';
  if (cacheUse !== 'accepted' && script.cachedData) codeCache = script.cachedData;
  script.runSync(context);
  script.release();
  const runtime = context.global.getSync('__cfguRuntime', { reference: true }) as IVM.Reference<Record<string, unknown>>;
  const handle = runtime.getSync('handle', { reference: true }) as IVM.Reference<(line: string) => string>;
  const partial = runtime.getSync('partial', { reference: true }) as IVM.Reference<(kind: string, message: string) => string>;
  const seal = runtime.getSync('seal', { reference: true }) as IVM.Reference<(warm: string) => string>;
  const sealReport = seal.applySync(undefined, [warmPlan], { timeout: 30_000 }) as string;
  seal.release();
  // The caches inside the isolate are bounded from its memory limit (sandbox-runtime.ts `limits`).
  const limits = runtime.getSync('limits', { reference: true }) as IVM.Reference<(memoryMb: number) => void>;
  limits.applySync(undefined, [options.memoryMb], { timeout: 30_000 });
  limits.release();
  runtime.release();
  warm(handle);
  return { isolate, handle, partial, sealReport, startupMs: performance.now() - started, codeCache: cacheUse };
}

/**
 * Requests run once in every new isolate, after sealing and before `ready`: V8 compiles a function at its first call,
 * so the first job of an isolate used to pay for compiling the whole job path (templates, each library, Ajv, the
 * failure path). That one-off cost, several milliseconds on a quiet machine and over 100 ms on a loaded one, was
 * charged to the first real job's time limit. The data here is constant: no request's value is ever in it, and the
 * per-job reset at the start of every job applies to what follows as it does between any two jobs.
 */
const WARM_CFGU = { schema: { type: 'string' } };
const WARM_LINES: string[] = [
  JSON.stringify({
    t: 'job',
    job: {
      input: {
        store: { type: 'in-memory' },
        set: { path: 'warm/up', hierarchy: ['', 'warm', 'warm/up'] },
        schema: { keys: { HOST: WARM_CFGU, PORT: { schema: { type: 'number' } }, URL: { const: '{{ $.configs.HOST.value }}:<%= $.configs.PORT.value %>' } } },
      },
      configs: { HOST: ['warm.example.com', 'store'], PORT: ['8080', 'default'], URL: ['', 'empty'] },
      consts: [{ key: 'URL', template: '{{ $.configs.HOST.value }}:<%= $.configs.PORT.value %>' }],
      tests: [
        {
          key: 'HOST',
          expressions: [
            'validator.isFQDN($.value)',
            'expect($.value).to.be.a("string")',
            'z.string().min(1).parse($.value) === $.value',
            '_.isString($.value) && $.labels.length === 0',
            'JSONSchema.validate({ type: "string", minLength: 1 }, $.value)',
            '$.value === "not this"',
            'expect($.storedValue).to.match(/^[0-9]+$/)',
          ],
        },
        { key: 'PORT', expressions: ['Number.isInteger($.value) && $.value > 0', 'z.number().max(10).parse($.value)'] },
      ],
    },
  }),
  JSON.stringify({ t: 'template', template: 'host={{ $.configs.HOST }}', context: { configs: { HOST: 'warm' } } }),
  JSON.stringify({ t: 'bool', expression: '$.key !== ""', context: { key: 'K', value: 'v' } }),
];

function warm(handle: IVM.Reference<(line: string) => string>): void {
  for (const line of WARM_LINES) {
    try {
      handle.applySync(undefined, [line], { timeout: 30_000 });
    } catch {
      // A warm-up that fails (a memory limit set very low) only leaves the first job to compile what it needs.
    }
  }
}

let sandbox = createSandbox();
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
  sandbox = createSandbox();
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

/** Static halves of jobs sent by the host (job-wire.ts): schema text only, kept across isolate renewals. */
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
