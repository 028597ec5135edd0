// The sliced parser of large bodies (src/server/body-parse.ts) makes what JSON.parse makes, refuses what it refuses,
// and refuses the forbidden prototype properties as the server's own parser does (Fastify's, which is its leaf parser).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import Fastify from 'fastify';
import { BodyParseError, LARGE_BODY, parseBodySteps, parseLargeBody } from '../../src/server/http/body/body-parse.js';
import { runAtOnce } from '../../src/core/slices.js';

const serverParser = Fastify().getDefaultJsonParser('error', 'error');
const parse = (text: string) => parseLargeBody(text, serverParser, {});
const pad = ' '.repeat(5000);

/** Texts with arrays and objects longer and shorter than a leaf, in every position, with spacing and escapes. */
function samples(): string[] {
  const wide = JSON.stringify({ keys: Object.fromEntries(Array.from({ length: 3000 }, (_, k) => [`K${k}`, k % 3 ? { default: `v\n"${k}"\u00e9` } : null])) });
  const long = JSON.stringify(['x'.repeat(9000), -1.5e3, true, false, null, [], {}, [[[]]], { a: { b: [1, 2, { c: 'd' }] } }]);
  const nested = JSON.stringify([{ a: Array.from({ length: 2000 }, (_, i) => ({ i, s: '\\"]}[{' })) }, Array.from({ length: 3000 }, (_, i) => i)]);
  const spaced = `${pad}[${pad}{${pad}"a"${pad}:${pad}[${pad}]${pad},"b":{${pad}}${pad}}${pad},${pad}1${pad}]${pad}`;
  const duplicate = `{"a":1,"b":[${'0,'.repeat(3000)}0],"a":2}`;
  const indexKeys = `{"b":1,"10":2,"2":3,"x":[${'"y",'.repeat(2000)}"z"]}`;
  return [wide, long, nested, spaced, duplicate, indexKeys, JSON.stringify(JSON.parse(wide), null, 2), `\ufeff${long}`];
}

test('large texts: the value JSON.parse makes, property order and duplicate keys included', async () => {
  for (const text of samples()) {
    const expected = JSON.parse(text.replace(/^\ufeff/, ''));
    const value = await parse(text);
    assert.deepEqual(value, expected);
    assert.equal(JSON.stringify(value), JSON.stringify(expected));
  }
});

test('texts that are not JSON are refused as such, wherever the mistake is', async () => {
  const good = samples()[2]!;
  const broken = [
    `${good}x`,
    good.slice(0, -1),
    good.replace('"s":', '"s" '),
    good.replace('[{"a":', '[{a:'),
    `[${'1,'.repeat(3000)}]`,
    `{${'"a":1,'.repeat(3000)}}`,
    `[${'1,'.repeat(3000)}01]`,
    `[${'"a",'.repeat(3000)}"\u0001"]`,
    `[${'1,'.repeat(3000)}\ufeff1]`,
    `[${'1,'.repeat(3000)}1]]`,
    `[${'1,'.repeat(3000)}1`,
    `[${'1 '.repeat(3000)}1]`,
    `{${'"a":1,'.repeat(3000)}"b"}`,
  ];
  for (const text of broken) {
    assert.throws(() => JSON.parse(text));
    await assert.rejects(parse(text), (e: unknown) => e instanceof BodyParseError && e.kind === 'invalid', text.slice(0, 40));
  }
});

test('`__proto__` and `constructor.prototype` anywhere are refused as forbidden (only when the text is JSON)', async () => {
  const filler = `"f":[${'1,'.repeat(3000)}1]`;
  const forbidden = [
    `{${filler},"__proto__":{"x":1}}`,
    `{${filler},"\\u005f_proto__":1}`,
    `[{${filler}},{"a":{"__proto__":1}}]`,
    `{${filler},"constructor":{"prototype":{}}}`,
    `{"constructor":{${filler},"prototype":1}}`,
    `[{${filler}},{"constructor":{"prototype":1}}]`,
  ];
  for (const text of forbidden) {
    await assert.rejects(parse(text), (e: unknown) => e instanceof BodyParseError && e.kind === 'forbidden', text.slice(-40));
  }
  // Not JSON after the forbidden name: not JSON (what the server says of such a body).
  await assert.rejects(parse(`{${filler},"__proto__":1,}`), (e: unknown) => e instanceof BodyParseError && e.kind === 'invalid');
  // A `constructor` that is not an object holding `prototype` is an ordinary key.
  assert.deepEqual(await parse(`{${filler},"constructor":{"p":1}}`), JSON.parse(`{${filler},"constructor":{"p":1}}`));
});

test('run at once, the steps give the same value; bodies up to LARGE_BODY are left to the server parser', () => {
  const text = samples()[0]!;
  assert.ok(text.length > LARGE_BODY);
  assert.deepEqual(runAtOnce(parseBodySteps(text, JSON.parse)), JSON.parse(text));
});
