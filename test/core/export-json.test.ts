import { test } from 'node:test';
import assert from 'node:assert/strict';
import { evaluatePipeline, exportJson, exportPipeline, exportPipelineJson, exportResult, type EvalResult } from '../../src/core/index.js';
import { isArrayIndex } from '../../src/core/names.js';
import { MemoryResolver, MemoryStore } from '../helpers/engine.js';

/** A result as the engine makes it (own properties only; `__proto__` included by defineProperty, as setOwn does). */
function resultOf(entries: Array<[string, string, Record<string, unknown>?]>, bare = false): EvalResult {
  const r: EvalResult = bare ? Object.create(null) : {};
  for (const [key, value, cfgu] of entries) {
    Object.defineProperty(r, key, { value: { key, value, origin: 'store', cfgu: cfgu ?? {}, set: '' }, enumerable: true, writable: true, configurable: true });
  }
  return r;
}

test('exportJson gives the bytes of JSON.stringify(exportResult(...)) and the count of its keys', () => {
  const cases: EvalResult[] = [
    resultOf([]),
    resultOf([['A', 'x', { hidden: true }]]),
    resultOf([
      ['B', '1'],
      ['10', 'ten'],
      ['2', '-0'],
      ['__proto__', 'p'],
      ['toString', '{"a":[1,true,null,"q\\"uote"]}'],
      ['S', 'line\nbreak "quoted" \u2028 ü'],
      ['H', 'secret', { hidden: true }],
      ['N', '1e21'],
      ['F', '0.1'],
      ['T', 'true'],
      ['E', ''],
      ['K', '42', { schema: { type: 'string' } }],
      ['L', '[1,2]', { schema: { type: 'object' } }],
    ]),
  ];
  // Larger results, in both forms the engine uses (a literal up to 64 keys, no prototype beyond).
  for (const size of [65, 300]) {
    const entries: Array<[string, string, Record<string, unknown>?]> = [];
    for (let i = 0; i < size; i++) entries.push([i % 7 === 0 ? String(i) : `K_${i}`, i % 3 === 0 ? String(i * 37) : i % 3 === 1 ? `v${i}` : `{"n":${i}}`, i % 11 === 0 ? { hidden: true } : {}]);
    cases.push(resultOf(entries, true), resultOf(entries));
  }
  for (const [i, result] of cases.entries()) {
    const exported = exportResult(result);
    const { text, keys } = exportJson(result);
    assert.equal(text, JSON.stringify(exported), `case ${i}`);
    assert.equal(keys, Object.keys(exported).length, `case ${i}`);
  }
});

test('exportJson quotes keys and string values exactly as JSON.stringify does, whatever their characters', () => {
  // Every character class JSON.stringify treats apart (quote, backslash, control characters, lone and paired
  // surrogates), the ones it leaves alone (DEL, U+2028, non-ASCII), at the length where the writer stops checking
  // short strings itself (64) and just past it, and as keys of a piped result (which the engine does not validate).
  const tricky = [
    'plain',
    'say "hi"',
    'C:\\path',
    'tab\there',
    '\u0000nul',
    'unit\u001fsep',
    'del\u007f',
    'lone \ud800 high',
    'lone \udfff low',
    'pair \ud83d\ude00',
    'ls \u2028 ps \u2029',
    'ünï',
    'x'.repeat(64),
    `${'y'.repeat(63)}"`,
    `${'z'.repeat(65)}`,
    `${'w'.repeat(64)}\\`,
  ];
  const asString = { schema: { type: 'string' } };
  const entries: Array<[string, string, Record<string, unknown>?]> = [];
  tricky.forEach((s, i) => {
    entries.push([`V${i}`, s, asString]);
    entries.push([s, `value ${i}`, asString]);
  });
  for (const result of [resultOf(entries), resultOf(entries, true)]) {
    const exported = exportResult(result);
    const { text, keys } = exportJson(result);
    assert.equal(text, JSON.stringify(exported));
    assert.equal(keys, tricky.length * 2);
    assert.deepEqual(JSON.parse(text), exported);
  }
});

test('the answer of a pipeline keeps the key order of its record, with and without array-index keys, piped or not', async () => {
  const store = new MemoryStore('main', 'json-file', [
    { set: '', key: 'B', value: 'b' },
    { set: '', key: '10', value: '10' },
    { set: '', key: '2', value: 'two' },
    { set: '', key: 'A', value: '7' },
    { set: 'prod', key: 'A', value: '8' },
    { set: '', key: 'Z', value: 'z' },
  ]);
  const deps = { stores: new MemoryResolver([store], 'main') };
  const command = (keys: string[], set = '') => ({ store: 'main', set, schema: { keys: Object.fromEntries(keys.map((k) => [k, k === 'H' ? { hidden: true, default: 'h' } : {}])) } });
  const pipelines = [
    [command(['B', 'A', 'Z', 'H'])], // no array index: the answer is written from the entries in schema order
    [command(['B', '10', 'A', '2', 'Z'])], // array indexes first, in numeric order
    [command(['Z', 'A']), command(['B', 'A', 'H'], 'prod')], // piped: the first command's keys, then the new ones
    [command(['Z', '10']), command(['2', 'A', 'B'], 'prod')],
    [command(['A', 'B']), command(['2', 'Z'])], // an array index only in the second command
    [command(['Z', '10']), command(['A', 'B'], 'prod')], // an array index only in the piped result
  ];
  for (const [i, commands] of pipelines.entries()) {
    const outcome = await evaluatePipeline(commands, deps);
    const hasIndex = Object.keys(outcome.result).some((k) => /^(0|[1-9]\d*)$/.test(k));
    assert.equal(outcome.ordered === undefined, hasIndex, `pipeline ${i}: the entries in order are given exactly when no key is an array index`);
    if (outcome.ordered) assert.deepEqual(outcome.ordered.map((e) => e.key), Object.keys(outcome.result), `pipeline ${i}`);
    const { text } = await exportPipelineJson(commands, deps);
    assert.equal(text, JSON.stringify(exportResult(outcome.result)), `pipeline ${i}`);
    assert.deepEqual(Object.keys(JSON.parse(text)), Object.keys(outcome.result).filter((k) => k !== 'H'), `pipeline ${i}`);
    assert.equal(JSON.stringify((await exportPipeline(commands, deps)).configs), text, `pipeline ${i}`);
  }
});

test('isArrayIndex names exactly the keys JavaScript enumerates first', () => {
  const names = ['0', '1', '01', '00', '10', '123', '4294967294', '4294967295', '4294967296', '9999999999', '12345678901', '-1', '1e3', 'a1', '1a', ' 1', ''];
  for (const name of names) {
    const record: Record<string, number> = { zz: 0 };
    record[name] = 1;
    assert.equal(isArrayIndex(name), Object.keys(record)[0] === name, JSON.stringify(name));
  }
});
