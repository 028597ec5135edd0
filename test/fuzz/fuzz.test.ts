/**
 * A short, seeded fuzz campaign against the real binary (`cfgu serve --workers 1` on a fixture), with the oracle of
 * test/fuzz/oracle.ts, plus checks of the oracle and the generator themselves. Requests go one at a time, so the
 * campaign replays exactly; the long, concurrent campaign is `node scripts/fuzz.mjs`.
 */
import { before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { classOf, groupFindings, nondeterminismCheck, parseResponses, readCaseFile, replayAll, ROOT, runCampaign, type CampaignResult, type ReplayResult } from './campaign.js';
import { generateCase, emit, Entries, Raw } from './generator.js';
import { checkAnswer, documentedStatuses, normalizeAnswer, STORE_CANARY, type Answer, type Finding } from './oracle.js';

/**
 * Oracle checks that current code is KNOWN to fail, each with the issue-10 finding it belongs to. An entry is
 * `check@family-prefix` (or a bare check). Remove an entry once its fix is merged; anything the oracle finds that is
 * not listed here fails the test.
 */
const KNOWN_FAILURES: string[] = [
  // a memory bomb ends as `memory-limit` or as `time-limit` (a GC storm near the heap limit), load- and heap-dependent
  'nondeterministic-limit-kind@expression/alloc',
  // finding 17, left under heavy load only (load average ~20 on 2 cores): a light job's first schema compile passes
  // the 100 ms CPU budget (schema/deep, schema/huge-number), a bomb's re-run attempts pass the request's CPU budget
  'nondeterministic-time-limit',
];

const SEED = 20_260_101;
const REQUESTS = 200;
/**
 * The servers of this file: `--workers 1` (in-process) with one sandbox child (plus the warm spare). Requests go one
 * at a time, so a second child would only add start-up CPU time (each child costs about a second to load and seal).
 */
const WORKERS = 1;
const SERVER_ENV = { CONFIGU_EXPRESSION_WORKERS: '1' };

const isKnown = (f: Finding) =>
  KNOWN_FAILURES.some((k) => {
    const [check, family] = k.split('@');
    return f.check === check && (family === undefined || f.family.startsWith(family));
  });

const answer = (over: Partial<Answer>): Answer => ({ status: 200, contentType: 'application/json; charset=utf-8', headers: {}, body: '{}', ms: 1, ...over });
const problem = (status: number, extra = '') =>
  answer({ status, contentType: 'application/problem+json; charset=utf-8', body: `{"type":"about:blank","title":"T","status":${status},"detail":"d"${extra}}` });

describe('the oracle', () => {
  const ctx = { statuses: documentedStatuses(ROOT), secretsPaths: ['/srv/fixture-dir'] };
  const c = generateCase(7, 3);
  const checks = (a: Answer) => checkAnswer(c, a, ctx).map((f) => f.check);

  test('documented statuses are read from docs/server.md', () => {
    const s = documentedStatuses(ROOT);
    for (const code of [200, 400, 413, 415, 422, 503]) assert.ok(s.has(code), String(code));
    assert.ok(!s.has(418));
  });

  test('accepts a plain answer and a well-formed problem', () => {
    assert.deepEqual(checks(answer({ body: `{"A":"${c.canary}"}` })), []);
    assert.deepEqual(checks(problem(422)), []);
  });

  test('flags each broken rule', () => {
    assert.deepEqual(checks(problem(500)), ['status-500']);
    assert.deepEqual(checks(problem(418)), ['status-undocumented']);
    assert.deepEqual(checks(answer({ status: 400, body: '{"error":"Bad Request"}' })), ['not-problem-json']);
    assert.deepEqual(checks(answer({ status: 400, contentType: 'application/problem+json', body: '{"type":"x","title":"t","status":422,"detail":"d"}' })), ['problem-status']);
    assert.deepEqual(checks(problem(422, ',"x":"Error: x\\n    at f (a:1:2)"')), ['stack']);
    assert.deepEqual(checks(problem(422, ',"x":"in /srv/fixture-dir"')), ['path']);
    assert.deepEqual(checks(answer({ body: '{"A":"/home/app/src/x.ts:12"}' })), ['path']);
    assert.deepEqual(checks(answer({ body: `{"A":"${generateCase(7, 4).canary}"}` })), ['canary-leak']);
    assert.deepEqual(checks(answer({ body: `{"A":"${STORE_CANARY}-main"}` })), ['store-canary']);
    assert.deepEqual(checks(answer({ error: 'timeout after 5 ms', status: 0 })), ['no-answer-timeout']);
    assert.deepEqual(checks(answer({ error: 'reset: ECONNRESET', status: 0 })), ['no-answer-reset']);
  });

  test('a path the request itself contains is not a leak', () => {
    const withPath = { ...c, body: '[{"schema":{"keys":{"A":{"schema":{"$ref":"file:///etc/passwd"}}}}}]' };
    assert.deepEqual(checkAnswer(withPath, problem(400, ',"x":"cannot resolve file:///etc/passwd"'), ctx), []);
  });

  test('answers compare without volatile fields', () => {
    assert.equal(normalizeAnswer(answer({ body: '{"uptime":1.5}' })), normalizeAnswer(answer({ body: '{"uptime":92}' })));
    assert.equal(normalizeAnswer(problem(500, ',"requestId":"a"')), normalizeAnswer(problem(500, ',"requestId":"b"')));
    assert.notEqual(normalizeAnswer(problem(422, ',"x":1')), normalizeAnswer(problem(422, ',"x":2')));
  });

  test('nondeterminism is classed by what differs: the kind of limit, a time limit, a memory limit, anything else', () => {
    const failed = (why: string) => problem(422, `,"errors":[{"key":"X","message":"the test of key \\"X\\" failed: ${why}"}]`);
    const time = failed('exceeded the time limit of 100 ms');
    const memory = failed('exceeded the sandbox memory limit of 64 MB');
    assert.equal(nondeterminismCheck('later', time, memory), 'nondeterministic-limit-kind');
    assert.equal(nondeterminismCheck('fresh-server', memory, time), 'nondeterministic-limit-kind');
    // a limit where the other answer has none, or another key's failure besides, is not a limit-kind flip
    assert.equal(nondeterminismCheck('later', answer({ body: '{"X":"1"}' }), time), 'nondeterministic-time-limit');
    assert.equal(nondeterminismCheck('later', problem(422, ',"rule":"cpu-budget"'), time), 'nondeterministic-time-limit');
    assert.equal(nondeterminismCheck('fresh-server', memory, answer({ body: '{"X":"1"}' })), 'nondeterministic-memory-limit');
    assert.equal(nondeterminismCheck('later', time, problem(422, `,"errors":[{"key":"Y","message":"the test of key \\"X\\" failed: exceeded the sandbox memory limit of 64 MB"}]`)), 'nondeterministic-time-limit');
    assert.equal(nondeterminismCheck('fresh-server', failed('yes'), failed('no')), 'nondeterministic-fresh-server');
    assert.equal(nondeterminismCheck('later', answer({ body: '{"X":"1"}' }), answer({ body: '{"X":"2"}' })), 'nondeterministic-later');
  });

  test('raw responses are split and decoded (content length, chunked)', () => {
    const raw = Buffer.from('HTTP/1.1 400 Bad Request\r\nContent-Length: 2\r\n\r\n{}HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n');
    const r = parseResponses(raw);
    assert.deepEqual(r.map((x) => [x.status, x.body]), [[400, '{}'], [200, 'abc']]);
  });
});

describe('the generator', () => {
  test('a case is a function of (seed, index)', () => {
    assert.deepEqual(generateCase(42, 17), generateCase(42, 17));
    assert.notDeepEqual(generateCase(42, 17), generateCase(43, 17));
    const canaries = new Set(Array.from({ length: 300 }, (_, i) => generateCase(1, i).canary));
    assert.equal(canaries.size, 300);
  });

  test('writes JSON texts JSON.stringify cannot', () => {
    assert.equal(emit(new Entries([['__proto__', 1], ['a', new Raw('1e400')], ['a', [null]]])), '{"__proto__":1,"a":1e400,"a":[null]}');
  });

  test('covers every family in a short campaign', () => {
    const families = new Set(Array.from({ length: REQUESTS }, (_, i) => generateCase(SEED, i).family.split('/')[0]));
    assert.deepEqual([...families].sort(), ['big', 'expression', 'http', 'mutated', 'numbers', 'raw', 'schema', 'valid']);
  });
});

describe('a short campaign against the binary', { timeout: 600_000 }, () => {
  let result: CampaignResult;

  test(`seed ${SEED}, ${REQUESTS} requests, half re-sent later and again to a fresh server`, async (t) => {
    result = await runCampaign({ seed: SEED, requests: REQUESTS, profile: 'quick', concurrency: 1, resendShare: 0.5, freshServer: true, timeoutMs: 60_000, workers: WORKERS, env: SERVER_ENV });
    // the campaign did exercise the server: answers of every kind, none missing
    const answered = result.answers.filter((a) => !a.error).length;
    assert.ok(answered >= REQUESTS * 0.95, `only ${answered} of ${REQUESTS} answered`);
    for (const s of ['200', '400', '422']) assert.ok((result.statusCounts[s] ?? 0) > 5, `few ${s} answers: ${JSON.stringify(result.statusCounts)}`);
    const unknown = result.findings.filter((f) => !isKnown(f));
    const lines = [...groupFindings(unknown)].map(([k, fs]) => `${k} (${fs.length}x) case ${fs[0]!.index}: ${fs[0]!.message.slice(0, 1500)}`);
    assert.deepEqual(lines, [], `replay one with: node scripts/fuzz.mjs --seed ${SEED} --requests ${REQUESTS} --profile quick --concurrency 1 --workers 1 --resend 0.5`);
    const known = new Set(result.findings.filter(isKnown).map(classOf));
    if (known.size) t.diagnostic(`known failures still present: ${[...known].join(', ')}`);
  });
});

describe('committed case files replay clean (except known failures)', { timeout: 600_000 }, () => {
  const dir = join(ROOT, 'test', 'fuzz', 'cases');
  let names: string[] = [];
  try {
    names = readdirSync(dir).filter((f) => f.endsWith('.json')).sort();
  } catch {
    /* no cases yet */
  }
  // all files on two shared servers (replayAll): each file's sequence in order on one, the reverse on the other
  let results: ReplayResult[] = [];
  before(async () => {
    results = await replayAll(names.map((n) => readCaseFile(join(dir, n))), { timeoutMs: 60_000, workers: WORKERS, env: SERVER_ENV });
  });
  names.forEach((name, i) => {
    test(name, (t) => {
      const { findings, answers } = results[i]!;
      assert.ok(answers.length > 0 && answers.every((a) => !a.error), `unanswered: ${answers.map((a) => a.error).join(', ')}`);
      const unknown = findings.filter((f) => !isKnown(f));
      assert.deepEqual(unknown.map((f) => `${classOf(f)}: ${f.message.slice(0, 300)}`), []);
      if (findings.length) t.diagnostic(`known failure still present: ${[...new Set(findings.map(classOf))].join(', ')}`);
    });
  });
});
