import { test } from 'node:test';
import assert from 'node:assert/strict';
import { prepareSchema, InputError, ErrorCodes, freezeDeep } from '../../src/core/index.js';
import { cfguShape } from '../../src/core/schema-check.js';
import { assertValidJsonSchema } from '../helpers/meta-schema.js';

/** The issues (path + message) a schema is rejected with. */
function issuesOf(schema: unknown) {
  try {
    prepareSchema(schema);
  } catch (e) {
    assert.ok(e instanceof InputError);
    assert.equal(e.code, ErrorCodes.INVALID_SCHEMA);
    return e.issues;
  }
  assert.fail('schema was accepted');
}
const oneIssue = (keys: unknown) => {
  const issues = issuesOf({ keys });
  assert.equal(issues.length, 1, JSON.stringify(issues));
  return issues[0]!;
};

test('every v1 property with a valid value is accepted, and null / {} declarations', () => {
  const s = prepareSchema({
    keys: {
      A: null,
      B: {},
      C: { description: 'c', label: 'l', hidden: true, default: 0, enum: [0, 1] },
      D: { label: ['x', 'y'], lazy: true, required: true, pattern: '^a+$', schema: { type: 'string' }, test: ['true', '$.value'] },
      E: { const: '{{ $.configs.C.value }}', test: 'true' },
      F: { default: false },
      G: { default: '' },
      H: { default: [] },
      I: { default: { a: 1 }, enum: [{ a: 1 }, 'x', 1, null, true] },
    },
  });
  assert.deepEqual(s.keys.map((k) => k.key), ['A', 'B', 'C', 'D', 'E', 'F', 'G', 'H', 'I']);
  assert.deepEqual(s.byName.get('D')!.labels, ['x', 'y']);
  assert.deepEqual(s.byName.get('C')!.labels, ['l']);
  assert.equal(s.byName.get('F')!.defaultText, 'false');
  assert.equal(s.byName.get('G')!.defaultText, '');
  assert.equal(s.byName.get('H')!.defaultText, '[]');
  assert.deepEqual(s.storeKeys, ['A', 'B', 'C', 'F', 'G', 'H', 'I']);
  assert.equal(s.needsSandbox, true);
});

test('the prepared schema is cached by content', () => {
  const a = prepareSchema({ keys: { X: { default: 1 } } });
  const b = prepareSchema({ keys: { X: { default: 1 } } });
  assert.equal(a, b);
  assert.equal(prepareSchema({ keys: { X: {} } }).needsSandbox, false);
});

test('property types are checked with readable messages', () => {
  const cases: Array<[unknown, string, string]> = [
    [{ description: 1 }, '/keys/K/description', '`description` of key "K" must be a string'],
    [{ description: '' }, '/keys/K/description', '`description` of key "K" must not be empty'],
    [{ hidden: 'yes' }, '/keys/K/hidden', '`hidden` of key "K" must be a boolean (true or false)'],
    [{ lazy: 1 }, '/keys/K/lazy', '`lazy` of key "K" must be a boolean (true or false)'],
    [{ required: 'true' }, '/keys/K/required', '`required` of key "K" must be a boolean (true or false)'],
    [{ const: 5 }, '/keys/K/const', '`const` of key "K" must be a string'],
    [{ pattern: 5 }, '/keys/K/pattern', '`pattern` of key "K" must be a string'],
    [{ enum: 'a' }, '/keys/K/enum', '`enum` of key "K" must be a list'],
    [{ enum: [] }, '/keys/K/enum', '`enum` of key "K" must not be an empty list'],
    [{ schema: 'string' }, '/keys/K/schema', '`schema` of key "K" must be an object'],
    [{ label: 3 }, '/keys/K/label', '`label` of key "K" must be a non-empty string or a non-empty list of unique non-empty strings'],
    [{ label: ['a', 'a'] }, '/keys/K/label', '`label` of key "K" must be a non-empty string or a non-empty list of unique non-empty strings'],
    [{ label: [] }, '/keys/K/label', '`label` of key "K" must be a non-empty string or a non-empty list of unique non-empty strings'],
    [{ test: 1 }, '/keys/K/test', '`test` of key "K" must be a non-empty expression string or a non-empty list of them'],
    [{ test: [] }, '/keys/K/test', '`test` of key "K" must be a non-empty expression string or a non-empty list of them'],
    [5, '/keys/K', 'the declaration of key "K" must be an object or null'],
    [[], '/keys/K', 'the declaration of key "K" must be an object or null'],
  ];
  for (const [cfgu, path, message] of cases) assert.deepEqual(oneIssue({ K: cfgu }), { path, message }, JSON.stringify(cfgu));
});

test('exclusive pairs', () => {
  const pairs: Array<[string, string, unknown, unknown]> = [
    ['lazy', 'const', true, '{{1}}'],
    ['lazy', 'default', true, 'x'],
    ['const', 'default', '{{1}}', 'x'],
    ['const', 'required', '{{1}}', true],
    ['default', 'required', 'x', true],
  ];
  for (const [a, b, va, vb] of pairs) {
    assert.deepEqual(oneIssue({ K: { [a]: va, [b]: vb } }), { path: '/keys/K', message: `key "K" cannot have both \`${a}\` and \`${b}\`` });
  }
  // Flags set to false combine with nothing.
  prepareSchema({ keys: { K: { default: 1, required: false }, L: { const: 'x', lazy: false } } });
});

test('default must be inside enum (deep equality); enum items unique (deep)', () => {
  assert.deepEqual(oneIssue({ K: { enum: ['a', 'b'], default: 'c' } }), {
    path: '/keys/K/default',
    message: 'the `default` of key "K" must be one of its `enum` items',
  });
  prepareSchema({ keys: { K: { enum: [{ a: [1] }], default: { a: [1] } } } });
  assert.deepEqual(oneIssue({ K: { enum: [{ a: 1 }, { a: 1 }] } }), {
    path: '/keys/K/enum',
    message: '`enum` of key "K" must not contain duplicates (items 0 and 1 are equal)',
  });
  // 1 and "1" are different items.
  prepareSchema({ keys: { K: { enum: [1, '1'] } } });
});

test('unknown properties are rejected and the allowed ones listed', () => {
  assert.deepEqual(oneIssue({ K: { descripton: 'x' } }), {
    path: '/keys/K/descripton',
    message: 'key "K" has an unknown property `descripton`; allowed: description, label, hidden, lazy, const, default, required, pattern, enum, schema, test',
  });
});

test('v0 properties name their v1 replacement', () => {
  const expected: Record<string, string> = {
    type: '`type` of key "K" was removed in Cfgu v1: every stored value is a string, so it needs no replacement (write a `test` expression for a stricter check)',
    options: '`options` of key "K" was renamed `enum` in Cfgu v1',
    labels: '`labels` of key "K" was renamed `label` in Cfgu v1',
    template: '`template` of key "K" was removed in Cfgu v1: use `const` instead',
    depends: '`depends` of key "K" was removed in Cfgu v1: write a `test` that reads `$.configs.<KEY>.value` instead',
  };
  for (const [prop, message] of Object.entries(expected)) {
    assert.deepEqual(oneIssue({ K: { [prop]: prop === 'depends' || prop === 'options' || prop === 'labels' ? ['x'] : 'String' } }), {
      path: `/keys/K/${prop}`,
      message,
    });
  }
});

test('a v0 file (top-level declarations) is named as such', () => {
  assert.deepEqual(issuesOf({ PORT: { type: 'Number', default: '80' } }), [
    { path: '', message: 'this is a Cfgu v0 schema: in v1 the declarations move under a top-level `keys` object' },
  ]);
  assert.deepEqual(issuesOf({ foo: 1 }), [{ path: '', message: 'a schema must have a `keys` object' }]);
});

test('schema-level shape errors', () => {
  assert.deepEqual(issuesOf(null), [{ path: '', message: 'a schema must be an object with a `keys` object' }]);
  assert.deepEqual(issuesOf('keys'), [{ path: '', message: 'a schema must be an object with a `keys` object' }]);
  assert.deepEqual(issuesOf({ keys: [] }), [{ path: '/keys', message: '`keys` must be an object' }]);
  assert.deepEqual(issuesOf({ keys: {} }), [{ path: '/keys', message: '`keys` must declare at least one key' }]);
  assert.deepEqual(issuesOf({ keys: { A: {} }, extra: 1 }), [{ path: '/extra', message: 'unknown schema property `extra`; a schema holds only `keys`' }]);
});

test('bad key names and reserved words', () => {
  assert.deepEqual(oneIssue({ 'a.b': {} }), { path: '/keys/a.b', message: 'key "a.b" must match ^[A-Za-z0-9_-]+$' });
  assert.deepEqual(oneIssue({ Config_Set: {} }), { path: '/keys/Config_Set', message: 'key "Config_Set" is a reserved word' });
});

test('pattern must compile; schema must be a valid JSON Schema', () => {
  assert.deepEqual(oneIssue({ K: { pattern: '(' } }), { path: '/keys/K/pattern', message: '`pattern` of key "K" is not a valid regular expression' });
  const issue = oneIssue({ K: { schema: { type: 'strnig' } } });
  assert.equal(issue.path, '/keys/K/schema');
  assert.match(issue.message, /^`schema` of key "K" is not a valid JSON Schema: \/type /);
});

test('every problem of every key is reported at once', () => {
  const issues = issuesOf({ keys: { A: { type: 'x' }, B: { lazy: true, const: '{{1}}' }, 'c d': null } });
  assert.deepEqual(
    issues.map((i) => i.path),
    ['/keys/A/type', '/keys/B', '/keys/c d'],
  );
});

test('const dependency order and cycles', () => {
  const s = prepareSchema({
    keys: {
      URL: { const: '{{ $.configs.HOST.value }}:{{ $.configs.PORT.value }}' },
      HOST: { const: '{{ $.configs.DOMAIN.value }}' },
      DOMAIN: { default: 'x' },
      PORT: { const: '{{ 80 }}' },
      A: { const: '{{ $.configs.B.value }}' },
      B: { const: "<% $.configs['A'].value %>" },
      SELF: { const: '{{ $.configs.SELF.storedValue }}' },
    },
  });
  assert.deepEqual(s.constOrder, ['HOST', 'PORT', 'URL']);
  assert.deepEqual([...s.constCycles], [
    ['A', 'A -> B -> A'],
    ['B', 'A -> B -> A'],
    ['SELF', 'SELF -> SELF'],
  ]);
});

test('a deep-frozen schema is prepared once and found again by identity; errors keep each caller\'s path', () => {
  const good = freezeDeep({ keys: { A: { default: 1 } } });
  assert.equal(prepareSchema(good), prepareSchema(good));
  const bad = freezeDeep({ keys: { A: { options: ['x'] } } });
  for (const prefix of ['/0/schema', '/3/schema']) {
    assert.throws(
      () => prepareSchema(bad, prefix),
      (e: unknown) => e instanceof InputError && e.issues[0]!.path === `${prefix}/keys/A/options`,
    );
  }
});

test('the declaration shape is a valid JSON Schema (compiled without the meta-schema check at start-up)', () => {
  assertValidJsonSchema(cfguShape, 'cfguShape');
});
