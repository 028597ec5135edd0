/**
 * The sandbox child process (bundled to dist/sandbox-child.js). It owns ONE isolated-vm isolate with the library
 * bundle loaded and sealed, and evaluates one request at a time: a JSON line on stdin, a JSON line on stdout.
 *
 * The process exists so that a V8 fatal error inside the isolate (some out-of-memory paths ignore the isolate's
 * memory limit and abort the whole process) kills this child, never the server. The host replaces a dead child.
 *
 * argv[2]: JSON `{ bundle, timeoutMs, memoryMb }`. The environment is empty (the host passes none).
 */
import { readFileSync } from 'node:fs';
import ivm from 'isolated-vm';
import { IMPORT_MESSAGE, failureResponse, memoryLimitMessage, timeLimitMessage, type SandboxRequest } from './protocol.js';

interface ChildOptions {
  bundle: string;
  timeoutMs: number;
  memoryMb: number;
}

const options = JSON.parse(process.argv[2] ?? '{}') as ChildOptions;
const TIMED_OUT = 'Script execution timed out.';

const started = performance.now();
const isolate = new ivm.Isolate({ memoryLimit: options.memoryMb });
const context = isolate.createContextSync();
isolate.compileScriptSync(readFileSync(options.bundle, 'utf8'), { filename: 'cfgu-sandbox.js' }).runSync(context);
const runtime = context.global.getSync('__cfguRuntime', { reference: true }) as ivm.Reference<Record<string, unknown>>;
const handle = runtime.getSync('handle', { reference: true }) as ivm.Reference<(line: string) => string>;
const partial = runtime.getSync('partial', { reference: true }) as ivm.Reference<(kind: string, message: string) => string>;
const seal = runtime.getSync('seal', { reference: true }) as ivm.Reference<() => string>;
const sealReport = seal.applySync(undefined, [], { timeout: 30_000 }) as string;
runtime.release();

/** Set once the isolate was disposed (memory limit): no further job is started. */
let dying = false;

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

function evaluate(line: string): void {
  try {
    reply(handle.applySync(undefined, [line], { timeout: options.timeoutMs }) as string);
    return;
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    if (isolate.isDisposed) {
      // The isolate hit its memory limit and was torn down: answer for this job, then let the host start a fresh
      // child (a new isolate needs the whole bundle again anyway).
      const text = JSON.stringify(failureResponse(parseRequest(line), 'memory-limit', memoryLimitMessage(options.memoryMb)));
      dying = true;
      reply(text, () => process.exit(0));
      return;
    }
    const timedOut = message === TIMED_OUT;
    const kind = timedOut ? 'time-limit' : 'error';
    const text = timedOut
      ? timeLimitMessage(options.timeoutMs)
      : message === 'Not supported'
        ? IMPORT_MESSAGE
        : clip(message.split('\n')[0] ?? 'the expression failed');
    try {
      reply(partial.applySync(undefined, [kind, text], { timeout: Math.max(50, options.timeoutMs) }) as string);
    } catch {
      if (isolate.isDisposed) {
        dying = true;
        reply(JSON.stringify(failureResponse(parseRequest(line), 'memory-limit', memoryLimitMessage(options.memoryMb))), () =>
          process.exit(0),
        );
        return;
      }
      reply(JSON.stringify(failureResponse(parseRequest(line), kind, text)));
    }
  }
}

// The host pipelines several jobs to a child; they are answered strictly in order, one line each. Once the isolate
// is gone the child answers nothing more: the host hands the jobs it had queued here to another child.
let buffer = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk: string) => {
  buffer += chunk;
  let nl: number;
  while (!dying && (nl = buffer.indexOf('\n')) !== -1) {
    const line = buffer.slice(0, nl);
    buffer = buffer.slice(nl + 1);
    if (line) evaluate(line);
  }
});
// The host closed our stdin: it is shutting down (or died).
process.stdin.on('end', () => process.exit(0));

reply(JSON.stringify({ t: 'ready', startupMs: Math.round(performance.now() - started), seal: JSON.parse(sealReport) }));
