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
