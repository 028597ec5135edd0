// The job wire (src/expressions/wire/job-wire.ts): a schema's static half goes to each child once, then only its id; a new
// child, an evicted id or a child that lost it gets the full form again; the child rebuilds the very request line the
// isolate received before, so answers do not change; and the caches never hold a value.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { freezeDeep } from '../../src/core/frozen.js';
import { ChildStatics, STATIC_LIMITS, childStaticLimit, StaticRegistry, childRecord, encodeWire, lineFor, unknownLine } from '../../src/expressions/wire/job-wire.js';
import { encodeJob, wireJobOf, type SandboxRequest } from '../../src/expressions/wire/protocol.js';
import { createSandboxEvaluator, type SandboxEvaluator } from '../../src/expressions/index.js';
import { type ConfigView, type ExpressionJob } from '../../src/core/ports.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

const legacyLine = (job: ExpressionJob): string => JSON.stringify({ t: 'job', job: encodeJob(job) });

/** Feed what the host writes (one or two lines) to a child's decoder; the outcome of the last line. */
function feed(child: ChildStatics, text: string): ReturnType<ChildStatics['decode']> {
  const lines = text.split('\n');
  for (const line of lines.slice(0, -1)) assert.ok('kept' in child.decode(line), line);
  return child.decode(lines[lines.length - 1]!);
}

/** The job the isolate ends up with, as JSON text (key order included), for the line the child hands it. */
function isolateJob(line: string): string {
  const request = JSON.parse(line) as SandboxRequest;
  if (request.t === 'job') return JSON.stringify(request.job);
  if (request.t === 'j') return JSON.stringify(wireJobOf(request.s, request.d));
  throw new Error(`not a job: ${line}`);
}

/** The host's lines for a job through a child's decoder give the isolate exactly the job the whole form gave. */
function assertSameJob(child: ChildStatics, text: string, job: ExpressionJob): string {
  const out = feed(child, text);
  assert.ok('line' in out, text);
  assert.equal(isolateJob(out.line), isolateJob(legacyLine(job)));
  return out.line;
}

function view(key: string, storedValue: string, cfgu: Record<string, unknown>, origin: ConfigView['origin'] = 'store'): ConfigView {
  return { key, storedValue, value: storedValue, origin, cfgu, labels: [] };
}

/** A job as the engine makes it: declarations shared by the configs, one const, tests on two keys. */
function engineJob(values: Record<string, string>, frozen = true): ExpressionJob {
  const keys: Record<string, Record<string, unknown>> = {
    HOST: { test: 'validator.isFQDN($.value)' },
    PORT: { schema: { type: 'number' }, test: ['$.value > 0', '$.value < 65536'] },
    PASSWORD: { hidden: true },
    URL: { const: '{{ $.configs.HOST.value }}:{{ $.configs.PORT.value }}' },
  };
  if (frozen) freezeDeep(keys);
  const configs: Record<string, ConfigView> = {};
  for (const key of Object.keys(keys)) configs[key] = view(key, values[key] ?? '', keys[key]!, values[key] ? 'store' : 'empty');
  return {
    input: { store: { type: 'json-file' }, set: { path: 'prod', hierarchy: ['', 'prod'] }, schema: { keys } },
    configs,
    consts: [{ key: 'URL', template: keys.URL!.const as string }],
    tests: [
      { key: 'HOST', expressions: ['validator.isFQDN($.value)'] },
      { key: 'PORT', expressions: ['$.value > 0', '$.value < 65536'] },
    ],
  };
}

/** An expression that fills the isolate's heap until its memory limit (the child renews its isolate). */
const HEAP_BOMB = "(() => { const a = []; for (;;) a.push('y'.repeat(1 << 20) + a.length); })()";
/** A job whose only work is one test expression on PORT. */
const portTest = (expression: string): ExpressionJob => ({ ...engineJob({ HOST: 'h', PORT: '1' }), consts: [], tests: [{ key: 'PORT', expressions: [expression] }] });

describe('job wire: static halves', () => {
  it('the first job to a child carries the static half, the next only its id; the isolate gets the same job', () => {
    const registry = new StaticRegistry();
    const held = childRecord(childStaticLimit(64));
    const child = new ChildStatics(childStaticLimit(64));
    const one = engineJob({ HOST: 'a.example.com', PORT: '1', PASSWORD: 'pw-one' });
    const two = engineJob({ HOST: 'b.example.com', PORT: '2', PASSWORD: 'pw-two' });
    const first = lineFor(encodeWire(one, registry), held);
    const second = lineFor(encodeWire(two, registry), held);
    assert.match(first, /^\{"t":"s","id":\d+,"s":\[.*\n\{"t":"j",/);
    assert.doesNotMatch(second, /"s":/);
    assert.doesNotMatch(second, /validator\.isFQDN/);
    assert.ok(second.length < first.length / 2, `${second.length} vs ${first.length}`);
    assertSameJob(child, first, one);
    assertSameJob(child, second, two);
    assert.equal(child.size, 1);
    assert.equal(registry.size, 1);
  });

  it('the same schema text in new objects (a new request body) gets the same id', () => {
    const registry = new StaticRegistry();
    const a = encodeWire(engineJob({ HOST: 'x' }), registry);
    const b = encodeWire(engineJob({ HOST: 'y' }, false), registry);
    assert.equal(a.half!.id, b.half!.id);
  });

  it('a new child (restart, replacement) starts empty: the static half is sent again', () => {
    const registry = new StaticRegistry();
    const job = encodeWire(engineJob({ HOST: 'h' }), registry);
    const old = childRecord(childStaticLimit(64));
    lineFor(job, old);
    assert.doesNotMatch(lineFor(job, old), /"s":/);
    const replaced = childRecord(childStaticLimit(64));
    const line = lineFor(job, replaced);
    assert.match(line, /"s":/);
    assertSameJob(new ChildStatics(childStaticLimit(64)), line, engineJob({ HOST: 'h' }));
  });

  it('an id evicted from the host record is sent in full again; one the child evicted is answered "unknown"', () => {
    const registry = new StaticRegistry();
    const held = childRecord(childStaticLimit(64));
    const child = new ChildStatics(childStaticLimit(64));
    const jobOf = (i: number): ExpressionJob => ({
      ...engineJob({ HOST: `h${i}` }),
      tests: [{ key: 'HOST', expressions: [`$.value !== "${i}"`] }],
    });
    const firstLine = lineFor(encodeWire(jobOf(0), registry), held);
    assert.ok('line' in feed(child, firstLine));
    for (let i = 1; i <= STATIC_LIMITS.entries; i++) assert.ok('line' in feed(child, lineFor(encodeWire(jobOf(i), registry), held)));
    // Both sides keep the last `entries` halves: schema 0 is gone from both.
    assert.equal(child.size, STATIC_LIMITS.entries);
    const again = encodeWire(jobOf(0), registry);
    const id = again.half!.id;
    assert.deepEqual(child.decode(`{"t":"j","id":${id},"d":[{"type":"json-file"},{"path":"","hierarchy":[""]},[],0,0]}`), { unknown: id });
    assert.equal(unknownLine(id), `{"t":"unknown","id":${id}}`);
    const resent = lineFor(again, held);
    assert.match(resent, /"s":/);
    assertSameJob(child, resent, jobOf(0));
  });

  it('gives the isolate the very job of the whole form: pipe extras, a Cfgu not the declaration, odd key order, __proto__', () => {
    const registry = new StaticRegistry();
    const held = childRecord(childStaticLimit(64));
    const child = new ChildStatics(childStaticLimit(64));
    const cases: ExpressionJob[] = [];
    const base = engineJob({ HOST: 'é.example.com', PORT: '80', PASSWORD: 'p"w\\\n\u2028' });
    // A key piped from an earlier command (undeclared here), placed first, as the pipe's merge puts them.
    const piped: Record<string, ConfigView> = { FROM_PIPE: view('FROM_PIPE', 'v', { label: 'x' }, 'default') };
    for (const key of Object.keys(base.configs)) piped[key] = base.configs[key]!;
    cases.push(base, { ...base, configs: piped });
    // A declared key whose config carries another Cfgu (the pipe's winner came from another command).
    cases.push({ ...base, configs: { ...base.configs, PORT: view('PORT', '81', { schema: { type: 'number' }, test: 'true' }) } });
    // A declared key missing from the configs, and keys in reverse order.
    const reversed: Record<string, ConfigView> = {};
    for (const key of Object.keys(base.configs).reverse()) if (key !== 'PASSWORD') reversed[key] = base.configs[key]!;
    cases.push({ ...base, configs: reversed });
    // `__proto__` as a key, and integer-like keys (which objects order first).
    const odd: Record<string, Record<string, unknown>> = JSON.parse('{"__proto__":{"test":"true"},"B":{},"10":{},"2":{}}');
    const oddConfigs: Record<string, ConfigView> = JSON.parse('{}');
    for (const key of Object.keys(odd)) Object.defineProperty(oddConfigs, key, { value: view(key, `v-${key}`, odd[key]!), enumerable: true, writable: true, configurable: true });
    cases.push({ input: { store: { type: '' }, set: { path: '', hierarchy: [''] }, schema: { keys: odd } }, configs: oddConfigs, consts: [], tests: [{ key: '__proto__', expressions: ['true'] }] });
    // No consts, no tests, no configs.
    cases.push({ ...base, configs: {}, consts: [], tests: [] });
    for (const job of cases) for (let round = 0; round < 2; round++) assertSameJob(child, lineFor(encodeWire(job, registry), held), job);
    // The configs keep their key order (expressions may list them).
    const reorderedLine = assertSameJob(child, lineFor(encodeWire(cases[3]!, registry), held), cases[3]!);
    assert.deepEqual(Object.keys(JSON.parse(isolateJob(reorderedLine)).configs), ['URL', 'PORT', 'HOST']);
    // A job whose input has another shape is sent in the old form and passed through untouched.
    const other = { ...base, input: { ...base.input, extra: 1 } } as unknown as ExpressionJob;
    const line = lineFor(encodeWire(other, registry), held);
    assert.equal(line, legacyLine(other));
    assert.deepEqual(child.decode(line), { line });
  });

  it('isolation: no cache holds a value, and a job by id carries and yields only its own values', () => {
    const registry = new StaticRegistry();
    const held = childRecord(childStaticLimit(64));
    const child = new ChildStatics(childStaticLimit(64));
    const secrets = ['secret-of-request-one', 'secret-of-request-two'];
    const one = engineJob({ HOST: 'one.example.com', PORT: '1111', PASSWORD: secrets[0]! });
    const two = engineJob({ HOST: 'two.example.com', PORT: '2222', PASSWORD: secrets[1]! });
    const lineOne = lineFor(encodeWire(one, registry), held);
    const lineTwo = lineFor(encodeWire(two, registry), held);
    const decodedOne = feed(child, lineOne) as { line: string };
    const decodedTwo = feed(child, lineTwo) as { line: string };
    for (const text of [...child.dump(), ...registry.texts()]) {
      for (const value of [...secrets, 'one.example.com', 'two.example.com', '1111', '2222', 'prod']) {
        assert.ok(!text.includes(value), `a static half holds "${value}"`);
      }
    }
    assert.ok(!lineTwo.includes(secrets[0]!) && !decodedTwo.line.includes(secrets[0]!) && !decodedTwo.line.includes('one.example.com'));
    assert.ok(decodedOne.line.includes(secrets[0]!) && !decodedOne.line.includes(secrets[1]!));
  });
});

describe('job wire: a real sandbox child', () => {
  let child: ChildProcessWithoutNullStreams;
  let lines: string[] = [];
  let waiters: Array<() => void> = [];
  const next = async (): Promise<string> => {
    while (!lines.length) await new Promise<void>((r) => waiters.push(r));
    return lines.shift()!;
  };
  // Writes what the host writes (a static half and a job line, or a job line) and reads the one answer.
  const answer = async (line: string): Promise<string> => {
    child.stdin.write(`${line}\n`);
    for (;;) {
      const got = await next();
      if (!got.startsWith('{"t":"ready"')) return got.replace(/,"cpu":[0-9.e-]+\}$/, '}');
    }
  };

  before(async () => {
    const file = join(root, 'dist', 'sandbox-child.js');
    if (!existsSync(file)) throw new Error('dist/sandbox-child.js is missing: run `node scripts/build.mjs` first');
    const config = JSON.stringify({ bundle: join(root, 'dist', 'sandbox', 'libraries.js'), timeoutMs: 5000, memoryMb: 64, retireHeapMb: 32 });
    child = spawn(process.execPath, ['--no-node-snapshot', file, config], { env: {} });
    createInterface({ input: child.stdout }).on('line', (line) => {
      lines.push(line);
      for (const w of waiters.splice(0)) w();
    });
    assert.match(await next(), /^\{"t":"ready"/);
  });
  after(() => {
    child.stdin.end();
    lines = [];
    waiters = [];
  });

  it('answers "unknown" for an id it never got, then the same answers as the old form, in full and by id', async () => {
    const registry = new StaticRegistry();
    const held = childRecord(childStaticLimit(64));
    const job = engineJob({ HOST: 'not a host', PORT: '70000', PASSWORD: 'pw' });
    const wire = encodeWire(job, registry);
    assert.equal(await answer(`${wire.head}}`), unknownLine(wire.half!.id));
    const legacy = await answer(legacyLine(job));
    assert.match(legacy, /"ok":false/);
    assert.equal(await answer(lineFor(wire, held)), legacy);
    assert.doesNotMatch(lineFor(wire, held), /"s":/);
    assert.equal(await answer(lineFor(wire, held)), legacy);
    const other = engineJob({ HOST: 'db.example.com', PORT: '5432', PASSWORD: 'pw' });
    assert.equal(await answer(lineFor(encodeWire(other, registry), held)), await answer(legacyLine(other)));
  });

  it('answers byte for byte as the whole form: failures, messages, consts, configs listed by an expression', async () => {
    const registry = new StaticRegistry();
    const held = childRecord(childStaticLimit(64));
    const base = engineJob({ HOST: 'db.example.com', PORT: '0', PASSWORD: 'pw' });
    const piped: Record<string, ConfigView> = { '7': view('7', 'seven', { label: 'x' }, 'default') };
    for (const key of Object.keys(base.configs).reverse()) piped[key] = base.configs[key]!;
    const jobs: ExpressionJob[] = [
      base,
      { ...base, configs: piped, tests: [{ key: 'HOST', expressions: ['(() => { throw new Error(JSON.stringify(Object.keys($.configs)) + JSON.stringify($.input)) })()', 'throw new Error($.configs.PASSWORD.value)', '$.configs["7"].cfgu.label === "x"'] }] },
      { ...base, consts: [{ key: 'URL', template: '{{ nope() }}' }] },
    ];
    for (const job of jobs) {
      const legacy = await answer(legacyLine(job));
      if (job === jobs[1]) assert.match(legacy, /\[\\"7\\",\\"URL\\",\\"PASSWORD\\",\\"PORT\\",\\"HOST\\"\]\{\\"store\\"/);
      for (let round = 0; round < 2; round++) assert.equal(await answer(lineFor(encodeWire(job, registry), held)), legacy);
    }
  });
});

describe('job wire through the pool: a child that does not hold the static half', () => {
  it('answers "unknown"; the job is sent again with its static half and passes', async () => {
    const ev = createSandboxEvaluator({ workers: 1, spares: 0, timeoutMs: 2000 });
    try {
      await ev.ready();
      const job = engineJob({ HOST: 'db.example.com', PORT: '1' });
      // The host is made to believe its child holds a static half it was never sent (as after an eviction the child
      // made and the host did not).
      const pool = ev as unknown as { registry: StaticRegistry; workers: Set<{ statics: ReturnType<typeof childRecord> }>; staticResends: number };
      const wire = encodeWire(job, pool.registry);
      for (const w of pool.workers) w.statics.set(wire.half!.id, true, { size: 1 });
      assert.deepEqual(await ev.run(job), { consts: [{ key: 'URL', ok: true, value: 'db.example.com:1' }], tests: [] });
      assert.equal(pool.staticResends, 1);
      assert.deepEqual(await ev.run(job), { consts: [{ key: 'URL', ok: true, value: 'db.example.com:1' }], tests: [] });
      assert.equal(pool.staticResends, 1);
    } finally {
      await ev.close();
    }
  });

  it('an isolate renewal (memory limit) keeps the static halves: the jobs dropped behind it pass when sent again', async () => {
    const ev = createSandboxEvaluator({ workers: 1, spares: 0, timeoutMs: 10_000, memoryMb: 64 });
    try {
      await ev.ready();
      const light = ['$.value === 1', 'true', '$.key === "PORT"'];
      const results = await Promise.all([HEAP_BOMB, ...light].map((e) => ev.run(portTest(e))));
      assert.equal(results[0]!.tests[0]!.kind, 'memory-limit');
      for (const r of results.slice(1)) assert.deepEqual(r, { consts: [], tests: [] });
      assert.equal(ev.replacements().renewals, 1);
      assert.equal((ev as unknown as { staticResends: number }).staticResends, 0);
    } finally {
      await ev.close();
    }
  });
  it('static halves queued for a child when it gives up its isolate still reach it: no job comes back as unknown', async () => {
    const ev = createSandboxEvaluator({ workers: 1, spares: 0, timeoutMs: 10_000, memoryMb: 64 });
    try {
      await ev.ready();
      // The jobs below are submitted while the bomb runs (it takes longer than 10 ms to fill its heap): they wait in
      // the queue (the pool never queues behind a head that has run more than a few ms), then go to the child with the bomb's answer, each with its own
      // static half (their tests differ), in the same turn as the child's renewal notice when both lines come in one
      // read. The halves were then recorded as held and never written.
      const pool = ev as unknown as { workers: Set<{ inflight: unknown[]; headSince: number }>; staticResends: number };
      let settled = false;
      const bombDone = ev.run(portTest(HEAP_BOMB)).finally(() => (settled = true));
      const [w] = [...pool.workers];
      while (!settled && !(w!.inflight.length === 1 && performance.now() - w!.headSince > 10)) await new Promise((r) => setImmediate(r));
      assert.equal(settled, false, 'the bomb is still running when the other jobs are submitted');
      const light = ['$.value === 1', 'true', '$.key === "PORT"'].map((e) => ev.run(portTest(e)));
      assert.equal(w!.inflight.length, 1, 'the light jobs wait behind the running bomb');
      const [b, ...rest] = await Promise.all([bombDone, ...light]);
      assert.equal(b!.tests[0]!.kind, 'memory-limit');
      for (const r of rest) assert.deepEqual(r, { consts: [], tests: [] });
      assert.equal(ev.replacements().renewals, 1);
      assert.equal(pool.staticResends, 0);
    } finally {
      await ev.close();
    }
  });
});

describe('job wire through the pool', () => {
  let ev: SandboxEvaluator;
  before(async () => {
    ev = createSandboxEvaluator({ workers: 1, spares: 0, timeoutMs: 2000 });
    await ev.ready();
  });
  after(() => ev.close());

  it('gives the same results by id as in full, and again from a replaced child', async () => {
    const job = engineJob({ HOST: 'not a host', PORT: '8080', PASSWORD: 'pw' });
    const first = await ev.run(job);
    assert.deepEqual(first.consts, [{ key: 'URL', ok: true, value: 'not a host:8080' }]);
    assert.equal(first.tests.length, 1);
    assert.equal(first.tests[0]!.key, 'HOST');
    const batch = await Promise.all(Array.from({ length: 12 }, () => ev.run(job)));
    for (const r of batch) assert.deepEqual(r, first);
    const [pid] = ev.pids();
    process.kill(pid!, 'SIGKILL');
    // The job in flight when the child died (if any) is run again elsewhere; every answer stays the same.
    for (let i = 0; i < 5; i++) assert.deepEqual(await ev.run(job), first);
    assert.notEqual(ev.pids()[0], pid);
  });
});
