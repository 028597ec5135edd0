// Wide request bodies (issue 31, item 2): a pipeline declaring thousands of keys is parsed, checked, prepared,
// evaluated and written in slices of the event loop (src/core/slices.ts), so `GET /live` is answered while such a body
// is being worked on. The server runs in this process: the test waits until the server has given the loop away in
// the middle of a wide body (a condition, not a clock), then asks /live, whose answer must come before the wide one.
// How long the loop is held is measured by bench/deep-bodies.mjs --shape keys, not here.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { turnsGiven } from '../../src/core/slices.js';
import { call, removeTempDirs, tempDir, writeJson } from './helpers.js';
import { serveInProcess, stopAfter } from '../helpers/in-process.js';

after(removeTempDirs);

function project(): string {
  const dir = tempDir();
  writeJson(join(dir, 'data.json'), [{ set: '', key: 'K_0_1', value: 'stored' }]);
  return writeJson(join(dir, '.configu'), { stores: { main: { type: 'json-file', configuration: { path: 'data.json' } } } });
}

/** `commands` commands of `keys` keys each, a default each (the names differ per `tag`, so no cache answers). */
function wideBody(tag: string, commands: number, keys: number): unknown[] {
  return Array.from({ length: commands }, (_, c) => ({
    schema: { keys: Object.fromEntries(Array.from({ length: keys }, (_, k) => [`K_${c}_${k}${tag}`, { default: `value-${k}` }])) },
  }));
}

/**
 * Send a wide body; as soon as the server has given the loop away while working on it, ask /live. Returns both
 * answers in the order they arrived.
 */
async function liveDuring(base: string, body: unknown[]): Promise<Array<{ what: string; status: number; text: string }>> {
  const arrived: Array<{ what: string; status: number; text: string }> = [];
  const before = turnsGiven();
  let wideDone = false;
  const wide = call(`${base}/export`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }).then((r) => {
    wideDone = true;
    arrived.push({ what: 'wide', status: r.status, text: r.body });
  });
  // Every turn of the loop: has the server given one away since the body was sent?
  while (!wideDone && turnsGiven() === before) await nextTurn();
  const live = wideDone
    ? Promise.resolve()
    : call(`${base}/live`).then((r) => {
        arrived.push({ what: 'live', status: r.status, text: r.body });
      });
  await Promise.all([wide, live]);
  return arrived;
}

test('/live is answered while a 10,000-key body and a two-command 10,000-key pipeline are worked on', async (t) => {
  const server = stopAfter(t, await serveInProcess(project()));
  for (const [tag, body] of [
    ['a', wideBody('a', 1, 10_000)],
    ['b', wideBody('b', 2, 5_000)],
  ] as const) {
    const arrived = await liveDuring(server.base, body);
    assert.deepEqual(
      arrived.map((a) => a.what),
      ['live', 'wide'],
      `body ${tag}: /live answered before the wide body (the server gave the loop away while working on it)`,
    );
    assert.equal(arrived[0]!.status, 200);
    const answer = arrived[1]!;
    assert.equal(answer.status, 200, answer.text);
    const configs = JSON.parse(answer.text) as Record<string, string>;
    const expected = body.reduce<number>((n, c) => n + Object.keys((c as { schema: { keys: object } }).schema.keys).length, 0);
    assert.equal(Object.keys(configs).length, expected);
    assert.equal(configs[`K_0_0${tag}`], 'value-0');
    assert.equal(configs[`K_${body.length - 1}_4999${tag}`], 'value-4999');
  }
});

test('a wide body that fails the route check in its last command: the same 400 as the whole check gives', async (t) => {
  const server = stopAfter(t, await serveInProcess(project()));
  const body = wideBody('c', 3, 1_000);
  (body[2] as { schema: { keys: Record<string, unknown> } }).schema.keys.K_2_500c = { hidden: 'yes' };
  const sliced = await call(`${server.base}/export`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  assert.equal(sliced.status, 400, sliced.body);
  const problem = sliced.json<Record<string, unknown>>();
  assert.equal(problem.type, 'urn:cfgu:problem:invalid-request');
  assert.equal(problem.detail, 'the request body is not a valid pipeline: /2/schema/keys/K_2_500c/hidden must be boolean');
  assert.deepEqual(problem.issues, [{ path: '/2/schema/keys/K_2_500c/hidden', message: 'must be boolean' }]);
  // A small pipeline with the same mistake, checked at once, gets the same answer.
  const small = await call(`${server.base}/export`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify([{ schema: { keys: { A: {} } } }, { schema: { keys: { A: {} } } }, { schema: { keys: { K_2_500c: { hidden: 'yes' } } } }]),
  });
  assert.equal(small.status, 400, small.body);
  const same = (p: Record<string, unknown>) => ({ ...p, instance: undefined, requestId: undefined });
  assert.deepEqual(same(small.json()), same(problem));
});
