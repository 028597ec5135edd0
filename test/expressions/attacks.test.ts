// Adversarial suite: every attack must leave the host untouched (canaries) and produce an exact outcome; attacks that
// try to leave state behind are followed by a second job that checks the state is gone.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSandboxEvaluator, type SandboxEvaluator } from '../../src/expressions/index.js';
import { oneTest, outcomeOf } from './helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'cfgu-attack-'));
const FILE = join(dir, 'pwned.txt');
const g = globalThis as Record<string, unknown>;
const ENV_CANARY = 'CFGU_ATTACK_CANARY';

let ev: SandboxEvaluator;
before(async () => {
  g.__cfguCanary = 'untouched';
  process.env[ENV_CANARY] = 'secret-canary';
  ev = createSandboxEvaluator({ workers: 2, timeoutMs: 100, memoryMb: 64 });
  await ev.ready();
});
after(async () => {
  await ev.close();
  rmSync(dir, { recursive: true, force: true });
});

const TL = { kind: 'time-limit', message: 'exceeded the time limit of 100 ms' };
const ML = { kind: 'memory-limit', message: 'exceeded the sandbox memory limit of 64 MB' };
const err = (message: string) => ({ kind: 'error', message });
const falsy = (source: string) => ({ kind: 'falsy', message: `test "${source}" evaluated to false` });

type Outcome = { kind: string; message?: string } | 'ok';
interface Attack {
  name: string;
  expr: string;
  /** The exact outcome, or a list of acceptable ones (a blow-up may hit either limit first). */
  expect: Outcome | Outcome[];
  /** A second job that must pass afterwards (state from the attack is gone). */
  next?: string;
}

const ATTACKS: Attack[] = [
  // --- constructor chains, eval, import --------------------------------------------------------------------
  { name: 'Object constructor chain to process', expr: "({}).constructor.constructor('return process')()", expect: err('process is not defined') },
  { name: 'Function constructor: globalThis.process', expr: "Function('return globalThis.process')()", expect: falsy("Function('return globalThis.process')()") },
  { name: 'Function constructor: process.env write', expr: `Function('process.env.${ENV_CANARY} = "x"')()`, expect: err('process is not defined') },
  { name: 'async function constructor', expr: "(async function(){}).constructor('return process')()", expect: err('an expression must be synchronous (it returned a promise)') },
  { name: 'generator function constructor', expr: "(function*(){}).constructor('return process')().next().value", expect: err('process is not defined') },
  { name: 'async generator function constructor', expr: "(async function*(){}).constructor('return require')().next(), typeof require === 'undefined'", expect: 'ok' },
  { name: 'eval reaching process', expr: "eval('process.exit(1)')", expect: err('process is not defined') },
  { name: 'eval reaching require', expr: `eval("require('fs').writeFileSync(${JSON.stringify(FILE).replace(/"/g, "'")}, 'x')")`, expect: err('require is not defined') },
  { name: 'dynamic import()', expr: "import('node:fs')", expect: err('dynamic import() is not available in the sandbox') },
  { name: 'dynamic import() via eval', expr: "eval('im' + 'port(\"node:child_process\")')", expect: err('an expression must be synchronous (it returned a promise)') },
  { name: 'no host globals', expr: "[typeof process, typeof require, typeof module, typeof Buffer, typeof fetch, typeof globalThis.__cfguCanary].every((t) => t === 'undefined')", expect: 'ok' },
  { name: 'host canary write', expr: "globalThis.__cfguCanary = 'pwned'", expect: err('Cannot add property __cfguCanary, object is not extensible') },
  { name: 'strict this is undefined', expr: 'this === undefined', expect: 'ok' },
  { name: 'context prototype chain to Function', expr: "$.configs.constructor.constructor('return typeof process')()", expect: err("Cannot read properties of undefined (reading 'constructor')") },
  // --- prototype pollution / tampering that would affect the next job ------------------------------------------
  { name: 'Object.prototype pollution', expr: 'Object.prototype.polluted = 1', expect: err('Cannot add property polluted, object is not extensible'), next: '({}).polluted === undefined' },
  { name: 'Array.prototype.map replaced', expr: "Array.prototype.map = function () { return 'pwned' }", expect: err("Cannot assign to read only property 'map' of object '[object Array]'"), next: '[1, 2].map((x) => x * 2)[1] === 4' },
  { name: '__proto__ pollution through JSON', expr: "Object.assign(Object.getPrototypeOf({}), JSON.parse('{\"admin\":true}'))", expect: err('Cannot add property admin, object is not extensible'), next: '({}).admin === undefined' },
  { name: 'String.prototype redefined', expr: "Object.defineProperty(String.prototype, 'trim', { value: () => 'pwned' })", expect: err('Cannot redefine property: trim'), next: "' a '.trim() === 'a'" },
  { name: 'global variable left behind', expr: 'globalThis.leak = 1', expect: err('Cannot add property leak, object is not extensible'), next: "typeof leak === 'undefined'" },
  { name: 'JSON.parse replaced', expr: 'JSON.parse = () => 1', expect: err("Cannot assign to read only property 'parse' of object '[object JSON]'"), next: "JSON.parse('2') === 2" },
  { name: 'lodash tampered', expr: '_.isString = () => true', expect: err("Cannot assign to read only property 'isString' of function lodash()"), next: '_.isString(1) === false' },
  { name: 'lodash redefined', expr: "Object.defineProperty(_, 'isString', { value: () => true })", expect: err('Cannot redefine property: isString'), next: '_.isString(1) === false' },
  { name: 'lodash mixin', expr: '_.mixin({ evil: () => 1 })', expect: err('Cannot add property evil, object is not extensible'), next: "typeof _.evil === 'undefined'" },
  { name: 'lodash templateSettings', expr: '_.templateSettings.interpolate = /x/g', expect: err("Cannot assign to read only property 'interpolate' of object '[object Object]'"), next: "_.template('<%= a %>')({ a: 1 }) === '1'" },
  { name: 'validator tampered', expr: 'validator.isEmail = () => true', expect: err("Cannot assign to read only property 'isEmail' of object '[object Object]'"), next: "validator.isEmail('nope') === false" },
  { name: 'zod tampered', expr: 'z.string = () => z.any()', expect: err('Cannot set property string of [object Object] which has only a getter'), next: 'z.string().safeParse(1).success === false' },
  { name: 'zod global config', expr: "z.config({ customError: () => 'hacked' })", expect: err('Cannot add property customError, object is not extensible'), next: "z.string().safeParse(1).error.issues[0].message !== 'hacked'" },
  { name: 'zod global registry id', expr: "z.globalRegistry.add(z.string(), { id: 'evil' }) && true", expect: 'ok', next: "!z.globalRegistry._idmap.has('evil') && z.string().meta({ id: 'evil' }) && true" },
  { name: 'zod registry through Map.prototype.set', expr: "Map.prototype.set.call(z.globalRegistry._idmap, 'k', 'v') && true", expect: 'ok', next: "z.globalRegistry._idmap.size === 0" },
  { name: 'zod internals prototype', expr: "Object.getPrototypeOf(z.string()._zod).pwned = 1", expect: err('Cannot add property pwned, object is not extensible'), next: "z.string()._zod.pwned === undefined" },
  { name: 'chai expect tampered', expr: 'expect.fail = () => {}', expect: err("Cannot assign to read only property 'fail' of function expect()"), next: "(() => { try { expect.fail('x'); return false } catch (e) { return e.message === 'x' } })()" },
  { name: 'chai config through Assertion', expr: 'expect(1).constructor.includeStack = true', expect: err("Cannot assign to read only property 'includeStack' of object '[object Object]'") },
  { name: 'chai plugin via Assertion.addMethod', expr: "expect(1).constructor.addMethod('evil', function () {})", expect: err('Cannot add property evil, object is not extensible'), next: "!Object.prototype.hasOwnProperty.call(expect(1).constructor.prototype, 'evil')" },
  { name: 'JSONSchema tampered', expr: 'JSONSchema.validate = () => true', expect: err("Cannot assign to read only property 'validate' of object '[object Object]'"), next: "(() => { try { JSONSchema.validate({ type: 'string' }, 1); return false } catch { return true } })()" },
  // --- getters, proxies, thrown oddities -----------------------------------------------------------------
  { name: 'getter on $ that never returns', expr: "(() => { Object.defineProperty($, 'value', { get() { while (true) {} } }); return $.value })()", expect: TL },
  { name: 'thrown Proxy with a looping trap', expr: '(() => { throw new Proxy({}, { get() { while (true) {} } }) })()', expect: TL },
  { name: 'thrown object with a message getter', expr: "(() => { throw { get message() { return 'custom' } } })()", expect: err('custom') },
  { name: 'thrown Symbol', expr: "(() => { throw Symbol('s') })()", expect: err('Symbol(s)') },
  { name: 'Proxy trap throwing', expr: "new Proxy({}, { get() { throw new Error('trap') } }).x", expect: err('trap') },
  { name: 'returned Proxy with a looping then', expr: '({ get then() { while (true) {} } })', expect: TL },
  // --- stack tricks -------------------------------------------------------------------------------------
  { name: 'Error.prepareStackTrace', expr: 'Error.prepareStackTrace = (e, s) => s', expect: err('Cannot add property prepareStackTrace, object is not extensible') },
  { name: 'stack reveals no host path', expr: "(() => { try { null.x } catch (e) { return !/\\/work|node_modules|\\.ts/.test(e.stack) } })()", expect: 'ok' },
  { name: 'Error.stackTraceLimit', expr: 'Error.stackTraceLimit = Infinity', expect: err("Cannot assign to read only property 'stackTraceLimit' of function 'function Error() { [native code] }'") },
  // --- Symbol.species ---------------------------------------------------------------------------------------
  { name: 'Array[Symbol.species] redefined', expr: 'Object.defineProperty(Array, Symbol.species, { get() { return Object } })', expect: err('Cannot redefine property: Symbol(Symbol.species)'), next: 'Array.isArray([1].map((x) => x))' },
  { name: 'species subclass returning globalThis', expr: '(() => { class A extends Array { static get [Symbol.species]() { return function () { return globalThis } } } return new A(1, 2).map((x) => x) })()', expect: err('Cannot define property 0, object is not extensible') },
  { name: 'Promise species / then hijack', expr: "Object.defineProperty(Promise.prototype, 'then', { value: () => 1 })", expect: err('Cannot redefine property: then') },
  // --- shared memory, wasm, timers, promises -------------------------------------------------------------
  { name: 'no SharedArrayBuffer / Atomics.wait', expr: "typeof SharedArrayBuffer === 'undefined' && typeof Atomics === 'undefined'", expect: 'ok' },
  { name: 'Atomics.wait', expr: 'Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0)', expect: err('Atomics is not defined') },
  { name: 'no WebAssembly', expr: 'WebAssembly.compile(new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0]))', expect: err('WebAssembly is not defined') },
  { name: 'no timers', expr: "[typeof setTimeout, typeof setInterval, typeof setImmediate, typeof queueMicrotask, typeof FinalizationRegistry].every((t) => t === 'undefined')", expect: 'ok' },
  { name: 'promise job that writes after the evaluation', expr: "Promise.resolve().then(() => Map.prototype.set.call(z.globalRegistry._idmap, 'late', 1)), true", expect: 'ok', next: "!z.globalRegistry._idmap.has('late')" },
  { name: 'promise job that loops after the evaluation', expr: '(async () => { await null; while (true) {} })(), true', expect: 'ok', next: 'true' },
  // --- CPU and memory ------------------------------------------------------------------------------------
  { name: 'endless loop', expr: '(() => { while (true) {} })()', expect: TL },
  { name: 'deep recursion', expr: '(() => { const f = () => f(); return f() })()', expect: err('Maximum call stack size exceeded') },
  { name: 'catastrophic backtracking regex', expr: "/^(a+)+$/.test('a'.repeat(40) + '!')", expect: TL },
  { name: 'multi-gigabyte string split', expr: "'x'.repeat(2 ** 28).split('')", expect: [ML, TL] },
  { name: 'huge array fill', expr: 'new Array(1e9).fill(0)', expect: [TL, ML] },
  { name: 'doubling string', expr: "(() => { let s = 'x'; for (;;) s += s })()", expect: [err('Invalid string length'), ML, TL] },
  { name: 'object growth', expr: '(() => { const a = []; for (;;) a.push({ a: [1, 2, 3] }) })()', expect: [ML, TL] },
];

function matches(actual: Outcome, expected: Outcome | Outcome[]): boolean {
  const list = Array.isArray(expected) ? expected : [expected];
  return list.some((e) => JSON.stringify(e) === JSON.stringify(actual));
}

function assertHostUntouched(): void {
  assert.equal(g.__cfguCanary, 'untouched');
  assert.equal(process.env[ENV_CANARY], 'secret-canary');
  assert.equal(existsSync(FILE), false);
  assert.equal(typeof g.leak, 'undefined');
  assert.equal(({} as Record<string, unknown>).polluted, undefined);
}

describe('sandbox attacks', () => {
  it('has at least 40 distinct attacks', () => {
    assert.ok(ATTACKS.length >= 40, `${ATTACKS.length} attacks`);
    assert.equal(new Set(ATTACKS.map((a) => a.expr)).size, ATTACKS.length);
  });
  for (const attack of ATTACKS) {
    it(attack.name, async () => {
      const actual = outcomeOf((await ev.run(oneTest(attack.expr))).tests);
      assert.ok(matches(actual, attack.expect), `${attack.expr}\n  got      ${JSON.stringify(actual)}\n  expected ${JSON.stringify(attack.expect)}`);
      assertHostUntouched();
      if (attack.next) {
        // Both children must be clean: run the check once on each (two concurrent jobs).
        const results = await Promise.all([ev.run(oneTest(attack.next)), ev.run(oneTest(attack.next))]);
        for (const r of results) assert.equal(outcomeOf(r.tests), 'ok', `after ${attack.expr}: ${attack.next}`);
      }
      assertHostUntouched();
    });
  }
});
