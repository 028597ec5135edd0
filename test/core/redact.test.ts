/**
 * Redaction of hidden values (src/core/redact.ts): the text rules, the taint of consts, and each side on its own:
 * the host redacts what an evaluator that does not (the test evaluator) hands back, and the sandbox redacts before
 * the host sees anything.
 */
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  constReadsHidden,
  evaluatePipeline,
  LARGE_VALUES_MESSAGE,
  Redactor,
  redactorFor,
  secretKeys,
  SHORT_VALUE_MESSAGE,
  upsert,
  ValidationError,
  type EvalCommandInput,
  type EvalFailure,
  type RedactionEntry,
} from '../../src/core/index.js';
import { createSandboxEvaluator } from '../../src/expressions/index.js';
import { HostEvaluator, MemoryResolver, MemoryStore } from '../helpers/engine.js';

const SECRET = 'S3CR3T-unit-canary-0a1b2c';

describe('the text rules', () => {
  const r = new Redactor([{ text: SECRET, cfgu: {} }]);

  test('every occurrence, quoted, escaped, cut short or beside other text', () => {
    assert.equal(r.redact(`a ${SECRET} b ${SECRET}`), 'a [hidden] b [hidden]');
    assert.equal(r.redact(`expected '${SECRET}' to equal 'x'`), "expected '[hidden]' to equal 'x'");
    assert.equal(r.redact(`"${SECRET.slice(0, 10)}"... is not valid JSON`), '"[hidden]"... is not valid JSON');
    assert.equal(r.redact(`expected '${SECRET.slice(0, 12)}…'`), "expected '[hidden]…'");
    assert.equal(r.redact(`x${SECRET}y`), 'x[hidden]y');
    // Runs shorter than 4 characters are not searched: only they can remain.
    assert.equal(r.redact(`token 'S3C' and ${SECRET.slice(-3)}`), "token 'S3C' and b2c");
    assert.equal(r.redact('nothing here'), 'nothing here');
  });

  test('escaped forms: JSON and single quotes', () => {
    const quoted = new Redactor([{ text: `it's "${SECRET}"\n`, cfgu: {} }]);
    assert.equal(quoted.redact(JSON.stringify(`it's "${SECRET}"\n`)), '"[hidden]"');
    assert.equal(quoted.redact(`'it\\'s "${SECRET}"\\n'`), "'[hidden]'");
  });

  test('coerced forms: a number, and the strings of an object', () => {
    const n = new Redactor([{ text: '1.50000', cfgu: {} }]);
    // 1.50000 coerces to 1.5, shorter than 4 characters: a message holding it is withheld.
    assert.equal(n.redact('expected 1.5 to equal 2'), SHORT_VALUE_MESSAGE);
    const o = new Redactor([{ text: JSON.stringify({ user: 'admin-user', pass: 'p\u00e4ss\\word' }), cfgu: {} }]);
    assert.equal(o.redact('login admin-user, secret p\u00e4ss\\word'), 'login [hidden], secret [hidden]');
    // The object's own text is searched too, so its property names are redacted as well (conservative).
    assert.equal(o.redact('no user'), 'no [hidden]');
  });

  test('a short value withholds any message containing it; the marks and fixed texts are kept as they are', () => {
    const s = new Redactor([{ text: '42', cfgu: {} }, { text: SECRET, cfgu: {} }]);
    assert.equal(s.redact('expected 42 to equal 43'), SHORT_VALUE_MESSAGE);
    assert.equal(s.redact(`no short value, ${SECRET}`), 'no short value, [hidden]');
    assert.equal(s.redact(SHORT_VALUE_MESSAGE), SHORT_VALUE_MESSAGE);
    // Redacting twice (the sandbox, then the host) changes nothing, even for a secret that looks like the mark.
    const mark = new Redactor([{ text: 'my-hidden-pass', cfgu: {} }]);
    const once = mark.redact('got my-hidden-pass');
    assert.equal(once, 'got [hidden]');
    assert.equal(mark.redact(once), once);
  });

  test('values too large to search: every message is withheld', () => {
    const big = new Redactor([{ text: 'x'.repeat(200_000), cfgu: {} }]);
    assert.equal(big.redact('anything at all'), LARGE_VALUES_MESSAGE);
    assert.equal(new Redactor([]).redact(`free ${SECRET}`), `free ${SECRET}`);
  });
});

describe('which values are secret', () => {
  const known = new Set(['PASS', 'HOST', 'my-key', 'URL']);
  const hidden = new Set(['PASS']);
  test('a const that names a hidden key, or reaches $.configs indirectly, reads hidden values', () => {
    for (const t of [
      '{{ $.configs.PASS.value }}',
      "{{ $.configs['PASS'].storedValue }}",
      '{{ "PASS" }}',
      '{{ Object.values($.configs).map(c => c.value).join() }}',
      '{{ JSON.stringify($.configs) }}',
      '{{ $["configs"].HOST.value }}',
      '{{ $.configs.valueOf() }}',
      '{{ $.valueOf().configs }}',
      '{{ _.get($, "configs") }}',
      '{{ arguments[0] }}',
      '{{ $.configs[["PA", "SS"].join("")].value }}',
      '{{ $?.configs?.HOST }}',
    ]) {
      assert.equal(constReadsHidden(t, known, hidden), true, t);
    }
  });

  test('a const that only names keys that are not hidden, or its own members, does not', () => {
    for (const t of [
      'http://{{ $.configs.HOST.value }}:{{ $.configs["my-key"].value }}/{{ $.input.set.path }}',
      '{{ $.key }}-{{ $.cfgu.description }}-{{ $.labels.join() }}',
      'plain text with $ and configs outside expressions',
    ]) {
      assert.equal(constReadsHidden(t, known, hidden), false, t);
    }
  });

  test('taint is transitive; an empty hidden value is no secret', () => {
    const entries: RedactionEntry[] = [
      { key: 'PASS', text: SECRET, origin: 'store', cfgu: { hidden: true } },
      { key: 'EMPTY', text: '', origin: 'empty', cfgu: { hidden: true } },
      { key: 'C', text: 'const-c', origin: 'const', cfgu: { const: '{{ $.configs.B.value }}' } },
      { key: 'B', text: 'const-b', origin: 'const', cfgu: { const: '{{ $.configs.A.value }}' } },
      { key: 'A', text: 'const-a', origin: 'const', cfgu: { const: '{{ $.configs.PASS.value }}' } },
      { key: 'FREE', text: 'f', origin: 'const', cfgu: { const: '{{ $.configs.HOST.value }}' } },
      { key: 'HOST', text: 'h', origin: 'store', cfgu: {} },
    ];
    assert.deepEqual([...secretKeys(entries)].sort(), ['A', 'B', 'C', 'PASS']);
    assert.equal(redactorFor(entries).redact(`${SECRET} const-c f h`), '[hidden] [hidden] f h');
  });
});

const failuresOf = async (run: () => Promise<unknown>): Promise<EvalFailure[]> => {
  try {
    await run();
  } catch (e) {
    assert.ok(e instanceof ValidationError, String(e));
    return e.failures;
  }
  assert.fail('no failure');
};

describe('the host redacts what an evaluator hands back (the test evaluator redacts nothing)', () => {
  const store = new MemoryStore('main', 'in-memory', [
    { set: '', key: 'PASS', value: SECRET },
    { set: '', key: 'HOST', value: 'db.local' },
  ]);
  const deps = { stores: new MemoryResolver([store], 'main'), expressions: new HostEvaluator() };
  const run = (commands: EvalCommandInput[]) => failuresOf(() => evaluatePipeline(commands, deps));

  test('test and const messages of every key of the command, and of later commands', async () => {
    const thrower = (what: string) => `(() => { throw new Error("got " + ${what}) })()`;
    assert.deepEqual(
      await run([
        {
          schema: {
            keys: {
              PASS: { hidden: true, test: thrower('$.value') },
              HOST: { test: thrower('$.configs.PASS.value') },
              URL: { const: '{{ $.configs.HOST.value }}:{{ $.configs.PASS.value }}' },
              BAD: { const: `{{ ${thrower('$.configs.URL.value')} }}` },
            },
          },
        },
        { schema: { keys: { PASS: {}, OTHER: { default: 1, test: thrower('$.configs.URL.value') } } }, configs: { PASS: 'visible' } },
      ]),
      [
        { command: 0, key: 'PASS', rule: 'test', message: `the test ${thrower('$.value')} of key "PASS" failed: got [hidden]` },
        { command: 0, key: 'HOST', rule: 'test', message: `the test ${thrower('$.configs.PASS.value')} of key "HOST" failed: got [hidden]` },
        { command: 0, key: 'BAD', rule: 'const', message: '`const` of key "BAD" failed: got [hidden]' },
        // The later command shadows PASS with a visible value; URL was computed from the hidden one and stays secret.
        { command: 1, key: 'OTHER', rule: 'test', message: `the test ${thrower('$.configs.URL.value')} of key "OTHER" failed: got [hidden]` },
      ],
    );
  });

  test('upsert: the new hidden value is redacted from its failures', async () => {
    const failures = await failuresOf(() =>
      upsert({ store, set: 'dev', schema: { keys: { PASS: { hidden: true, test: '(() => { throw new Error("bad " + $.value) })()' } } }, values: { PASS: `${SECRET}-new` }, expressions: deps.expressions }),
    );
    assert.deepEqual(failures.map((f) => f.message), ['the test (() => { throw new Error("bad " + $.value) })() of key "PASS" failed: bad [hidden]']);
  });
});

describe('the sandbox redacts before the host sees a message (defence in depth)', () => {
  const sandbox = createSandboxEvaluator({ workers: 1, spares: 0, timeoutMs: 1000 });
  after(() => sandbox.close());

  test('test and const outcomes come back redacted', async () => {
    const view = (key: string, storedValue: string, cfgu: Record<string, unknown>) => ({ key, storedValue, value: storedValue, origin: 'store' as const, cfgu, labels: [] });
    const keys = { PASS: { hidden: true }, HOST: {}, URL: { const: '{{ $.configs.PASS.value }}!' }, BAD: { const: '{{ JSON.parse($.configs.URL.value) }}' } };
    const outcome = await sandbox.run({
      input: { store: { type: 'in-memory' }, set: { path: '', hierarchy: [''] }, schema: { keys } },
      configs: { PASS: view('PASS', SECRET, keys.PASS), HOST: view('HOST', 'db.local', keys.HOST), URL: { ...view('URL', '', keys.URL), origin: 'empty' }, BAD: { ...view('BAD', '', keys.BAD), origin: 'empty' } },
      consts: [
        { key: 'URL', template: keys.URL.const },
        { key: 'BAD', template: keys.BAD.const },
      ],
      tests: [{ key: 'HOST', expressions: ['expect($.configs.URL.value).to.equal("x")', 'assert.fail($.configs.PASS.value)'] }],
    });
    assert.deepEqual(outcome, {
      consts: [
        { key: 'URL', ok: true, value: `${SECRET}!` },
        { key: 'BAD', ok: false, kind: 'error', message: 'Unexpected token \'S\', "[hidden]"... is not valid JSON' },
      ],
      tests: [
        { key: 'HOST', index: 0, ok: false, kind: 'error', message: "expected '[hidden]' to equal 'x'" },
        { key: 'HOST', index: 1, ok: false, kind: 'error', message: '[hidden]' },
      ],
    });
  });
});
