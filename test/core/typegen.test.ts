/**
 * core/typegen (`cfgu generate`): the types of every Cfgu property, the generated text, the keys refused, and the
 * generated module checked against tsc (strict) and against real exports of the engine on the real sandbox.
 */
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { transformSync } from 'esbuild';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { exportPipeline, ValidationError, type ConfigSchema, type EvalCommandInput } from '../../src/core/index.js';
import { generateTypes, readJsonSchema, readTest, type TypegenFormat } from '../../src/core/typegen/index.js';
import { createSandboxEvaluator } from '../../src/expressions/index.js';
import { MemoryResolver, MemoryStore } from '../helpers/engine.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** A temporary folder whose `node_modules` is the checkout's (the zod module imports 'zod'). */
function folder(): string {
  const dir = mkdtempSync(join(tmpdir(), 'cfgu-typegen-'));
  dirs.push(dir);
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
  return dir;
}

function generate(schema: ConfigSchema, format: TypegenFormat = 'ts', name = 'App'): string {
  const r = generateTypes(schema, { name, format, source: 'app.cfgu.json' });
  assert.ok(r.ok, JSON.stringify(!r.ok && r.problems));
  return r.text;
}

/** The property line of a key in the generated interface (the line after its doc comment). */
function propertyOf(text: string, key: string): string {
  const m = new RegExp(`\\n  ${key}: ([\\s\\S]*?);\\n(?=  [^\\s}]|\\})`).exec(text);
  assert.ok(m, `no property ${key} in\n${text}`);
  return m[1]!;
}

const UNTYPED = 'string | number | boolean | JsonValue[] | { [key: string]: JsonValue }';

test('every Cfgu property types the key as the export answers it', () => {
  const text = generate({
    keys: {
      PLAIN: {},
      NULL_DECL: null,
      DESCRIBED: { description: 'The host name.' },
      LABELLED: { label: ['db', 'net'] },
      HIDDEN: { hidden: true },
      LAZY: { lazy: true, schema: { type: 'number' } },
      LAZY_REQUIRED: { lazy: true, required: true, schema: { type: 'number' } },
      CONST: { const: '{{ $.configs.PLAIN.value }}' },
      CONST_NUMBER: { const: '{{ 1 + 1 }}', schema: { type: 'number' } },
      DEFAULTED: { default: 8080, schema: { type: 'integer' } },
      REQUIRED: { required: true },
      REQUIRED_NUMBER: { required: true, schema: { type: 'number' } },
      PATTERNED: { pattern: '^a+$' },
      ENUMERATED: { enum: ['a', 'b'] },
      SCHEMA_STRING: { schema: { type: 'string', minLength: 3 } },
      SCHEMA_TYPES: { schema: { type: ['boolean', 'array'] } },
      TESTED: { test: 'typeof $.value === "boolean"' },
      TEST_UNREAD: { test: 'validator.isURL($.value)' },
    },
  });
  // `""` is a string: the union says it already.
  assert.equal(propertyOf(text, 'PLAIN'), UNTYPED);
  assert.equal(propertyOf(text, 'NULL_DECL'), UNTYPED);
  assert.match(text, /  \/\*\*\n   \* The host name\.\n   \*\/\n  DESCRIBED: /);
  assert.equal(propertyOf(text, 'LABELLED'), UNTYPED);
  assert.ok(!text.includes('HIDDEN'), 'a hidden key is not in the export');
  assert.equal(propertyOf(text, 'LAZY'), 'number | ""');
  assert.equal(propertyOf(text, 'LAZY_REQUIRED'), 'number');
  assert.equal(propertyOf(text, 'CONST'), UNTYPED);
  assert.equal(propertyOf(text, 'CONST_NUMBER'), 'number');
  assert.equal(propertyOf(text, 'DEFAULTED'), 'number');
  assert.match(text, /   \* @default 8080\n   \*\/\n  DEFAULTED: /);
  assert.equal(propertyOf(text, 'REQUIRED'), UNTYPED);
  assert.equal(propertyOf(text, 'REQUIRED_NUMBER'), 'number');
  assert.equal(propertyOf(text, 'PATTERNED'), UNTYPED);
  assert.equal(propertyOf(text, 'ENUMERATED'), '"a" | "b" | ""');
  assert.equal(propertyOf(text, 'SCHEMA_STRING'), 'string');
  assert.equal(propertyOf(text, 'SCHEMA_TYPES'), 'boolean | JsonValue[] | ""');
  assert.equal(propertyOf(text, 'TESTED'), 'boolean | ""');
  assert.equal(propertyOf(text, 'TEST_UNREAD'), UNTYPED);
});

test('enums of mixed types are typed by what each item is exported as', () => {
  const text = generate({
    keys: {
      MIXED: { enum: ['a', 1, 2.5, true, null, [1, 'x'], { k: false }], required: true },
      AS_STRINGS: { enum: [1, true, 'x'], schema: { type: 'string' }, required: true },
    },
  });
  // `null` is stored as the text "null", which is exported as that string.
  assert.equal(propertyOf(text, 'MIXED'), '"a" | 1 | 2.5 | true | "null" | [1, "x"] | {\n    k: false;\n  }');
  assert.equal(propertyOf(text, 'AS_STRINGS'), '"1" | "true" | "x"');
  const zod = generate({ keys: { MIXED: { enum: ['a', 1, true, [1]], required: true } } }, 'zod');
  assert.match(zod, /  MIXED: z\.union\(\[z\.literal\(\["a", 1, true\]\), z\.tuple\(\[z\.literal\(1\)\]\)\]\),/);
});

test('defaults of every JSON type: the exported form in @default, and the key never empty', () => {
  const defaults: Record<string, unknown> = { S: 'text', E: '', N: -1.5, I: 42, T: true, F: false, A: [1, 'two', null], O: { a: { b: [] } }, Z: null };
  const keys: ConfigSchema['keys'] = {};
  for (const [k, d] of Object.entries(defaults)) keys[k] = { default: d as never };
  const text = generate({ keys });
  for (const k of ['S', 'E', 'N', 'I', 'T', 'F', 'A', 'O', 'Z']) assert.equal(propertyOf(text, k), UNTYPED, k);
  const tags = [...text.matchAll(/@default (.*)/g)].map((m) => m[1]);
  // A default of null is stored as "null" and exported as that string.
  assert.deepEqual(tags, ['"text"', '""', '-1.5', '42', 'true', 'false', '[1,"two",null]', '{"a":{"b":[]}}', '"null"']);
});

test('keys that are not identifiers are quoted; descriptions with comment terminators are escaped', () => {
  // Parsed from JSON: `__proto__` is then an own key, as in a schema file.
  const schema = JSON.parse(
    JSON.stringify({
      keys: {
        'my-key': { description: 'ends */ here, and **/ there\nsecond line /* not a comment */', required: true },
        '1st': { required: true },
        'a-b_c': { required: true },
        PROTO_HERE: { required: true, schema: { type: 'string' } },
        ok_Name: { required: true },
      },
    }).replace('PROTO_HERE', '__proto__'),
  ) as ConfigSchema;
  assert.ok(Object.hasOwn(schema.keys, '__proto__'));
  const text = generate(schema);
  assert.match(text, /\n  "my-key": /);
  assert.match(text, /\n  "1st": /);
  assert.match(text, /\n  "a-b_c": /);
  assert.match(text, /\n  __proto__: string;/);
  assert.match(text, /\n  ok_Name: /);
  assert.match(text, /   \* ends \*\\\/ here, and \*\*\\\/ there\n   \* second line \/\* not a comment \*\\\/\n/);
  assert.ok(!/\*\/ here/.test(text));
  const zod = generate(schema, 'zod');
  assert.match(zod, /\n  \["__proto__"\]: z\.string\(\),/);
  const json = JSON.parse(generate(schema, 'json-schema'));
  assert.equal(json.properties['my-key'].description, 'ends */ here, and **/ there\nsecond line /* not a comment */');
  assert.ok(Object.hasOwn(json.properties, '__proto__'));
});

test('the output is deterministic and keeps schema order', () => {
  const schema: ConfigSchema = { keys: { Z: {}, A: { enum: [2, 1] }, M: { schema: { type: 'object', properties: { y: {}, x: {} } } } } };
  for (const f of ['ts', 'zod', 'json-schema'] as const) assert.equal(generate(schema, f), generate(structuredClone(schema), f));
  const text = generate(schema);
  assert.ok(text.indexOf('  Z:') < text.indexOf('  A:') && text.indexOf('  A:') < text.indexOf('  M:'));
  assert.equal(propertyOf(text, 'A'), '2 | 1 | ""');
  assert.deepEqual(Object.keys(JSON.parse(generate(schema, 'json-schema')).properties), ['Z', 'A', 'M']);
});

test('schemas it cannot type are refused, naming the key and what disagrees', () => {
  const problems = (keys: ConfigSchema['keys']) => {
    const r = generateTypes({ keys }, { name: 'App', format: 'ts', source: 's' });
    assert.ok(!r.ok);
    return r.problems.map((p) => p.message);
  };
  assert.deepEqual(problems({ A: { enum: ['a', 1], schema: { type: 'number' } } }), [
    'key "A": `enum` item 0 ("a") can never be exported: its exported value "a" is refused by `schema.type`',
  ]);
  assert.deepEqual(problems({ B: { schema: { type: 'null' } } }), [
    'key "B" cannot be typed: `schema.type` names no type a stored value is exported as (a value is never exported as null)',
  ]);
  assert.deepEqual(problems({ C: { schema: { type: 'string' }, test: 'typeof $.value === "number"' } }), [
    'key "C" cannot be typed: no value passes `schema.type`, `schema` and the test "typeof $.value === \\"number\\"" together',
  ]);
  assert.deepEqual(problems({ D: { default: 'x', schema: { type: 'number' } } }), [
    'key "D": its `default` can never be exported: its exported value "x" is refused by `schema.type`',
  ]);
  assert.deepEqual(problems({ OK: {}, E: { enum: [1, 2], test: 'z.string().parse($.value)' }, F: { enum: [null], schema: { type: 'number' } } }), [
    'key "E": `enum` item 0 (1) can never be exported: its exported value 1 is refused by the test "z.string().parse($.value)"',
    'key "F": `enum` item 0 (null) can never be exported: its exported value "null" is refused by `schema.type`',
  ]);
  // A hidden key is not typed, so it is not refused either.
  assert.ok(generateTypes({ keys: { H: { hidden: true, schema: { type: 'null' } } } }, { name: 'App', format: 'ts', source: 's' }).ok);
  assert.throws(() => generateTypes({ keys: { A: {} } }, { name: 'class', format: 'ts', source: 's' }), /reserved word/);
});

test('JSON Schemas are read as upper bounds: types, enums, objects, arrays, combinators; the rest is not narrowed', () => {
  const ts = (schema: unknown): string => generate({ keys: { K: { schema: schema as Record<string, unknown>, required: true } } }).match(/  K: (.*?);\n}/s)![1]!;
  assert.equal(ts({ type: 'array', items: { type: 'object', properties: { a: { enum: [1, 2] } }, required: ['a'], additionalProperties: false } }), '{\n    a: 1 | 2;\n  }[]');
  assert.equal(ts({ anyOf: [{ type: 'string' }, { type: 'integer' }] }), 'string | number');
  assert.equal(ts({ allOf: [{ type: ['string', 'number'] }, { type: 'number' }] }), 'number');
  assert.equal(ts({ type: 'object', additionalProperties: { type: 'boolean' } }), '{ [key: string]: boolean }');
  // Not read: $ref, patternProperties beside additionalProperties, not, if.
  assert.equal(ts({ $ref: '#/definitions/x', definitions: { x: { type: 'string' } } }), UNTYPED);
  assert.equal(ts({ type: 'object', patternProperties: { '^x': {} }, additionalProperties: false }), '{ [key: string]: JsonValue }');
  assert.equal(ts({ type: 'string', not: { const: 'a' } }), 'string');
  assert.deepEqual(readJsonSchema(false), { kind: 'never' });
  // Nesting beyond MAX_READ_DEPTH reads as any value.
  let deep: Record<string, unknown> = { type: 'string' };
  for (let i = 0; i < 20; i++) deep = { type: 'array', items: deep };
  assert.match(ts(deep), /^JsonValue(\[\]){16}$/);
});

test('the test forms read statically', () => {
  assert.deepEqual(readTest('typeof $.value === "number";'), { kind: 'number', integer: false });
  assert.deepEqual(readTest("'string' == typeof $.value"), { kind: 'string' });
  assert.deepEqual(readTest('Number.isInteger($.value)'), { kind: 'number', integer: true });
  assert.deepEqual(readTest('JSONSchema.validate({"type":"boolean"}, $.value)'), { kind: 'boolean' });
  assert.deepEqual(readTest("z.enum(['a', 'b']).safeParse($.value).success"), {
    kind: 'union',
    of: [{ kind: 'literal', value: 'a' }, { kind: 'literal', value: 'b' }],
  });
  assert.deepEqual(readTest('z.number().int().min(1).refine((v) => v % 2 === 0, "even").parse($.value)'), { kind: 'number', integer: true });
  for (const unread of [
    'validator.isURL($.value)',
    'z.number().parse($.storedValue)',
    'z.coerce.number().parse($.value)',
    'z.number().catch(0).parse($.value)',
    'z.number().or(z.string()).parse($.value)',
    'typeof $.value === "number" || true',
    'JSONSchema.validate({type: "number"}, $.value)',
  ]) {
    assert.equal(readTest(unread), undefined, unread);
  }
});

/** Run tsc (strict) on files in a folder; the diagnostics as `file:code`. */
function tscDiagnostics(dir: string): string[] {
  writeFileSync(
    join(dir, 'tsconfig.json'),
    JSON.stringify({ compilerOptions: { strict: true, noEmit: true, target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', skipLibCheck: true, types: [] }, include: ['*.ts'] }),
  );
  const r = spawnSync(join(ROOT, 'node_modules/.bin/tsc'), ['-p', dir], { encoding: 'utf8', cwd: dir });
  return [...r.stdout.matchAll(/^(\S+?\.ts)\(\d+,\d+\): error (TS\d+)/gm)].map((m) => `${m[1]}:${m[2]}`);
}

const CHECKED: ConfigSchema = {
  keys: {
    PORT: { description: 'Port; ends */ here', schema: { type: 'integer' }, default: 8080 },
    HOST: { required: true, schema: { type: 'string' } },
    MODE: { enum: ['dev', 'prod', 1, null, [true], { a: 'b' }], required: true },
    'feature-flags': { schema: { type: 'object', properties: { beta: { type: 'boolean' } }, required: ['beta'] } },
    RATIO: { test: 'z.number().min(0).max(1).parse($.value)' },
    ANY: {},
    LIST: { default: [1, 2], test: 'JSONSchema.validate({"type":"array","items":{"type":"integer"}}, $.value)' },
    URL: { const: 'http://{{ $.configs.HOST.value }}:{{ $.configs.PORT.value }}' },
    SECRET: { hidden: true },
    OFF: { lazy: true, schema: { type: 'boolean' } },
  },
};

test('the generated modules compile with tsc (strict) and a misuse does not', () => {
  const dir = folder();
  writeFileSync(join(dir, 'app.ts'), generate(CHECKED, 'ts'));
  writeFileSync(join(dir, 'app-zod.ts'), generate(CHECKED, 'zod'));
  const base = `{ PORT: 1, HOST: "h", MODE: "null", "feature-flags": { beta: true }, RATIO: "", ANY: 3, LIST: [1], URL: "u", OFF: false }`;
  writeFileSync(
    join(dir, 'use.ts'),
    [
      `import type { App } from './app.js';`,
      `import { appSchema } from './app-zod.js';`,
      `export const good: App = ${base};`,
      `export const alsoGood: App = { ...good, MODE: { a: "b" }, "feature-flags": "", RATIO: 0.5, ANY: { x: [null] } };`,
      `export const parsed: App = appSchema.parse(JSON.parse("{}"));`,
      `export const port: number = good.PORT;`,
    ].join('\n'),
  );
  writeFileSync(join(dir, 'wrong-number.ts'), `import type { App } from './app.js';\nexport const c: App = { ...${base}, PORT: "8080" };\n`);
  writeFileSync(join(dir, 'wrong-enum.ts'), `import type { App } from './app.js';\nexport const c: App = { ...${base}, MODE: "staging" };\n`);
  writeFileSync(join(dir, 'missing.ts'), `import type { App } from './app.js';\nconst { HOST: _h, ...rest } = ${base};\nexport const c: App = rest;\n`);
  writeFileSync(join(dir, 'hidden.ts'), `import type { App } from './app.js';\nexport const read = (c: App) => c.SECRET;\n`);
  writeFileSync(join(dir, 'wrong-type.ts'), `import type { App } from './app.js';\nexport const c: App = { ...${base}, HOST: 1 };\n`);
  assert.deepEqual(tscDiagnostics(dir).sort(), ['hidden.ts:TS2339', 'missing.ts:TS2741', 'wrong-enum.ts:TS2322', 'wrong-number.ts:TS2322', 'wrong-type.ts:TS2322']);
});

test('the zod validator and the JSON Schema accept real exports of the engine, and refuse wrong ones', async () => {
  const dir = folder();
  const js = transformSync(generate(CHECKED, 'zod'), { loader: 'ts', format: 'esm' }).code;
  writeFileSync(join(dir, 'app.mjs'), js);
  const { appSchema } = (await import(pathToFileURL(join(dir, 'app.mjs')).href)) as { appSchema: { safeParse(v: unknown): { success: boolean; data?: unknown } } };
  const ajv = new Ajv2020({ strict: true, allErrors: true });
  const validate = ajv.compile(JSON.parse(generate(CHECKED, 'json-schema')));

  const expressions = createSandboxEvaluator({ workers: 1, spares: 0, timeoutMs: 2000 });
  try {
    const variants: Array<Array<[string, string]>> = [
      [['HOST', 'db'], ['MODE', 'dev']],
      [['HOST', 'db'], ['MODE', '1'], ['PORT', '5432'], ['feature-flags', '{"beta":false,"x":1}'], ['RATIO', '0.25'], ['ANY', '{"a":null}'], ['LIST', '[3]']],
      [['HOST', 'db'], ['MODE', 'null'], ['ANY', '12'], ['LIST', '[]']],
      [['HOST', '{"not":"parsed"}'], ['MODE', '[true]'], ['ANY', 'true'], ['SECRET', 's3cret']],
      [['HOST', 'h'], ['MODE', '{"a":"b"}'], ['ANY', '[1,"x"]'], ['RATIO', '1']],
    ];
    let accepted = 0;
    for (const [i, values] of variants.entries()) {
      const store = new MemoryStore('main', 'in-memory', values.map(([key, value]) => ({ set: '', key, value })));
      const commands: EvalCommandInput[] = [{ schema: CHECKED, configs: i === 1 ? { OFF: 'true' } : {} }];
      let configs: Record<string, unknown>;
      try {
        configs = (await exportPipeline(commands, { stores: new MemoryResolver([store], 'main'), expressions })).configs;
      } catch (e) {
        assert.ok(e instanceof ValidationError, String(e));
        assert.fail(`variant ${i} failed validation: ${JSON.stringify(e.failures)}`);
      }
      const z = appSchema.safeParse(configs);
      assert.ok(z.success, `zod refused variant ${i}: ${JSON.stringify(configs)}`);
      assert.ok(validate(configs), `Ajv refused variant ${i}: ${JSON.stringify(validate.errors)}`);
      assert.ok(!Object.hasOwn(configs, 'SECRET'));
      accepted++;
    }
    assert.equal(accepted, variants.length);
    const good = (await exportPipeline([{ schema: CHECKED }], { stores: new MemoryResolver([new MemoryStore('main', 'in-memory', [{ set: '', key: 'HOST', value: 'h' }, { set: '', key: 'MODE', value: 'prod' }])], 'main'), expressions })).configs;
    for (const wrong of [{ PORT: 'x' }, { MODE: 'staging' }, { HOST: 1 }, { RATIO: '0.5' }, { OFF: 'true' }, { LIST: [1.5] }]) {
      const value = { ...good, ...wrong };
      assert.equal(appSchema.safeParse(value).success, false, `zod accepted ${JSON.stringify(wrong)}`);
      assert.equal(validate(value), false, `Ajv accepted ${JSON.stringify(wrong)}`);
    }
    const { HOST: _h, ...missing } = good;
    assert.equal(appSchema.safeParse(missing).success, false);
    assert.equal(validate(missing), false);
  } finally {
    await expressions.close();
  }
});
