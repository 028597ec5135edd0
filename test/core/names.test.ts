import { test } from 'node:test';
import assert from 'node:assert/strict';
import { keyProblem, parseSet, normaliseName } from '../../src/core/index.js';

test('valid keys', () => {
  for (const key of ['PORT', 'db-host', 'a_b', 'X1', '0', 'API_KEY_2']) assert.equal(keyProblem(key), undefined, key);
});

test('keys outside the pattern are rejected with the pattern in the message', () => {
  for (const key of ['a.b', 'a b', 'ü', 'a/b', '$x', '']) {
    const p = keyProblem(key);
    assert.ok(p, key);
  }
  assert.equal(keyProblem('a.b'), 'key "a.b" must match ^[A-Za-z0-9_-]+$');
  assert.equal(keyProblem(''), 'a key must be a non-empty string');
});

test('reserved words are matched after normalisation', () => {
  assert.equal(normaliseName('Config_Set'), 'configset');
  for (const key of ['this', 'THIS', 'Cfgu', 'config_set', 'ConfigSet', 'CONFIG-STORE', 'configKey', 'key', 'KEY', 'Value', 'config_value', 'ConfigSchema', 'configu', '_', '-', '__', '_-_']) {
    assert.equal(keyProblem(key), `key "${key}" is a reserved word`, key);
  }
  // Near misses are fine.
  for (const key of ['keys', 'values', 'thisKey', 'config']) assert.equal(keyProblem(key), undefined, key);
});

test('set paths: trimming, one leading and trailing slash, hierarchy root first', () => {
  assert.deepEqual(parseSet(''), { path: '', hierarchy: [''] });
  assert.deepEqual(parseSet('/'), { path: '', hierarchy: [''] });
  assert.deepEqual(parseSet('  '), { path: '', hierarchy: [''] });
  assert.deepEqual(parseSet('prod'), { path: 'prod', hierarchy: ['', 'prod'] });
  assert.deepEqual(parseSet(' /prod/eu/ '), { path: 'prod/eu', hierarchy: ['', 'prod', 'prod/eu'] });
  assert.deepEqual(parseSet('a/b/c'), { path: 'a/b/c', hierarchy: ['', 'a', 'a/b', 'a/b/c'] });
});

test('bad set segments are rejected', () => {
  assert.deepEqual(parseSet('a//b'), { problem: 'set path "a//b" has an empty segment' });
  assert.deepEqual(parseSet('//a'), { problem: 'set path "//a" has an empty segment' });
  assert.deepEqual(parseSet('a/b.c'), { problem: 'set path "a/b.c" has an invalid segment: key "b.c" must match ^[A-Za-z0-9_-]+$' });
  assert.deepEqual(parseSet('prod/this'), { problem: 'set path "prod/this" has an invalid segment: key "this" is a reserved word' });
});
