/**
 * The whole-suite secret scan (docs/security.md, "The whole-suite scan"), test side.
 *
 * Fixtures plant recognisable secrets (`planted(name)`: a value starting with SECRET_MARKER) as the values of hidden
 * keys. When the environment variable CFGU_TEST_CAPTURE names a folder (`npm test` sets it), every test process appends
 * what the shared helpers saw to `<folder>/<pid>.jsonl`, one JSON record a line: `{ kind, file, text }`, `file` being
 * the test file of the process. After the run, scripts/secret-scan.mjs fails when a record holds the marker, except
 * the records that carry hidden values by design, which are given their own kind here, at capture:
 * - `eval-pipe`: standard output of a command that is the `cfgu eval` format (docs/cli.md, "The eval format"); it
 *   holds every value, hidden ones included, so that `cfgu export` can read it.
 * - `const-value`: a text whose only secrets are values that a test declared with `byDesign()` (a const computed from a
 *   hidden key is not hidden itself: its value is exported, as the user wrote it).
 * Without CFGU_TEST_CAPTURE nothing is written and nothing is hooked.
 *
 * Loaded first in every test process (`--import`, scripts/test.mjs), it also adds an `onSend` hook to every Fastify
 * instance the process creates (Fastify's `fastify.initialization` diagnostics channel), so that in-process answers,
 * `inject()` included, are captured without the tests doing anything.
 */
import { randomBytes } from 'node:crypto';
import { subscribe } from 'node:diagnostics_channel';
import { appendFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The start of every planted secret: what the scan looks for. */
export const SECRET_MARKER = 'S3CR3T-cfgu-';

/** A recognisable secret, new at each call: `S3CR3T-cfgu-<name>-<random>`. */
export function planted(name: string): string {
  const value = `${SECRET_MARKER}${name}-${randomBytes(5).toString('hex')}`;
  // Its random tail is searched for too: a message that cut the start of the value off still leaks.
  record('planted', value);
  return value;
}

export type CaptureKind =
  | 'response-body'
  | 'response-header'
  | 'log-line'
  | 'server-stderr'
  | 'cli-stdout'
  | 'cli-stderr'
  /** By design (not scanned): the `cfgu eval` format. */
  | 'eval-pipe'
  /** By design (not scanned): a const's own value, declared with `byDesign()`. */
  | 'const-value'
  /** Not output: a value `planted()` made, whose random tail the scan also looks for. */
  | 'planted';

/** Kinds the scan skips: output that carries hidden values on purpose. */
export const BY_DESIGN_KINDS: readonly CaptureKind[] = ['eval-pipe', 'const-value', 'planted'];

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const folder = process.env.CFGU_TEST_CAPTURE || undefined;
/** True when this process writes a capture. */
export const capturing = folder !== undefined;
const target = folder && join(folder, `${process.pid}.jsonl`);
/** The test file of this process, named by its source (`npm test` runs bundles of them, under .cache/test-build/). */
const file = process.argv[1] ? relative(ROOT, process.argv[1]).replace(/^\.cache\/test-build\/(.*)\.mjs$/, '$1.ts') : '?';
/** Over this length, a text without the marker is stored cut (it is counted, and has nothing to find). */
const KEEP = 16_384;

const declared = new Set<string>();

/**
 * Declare `value` as output by design (a const's own value that is computed from a hidden key): a text whose every
 * marker lies inside such values is captured as `const-value`. Declare the exact value the test expects in the answer.
 */
export function byDesign(value: string): void {
  if (value.includes(SECRET_MARKER)) declared.add(value);
}

/** The `cfgu eval` format: a JSON object of key -> { key, value, origin, ... } (at least one key). */
function isEvalPipe(text: string): boolean {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch {
    return false;
  }
  if (!data || typeof data !== 'object' || Array.isArray(data)) return false;
  const entries = Object.entries(data as Record<string, unknown>);
  return (
    entries.length > 0 &&
    entries.every(([k, e]) => !!e && typeof e === 'object' && (e as Record<string, unknown>).key === k && typeof (e as Record<string, unknown>).value === 'string' && 'origin' in e)
  );
}

function classify(kind: CaptureKind, text: string): CaptureKind {
  if (!text.includes(SECRET_MARKER)) return kind;
  if (kind === 'cli-stdout' && isEvalPipe(text)) return 'eval-pipe';
  if (declared.size) {
    let rest = text;
    for (const v of declared) rest = rest.split(v).join('');
    if (!rest.includes(SECRET_MARKER)) return 'const-value';
  }
  return kind;
}

/** Append one record (nothing when not capturing, or for an empty text). Never throws: capture must not fail a test. */
export function record(kind: CaptureKind, text: string | Buffer | undefined | null): void {
  if (!target || text === undefined || text === null) return;
  const s = typeof text === 'string' ? text : text.toString('utf8');
  if (!s) return;
  try {
    const k = classify(kind, s);
    const cut = s.length > KEEP && !s.includes(SECRET_MARKER);
    const rec = { kind: k, file, text: cut ? s.slice(0, KEEP) : s, ...(k !== kind ? { as: kind } : {}), ...(cut ? { length: s.length } : {}) };
    appendFileSync(target, `${JSON.stringify(rec)}\n`);
  } catch {
    /* the folder is gone (the run ended): nothing to do */
  }
}

/** Headers as one record (names and values). */
export function recordHeaders(headers: Record<string, unknown>): void {
  if (target) record('response-header', JSON.stringify(headers));
}

/**
 * A line splitter for streamed output (a child's stdout): complete lines are recorded as they come, the rest when
 * `end()` is called.
 */
export function lineRecorder(kind: CaptureKind): { write(chunk: string | Buffer): void; end(): void } {
  let buffer = '';
  return {
    write(chunk) {
      if (!target) return;
      buffer += chunk.toString();
      let nl: number;
      while ((nl = buffer.indexOf('\n')) !== -1) {
        record(kind, buffer.slice(0, nl));
        buffer = buffer.slice(nl + 1);
      }
    },
    end() {
      if (buffer) record(kind, buffer);
      buffer = '';
    },
  };
}

// Every Fastify instance of this process: its answers (body and headers), in-process and `inject()` alike. Streams
// (Server-Sent Events, files) are not read here; the SSE client helper captures what it receives.
const HOOKED = Symbol.for('cfgu.test.capture.hooked');
const g = globalThis as Record<symbol, unknown>;
if (target && !g[HOOKED]) {
  g[HOOKED] = true;
  subscribe('fastify.initialization', (message) => {
    const fastify = (message as { fastify?: { addHook: (name: string, fn: (...args: any[]) => void) => void } }).fastify;
    fastify?.addHook('onSend', (_req: unknown, reply: { getHeaders(): Record<string, unknown> }, payload: unknown, done: (err: null, payload: unknown) => void) => {
      try {
        if (typeof payload === 'string' || Buffer.isBuffer(payload)) record('response-body', payload);
        recordHeaders(reply.getHeaders());
      } catch {
        /* never fail an answer */
      }
      done(null, payload);
    });
  });
}

/**
 * Schema keys that exercise a hidden key `key` (whose stored value is a planted secret) on every path whose message
 * could quote it: tests that fail (chai, zod, a regular expression, a message built from the value), a hidden const
 * built from it with a failing test, and a const that fails to compute from it. None of them may show the value.
 * `failingOnHiddenErrors(key)` is the exact list of errors they give.
 */
export function failingOnHidden(key: string): Record<string, unknown> {
  return {
    [key]: { hidden: true, test: HIDDEN_TESTS },
    [`${key}_URL`]: { hidden: true, const: `https://app:{{ $.configs.${key}.value }}@db.local/app`, test: 'expect($.value).to.equal("x")' },
    [`${key}_JSON`]: { const: `{{ JSON.parse($.configs.${key}.value) }}` },
  };
}
const HIDDEN_TESTS = ['expect($.value).to.match(/^[a-z]+$/)', 'z.enum(["a", "b"]).parse($.value)', '/^[0-9]+$/.test($.value) || assert.fail("no match: " + $.value)'];

/** The errors of `failingOnHidden(key)` in command `command`, in the order the engine lists them. */
export function failingOnHiddenErrors(key: string, command = 0): Array<{ command: number; key: string; rule: string; message: string }> {
  const [chai, zod, regex] = HIDDEN_TESTS;
  return [
    { command, key, rule: 'test', message: `the test ${chai} of key "${key}" failed: expected '[hidden]' to match /^[a-z]+$/` },
    { command, key, rule: 'test', message: `the test ${zod} of key "${key}" failed: ✖ Invalid option: expected one of "a"|"b"` },
    { command, key, rule: 'test', message: `the test ${regex} of key "${key}" failed: no match: [hidden]` },
    { command, key: `${key}_URL`, rule: 'test', message: `the test expect($.value).to.equal("x") of key "${key}_URL" failed: expected '[hidden]…' to equal 'x'` },
    { command, key: `${key}_JSON`, rule: 'const', message: `\`const\` of key "${key}_JSON" failed: Unexpected token 'S', "[hidden]"... is not valid JSON` },
  ];
}
