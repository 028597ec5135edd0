/**
 * Secrets never leave by accident (docs/security.md, "What can carry a value out"), through the real binary.
 *
 * A recognisable secret (CANARY) is the value of hidden keys in the store of a real `cfgu serve` and of real `cfgu`
 * commands. First, each source of failure messages (chai, zod, JSON Schema, validator, a thrown error, a falsy test, a
 * const computed from a hidden key, the pipe) gets an exact 422 body with `[hidden]`. Then a broad matrix of requests
 * (every failure kind: tests and consts failing, schema/enum/pattern/required failures, limits, budgets, a store that
 * is down, bad overrides, bad schemas) runs through the server with its log captured (stdout and stderr), and the CLI
 * runs eval, export and upsert failures. Every byte captured, response bodies and headers included, is scanned for
 * the canary. The only places it may appear are the documented channels, which are asserted too: `cfgu eval`'s own
 * output (the pipe format) and a const's own value in an export.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { call, killChildren, postJson, removeTempDirs, serveOnFreePort, tempDir, waitForStatus, writeJson, type HttpAnswer, type Spawned } from '../server/helpers.js';
import { cfgu, closeSandbox, killChildren as killCliChildren, project, removeTempDirs as removeCliTempDirs, runCli, type Ran } from '../cli/helpers.js';
import { byDesign } from '../helpers/capture.js';

const CANARY = 'S3CR3T-cfgu-canary-7f3a9c21e5';
/** A second secret, written by `cfgu upsert`. */
const CANARY2 = 'S3CR3T-cfgu-canary2-b81d04e6aa';
/** Any 8 characters of a canary found anywhere is a leak (redaction leaves at most 3 characters of a run). */
function leaks(text: string): string[] {
  const found: string[] = [];
  for (const secret of [CANARY, CANARY2]) {
    for (let i = 0; i + 8 <= secret.length; i++) {
      const piece = secret.slice(i, i + 8);
      if (text.includes(piece)) {
        found.push(piece);
        break;
      }
    }
  }
  return found;
}

/** Everything captured from servers and commands, scanned at the end. */
const captured: Array<{ where: string; text: string }> = [];
function capture(where: string, r: HttpAnswer): HttpAnswer {
  captured.push({ where: `${where}: body`, text: r.body }, { where: `${where}: headers`, text: JSON.stringify(r.headers) });
  return r;
}
function captureRun(where: string, r: Ran, { stdout = true }: { stdout?: boolean } = {}): Ran {
  captured.push({ where: `${where}: stderr`, text: r.stderr });
  if (stdout) captured.push({ where: `${where}: stdout`, text: r.stdout });
  return r;
}

const DATA = [
  { set: '', key: 'GREETING', value: 'hello' },
  { set: '', key: 'PASSWORD', value: CANARY },
  { set: 'prod', key: 'PASSWORD', value: CANARY },
  // An object whose key is the secret (JSON Schema and zod quote data paths).
  { set: '', key: 'TOKENS', value: JSON.stringify({ [CANARY]: 'enabled' }) },
  // A hidden value too short to search for in text.
  { set: '', key: 'PIN', value: '42' },
];

const VALIDATION = { type: 'urn:cfgu:problem:validation-failed', title: 'Validation Failed', status: 422 };
const one = (key: string, rule: string, message: string, command = 0) => ({ ...VALIDATION, detail: '1 key failed validation', errors: [{ command, key, rule, message }] });
const WITHHELD = '[withheld: the message contains the text of a hidden value shorter than 4 characters]';

let server: { p: Spawned; base: string };
let dir: string;

before(async () => {
  dir = tempDir('cfgu-secrets-');
  writeJson(join(dir, 'data.json'), DATA);
  writeJson(join(dir, 'flaky.json'), DATA);
  writeJson(join(dir, '.configu'), {
    stores: {
      main: { type: 'json-file', default: true, configuration: { path: 'data.json' } },
      flaky: { type: 'json-file', configuration: { path: 'flaky.json' } },
    },
  });
  const started = await serveOnFreePort(['--config', join(dir, '.configu')], {
    CONFIGU_LIMIT_COMMANDS: '6',
    CONFIGU_LIMIT_SET_DEPTH: '4',
    CONFIGU_LIMIT_VALUE_BYTES: '100',
    // Small enough for the time-limit and budget rows to cost little (CPU time), large enough for the first use of a
    // library in a fresh isolate on a loaded machine (250 ms was not, once).
    CONFIGU_EXPRESSION_TIMEOUT_MS: '1000',
    CONFIGU_EXPRESSION_REQUEST_CPU_MS: '2500',
    CONFIGU_EXPRESSION_WORKERS: '1',
  });
  server = { p: started.p, base: started.base };
  await waitForStatus(`${server.base}/ready`, 200);
  // Warm the sandbox: the first use of each library in an isolate costs the most CPU time. Not asserted, but scanned.
  const warm = ['expect($.value).to.match(/^x$/)', 'z.object({}).strict().parse({ a: 1 })', 'JSONSchema.validate({ type: "number" }, $.value)', 'validator.isEmail($.value)'];
  await exportCall('warm-up', [{ schema: { keys: { PASSWORD: { hidden: true, test: warm } } } }]);
});

after(async () => {
  await closeSandbox();
  await killChildren();
  killCliChildren();
  removeTempDirs();
  removeCliTempDirs();
});

/** The first requests start the sandbox, slow on a loaded machine: the client's hang guard is generous. */
const HANG_GUARD = { timeoutMs: 300_000 };
const exportCall = async (name: string, body: unknown) => capture(name, await postJson(`${server.base}/export`, body, {}, HANG_GUARD));

async function expect422(name: string, body: unknown, problem: unknown): Promise<void> {
  const r = await exportCall(name, body);
  assert.equal(r.status, 422, r.body);
  assert.match(String(r.headers['content-type']), /^application\/problem\+json/);
  assert.deepEqual(JSON.parse(r.body), problem);
  assert.deepEqual(leaks(r.body), [], r.body);
}

describe('422 bodies: every message source is redacted, exactly', { concurrency: false }, () => {
  test('chai: the stored value in `expect(...).to.match` (the reported case)', async () => {
    const test = 'expect($.storedValue).to.match(/^[a-z]+$/)';
    await expect422('chai', [{ schema: { keys: { PASSWORD: { hidden: true, test } } } }], one('PASSWORD', 'test', `the test ${test} of key "PASSWORD" failed: expected '[hidden]' to match /^[a-z]+$/`));
  });

  test('zod: a data path made of the secret', async () => {
    const test = 'z.object({}).strict().parse($.value)';
    await expect422('zod', [{ schema: { keys: { TOKENS: { hidden: true, test } } } }], one('TOKENS', 'test', `the test ${test} of key "TOKENS" failed: ✖ Unrecognized key: [hidden]`));
  });

  test('JSON Schema (Ajv): the `schema` rule quotes a data path', async () => {
    await expect422(
      'json schema',
      [{ schema: { keys: { TOKENS: { hidden: true, schema: { type: 'object', additionalProperties: { type: 'number' } } } } } }],
      one('TOKENS', 'schema', 'the value of key "TOKENS" does not match its `schema`: data/[hidden] must be number'),
    );
    const test = 'JSONSchema.validate({ propertyNames: { maxLength: 3 } }, $.value)';
    await expect422(
      'JSONSchema.validate',
      [{ schema: { keys: { TOKENS: { hidden: true, test } } } }],
      one('TOKENS', 'test', `the test ${test} of key "TOKENS" failed: data must NOT have more than 3 characters, data property name must be valid`),
    );
  });

  test('validator: a failure message that quotes the value', async () => {
    const test = 'validator.isEmail($.value) || assert.fail("not an email address: " + $.value)';
    await expect422('validator', [{ schema: { keys: { PASSWORD: { hidden: true, test } } } }], one('PASSWORD', 'test', `the test ${test} of key "PASSWORD" failed: not an email address: [hidden]`));
  });

  test('a thrown Error, and a native error that quotes the value (JSON.parse)', async () => {
    const thrown = '(() => { throw new Error(`bad secret ${$.value}!`) })()';
    await expect422('thrown', [{ schema: { keys: { PASSWORD: { hidden: true, test: thrown } } } }], one('PASSWORD', 'test', `the test ${thrown} of key "PASSWORD" failed: bad secret [hidden]!`));
    // V8 quotes the text it could not parse; its first character stands alone ('S'), below the searched length.
    await expect422(
      'JSON.parse',
      [{ schema: { keys: { PASSWORD: { hidden: true, test: 'JSON.parse($.value)' } } } }],
      one('PASSWORD', 'test', `the test JSON.parse($.value) of key "PASSWORD" failed: Unexpected token 'S', "[hidden]"... is not valid JSON`),
    );
  });

  test('a falsy test names the test, never the value', async () => {
    await expect422('falsy', [{ schema: { keys: { PASSWORD: { hidden: true, test: '$.value === "guess"' } } } }], one('PASSWORD', 'test', 'the value of key "PASSWORD" failed the test $.value === "guess"'));
  });

  test('another key’s test reading a hidden value through $.configs, in the same command and through the pipe', async () => {
    const test = 'assert.equal($.configs.PASSWORD.value, "nope")';
    const message = `the test ${test} of key "GREETING" failed: expected '[hidden]' to equal 'nope'`;
    await expect422('same command', [{ schema: { keys: { PASSWORD: { hidden: true }, GREETING: { test } } } }], one('GREETING', 'test', message));
    await expect422('pipe', [{ schema: { keys: { PASSWORD: { hidden: true } } } }, { schema: { keys: { GREETING: { test } } } }], one('GREETING', 'test', message, 1));
  });

  test('a const computed from a hidden key is redacted like it (its test, a later command, its own failure)', async () => {
    const keys = { PASSWORD: { hidden: true }, URL: { const: 'postgres://app:{{ $.configs.PASSWORD.value }}@db/app', test: 'expect($.value).to.have.length.below(10)' } };
    // chai cuts long strings (…): the part it shows is redacted all the same.
    await expect422('const', [{ schema: { keys } }], one('URL', 'test', `the test expect($.value).to.have.length.below(10) of key "URL" failed: expected '[hidden]…' to have a length below 10 but got ${CANARY.length + 22}`));
    // A const of a const (transitive), read by a later command that declares PASSWORD again, not hidden, with an
    // override that wins over the piped value: the consts computed from the hidden value stay secret all the same.
    const later = 'assert.equal($.configs.DSN.value, "")';
    await expect422(
      'const chain',
      [
        { schema: { keys: { PASSWORD: { hidden: true }, URL: { const: 'postgres://app:{{ $.configs.PASSWORD.value }}@db/app' }, DSN: { const: 'dsn={{ $.configs.URL.value }}' } } } },
        { schema: { keys: { PASSWORD: {}, GREETING: { test: later } } }, configs: { PASSWORD: 'public' } },
      ],
      one('GREETING', 'test', `the test ${later} of key "GREETING" failed: expected '[hidden]…' to equal ''`, 1),
    );
    await expect422(
      'const failure',
      [{ schema: { keys: { PASSWORD: { hidden: true }, N: { const: '{{ JSON.parse("[" + $.configs.PASSWORD.value) }}' } } } }],
      one('N', 'const', '`const` of key "N" failed: Unexpected token \'S\', "[[hidden]"... is not valid JSON'),
    );
  });

  test('a hidden value shorter than 4 characters: a message containing it is withheld whole', async () => {
    await expect422('short', [{ schema: { keys: { PIN: { hidden: true, test: 'expect($.value).to.equal(43)' } } } }], one('PIN', 'test', `the test expect($.value).to.equal(43) of key "PIN" failed: ${WITHHELD}`));
  });

  test('by design: a const’s own value is exported, even when computed from a hidden key', async () => {
    // Declared for the whole-suite scan too (test/helpers/capture.ts): this answer is captured as `const-value`.
    byDesign(`u=${CANARY}`);
    const r = await postJson(`${server.base}/export`, [{ schema: { keys: { PASSWORD: { hidden: true }, URL: { const: 'u={{ $.configs.PASSWORD.value }}' } } } }], {}, HANG_GUARD);
    assert.equal(r.status, 200);
    assert.deepEqual(JSON.parse(r.body), { URL: `u=${CANARY}` });
    // Not in this file's scan: this is the documented channel.
  });
});

describe('the scan: every failure kind through the server, the log captured', { concurrency: false }, () => {
  const hidden = { PASSWORD: { hidden: true }, TOKENS: { hidden: true } };
  const matrix: Array<{ name: string; body: unknown; status: number }> = [
    { name: 'success', body: [{ schema: { keys: { ...hidden, GREETING: {} } } }], status: 200 },
    { name: 'success at a set', body: [{ set: 'prod', schema: { keys: { ...hidden, GREETING: { test: '$.configs.PASSWORD.value.length > 10' } } } }], status: 200 },
    { name: 'pattern', body: [{ schema: { keys: { PASSWORD: { hidden: true, pattern: '^[a-z]+$' } } } }], status: 422 },
    { name: 'bad pattern', body: [{ schema: { keys: { PASSWORD: { hidden: true, pattern: '(' } } } }], status: 400 },
    { name: 'enum', body: [{ schema: { keys: { PASSWORD: { hidden: true, enum: ['a', 'b'] } } } }], status: 422 },
    { name: 'schema', body: [{ schema: { keys: { PASSWORD: { hidden: true, schema: { type: 'string', format: 'email', maxLength: 3 } } } } }], status: 422 },
    { name: 'required', body: [{ schema: { keys: { ...hidden, MISSING: { required: true } } } }], status: 422 },
    { name: 'tests of every library', body: [{ schema: { keys: { PASSWORD: { hidden: true, test: ['expect($.value).to.equal(1)', 'assert.isNumber($.value)', '$.value.should.equal("x")', 'z.number().parse($.value)', 'z.email().parse($.value)', '_.isNumber($.value)', 'validator.isUUID($.value)', 'JSONSchema.validate({ const: "x" }, $.value)', 'null.x', 'throw_me($.value)', 'expect({ v: $.value }).to.deep.equal({})', 'expect([$.value]).to.include("x")', 'assert.fail($.value)', 'assert.fail(JSON.stringify($.configs))', 'assert.fail(String([$.value, $.value]))', 'assert.fail(encodeURIComponent($.value))'] } } } }], status: 422 },
    { name: 'const failing in many ways', body: [{ schema: { keys: { ...hidden, A: { const: '{{ $.configs.PASSWORD.value.x.y }}' }, B: { const: '{{ JSON.parse($.configs.TOKENS.value + "}") }}' }, C: { const: '{{ (() => { throw $.configs.PASSWORD.value })() }}' }, D: { const: '{{ (() => { throw { message: $.configs.TOKENS.storedValue } })() }}' } } } }], status: 422 },
    { name: 'const over the value limit', body: [{ schema: { keys: { ...hidden, BIG: { const: '{{ $.configs.PASSWORD.value.repeat(10) }}' } } } }], status: 422 },
    { name: 'const cycle', body: [{ schema: { keys: { ...hidden, A: { const: '{{ $.configs.B.value }}' }, B: { const: '{{ $.configs.A.value }}' } } } }], status: 422 },
    { name: 'time limit', body: [{ schema: { keys: { PASSWORD: { hidden: true, test: '(() => { for (;;) {} })()' } } } }], status: 422 },
    { name: 'budget', body: Array.from({ length: 5 }, () => ({ schema: { keys: { PASSWORD: { hidden: true, test: '(() => { for (;;) {} })()' } } } })), status: 422 },
    { name: 'memory', body: [{ schema: { keys: { PASSWORD: { hidden: true, test: '(() => { const a = []; for (;;) a.push($.value + a.length) })()' } } } }], status: 422 },
    { name: 'too many commands', body: Array.from({ length: 7 }, () => ({ schema: { keys: hidden } })), status: 413 },
    { name: 'set too deep', body: [{ set: 'a/b/c/d/e', schema: { keys: hidden } }], status: 413 },
    { name: 'override of a const', body: [{ schema: { keys: { ...hidden, C: { const: 'x' } } }, configs: { C: CANARY } }], status: 422 },
    { name: 'override of an undeclared key', body: [{ schema: { keys: hidden }, configs: { NOPE: CANARY } }], status: 422 },
    { name: 'override of a hidden key that fails', body: [{ schema: { keys: { PASSWORD: { hidden: true, test: 'expect($.value).to.have.length(1)' } } }, configs: { PASSWORD: CANARY2 } }], status: 422 },
    { name: 'overrides not an object', body: [{ schema: { keys: hidden }, configs: [CANARY] }], status: 400 },
    { name: 'invalid schema', body: [{ schema: { keys: { PASSWORD: { hidden: 'yes', test: 42 } } } }], status: 400 },
    { name: 'invalid set', body: [{ set: 'a//b', schema: { keys: hidden } }], status: 400 },
    { name: 'unknown store', body: [{ store: 'nope', schema: { keys: hidden } }], status: 400 },
    { name: 'not a pipeline', body: { schema: { keys: hidden } }, status: 400 },
  ];

  for (const c of matrix) {
    test(`${c.name}: ${c.status}`, async () => {
      const r = await exportCall(c.name, c.body);
      assert.equal(r.status, c.status, r.body);
      if (c.status === 200) assert.ok(!('PASSWORD' in JSON.parse(r.body)), 'a hidden key is never exported');
    });
  }

  test('a store that is down (503), its log line included', async () => {
    writeFileSync(join(dir, 'flaky.json'), `[ {"set": "", "key": "PASSWORD", "value": "${CANARY}"`);
    const r = await exportCall('store down', [{ store: 'flaky', schema: { keys: { PASSWORD: { hidden: true } } } }]);
    assert.equal(r.status, 503, r.body);
    await server.p.waitForLog('request failed', (l) => l.reqId === r.headers['x-request-id']);
  });

  test('unknown routes and methods', async () => {
    capture('404', await call(`${server.base}/export/${CANARY.slice(0, 3)}`));
    capture('405', await call(`${server.base}/export`));
  });

  test('nothing captured holds the secret: response bodies and headers, the server log (stdout and stderr)', async () => {
    captured.push({ where: 'server stdout (log)', text: server.p.stdout() }, { where: 'server stderr', text: server.p.stderr() });
    // The scan can fail: the log holds a line per request of the matrix.
    assert.ok(server.p.logs().filter((l) => l.msg === 'request').length >= matrix.length);
    const found = captured.map((c) => ({ where: c.where, leaks: leaks(c.text) })).filter((c) => c.leaks.length);
    assert.deepEqual(found, []);
  });
});

// The commands run in this process (runCli: the dispatcher with its output captured, every byte of it scanned), but
// the first, which runs the built binary: a real process's stderr carries no more than the in-process run shows.
describe('the CLI: stderr, upsert output, export failures', { concurrency: false }, () => {
  let cwd: string;
  const SCHEMA = { keys: { PASSWORD: { hidden: true, test: 'expect($.storedValue).to.match(/^[a-z]+$/)' }, GREETING: {} } };
  /** The run failed (exit 1) on SCHEMA's test of PASSWORD, and standard error says so, redacted. */
  const assertMatchFailure = (command: string, r: Ran) => {
    assert.equal(r.code, 1);
    assert.equal(r.stdout, '');
    assert.equal(
      r.stderr,
      `cfgu ${command}: 1 key failed validation:\n` +
        `command 0, key PASSWORD, rule test: the test expect($.storedValue).to.match(/^[a-z]+$/) of key "PASSWORD" failed: expected '[hidden]' to match /^[a-z]+$/\n`,
    );
  };
  before(() => {
    cwd = project({ 'data.json': DATA, 'app.cfgu.json': SCHEMA, 'ok.cfgu.json': { keys: { PASSWORD: { hidden: true }, GREETING: {}, URL: { const: '{{ $.configs.PASSWORD.value }}' } } } });
  });

  test('cfgu eval: a failing test on a hidden key, on stderr, exactly', async () => {
    assertMatchFailure('eval', captureRun('eval failure', await cfgu(['eval', '--schema', 'app.cfgu.json'], { cwd })));
    const debug = captureRun('eval failure --debug', await runCli(['eval', '--schema', 'app.cfgu.json', '--debug'], { cwd }));
    assert.equal(debug.code, 1);
  });

  test('cfgu eval output (the pipe format) carries hidden values by design; export --filter and --template failures do not', async () => {
    const evaluated = await runCli(['eval', '--schema', 'ok.cfgu.json'], { cwd });
    assert.equal(evaluated.code, 0, evaluated.stderr);
    captureRun('eval success', evaluated, { stdout: false });
    assert.equal(JSON.parse(evaluated.stdout).PASSWORD.value, CANARY);

    const filter = 'assert.equal($.configs.PASSWORD.value, "x")';
    const f = captureRun('export --filter', await runCli(['export', '--filter', filter], { cwd, stdin: evaluated.stdout }));
    assert.equal(f.code, 1);
    assert.equal(
      f.stderr,
      `cfgu export: 2 --filter evaluations failed:\n` +
        `key GREETING, --filter ${JSON.stringify(filter)}: expected '[hidden]' to equal 'x'\n` +
        `key URL, --filter ${JSON.stringify(filter)}: expected '[hidden]' to equal 'x'\n`,
    );
    // The template sees URL, a const computed from the hidden PASSWORD: its value is redacted from the failure.
    writeFileSync(join(cwd, 'bad.tmpl'), 'url={{ JSON.parse($.configs.URL.value) }}\n');
    const t = captureRun('export --template', await runCli(['export', '--template', 'bad.tmpl'], { cwd, stdin: evaluated.stdout }));
    assert.equal(t.code, 1);
    assert.equal(t.stderr, `cfgu export: --template bad.tmpl: Unexpected token 'S', "[hidden]"... is not valid JSON\n`);
    // Hidden keys are never exported.
    const e = captureRun('export', await runCli(['export', '--filter', '$.key !== "URL"'], { cwd, stdin: evaluated.stdout }));
    assert.equal(e.code, 0, e.stderr);
    assert.deepEqual(JSON.parse(e.stdout), { GREETING: 'hello' });
  });

  test('cfgu upsert: hidden values are printed masked, and redacted from failures', async () => {
    const schema = ['--schema', 'ok.cfgu.json'];
    const add = captureRun('upsert add', await runCli(['upsert', ...schema, '--set', 'dev', '--kv', `PASSWORD=${CANARY2}`, '--kv', 'GREETING=hi'], { cwd }));
    assert.equal(add.stderr, '');
    assert.equal(add.stdout, '2 changes in store "main", set "dev":\n+ PASSWORD = [hidden]\n+ GREETING = "hi"\n');
    const change = captureRun('upsert change', await runCli(['upsert', ...schema, '--set', 'dev', '-k', 'PASSWORD', '-v', CANARY], { cwd }));
    assert.equal(change.stdout, '1 change in store "main", set "dev":\n~ PASSWORD = [hidden] (was [hidden])\n');
    const remove = captureRun('upsert delete', await runCli(['upsert', ...schema, '--set', 'dev', '-k', 'PASSWORD'], { cwd }));
    assert.equal(remove.stdout, '1 change in store "main", set "dev":\n- PASSWORD (was [hidden])\n');

    assertMatchFailure('upsert', captureRun('upsert failure', await runCli(['upsert', '--schema', 'app.cfgu.json', '--kv', `PASSWORD=${CANARY2}`], { cwd })));
    const usage = captureRun('upsert usage', await runCli(['upsert', ...schema, '-v', CANARY2], { cwd }));
    assert.equal(usage.code, 2);
  });

  test('nothing the CLI printed holds the secret (but eval’s own output)', () => {
    const found = captured.map((c) => ({ where: c.where, leaks: leaks(c.text) })).filter((c) => c.leaks.length);
    assert.deepEqual(found, []);
  });
});
