/**
 * The fuzzer's request generator. Case `i` of seed `s` is a pure function of `(s, i)` (its own PRNG stream), so any
 * case, or any slice of a campaign, can be rebuilt from two numbers. Cases are plain JSON (see FuzzCase) so a failing
 * one can be written to a file and replayed without this module.
 *
 * Families: valid pipelines built from the Cfgu v1 rules, the same mutated (wrong types, odd keys, odd numbers),
 * odd JSON Schemas (twins whose JSON texts collide, `$async`, `$id`, invalid ones, cache poisoning from an
 * expression), hostile expressions (throw, loop, allocate, promises, prototypes, state planted for later requests),
 * deep and large inputs, HTTP-level oddities and raw bytes on a socket.
 */

// ---------------------------------------------------------------------------------------------------------------
// PRNG

import { mulberry32 } from './prng.mjs';

/** One 32-bit stream seed per (campaign seed, case index): cases do not depend on each other. */
export function caseSeed(seed: number, index: number): number {
  let h = (Math.imul(seed >>> 0, 0x9e3779b1) ^ Math.imul(index + 1, 0x85ebca6b)) >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x7feb352d) >>> 0;
  h = Math.imul(h ^ (h >>> 15), 0x846ca68b) >>> 0;
  return (h ^ (h >>> 16)) >>> 0;
}

export class Rng {
  readonly next: () => number;
  constructor(seed: number) {
    this.next = mulberry32(seed);
  }
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)] as T;
  }
  /** Weighted pick: [weight, value] pairs. */
  weighted<T>(items: ReadonlyArray<readonly [number, T]>): T {
    const total = items.reduce((s, [w]) => s + w, 0);
    let r = this.next() * total;
    for (const [w, v] of items) if ((r -= w) < 0) return v;
    return items[items.length - 1]![1];
  }
  shuffle<T>(items: T[]): T[] {
    for (let i = items.length - 1; i > 0; i--) {
      const j = Math.floor(this.next() * (i + 1));
      [items[i], items[j]] = [items[j]!, items[i]!];
    }
    return items;
  }
  word(min = 1, max = 8, alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789'): string {
    let s = '';
    for (let i = this.int(min, max); i > 0; i--) s += alphabet[Math.floor(this.next() * alphabet.length)];
    return s;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// JSON texts with tokens JSON.stringify cannot write (1e400, duplicate or `__proto__` keys)

/** Emitted verbatim into the JSON text. */
export class Raw {
  constructor(readonly text: string) {}
}
/** An object as an ordered list of entries: keys may repeat or be `__proto__`. */
export class Entries {
  constructor(readonly entries: Array<[string, J]>) {}
}
export type J = null | boolean | number | string | Raw | Entries | J[] | { [key: string]: J };

export function emit(v: J): string {
  if (v instanceof Raw) return v.text;
  if (v instanceof Entries) return `{${v.entries.map(([k, x]) => `${JSON.stringify(k)}:${emit(x)}`).join(',')}}`;
  if (Array.isArray(v)) return `[${v.map(emit).join(',')}]`;
  if (v !== null && typeof v === 'object') return `{${Object.keys(v).map((k) => `${JSON.stringify(k)}:${emit(v[k]!)}`).join(',')}}`;
  return JSON.stringify(v);
}

// ---------------------------------------------------------------------------------------------------------------
// Cases

export interface FuzzCase {
  seed: number;
  index: number;
  /** Generator family (and sub-family after a slash): findings are grouped by it. */
  family: string;
  /** This case's own secret: planted in its overrides, expressions and schemas; no other answer may contain it. */
  canary: string;
  /** An HTTP request on a fresh connection ... */
  method?: string;
  path?: string;
  headers?: Record<string, string>;
  body?: string;
  /** ... or these exact bytes (base64) written on a fresh socket. */
  raw?: string;
  /** Expected to cost the server a sandbox restart or a time-limit wait: kept rare. */
  heavy?: boolean;
  /** For crafted cases whose documented outcome is known: the statuses that are right (the oracle's `expectation`). */
  expect?: { status: number[]; why: string };
}

export type Profile = 'quick' | 'full';

/** Store keys the fixture holds; generated pipelines read these. */
export const STORE_KEYS = ['HOST', 'PORT', 'REGION', 'LOG_LEVEL', 'FEATURES', 'TIMEOUT_MS', 'DB_USER', 'RATIO', 'LIST', 'BIG'] as const;
export const SETS = ['', 'prod', 'prod/eu', '/prod/', 'prod/eu/', 'staging'];
/** Key names: store keys, plain ones, and names that are also Object.prototype members. */
const KEYS = [...STORE_KEYS, 'A', 'B', 'C', 'X_1', 'key-2', 'constructor', 'toString', 'hasOwnProperty', 'valueOf', 'prototype'];

/** Canary text: alphanumeric so it fits in a key name; found in answers with CANARY_PATTERN. */
export const canaryFor = (seed: number, index: number, rng: Rng) => `cnry${(seed >>> 0).toString(36)}q${index.toString(36)}q${rng.word(6, 6)}`;
export const CANARY_PATTERN = /cnry[0-9a-z]+q[0-9a-z]+q[0-9a-z]{6}/gi;

/** Schemas shared by many cases, so cache keys collide within a short campaign. */
const SHARED_SCHEMAS: J[] = [
  { type: 'string', minLength: 8 },
  { type: 'number' },
  { type: 'integer', minimum: 1, maximum: 65535 },
  { type: 'string' },
  { type: 'object', properties: { search: { type: 'boolean' } } },
  { type: 'array', items: { type: 'string' } },
];
/** Pairs whose members parse to different values but serialise to the same JSON text (1e400 and null). */
const TWIN_SCHEMAS: Array<[string, string]> = [
  ['{"maximum":1e400}', '{"maximum":null}'],
  ['{"enum":[1e400]}', '{"enum":[null]}'],
  ['{"minimum":-1e400}', '{"minimum":null}'],
  ['{"type":"number","multipleOf":1e400}', '{"type":"number","multipleOf":null}'],
  ['{"const":1e400}', '{"const":null}'],
  ['{"items":[1e400]}', '{"items":[null]}'],
];
const ODD_NUMBERS = ['1e400', '-1e400', '1e-400', '-0', '0.1e1', '1E2', '9007199254740993', '123456789012345678901234567890', '0.30000000000000004', '5e-324', '1.7976931348623157e308'];

export interface GenOptions {
  profile: Profile;
}

/** Build case `index` of campaign `seed`. */
export function generateCase(seed: number, index: number, options: GenOptions = { profile: 'quick' }): FuzzCase {
  const rng = new Rng(caseSeed(seed, index));
  const canary = canaryFor(seed, index, rng);
  const g = new Gen(rng, canary, options.profile);
  const quick = options.profile === 'quick';
  const family = rng.weighted<() => Partial<FuzzCase> & { family: string }>([
    [30, () => g.validCase()],
    [18, () => g.mutatedCase()],
    [12, () => g.schemaCase()],
    [12, () => g.expressionCase()],
    [6, () => g.numbersCase()],
    [quick ? 3 : 6, () => g.bigCase()],
    [8, () => g.httpCase()],
    [4, () => g.rawCase()],
  ]);
  const c = family();
  return { seed, index, canary, ...c } as FuzzCase;
}

const JSON_HEADERS = { 'content-type': 'application/json' };

class Gen {
  constructor(
    readonly rng: Rng,
    readonly canary: string,
    readonly profile: Profile,
  ) {}

  get quick() {
    return this.profile === 'quick';
  }

  exportOf(family: string, body: J | string, extra: Partial<FuzzCase> = {}): Partial<FuzzCase> & { family: string } {
    return { family, method: 'POST', path: '/export', headers: { ...JSON_HEADERS }, body: typeof body === 'string' ? body : emit(body), ...extra };
  }

  // ---- values ---------------------------------------------------------------------------------------------------

  /** A JSON value for a default or an enum item. */
  value(depth = 0): J {
    const r = this.rng;
    return r.weighted<() => J>([
      [4, () => r.word(1, 10)],
      [3, () => r.int(-1000, 70000)],
      [1, () => r.next() * 100],
      [2, () => r.chance(0.5)],
      [1, () => null],
      [1, () => ''],
      [1, () => String(r.int(0, 99999))],
      [1, () => this.unicode()],
      [depth < 2 ? 1 : 0, () => [this.value(depth + 1), this.value(depth + 1)]],
      [depth < 2 ? 1 : 0, () => ({ [r.word(1, 5)]: this.value(depth + 1) })],
      [1, () => new Raw(r.pick(ODD_NUMBERS))],
    ])();
  }

  unicode(): string {
    return this.rng.pick(['é', 'ß', '中文', '😀', '\u0000', '\u2028', '\u200b', 'e\u0301', '\ud83d\ude00', 'Ω≈ç', '\u202e']) + this.rng.word(0, 4);
  }

  /** An override value: usually carries the canary. */
  override(): J {
    const r = this.rng;
    return r.weighted<() => J>([
      [5, () => this.canary],
      [2, () => `{"secret":"${this.canary}"}`],
      [2, () => this.value()],
      [1, () => ({ secret: this.canary })],
      [1, () => [this.canary]],
    ])();
  }

  // ---- expressions ----------------------------------------------------------------------------------------------

  /** A `test` expression that terminates quickly and deterministically. */
  plainTest(key: string): string {
    const r = this.rng;
    return r.pick([
      '$.value !== undefined',
      'typeof $.value === "number"',
      'typeof $.value === "string"',
      'validator.isInt(String($.storedValue))',
      'validator.isFQDN(String($.value))',
      '_.isString($.value)',
      'JSONSchema.validate({ type: "string" }, $.value)',
      'jsonschema.validate({ type: "integer", minimum: 1 }, $.value)',
      'z.string().safeParse($.value).success',
      'expect($.value).to.be.a("string")',
      'assert.isNotNull($.value)',
      `$.key === ${JSON.stringify(key)}`,
      '$.labels.length >= 0',
      '$.cfgu.hidden !== true',
      '$.origin !== "empty"',
      `${JSON.stringify(this.canary)} !== $.value`,
      '$.configs.HOST.value.length > 0',
      '$.input.set.hierarchy.length > 0',
      '$.value > 1024',
      '"import(" !== "x"',
      'String($.value).includes("import(")',
      '/^[a-z]+$/.test($.storedValue)',
    ]);
  }

  /** Expressions that throw, loop, allocate, return promises, touch prototypes or plant state. */
  hostileTest(): { expr: string; heavy: boolean; tag: string } {
    const r = this.rng;
    const c = this.canary;
    const cheap: Array<[string, string]> = [
      ['throw', `(() => { throw new Error("boom-${c}") })()`],
      ['throw', 'null.x'],
      ['throw', 'undefined()'],
      ['throw', '(() => { throw { toString() { return "obj" } } })()'],
      ['throw', '(() => { throw Symbol("s") })()'],
      ['recursion', '(function f() { return f() })()'],
      ['promise', 'Promise.resolve(true)'],
      ['promise', '(async () => false)()'],
      ['promise', 'Promise.reject(new Error("rejected"))'],
      ['promise', 'new Promise(() => {})'],
      ['proto', 'Object.prototype.polluted = 1'],
      ['proto', '(() => { try { Object.prototype.toString = () => "p" } catch (e) {} return true })()'],
      ['proto', '(() => { try { Array.prototype.push = null } catch (e) {} return true })()'],
      ['proto', '({}).constructor.constructor("return this")() !== undefined'],
      ['proto', '(() => { try { return typeof this.constructor.constructor("return process")() } catch (e) { return true } })()'],
      ['proto', '(() => { try { return Function("return this.process")() === undefined } catch (e) { return true } })()'],
      ['import', 'import("fs")'],
      ['import', 'typeof require === "undefined"'],
      ['stash', this.stashWrite()],
      ['poison', this.poisonWrite()],
      ['caller', this.callerGadget()],
      ['schema-in-expr', `JSONSchema.validate(${r.pick(['{"$async":true,"type":"number"}', '{"type":5}', `{"properties":{"${c}":{"type":5}}}`, '{"$id":"urn:x"}'])}, $.value)`],
      ['regex', '/(a+)+$/.test("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab")'],
    ];
    const heavy: Array<[string, string]> = [
      ['loop', '(() => { while (true) {} })()'],
      ['loop', '(() => { for (;;) {} })()'],
      ['alloc', '"x".repeat(2**28).split("")'],
      ['alloc', '(() => { const a = []; for (;;) a.push(new Array(1e6).fill(1)) })()'],
    ];
    const heavyShare = this.quick ? 0.08 : 0.2;
    if (r.chance(heavyShare)) {
      const [tag, expr] = r.pick(heavy);
      return { expr, heavy: true, tag };
    }
    const [tag, expr] = r.pick(cheap);
    return { expr, heavy: false, tag };
  }

  /** Objects an expression can reach; a write to one must never be visible to another request. */
  stashTarget(): string {
    return this.rng.pick([
      'globalThis',
      'Object.prototype',
      'Array.prototype',
      'Function.prototype',
      '_',
      'validator',
      'JSONSchema',
      'z',
      'expect',
      'JSON',
      'Math',
      'Object.getOwnPropertyDescriptor(Object.prototype, "__proto__").get',
      'Object.getOwnPropertyDescriptor(Object.prototype, "__proto__").set',
      'Object.getOwnPropertyDescriptor(Object.prototype, "toString")',
    ]);
  }
  stashWrite(): string {
    return `(() => { try { ${this.stashTarget()}.cfguStash = ${JSON.stringify(this.canary)} } catch (e) {} return true })()`;
  }
  stashRead(): string {
    return `{{ (() => { try { return String(${this.stashTarget()}.cfguStash) } catch (e) { return "none" } })() }}`;
  }
  /** Cache poisoning (finding 2 of the issue): a schema whose toJSON text differs from what it validates. */
  poisonWrite(): string {
    const shared = emit(this.rng.pick(SHARED_SCHEMAS));
    return `(() => { try { JSONSchema.validate({ toJSON() { return ${shared} }, type: "boolean", description: ${JSON.stringify(this.canary)} }, true) } catch (e) {} return true })()`;
  }
  /** A sloppy-mode getter that records its caller's arguments (finding 1): must see nothing of another job. */
  callerGadget(): string {
    const shared = emit(this.rng.pick(SHARED_SCHEMAS));
    return `(() => { const s = ${shared}; const g = Function("return function g() { try { const a = g.caller && g.caller.arguments; if (a) globalThis.cfguCaught = JSON.stringify(Array.from(a)).slice(0, 300) } catch (e) {} }")(); try { Object.defineProperty(s, "cfguHook", { get: g, enumerable: false }); JSONSchema.validate(s, ${JSON.stringify(this.canary)}) } catch (e) {} return true })()`;
  }

  template(): string {
    const r = this.rng;
    return r.pick([
      '{{ $.configs.HOST.value }}:{{ $.configs.PORT.value }}',
      'static',
      '{{ 1 + 1 }}',
      '<% "x".repeat(3) %>',
      `{{ ${JSON.stringify(this.canary)} }}`,
      '{{ JSON.stringify($.configs.FEATURES.value) }}',
      '{{ String(globalThis.cfguCaught) }}',
      this.stashRead(),
      '{{ $.configs.A.value }}-{{ $.configs.B.value }}',
      '{{ [1,2,3].map(x => x * 2).join(",") }}',
      '{{ "import(" }}',
      '{{ "[".repeat(50) + "]".repeat(50) }}',
      '{{ Object.keys(this).join(",") }}',
      '{{ typeof process }}',
      '{{ }}',
      '{{ 1 +',
    ]);
  }

  // ---- Cfgu declarations ----------------------------------------------------------------------------------------

  /** A valid Cfgu v1 declaration (exclusive pairs respected, default in enum). */
  cfgu(key: string): J {
    const r = this.rng;
    if (r.chance(0.1)) return r.chance(0.5) ? null : {};
    const d: Record<string, J> = {};
    if (r.chance(0.2)) d.description = r.word(3, 20);
    if (r.chance(0.15)) d.label = r.chance(0.5) ? r.word() : [r.word(1, 4) + 'a', r.word(1, 4) + 'b'];
    if (r.chance(0.15)) d.hidden = r.chance(0.5);
    const source = r.weighted<string>([
      [5, 'store'],
      [2, 'default'],
      [1, 'const'],
      [1, 'lazy'],
      [1, 'required'],
    ]);
    if (source === 'default') d.default = this.value();
    if (source === 'const') d.const = this.template();
    if (source === 'lazy') d.lazy = true;
    if (source === 'required') d.required = true;
    if (r.chance(0.15)) d.pattern = r.pick(['^[a-z0-9.-]+$', '^\\d+$', '.*', '^(a|b)+$', '\\p{L}+']);
    if (r.chance(0.15)) {
      const items: J[] = [this.value(), this.value(), r.word()];
      if ('default' in d && !items.some((i) => emit(i) === emit(d.default!))) items.push(d.default!);
      // unique by JSON text, as the engine requires
      const seen = new Set<string>();
      d.enum = items.filter((i) => !seen.has(emit(i)) && !!seen.add(emit(i)));
    }
    if (r.chance(0.2)) d.schema = r.pick(SHARED_SCHEMAS);
    if (r.chance(0.3)) d.test = r.chance(0.8) ? this.plainTest(key) : [this.plainTest(key), this.plainTest(key)];
    return d;
  }

  keysObject(n: number): Record<string, J> {
    const keys: Record<string, J> = {};
    for (let i = 0; i < n; i++) {
      const key = this.rng.pick(KEYS);
      Object.defineProperty(keys, key, { value: this.cfgu(key), enumerable: true, configurable: true, writable: true });
    }
    if (!Object.keys(keys).length) keys.A = {};
    return keys;
  }

  command(): Record<string, J> {
    const r = this.rng;
    const keys = this.keysObject(r.int(1, 6));
    const cmd: Record<string, J> = { schema: { keys } };
    if (r.chance(0.7)) cmd.store = r.chance(0.85) ? 'main' : 'spare';
    if (r.chance(0.7)) cmd.set = r.pick(SETS);
    const overridable = Object.keys(keys).filter((k) => !(keys[k] && typeof keys[k] === 'object' && 'const' in (keys[k] as object)));
    if (overridable.length && r.chance(0.5)) {
      const configs: Record<string, J> = {};
      for (const k of overridable) if (r.chance(0.6)) Object.defineProperty(configs, k, { value: this.override(), enumerable: true, configurable: true, writable: true });
      cmd.configs = configs;
    }
    return cmd;
  }

  pipeline(): Array<Record<string, J>> {
    return Array.from({ length: this.rng.weighted([[6, 1], [3, 2], [1, 3]] as const) }, () => this.command());
  }

  // ---- families -------------------------------------------------------------------------------------------------

  validCase() {
    return this.exportOf('valid', this.pipeline());
  }

  mutatedCase() {
    const r = this.rng;
    const p = this.pipeline();
    const cmd = p[0]!;
    const keys = (cmd.schema as { keys: Record<string, J> }).keys;
    const k0 = Object.keys(keys)[0]!;
    const mutations: Array<[string, () => J | string]> = [
      ['wrong-type/schema', () => (((cmd.schema = r.pick<J>(['x', 5, [], null, { keys: [] }, { keys: 'a' }, { keys: {} }])), p))],
      ['wrong-type/configs', () => ((cmd.configs = r.pick<J>([5, 'x', [this.canary], null])), p)],
      ['wrong-type/set', () => ((cmd.set = r.pick<J>([5, null, ['prod'], { a: 1 }, 'a//b', '../x', 'prod/../eu', ' ', '/', 'a/' + 'b/'.repeat(40)])), p)],
      ['wrong-type/store', () => ((cmd.store = r.pick<J>([5, null, '', 'nope', 'main ', 'MAIN', 'json-file', '__proto__'])), p)],
      ['wrong-type/cfgu', () => ((keys[k0] = r.pick<J>([5, 'x', [], true, { type: 'String' }, { options: [1] }, { labels: ['a'] }, { template: 'x' }, { depends: ['A'] }, { default: 1, required: true }, { lazy: true, const: 'x' }, { const: 'x', default: 1 }, { unknown: 1 }, { required: 'yes' }, { hidden: 1 }, { enum: [] }, { enum: [1, 1] }, { enum: 'a' }, { test: 5 }, { test: [] }, { pattern: '(' }, { pattern: 5 }, { label: [] }, { label: ['a', 'a'] }, { description: '' }])), p)],
      ['root', () => r.pick<J>([{}, [], null, 5, '"x"', p[0]!, [[]], [null], [5]])],
      ['unknown-property', () => ((cmd[r.pick(['cache', 'extra', 'Schema', 'constructor'])] = 1), p)],
      ['proto-key', () => this.protoBody(p)],
      ['odd-key', () => ((keys[r.pick(['', 'a b', 'é', '$', '_', 'this', 'Cfgu', 'config_set', 'ConfigValue', 'a.b', 'x'.repeat(300), '😀'])] = {}), p)],
      ['override-undeclared', () => ((cmd.configs = { UNDECLARED_KEY: this.canary }), p)],
      ['override-const', () => ((keys.CONSTKEY = { const: 'c' }), (cmd.configs = { CONSTKEY: this.canary }), p)],
      ['dup-keys', () => `[{"schema":{"keys":{"A":{"default":"one"},"A":{"default":${JSON.stringify(this.canary)}}}},"configs":{"A":"x","A":${JSON.stringify(this.canary)}}}]`],
      ['commands-limit', () => Array.from({ length: r.pick([50, 51, 200]) }, () => ({ schema: { keys: { A: {} } } }))],
      ['nested-json-text', () => ((cmd.configs = { [k0]: r.pick([`{"a":{"b":{"c":"${this.canary}"}}}`, '[[[[[1]]]]]', '{"__proto__":{"x":1}}', '{"constructor":{"prototype":{"x":1}}}', 'nulll', '{"a":1e400}', '"\\ud800"'])}), p)],
    ];
    const [name, make] = r.pick(mutations);
    const body = make();
    return this.exportOf(`mutated/${name}`, typeof body === 'string' ? body : (body as J));
  }

  /** A body with a `__proto__` key somewhere (the JSON text, not an object literal). */
  protoBody(p: Array<Record<string, J>>): string {
    const r = this.rng;
    const where = r.int(0, 3);
    const text = emit(p as J);
    const proto = `"__proto__":{"polluted":${JSON.stringify(this.canary)}}`;
    if (where === 0) return text.replace('{', `{${proto},`);
    if (where === 1) return text.replace('"keys":{', `"keys":{${proto},`);
    if (where === 2) return `[{"schema":{"keys":{"A":{"schema":{${proto}}}}}}]`;
    return `[{"schema":{"keys":{"A":{}}},"configs":{${proto}}}]`;
  }

  schemaCase() {
    const r = this.rng;
    const c = this.canary;
    const key = r.pick(['A', 'PORT', 'HOST', 'FEATURES']);
    const valueSource = r.pick([`"default":${JSON.stringify(r.pick(['abc', '8080', '5', 'x'.repeat(9)]))},`, `"default":${emit(this.value())},`, '', '"required":true,']);
    const configs = r.chance(0.5) ? `,"configs":{"${key}":${JSON.stringify(r.chance(0.5) ? c : String(r.int(0, 99999)))}}` : '';
    const wrap = (schemaText: string, sub: string) =>
      this.exportOf(`schema/${sub}`, `[{"store":"main","set":"prod","schema":{"keys":{"${key}":{${valueSource}"schema":${schemaText}}}}${configs}}]`);
    const kind = r.pick(['twin', 'twin', 'twin', 'async', 'async-plain', 'import-text', 'id', 'invalid', 'shared', 'format', 'ref', 'deep', 'bigenum', 'default-in-enum', 'huge-number']);
    switch (kind) {
      case 'twin': {
        const pair = r.pick(TWIN_SCHEMAS);
        return wrap(r.chance(0.5) ? pair[0] : pair[1], 'twin');
      }
      case 'async-plain':
        // the issue's finding 12: refuse `$async` (400) or honour it ("abc" is not a number: 422), never ignore it
        return this.exportOf('schema/async', r.pick(['[{"schema":{"keys":{"A":{"default":"abc","schema":{"$async":true,"type":"number"}}}}}]', '[{"schema":{"keys":{"A":{"schema":{"$async":true,"type":"integer"}}}},"configs":{"A":"x1"}}]']), {
          expect: { status: [400, 422], why: 'a `schema` with `$async` must be refused or enforced, not skipped' },
        });
      case 'import-text':
        // finding 13: the text `import(` inside a string literal is not an import
        return this.exportOf('schema/import-text', r.pick(['[{"schema":{"keys":{"A":{"default":"abc","test":"\'import(\' !== \'x\'"}}}}]', '[{"schema":{"keys":{"A":{"const":"{{ \'import(\' + 1 }}"}}}}]', '[{"schema":{"keys":{"A":{"default":"import(","test":"$.value.startsWith(\\"import(\\")"}}}}]']), {
          expect: { status: [200], why: 'an expression that only mentions `import(` in a string is ordinary code' },
        });
      case 'async':
        return wrap(r.pick(['{"$async":true,"type":"number"}', '{"$async":false,"type":"number"}', '{"$async":"yes"}', '{"type":"object","properties":{"a":{"$async":true}}}']), 'async');
      case 'id':
        return wrap(`{"$id":"urn:cfgu:fuzz:${r.int(0, 20)}","type":${r.pick(['"string"', '"number"'])}}`, 'id');
      case 'invalid':
        return wrap(r.pick([`{"properties":{"${c}":{"type":5}}}`, '{"type":"strin"}', '{"minimum":"1"}', '{"required":"x"}', '{"pattern":"("}', `{"type":["string","${c}"]}`, '{"allOf":5}', '{"$schema":"http://example.com/nope"}']), 'invalid');
      case 'shared':
        return wrap(emit(r.pick(SHARED_SCHEMAS)), 'shared');
      case 'format':
        return wrap(r.pick(['{"format":"email"}', '{"format":"uri"}', '{"format":"nope"}', '{"format":"date-time"}']), 'format');
      case 'ref':
        return wrap(r.pick(['{"$ref":"http://127.0.0.1:1/x.json"}', '{"$ref":"file:///etc/passwd"}', '{"$ref":"#/definitions/a","definitions":{"a":{"$ref":"#/definitions/a"}}}', '{"$ref":"#"}']), 'ref');
      case 'deep': {
        const n = this.quick ? r.pick([50, 300, 1000]) : r.pick([300, 1000, 3000]);
        return wrap('{"items":'.repeat(n) + '{}' + '}'.repeat(n), 'deep');
      }
      case 'bigenum': {
        const n = this.quick ? 500 : r.pick([2000, 20000]);
        return wrap(`{"enum":[${Array.from({ length: n }, (_, i) => i).join(',')}]}`, 'bigenum');
      }
      case 'default-in-enum':
        return this.exportOf('schema/default-in-enum', r.pick([
          '[{"schema":{"keys":{"A":{"default":null,"enum":[null]}}}}]',
          '[{"schema":{"keys":{"A":{"default":5,"enum":[5],"schema":{"type":"string"}}}}}]',
          '[{"schema":{"keys":{"A":{"default":"5","enum":["5"]}}}}]',
          '[{"schema":{"keys":{"A":{"default":{"a":1},"enum":[{"a":1}]}}}}]',
          '[{"schema":{"keys":{"A":{"default":[],"enum":[[]]}}}}]',
          '[{"schema":{"keys":{"A":{"default":true,"enum":[true,"true"]}}}}]',
        ]), { expect: { status: [200, 400], why: 'a declaration that passes the schema check with its `default` in `enum` must not fail `enum` (finding 14)' } });
      default:
        return wrap(`{"type":"number","maximum":${r.pick(ODD_NUMBERS)}}`, 'huge-number');
    }
  }

  expressionCase() {
    const r = this.rng;
    const h = this.hostileTest();
    const victim = r.chance(0.5);
    const keys: Record<string, J> = { X: { default: r.pick(['1', 'abc', 'x'.repeat(9)]), test: h.expr } };
    // a victim key in the same request, with a shared schema and this request's secret as its value
    if (victim) keys.V = { schema: r.pick(SHARED_SCHEMAS) };
    if (r.chance(0.4)) keys.R = { const: this.stashRead() };
    if (r.chance(0.2)) keys.C = { const: `{{ ${h.expr} }}` };
    const cmd: Record<string, J> = { store: 'main', schema: { keys } };
    if (victim) cmd.configs = { V: r.chance(0.5) ? this.canary : `${this.canary}-long-enough` };
    return this.exportOf(`expression/${h.tag}`, [cmd], { heavy: h.heavy });
  }

  numbersCase() {
    const r = this.rng;
    const n = r.pick(ODD_NUMBERS);
    const where = r.pick(['default', 'enum', 'configs', 'const']);
    const body =
      where === 'default'
        ? `[{"schema":{"keys":{"A":{"default":${n}}}}}]`
        : where === 'enum'
          ? `[{"schema":{"keys":{"A":{"default":${n},"enum":[${n}]}}}}]`
          : where === 'configs'
            ? `[{"schema":{"keys":{"A":{}}},"configs":{"A":${n}}}]`
            : `[{"schema":{"keys":{"A":{"const":"{{ ${n} }}"}}}}]`;
    return this.exportOf(`numbers/${where}`, body);
  }

  bigCase() {
    const r = this.rng;
    const q = this.quick;
    const kind = r.pick(['deep-json-text', 'deep-json-default', 'long-template', 'deep-set', 'many-keys', 'deep-body', 'big-string', 'amplify']);
    switch (kind) {
      case 'deep-json-text': {
        const n = r.pick([100, 1000, 5000]);
        return this.exportOf('big/deep-json-text', [{ schema: { keys: { A: { const: `{{ "[".repeat(${n}) + "]".repeat(${n}) }}` } } } }]);
      }
      case 'deep-json-default': {
        const n = r.pick([100, 1000, 5000]);
        return this.exportOf('big/deep-json-default', [{ schema: { keys: { A: { default: '['.repeat(n) + ']'.repeat(n) } } } }]);
      }
      case 'long-template': {
        const n = q ? 200 : r.pick([200, 2000]);
        return this.exportOf('big/long-template', [{ schema: { keys: { A: { default: 'a' }, T: { const: '{{ $.configs.A.value }}'.repeat(n) } } } }]);
      }
      case 'deep-set': {
        const n = q ? r.pick([50, 300]) : r.pick([300, 3000]);
        return this.exportOf('big/deep-set', [{ set: Array.from({ length: n }, (_, i) => `s${i}`).join('/'), schema: { keys: { HOST: {}, PORT: {} } } }]);
      }
      case 'many-keys': {
        const n = q ? 500 : r.pick([2000, 10000]);
        const keys: Record<string, J> = {};
        for (let i = 0; i < n; i++) keys[`K${i}`] = i % 50 === 0 ? { const: `{{ $.configs.K${i + 1}.value }}` } : { default: i };
        return this.exportOf('big/many-keys', [{ schema: { keys } }]);
      }
      case 'deep-body': {
        const n = r.pick([1000, 10000, q ? 20000 : 100000]);
        return this.exportOf('big/deep-body', `[{"schema":{"keys":{"A":{"default":${'['.repeat(n)}${']'.repeat(n)}}}}}]`);
      }
      case 'big-string':
        return this.exportOf('big/big-string', [{ schema: { keys: { A: { default: 'x'.repeat(q ? 100_000 : 900_000) } } } }]);
      default: {
        const n = q ? 3 : r.pick([6, 12]);
        const keys: Record<string, J> = {};
        for (let i = 0; i < n; i++) keys[`P${i}`] = { const: '{{ "x".repeat(2**18) }}' };
        return this.exportOf('big/amplify', [{ schema: { keys } }], { heavy: true });
      }
    }
  }

  httpCase() {
    const r = this.rng;
    const body = emit(this.pipeline());
    const kind = r.pick(['content-type', 'broken-json', 'method', 'path', 'request-id', 'accept']);
    switch (kind) {
      case 'content-type': {
        const ct = r.pick(['text/plain', 'application/json; charset=utf-16', 'application/json; charset=latin1', 'application/x-www-form-urlencoded', 'application/vnd.api+json', 'APPLICATION/JSON', 'application/json;charset=UTF-8', 'application/jsonx', 'multipart/form-data; boundary=x', '', 'application/json; charset=']);
        return { family: 'http/content-type', method: 'POST', path: '/export', headers: ct ? { 'content-type': ct } : {}, body };
      }
      case 'broken-json': {
        const broken = r.pick([body.slice(0, Math.max(1, body.length - r.int(1, 10))), body + ',', '\ufeff' + body, body.replace(':', '::'), '[NaN]', '// c\n' + body, "[{'a':1}]", '', ' ', 'null', '\u0000', body.replace(/"/, '\\"'), `[{"schema":{"keys":{"A":{"default":"\\ud800"}}}}]`, `[{"schema":{"keys":{"A":{"default":"${this.canary}\\x"}}}}]`]);
        return this.exportOf('http/broken-json', broken);
      }
      case 'method':
        return { family: 'http/method', method: r.pick(['GET', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'HEAD']), path: r.pick(['/export', '/live', '/ready']), headers: { ...JSON_HEADERS }, body: r.chance(0.5) ? body : undefined };
      case 'path':
        return { family: 'http/path', method: r.pick(['GET', 'POST']), path: r.pick(['/export/', '/EXPORT', '/export?x=1', '/export#x', '//export', '/nope', '/docs/static/../../../package.json', '/docs/../package.json', '/%2e%2e/package.json', '/export%00', '/live?__proto__=1', '/openapi.json/x', '/' + 'a'.repeat(5000)]), headers: { ...JSON_HEADERS }, body };
      case 'request-id':
        return this.exportOf('http/request-id', body, { headers: { ...JSON_HEADERS, 'x-request-id': r.pick([this.canary, 'a'.repeat(200), 'é', '../../etc', '<script>', '']) } });
      default:
        return this.exportOf('http/accept', body, { headers: { ...JSON_HEADERS, accept: r.pick(['text/html', 'application/xml', '*/*', 'application/problem+json']) } });
    }
  }

  rawCase() {
    const r = this.rng;
    const body = emit([{ schema: { keys: { A: { default: this.canary } } } }]);
    const len = Buffer.byteLength(body);
    const req = (head: string, b = body) => `${head}\r\n\r\n${b}`;
    const kind = r.pick(['garbage', 'no-host', 'big-header', 'dup-length', 'chunked-bad', 'short-length', 'http10', 'bad-version', 'odd-header', 'invalid-utf8']);
    let text: string | Buffer;
    switch (kind) {
      case 'garbage':
        text = r.pick(['\u0000\u0001\u0002\r\n\r\n', 'GET\r\n\r\n', 'HELLO /export HTTP/1.1\r\nHost: x\r\n\r\n', ' / HTTP/1.1\r\n\r\n']);
        break;
      case 'no-host':
        text = req(`POST /export HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: ${len}\r\nConnection: close`);
        break;
      case 'big-header':
        text = req(`GET /live HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(r.pick([20_000, 70_000]))}\r\nConnection: close`, '');
        break;
      case 'dup-length':
        text = req(`POST /export HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${len}\r\nContent-Length: ${len + 1}\r\nConnection: close`);
        break;
      case 'chunked-bad':
        text = `POST /export HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\nzz\r\n${body}\r\n0\r\n\r\n`;
        break;
      case 'short-length':
        text = req(`POST /export HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Math.max(1, len - 5)}\r\nConnection: close`);
        break;
      case 'http10':
        text = req(`POST /export HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: ${len}`);
        break;
      case 'bad-version':
        text = req('GET /live HTTP/9.9\r\nHost: x\r\nConnection: close', '');
        break;
      case 'odd-header':
        text = req(`POST /export HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${len}\r\n${r.pick(['X-A: \u00e9', 'Bad Header: 1', 'X-A:\tb', ': empty-name', 'X-A: a\rb'])}\r\nConnection: close`);
        break;
      default: {
        const bytes = Buffer.concat([Buffer.from('[{"schema":{"keys":{"A":{"default":"'), Buffer.from([0xff, 0xfe, 0xc3]), Buffer.from('"}}}}]')]);
        text = Buffer.concat([Buffer.from(`POST /export HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${bytes.length}\r\nConnection: close\r\n\r\n`), bytes]);
      }
    }
    return { family: `raw/${kind}`, raw: Buffer.from(text as string | Buffer).toString('base64') };
  }
}
