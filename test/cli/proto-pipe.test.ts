/** A key named `__proto__` survives the pipe: `cfgu eval | cfgu eval` and `cfgu eval | cfgu export` carry it. */
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { parseEvalResult } from '../../src/cli/eval-format.js';
import { closeSandbox, killChildren, project, removeTempDirs, runCli } from './helpers.js';

after(async () => {
  killChildren();
  removeTempDirs();
  await closeSandbox();
});

describe('__proto__ through the pipe', () => {
  test('parseEvalResult keeps it as an own key, in order', () => {
    const text = JSON.stringify({
      A: { key: 'A', value: 'a', origin: 'store', cfgu: {}, set: '' },
    }).replace(/^\{/, '{"__proto__":{"key":"__proto__","value":"p","origin":"store","cfgu":{},"set":"s"},');
    const result = parseEvalResult(text);
    assert.deepEqual(Object.keys(result), ['__proto__', 'A']);
    assert.equal(Object.getPrototypeOf(result), Object.prototype);
    assert.deepEqual(Object.getOwnPropertyDescriptor(result, '__proto__')?.value, { key: '__proto__', value: 'p', origin: 'store', cfgu: {}, set: 's' });
  });

  test('cfgu eval | cfgu eval | cfgu export', async () => {
    const dir = project({
      // Text, not an object literal: `__proto__: {}` in a literal would set the prototype.
      'first.cfgu.json': '{ "keys": { "__proto__": {}, "A": {} } }',
      'second.cfgu.json': { keys: { B: { const: '{{ $.configs.__proto__.value }}-{{ $.configs.A.value }}' } } },
      'data.json': [
        { set: 'prod', key: '__proto__', value: 'p' },
        { set: 'prod', key: 'A', value: 'a' },
      ],
    });
    const first = await runCli(['eval', '--set', 'prod', '--schema', 'first.cfgu.json'], { cwd: dir });
    assert.equal(first.code, 0, first.stderr);
    assert.ok(first.stdout.includes('"__proto__": {'), first.stdout);
    const second = await runCli(['eval', '--schema', 'second.cfgu.json'], { cwd: dir, stdin: first.stdout });
    assert.equal(second.code, 0, second.stderr);
    const parsed = JSON.parse(second.stdout) as Record<string, { value: string; origin: string }>;
    assert.deepEqual(Object.keys(parsed), ['__proto__', 'A', 'B']);
    assert.equal(parsed.B!.value, 'p-a');
    const exported = await runCli(['export', '--format', 'json'], { cwd: dir, stdin: second.stdout });
    assert.equal(exported.code, 0, exported.stderr);
    assert.equal(exported.stdout, '{\n  "__proto__": "p",\n  "A": "a",\n  "B": "p-a"\n}\n');
  });
});
