/**
 * The v0 `type` property is refused with a hint that fits the type it named; every `test` expression a hint offers
 * is run on the real sandbox and must accept a value of that type and refuse one of another.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { exportPipeline, prepareSchema, InputError, ValidationError } from '../../src/core/index.js';
import { createSandboxEvaluator } from '../../src/expressions/index.js';
import { MemoryResolver, MemoryStore } from '../helpers/engine.js';

const expressions = createSandboxEvaluator({ workers: 1, spares: 0 });
after(() => expressions.close());

function typeMessage(type: unknown): string {
  try {
    prepareSchema({ keys: { K: { type } } });
  } catch (e) {
    assert.ok(e instanceof InputError, String(e));
    assert.equal(e.issues.length, 1, JSON.stringify(e.issues));
    assert.equal(e.issues[0]!.path, '/keys/K/type');
    return e.issues[0]!.message;
  }
  assert.fail('a v0 `type` was accepted');
}

// v0 type -> a stored value of that type, and one of another type.
const SAMPLES: Record<string, [string, string]> = {
  Number: ['8080', 'eighty'],
  Boolean: ['true', 'yes'],
  URL: ['https://api.example.com/v1', 'not a url'],
  Email: ['ops@example.com', 'ops@'],
  UUID: ['123e4567-e89b-12d3-a456-426614174000', '123e4567'],
  Domain: ['api.example.com', 'not a domain'],
  IPv4: ['10.0.0.1', '::1'],
  IPv6: ['::1', '10.0.0.1'],
  SemVer: ['1.2.3', '1.2'],
};

async function passes(expression: string, value: string): Promise<boolean> {
  const stores = new MemoryResolver([new MemoryStore('main', 'in-memory', [{ set: '', key: 'K', value }])], 'main');
  try {
    await exportPipeline([{ schema: { keys: { K: { test: expression } } } }], { stores, expressions });
    return true;
  } catch (e) {
    assert.ok(e instanceof ValidationError, String(e));
    assert.equal(e.failures[0]?.rule, 'test');
    return false;
  }
}

test('each v0 type gets a `test` example that checks that type (run on the sandbox)', async () => {
  for (const [type, [good, bad]] of Object.entries(SAMPLES)) {
    const message = typeMessage(type);
    assert.match(message, /^`type` of key "K" was removed in Cfgu v1: write a `test` expression instead \(e\.g\. "(.+)"\)$/, type);
    const expression = /\(e\.g\. "(.+)"\)$/.exec(message)![1]!;
    assert.equal(await passes(expression, good), true, `${type}: ${expression} accepts ${good}`);
    assert.equal(await passes(expression, bad), false, `${type}: ${expression} refuses ${bad}`);
  }
});

test('Number is not offered a URL check; case does not matter', () => {
  assert.equal(typeMessage('Number'), '`type` of key "K" was removed in Cfgu v1: write a `test` expression instead (e.g. "typeof $.value === \'number\'")');
  assert.equal(typeMessage('number'), typeMessage('Number'));
  assert.doesNotMatch(typeMessage('Number'), /isURL/);
});

test('types whose v1 replacement is another property, or nothing, say so', () => {
  assert.equal(typeMessage('String'), '`type` of key "K" was removed in Cfgu v1: every stored value is a string, so it needs no replacement (write a `test` expression for a stricter check)');
  assert.equal(typeMessage('RegEx'), '`type` of key "K" was removed in Cfgu v1: write a `pattern` instead');
  assert.equal(typeMessage('JSONSchema'), '`type` of key "K" was removed in Cfgu v1: write a `schema` instead');
});

test('an unknown type, or one named like an object property, gets the general hint', () => {
  const general = '`type` of key "K" was removed in Cfgu v1: write a `test` expression instead (e.g. a validator.js check on `$.storedValue`)';
  for (const type of ['Color', 'constructor', '__proto__', 'toString', 42]) assert.equal(typeMessage(type), general, String(type));
});
