import { coerceValue, declaredTypeOf } from '../../core/coerce.js';
import { labelsOf } from '../../core/view.js';
import { ProgressiveRedaction } from '../../core/redact.js';
import { failureResponse, wireJobOf, type SandboxRequest, type SandboxResponse, type WireJob } from '../wire/protocol.js';
import type { ConfigView, ConstOutcome, ExpressionFailureKind, TestOutcome } from '../../core/ports.js';
import { O, JSONparse, JSONstringify, StringCtor } from './intrinsics.js';
import { Failure, render, testExpression } from './compile.js';
import { beginJob } from './seal.js';
import { beginClockWatch, readClockOrChance } from './prelude.js';

// ---------------------------------------------------------------------------------------------------------------
// Jobs
// ---------------------------------------------------------------------------------------------------------------
const EMPTY_VIEW = (key: string): ConfigView => ({ key, storedValue: '', value: '', origin: 'empty', cfgu: {}, labels: [] });

function contextFor(key: string, configs: Record<string, ConfigView>, input: unknown): unknown {
  const view = O.prototype.hasOwnProperty.call(configs, key) ? configs[key]! : EMPTY_VIEW(key);
  return {
    key,
    value: view.value,
    storedValue: view.storedValue,
    origin: view.origin,
    cfgu: view.cfgu,
    labels: view.labels,
    configs,
    input,
  };
}

/** Progress of the request in flight, read by partial() after a time limit interrupted it. */
let progress:
  | { request: SandboxRequest; consts: ConstOutcome[]; tests: TestOutcome[]; testsDone: number; response: string | undefined }
  | undefined;

function runJob(job: WireJob): SandboxResponse {
  // Decode the wire form (wire/protocol.ts): value and labels are derived here exactly as the host derives them.
  const declared = job.input.schema.keys as Record<string, Record<string, unknown>>;
  const configs: Record<string, ConfigView> = O.create(null);
  for (const key of O.keys(job.configs ?? {})) {
    const [storedValue, origin, sent] = job.configs[key]!;
    const cfgu = sent ?? (O.prototype.hasOwnProperty.call(declared, key) ? declared[key]! : {});
    configs[key] = { key, storedValue, value: coerceValue(storedValue, declaredTypeOf(cfgu)), origin, cfgu, labels: labelsOf(cfgu) };
  }
  const p = progress!;
  // Defence in depth: hidden values are redacted from messages here already (the host does it again). Set up at the
  // first failure, from the values known then; the consts computed after that are checked one by one.
  let redaction: ProgressiveRedaction | undefined;
  const redact = (message: string): string =>
    (redaction ??= new ProgressiveRedaction(
      O.keys(configs).map((key) => ({ key, text: configs[key]!.storedValue, origin: configs[key]!.origin, cfgu: configs[key]!.cfgu })),
    )).redact(message);
  for (const c of job.consts) {
    const rendered = render(c.template, contextFor(c.key, configs, job.input));
    if (rendered instanceof Failure) {
      p.consts.push({ key: c.key, ok: false, kind: rendered.kind, message: redact(rendered.message) });
      continue;
    }
    const prior = configs[c.key];
    const cfgu = prior?.cfgu ?? {};
    configs[c.key] = {
      key: c.key,
      storedValue: rendered,
      value: coerceValue(rendered, declaredTypeOf(cfgu)),
      origin: 'const',
      cfgu,
      labels: prior?.labels ?? [],
    };
    redaction?.constComputed(c.key, c.template, rendered, cfgu);
    p.consts.push({ key: c.key, ok: true, value: rendered });
  }
  for (const t of job.tests) {
    const $ = contextFor(t.key, configs, job.input);
    for (let index = 0; index < t.expressions.length; index++) {
      const r = testExpression(t.expressions[index]!, $);
      if (r instanceof Failure) p.tests.push({ key: t.key, index, ok: false, kind: r.kind, message: redact(r.message) });
      p.testsDone++;
    }
  }
  return { t: 'job', result: { consts: p.consts, tests: p.tests } };
}

function dispatch(request: SandboxRequest): SandboxResponse {
  switch (request.t) {
    case 'job':
      return runJob(request.job);
    case 'j':
      // The static-half form (wire/job-wire.ts): the same job, decoded here into the object the whole form parses into.
      return runJob(wireJobOf(request.s, request.d));
    case 'template': {
      const r = render(request.template, request.context);
      return r instanceof Failure ? { t: 'value', ok: false, kind: r.kind, message: r.message } : { t: 'value', ok: true, value: r };
    }
    case 'bool': {
      const r = testExpression(request.expression, request.context);
      if (r === true) return { t: 'value', ok: true, value: true };
      if (r.kind === 'falsy') return { t: 'value', ok: true, value: false };
      return { t: 'value', ok: false, kind: r.kind, message: r.message };
    }
    case 'trusted': {
      const vars: Record<string, string> = O.create(null);
      for (const k of O.keys(request.variables ?? {})) vars[k] = StringCtor(request.variables[k]);
      // Unknown bare identifiers read as "", but the globals (JSON, Math, _ ...) stay visible.
      const scope = new Proxy(vars, {
        has: (target, name) => typeof name === 'string' && (name in target || !(name in globalThis)),
        get: (target, name) => (typeof name === 'string' ? (name in target ? target[name] : '') : undefined),
      });
      const r = render(request.template, scope, true);
      return r instanceof Failure ? { t: 'value', ok: false, kind: r.kind, message: r.message } : { t: 'value', ok: true, value: r };
    }
    default:
      return { t: 'value', ok: false, kind: 'error', message: 'unknown sandbox request' };
  }
}

/** Evaluate one request line; returns the response line. */
export function handle(line: string): string {
  beginJob();
  let request: SandboxRequest;
  try {
    request = JSONparse(line) as SandboxRequest;
  } catch {
    return JSONstringify({ t: 'value', ok: false, kind: 'error', message: 'malformed sandbox request' });
  }
  progress = { request, consts: [], tests: [], testsDone: 0, response: undefined };
  beginClockWatch();
  const response = dispatch(request);
  if (response.t === 'job' && !readClockOrChance()) response.pure = true;
  const text = JSONstringify(response);
  // Kept until the next request: if a late promise job (run by the isolate after this returns) throws or overruns,
  // partial() still answers with the completed result.
  progress.response = text;
  return text;
}

/** After a limit interrupted handle(): what completed, and `kind` for everything else. */
export function partial(kind: ExpressionFailureKind, message: string): string {
  const p = progress;
  progress = undefined;
  if (!p) return JSONstringify({ t: 'value', ok: false, kind, message });
  if (p.response !== undefined) return p.response;
  return JSONstringify(failureResponse(p.request, kind, message, { consts: p.consts, tests: p.tests, testsDone: p.testsDone }));
}
