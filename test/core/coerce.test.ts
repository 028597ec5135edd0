import { test } from 'node:test';
import assert from 'node:assert/strict';
import { coerceValue } from '../../src/core/index.js';

test('numbers: canonical and round-trip safe only', () => {
  assert.equal(coerceValue('8080'), 8080);
  assert.equal(coerceValue('-1.5'), -1.5);
  assert.equal(coerceValue('0'), 0);
  assert.equal(coerceValue('1.0'), 1); // allowed: the value is exact
  assert.equal(coerceValue('1e3'), 1000);
  assert.equal(coerceValue('0.1'), 0.1);
  assert.equal(coerceValue('007'), '007'); // not JSON
  assert.equal(coerceValue('12345678901234567890'), '12345678901234567890'); // would lose precision
  assert.equal(coerceValue('9007199254740993'), '9007199254740993');
  assert.equal(coerceValue('9007199254740991'), 9007199254740991);
  assert.equal(coerceValue('1e400'), '1e400'); // Infinity
  assert.equal(coerceValue('0.30000000000000004'), 0.30000000000000004);
  assert.equal(coerceValue('0.1000000000000000000001'), '0.1000000000000000000001');
  assert.equal(coerceValue(' 5'), ' 5');
  assert.equal(coerceValue('5 '), '5 ');
  assert.equal(coerceValue('+5'), '+5');
  assert.equal(coerceValue('-0'), -0);
});

test('strings, null and JSON strings stay strings', () => {
  assert.equal(coerceValue('hello'), 'hello');
  assert.equal(coerceValue('null'), 'null');
  assert.equal(coerceValue('"q"'), '"q"');
  assert.equal(coerceValue(''), '');
  assert.equal(coerceValue('{not json'), '{not json');
  assert.equal(coerceValue('True'), 'True');
});

test('booleans, objects, arrays', () => {
  assert.equal(coerceValue('true'), true);
  assert.equal(coerceValue('false'), false);
  assert.deepEqual(coerceValue('{"a":1,"b":[true,null]}'), { a: 1, b: [true, null] });
  assert.deepEqual(coerceValue('[1,"2",{"x":3}]'), [1, '2', { x: 3 }]);
  assert.deepEqual(coerceValue(' {"a":1} '), { a: 1 });
  assert.deepEqual(coerceValue('[]'), []);
  assert.deepEqual(coerceValue('{}'), {});
});

test('schema.type wins', () => {
  assert.equal(coerceValue('8080', 'string'), '8080');
  assert.equal(coerceValue('true', 'string'), 'true');
  assert.equal(coerceValue('8080', 'number'), 8080);
  assert.equal(coerceValue('8080', 'integer'), 8080);
  assert.equal(coerceValue('1.5', 'integer'), '1.5');
  assert.equal(coerceValue('8080', 'boolean'), '8080');
  assert.equal(coerceValue('[1]', 'object'), '[1]');
  assert.deepEqual(coerceValue('[1]', 'array'), [1]);
  assert.equal(coerceValue('8080', ['string', 'null']), '8080');
  assert.equal(coerceValue('8080', ['string', 'number']), 8080);
});

test('plain integers (read without JSON.parse): the edges of that path give what the general path gives', () => {
  assert.equal(coerceValue('7'), 7);
  assert.equal(coerceValue('-42'), -42);
  assert.equal(coerceValue('999999999999999'), 999999999999999); // 15 digits: the longest this path takes
  assert.equal(coerceValue('-999999999999999'), -999999999999999);
  assert.equal(coerceValue('9007199254740993'), '9007199254740993'); // 16 digits, not exact in a double: stays text
  assert.equal(coerceValue('1234567890123456'), 1234567890123456); // 16 digits, exact: the general path keeps it
  assert.ok(Object.is(coerceValue('-0'), -0)); // JSON's -0, as before
  assert.equal(coerceValue('01'), '01');
  assert.equal(coerceValue('-01'), '-01');
  assert.equal(coerceValue('-'), '-');
  assert.equal(coerceValue('+1'), '+1');
  assert.equal(coerceValue('12a'), '12a');
  assert.equal(coerceValue('42', 'integer'), 42);
  assert.equal(coerceValue('42', ['null', 'number']), 42);
  assert.equal(coerceValue('42', 'string'), '42');
  assert.equal(coerceValue('42', 'boolean'), '42');
  assert.equal(coerceValue('42', ['array', 'object']), '42');
});
