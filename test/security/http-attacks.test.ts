/**
 * End-to-end attacks on the running HTTP service: the real binary (`node bin/cfgu.js serve`), auth on, a json-file
 * store, an unreachable postgresql store whose password comes from the environment, and the expression sandbox with
 * two children. Every attack asserts the exact status and problem body, and then that the attack changed nothing:
 * the host was not reached, no state leaked to a later request, the process is alive and a normal request succeeds.
 * A canary environment variable, the store password and the bearer key must never appear in any response.
 *
 * Needs dist/ (`node scripts/build.mjs`).
 */
import { after, afterEach, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, writeFileSync } from 'node:fs';
import { Agent, createServer, get as httpGet, type Server } from 'node:http';
import { connect } from 'node:net';
import { dirname, join } from 'node:path';
import { call, killChildren, removeTempDirs, BIN, serveOnFreePort, tempDir, waitForStatus, type CallOptions, type HttpAnswer, type Spawned } from '../server/helpers.js';

if (!existsSync(join(dirname(BIN), '..', 'dist', 'cli.js'))) throw new Error('dist/cli.js is missing: run `node scripts/build.mjs` first');

const KEY = 'sec-key-3f9a1c7e5b2d';
const CANARY = 'CANARY-c4n4ry-5ecret-0a1b2c3d';
const DB_PASSWORD = 'pg-pa55w0rd-9z8y7x6w';
const STORE_SECRET = 'store-secret-value-4242';
// The expression time budget of the server under test: long enough that a memory bomb reaches the memory limit before
// the time limit even on a loaded machine (at 100-250 ms, a busy 2-core machine answered "time limit" now and then).
const TIMEOUT_MS = 1000;

let dir: string;
let server: Spawned;
let docsServer: Spawned;
let base: string;
let docsBase: string;
/** A local HTTP server that counts hits: any fetch of a `$ref`/`$id`/`$schema` URL would land here. */
let trap: Server;
let trapHits = 0;
let trapUrl: string;
/** The answers of the running test, scanned after it (afterEach) for secrets, paths and stacks. */
const answers: HttpAnswer[] = [];

const auth = { authorization: `Bearer ${KEY}` };

async function send(url: string, options: CallOptions = {}): Promise<HttpAnswer> {
  const r = await call(url, options);
  answers.push(r);
  return r;
}
const post = (text: string | Buffer, headers: Record<string, string> = {}, url = `${base}/export`) =>
  send(url, { method: 'POST', headers: { ...auth, 'content-type': 'application/json', ...headers }, body: text });
const exportBody = (body: unknown, headers: Record<string, string> = {}) => post(JSON.stringify(body), headers);
/** One command declaring key X (and nothing else), with overrides. */
const one = (cfgu: unknown, configs: Record<string, unknown> | null = { X: 'v' }) =>
  exportBody([{ schema: { keys: { X: cfgu } }, ...(configs ? { configs } : {}) }]);

/**
 * Sequential jobs all go to the same sandbox child (the pool picks the child with the fewest jobs in flight, the first
 * one on a tie); two at once go to one child each. `both` runs an attack (or a probe) once on each child.
 */
const both = <T>(fn: () => Promise<T>): Promise<T[]> => Promise.all([fn(), fn()]);

/** Raw HTTP/1.1 over a socket: for request lines and headers node's client would refuse or normalise. */
function raw(url: string, text: string): Promise<string> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const s = connect(Number(u.port), u.hostname, () => s.end(text));
    let out = '';
    s.setEncoding('utf8');
    s.on('data', (c: string) => (out += c));
    s.on('end', () => {
      answers.push({ status: Number(out.split(' ')[1]), headers: {}, body: out, json: <T>() => ({}) as T });
      resolve(out);
    });
    s.on('error', reject);
  });
}

function problem(r: HttpAnswer, status: number, type: string, title: string): Record<string, any> {
  assert.equal(r.status, status, r.body);
  assert.equal(r.headers['content-type'], 'application/problem+json; charset=utf-8');
  const p = JSON.parse(r.body);
  assert.equal(p.type, type);
  assert.equal(p.title, title);
  assert.equal(p.status, status);
  assert.equal(typeof p.detail, 'string');
  return p;
}

const validation = (r: HttpAnswer, errors: Array<{ key: string; rule: string; message: string | RegExp }>, command = 0) => {
  const p = problem(r, 422, 'urn:cfgu:problem:validation-failed', 'Validation Failed');
  assert.equal(p.detail, `${errors.length} key${errors.length === 1 ? '' : 's'} failed validation`);
  assert.equal(p.errors.length, errors.length, r.body);
  errors.forEach((e, i) => {
    assert.equal(p.errors[i].command, command);
    assert.equal(p.errors[i].key, e.key);
    assert.equal(p.errors[i].rule, e.rule);
    if (typeof e.message === 'string') assert.equal(p.errors[i].message, e.message);
    else assert.match(p.errors[i].message, e.message);
  });
  return p;
};

/** The server is alive and still serves a normal request with the store's value and an expression. */
async function stillServing(): Promise<void> {
  assert.equal(server.child.exitCode, null, 'the server process is alive');
  const live = await send(`${base}/live`);
  assert.equal(live.status, 200);
  const r = await exportBody([{ set: 'prod', schema: { keys: { A: { test: '$.value === "pa"' }, B: { const: '{{ $.configs.A.value }}-b' } } } }]);
  assert.equal(r.status, 200, r.body);
  assert.equal(r.body, '{"A":"pa","B":"pa-b"}');
}

before(async () => {
  dir = tempDir('cfgu-sec-');
  writeFileSync(
    join(dir, 'data.json'),
    JSON.stringify([
      { set: '', key: 'A', value: 'a' },
      { set: 'prod', key: 'A', value: 'pa' },
      { set: 'prod', key: 'SECRET', value: STORE_SECRET },
    ]),
  );
  // YAML, so the template below is not JSON-escaped. The db store is unreachable (port 1); its password is rendered
  // from the environment through a regular expression (the trusted render runs in the sandbox children that later
  // serve requests).
  writeFileSync(
    join(dir, '.configu'),
    [
      'stores:',
      '  main: { type: json-file, configuration: { path: data.json }, default: true }',
      '  db:',
      '    type: postgresql',
      '    configuration:',
      '      host: 127.0.0.1',
      '      port: 1',
      '      username: cfgu',
      "      password: '{{ /^[^\\s]+$/.test(CFGU_DB_PASSWORD) ? CFGU_DB_PASSWORD : \"\" }}'",
      '      database: cfgu',
      '      timeout: 300',
      'interface:',
      '  proxy:',
      "    auth: { enabled: true, presharedKeys: ['{{ CFGU_SEC_KEY }}'] }",
      '',
    ].join('\n'),
  );
  trap = createServer((_req, res) => {
    trapHits++;
    res.setHeader('content-type', 'application/json');
    res.end('{"type":"string"}');
  });
  await new Promise<void>((r) => trap.listen(0, '127.0.0.1', r));
  const ta = trap.address();
  trapUrl = `http://127.0.0.1:${typeof ta === 'object' && ta ? ta.port : 0}`;

  ({ server, base } = await startServer());
  ({ server: docsServer, base: docsBase } = await startServer({ CONFIGU_DOCS_PUBLIC: 'true', CONFIGU_EXPRESSION_WORKERS: '1' }));
});

/** A server on the project above, on a port of the system's choosing; resolves when it is ready. */
async function startServer(extra: Record<string, string> = {}): Promise<{ server: Spawned; base: string }> {
  const env = {
    CFGU_CANARY_SECRET: CANARY,
    CFGU_DB_PASSWORD: DB_PASSWORD,
    CFGU_SEC_KEY: KEY,
    CONFIGU_EXPRESSION_WORKERS: '2',
    CONFIGU_EXPRESSION_TIMEOUT_MS: String(TIMEOUT_MS),
    ...extra,
  };
  const { p, base } = await serveOnFreePort(['--config', join(dir, '.configu'), '--workers', '1'], env);
  try {
    // Not /ready: the db store never answers, and a store without a backup that never answered keeps the server
    // not ready (docs/server.md). The server serves meanwhile; /live says it is up.
    await waitForStatus(`${base}/live`, 200);
  } catch (e) {
    throw new Error(`${(e as Error).message}\nstderr: ${p.stderr()}`);
  }
  return { server: p, base };
}

/** No canary env value, store password, bearer key, server path or stack in any body or header of `seen`. */
function assertKeptToItself(seen: HttpAnswer[], server: Spawned): void {
  for (const a of seen) {
    const text = `${JSON.stringify(a.headers)}\n${a.body}`;
    for (const secret of [CANARY, DB_PASSWORD, KEY]) assert.ok(!text.includes(secret), `a response contained a secret: ${text.slice(0, 300)}`);
    assert.ok(!text.includes(dir), `a response contained the server's folder: ${text.slice(0, 300)}`);
    const body = a.body.startsWith('{"openapi"') ? '' : a.body; // the OpenAPI text mentions `.configu` by design
    assert.doesNotMatch(body, /\n\s+at |node_modules|\/work\/|dist\/|\.configu|sandbox-child|cfgu-sandbox\.js/, body.slice(0, 300));
  }
  // The store's secret value is only ever in the answer of the request that asked for it.
  const leaks = seen.filter((a) => a.body.includes(STORE_SECRET) && a.body !== JSON.stringify({ SECRET: STORE_SECRET }));
  assert.deepEqual(leaks.map((a) => a.body.slice(0, 200)), []);
  assert.equal(server.child.exitCode, null, 'the server is alive');
  assert.equal(server.stderr(), '', 'the server wrote nothing on stderr');
}

// Every test is checked on its own: what it received kept the secrets, whatever ran before it.
afterEach(() => {
  const seen = answers.splice(0);
  assertKeptToItself(seen, server);
  assert.equal(docsServer.stderr(), '');
});

after(async () => {
  await killChildren();
  await new Promise<void>((r) => (trap ? trap.close(() => r()) : r()));
  removeTempDirs();
});

describe('the trusted .configu render', () => {
  test('the first job of each child does not see it (the store password went through a regex at start-up)', async () => {
    // A server of its own: no request job has run in either of its children yet.
    const fresh = await startServer();
    try {
      const spy = '{{ JSON.stringify([RegExp.input, RegExp.lastMatch]) }}';
      const ask = () => send(`${fresh.base}/export`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify([{ schema: { keys: { X: { const: spy } } } }]),
      });
      for (const r of await both(ask)) {
        assert.equal(r.status, 200, r.body);
        assert.equal(r.body, '{"X":["",""]}');
        assert.ok(!r.body.includes(DB_PASSWORD));
      }
      assertKeptToItself(answers, fresh.server);
    } finally {
      fresh.server.child.kill('SIGKILL');
      await fresh.server.exited;
    }
  });
});

describe('expressions cannot reach the host, through any route that evaluates', () => {
  const PROBE = 'typeof process + "|" + typeof require + "|" + typeof Buffer + "|" + typeof fetch + "|" + typeof setTimeout';
  const NOTHING = 'undefined|undefined|undefined|undefined|undefined';

  test('const and template parts ({{ }} and <% %>) see no host object', async () => {
    const r = await one({ const: `{{ ${PROBE} }}/<% typeof globalThis.process %>/<% (function () { return this })() === undefined %>` }, null);
    assert.equal(r.status, 200, r.body);
    assert.deepEqual(JSON.parse(r.body), { X: `${NOTHING}/undefined/true` });
  });

  test('test: constructor chains to the global object find no process', async () => {
    const r = await one({ test: '[].constructor.constructor("return typeof process")() === "undefined" && (async function(){}).constructor === Object.getPrototypeOf(async function(){}).constructor' });
    assert.equal(r.status, 200, r.body);
    assert.equal(r.body, '{"X":"v"}');
    const r2 = await one({ const: '{{ Function("return this")().process.mainModule }}' }, null);
    validation(r2, [{ key: 'X', rule: 'const', message: "`const` of key \"X\" failed: Cannot read properties of undefined (reading 'mainModule')" }]);
    const r3 = await one({ test: 'import("node:fs")' });
    validation(r3, [{ key: 'X', rule: 'test', message: /^the test import\("node:fs"\) of key "X" failed: .*import/ }]);
  });

  test('pattern: a regex that looks like code is only ever a regex', async () => {
    const r = await one({ pattern: '^(")\\+process\\.exit\\(1\\)\\+(")$' });
    validation(r, [{ key: 'X', rule: 'pattern', message: 'the value of key "X" does not match the pattern ^(")\\+process\\.exit\\(1\\)\\+(")$' }]);
    const bad = await one({ pattern: '"); process.exit(1); ("' });
    const p = problem(bad, 400, 'urn:cfgu:problem:invalid-schema', 'Invalid Schema');
    assert.equal(p.detail, '`pattern` of key "X" is not a valid regular expression');
    assert.deepEqual(p.issues, [{ path: '/0/schema/keys/X/pattern', message: '`pattern` of key "X" is not a valid regular expression' }]);
    await stillServing();
  });

  test('schema: `pattern`, `format`, property names and required names cannot inject code into the compiled validator', async () => {
    const r = await one(
      {
        schema: {
          type: 'object',
          properties: { "a'+process.exit(1)+'": { type: 'string', pattern: '"+process.exit(1)+"', format: 'x" + process.exit(1) + "' } },
          required: ['b"+process.exit(1)+"'],
        },
      },
      { X: { "a'+process.exit(1)+'": '"+process.exit(1)+"' } },
    );
    validation(r, [
      {
        key: 'X',
        rule: 'schema',
        message: 'the value of key "X" does not match its `schema`: data must have required property \'b"+process.exit(1)+"\', data/a\'+process.exit(1)+\' must match pattern ""+process.exit(1)+""',
      },
    ]);
    const catastrophic = await one({ schema: { type: 'string', pattern: '^(a+)+$' } }, { X: `${'a'.repeat(40)}!` });
    validation(catastrophic, [{ key: 'X', rule: 'schema', message: `the value of key "X" does not match its \`schema\`: exceeded the time limit of ${TIMEOUT_MS} ms` }]);
    await stillServing();
  });

  test('schema: remote `$ref`, `$id` and `$schema` are never fetched; `$data` is not a reference', async () => {
    const ref = await one({ schema: { $ref: `${trapUrl}/s.json` } });
    validation(ref, [{ key: 'X', rule: 'schema', message: `the value of key "X" does not match its \`schema\`: can't resolve reference ${trapUrl}/s.json from id #` }]);
    const id = await one({ schema: { $id: `${trapUrl}/id.json`, type: 'string', allOf: [{ $ref: `${trapUrl}/other.json` }] } });
    validation(id, [{ key: 'X', rule: 'schema', message: `the value of key "X" does not match its \`schema\`: can't resolve reference ${trapUrl}/other.json from id ${trapUrl}/id.json` }]);
    const meta = await one({ schema: { $schema: `${trapUrl}/meta.json`, type: 'string' } });
    const p = problem(meta, 400, 'urn:cfgu:problem:invalid-schema', 'Invalid Schema');
    assert.equal(p.detail, '`schema` of key "X" is not a valid JSON Schema: /$schema is not a meta-schema cfgu can check against');
    const data = await one({ schema: { properties: { a: { const: { $data: '1/b' } } } } }, { X: { a: 1, b: 1 } });
    validation(data, [{ key: 'X', rule: 'schema', message: 'the value of key "X" does not match its `schema`: data/a must be equal to constant' }]);
    assert.equal(trapHits, 0, 'nothing was fetched');
  });

  test('a `$id` registered by one request is not resolvable by the next (both children)', async () => {
    for (const define of await both(() => one({ schema: { $id: 'urn:cfgu:planted', definitions: { s: { type: 'string' } }, $ref: '#/definitions/s' } }))) {
      assert.equal(define.status, 200, define.body);
    }
    for (const use of await both(() => one({ schema: { $ref: 'urn:cfgu:planted#/definitions/s' } }))) {
      validation(use, [{ key: 'X', rule: 'schema', message: 'the value of key "X" does not match its `schema`: can\'t resolve reference urn:cfgu:planted#/definitions/s from id #' }]);
    }
  });
});

describe('no state survives from one request to the next in the same sandbox child', () => {
  test('prototype pollution and library tampering fail, and probes on both children see pristine intrinsics', async () => {
    const attacks: Array<[string, string]> = [
      ['(Object.prototype.polluted = 1, true)', 'Cannot add property polluted, object is not extensible'],
      ['(Object.defineProperty(Array.prototype, "x", { value: 1 }), true)', 'Cannot define property x, object is not extensible'],
      ['(_.templateSettings.interpolate = /x/, true)', "Cannot assign to read only property 'interpolate' of object '[object Object]'"],
      ['(JSON.stringify = () => "pwned", true)', "Cannot assign to read only property 'stringify' of object '[object JSON]'"],
      ['(String.prototype.trim = () => "pwned", true)', "Cannot assign to read only property 'trim' of object '[object String]'"],
      ['z.config({ customError: () => "PWNED" }) || true', 'Cannot add property customError, object is not extensible'],
    ];
    const probe =
      '{{ [typeof ({}).polluted, [].x, JSON.stringify([1]), " a ".trim(), String(_.templateSettings.interpolate) === String(/<%=([\\s\\S]+?)%>/g), z.number().safeParse("s").error.issues[0].message].join("|") }}';
    for (const [source, message] of attacks) {
      for (const r of await both(() => one({ test: source }))) {
        validation(r, [{ key: 'X', rule: 'test', message: `the test ${source} of key "X" failed: ${message}` }]);
      }
      for (const p of await both(() => one({ const: probe }, null))) {
        assert.equal(p.status, 200, p.body);
        assert.deepEqual(JSON.parse(p.body), { X: 'undefined||[1]|a|true|Invalid input: expected number, received string' });
      }
    }
  });

  test('RegExp legacy statics (RegExp.input, $1, lastMatch, ...) do not carry another request\'s value', async () => {
    // Before the fix, the attacker read the victim's stored secret from RegExp.input / RegExp.$1.
    const spy = '{{ JSON.stringify([RegExp.input, RegExp["$_"], RegExp.lastMatch, RegExp.leftContext, RegExp.rightContext, RegExp.$1, RegExp.lastParen]) }}';
    const empty = '{"X":["","","","","","",""]}';
    for (let i = 0; i < 2; i++) {
      const victims = await both(() =>
        exportBody([
          { set: 'prod', schema: { keys: { SECRET: { pattern: '^store-(secret)-value-[0-9]+$', test: 'validator.isAscii($.storedValue)', schema: { type: 'string', pattern: 'secret' } } } } },
        ]),
      );
      for (const victim of victims) {
        assert.equal(victim.status, 200, victim.body);
        assert.equal(victim.body, JSON.stringify({ SECRET: STORE_SECRET }));
      }
      for (const attacker of await both(() => one({ const: spy }, null))) {
        assert.equal(attacker.status, 200, attacker.body);
        assert.equal(attacker.body, empty);
      }
    }
  });

});

describe('deeply nested and oversized JSON', () => {
  const nested = (n: number) => '['.repeat(n) + ']'.repeat(n);

  test('a body of 100k nested arrays is a 413 before it is parsed (issue 31), never a stack overflow; 10k is a 400', async () => {
    const text = nested(100_000);
    assert.ok(text.length <= 1024 * 1024);
    const deep = problem(await post(text), 413, 'urn:cfgu:problem:limit-exceeded', 'Limit Exceeded');
    assert.equal(deep.detail, 'the request body nests more than 10000 arrays or objects inside one another; the limit is 10000');
    const p = problem(await post(nested(10_000)), 400, 'urn:cfgu:problem:invalid-request', 'Invalid Request');
    assert.equal(p.detail, 'the request body is not a valid pipeline: /0 must be object');
    assert.deepEqual(p.issues, [{ path: '/0', message: 'must be object' }]);
    await stillServing();
  });

  test('an override nested 5k deep is a 422 `override` failure (was a 500); 100k deep is refused as a body (413)', async () => {
    const tooDeep = await post(`[{"schema":{"keys":{"X":{}}},"configs":{"X":${nested(100_000)}}}]`);
    assert.equal(problem(tooDeep, 413, 'urn:cfgu:problem:limit-exceeded', 'Limit Exceeded').detail, 'the request body nests more than 10000 arrays or objects inside one another; the limit is 10000');
    for (const n of [5_000, 9_990]) {
      for (const cfgu of ['{}', '{"enum":[1,2]}', '{"test":"true","schema":{"type":"array"}}']) {
        const r = await post(`[{"schema":{"keys":{"X":${cfgu}}},"configs":{"X":${nested(n)}}}]`);
        validation(r, [{ key: 'X', rule: 'override', message: 'the override for key "X" cannot be stored: it is nested too deeply' }]);
      }
    }
    await stillServing();
  });

  test('a `default` and `enum` nested deep are a 400 at every depth (3k deep was a 500: a stack overflow in the checks)', async () => {
    // Declarations nest at most 64 levels (a `schema` 32): every depth beyond is the same 400, found before any
    // recursive step runs.
    // (Deeper than 10,000 levels, the body itself is refused first: 413, in the test above.)
    for (const n of [2000, 3000, 4000, 6000, 9_990]) {
      const r = await post(`[{"schema":{"keys":{"X":{"default":${nested(n)},"enum":[${nested(n)},${nested(n - 1)}]}}}}]`);
      const p = problem(r, 400, 'urn:cfgu:problem:invalid-schema', 'Invalid Schema');
      assert.equal(p.detail, '`default` of key "X" is nested more than 64 levels deep', `depth ${n}`);
      assert.deepEqual(p.issues, [{ path: '/0/schema/keys/X/default', message: p.detail }]);
    }
    const deepSchema = problem(await post(`[{"schema":{"keys":{"X":{"schema":${'{"not":'.repeat(9_990)}{}${'}'.repeat(9_990)}}}}}]`), 400, 'urn:cfgu:problem:invalid-schema', 'Invalid Schema');
    assert.equal(deepSchema.detail, '`schema` of key "X" is nested more than 32 levels deep');
    await stillServing();
  });

  test('a 1 MiB `enum` is checked without freezing the server (was quadratic on the event loop: 40k items froze /live for 6 s)', async () => {
    const items = Array.from({ length: 150_000 }, (_, i) => i);
    // /live keeps answering while the big enums are checked (how fast is measured by the benchmark, not here).
    let done = false;
    let lives = 0;
    const poll = (async () => {
      while (!done) {
        assert.equal((await send(`${base}/live`)).status, 200);
        lives++;
      }
    })();
    const r = await one({ enum: items });
    const dup = await one({ enum: [...items, { a: [1, { b: 2 }] }, 7, { a: [1, { b: 2 }] }] });
    done = true;
    await poll;
    assert.ok(lives > 0, '/live answered while the enums were checked');
    const p = validation(r, [{ key: 'X', rule: 'enum', message: /^the value of key "X" is not one of the allowed values: 0, 1, 2, .*…$/ }]);
    assert.ok(p.errors[0].message.length < 1000, `message of ${p.errors[0].message.length} characters`);
    const d = problem(dup, 400, 'urn:cfgu:problem:invalid-schema', 'Invalid Schema');
    assert.equal(d.detail, '`enum` of key "X" must not contain duplicates (items 150000 and 150002 are equal)');
  });

  test('limits: a body over 1 MiB, 51 commands and 10,001 keys are 413', async () => {
    const big = problem(await post(JSON.stringify([{ schema: { keys: { X: { description: 'x'.repeat(1024 * 1024) } } } }])), 413, 'urn:cfgu:problem:limit-exceeded', 'Limit Exceeded');
    assert.equal(big.detail, 'the request body is larger than the configured limit');
    const cmds = problem(await exportBody(Array.from({ length: 51 }, () => ({ schema: { keys: { A: {} } } }))), 413, 'urn:cfgu:problem:limit-exceeded', 'Limit Exceeded');
    assert.equal(cmds.detail, 'the pipeline has 51 commands; the limit is 50');
    const keys = Object.fromEntries(Array.from({ length: 10_001 }, (_, i) => [`K${i}`, null]));
    const many = problem(await exportBody([{ schema: { keys } }]), 413, 'urn:cfgu:problem:limit-exceeded', 'Limit Exceeded');
    assert.equal(many.detail, 'command 0 declares 10001 keys; the limit is 10000');
  });
});

describe('names: keys, sets and stores', () => {
  test('`__proto__` anywhere in the body is refused; constructor / prototype / hasOwnProperty / toString are plain keys', async () => {
    for (const text of [
      '[{"schema":{"keys":{"__proto__":{}}}}]',
      '[{"schema":{"keys":{"A":{}}},"configs":{"__proto__":{"polluted":1}}}]',
      '[{"schema":{"keys":{"constructor":{}}},"configs":{"constructor":{"prototype":{"polluted":1}}}}]',
    ]) {
      const p = problem(await post(text), 400, 'urn:cfgu:problem:invalid-request', 'Invalid Request');
      assert.equal(p.detail, 'the request body contains a `__proto__` or `constructor.prototype` property, which the server refuses');
    }
    const r = await exportBody([
      {
        schema: { keys: { constructor: { default: 'c' }, prototype: { default: 'p' }, hasOwnProperty: { test: '$.value === "h"' }, toString: { const: '{{ $.configs.constructor.value }}' } } },
        configs: { hasOwnProperty: 'h' },
      },
      { schema: { keys: { valueOf: { default: 'v' } } } },
    ]);
    assert.equal(r.status, 200, r.body);
    assert.equal(r.body, '{"constructor":"c","prototype":"p","hasOwnProperty":"h","toString":"c","valueOf":"v"}');
    // Nothing leaked onto the host's objects: a plain export still has exactly its own key.
    const plain = await exportBody([{ schema: { keys: { A: {} } } }]);
    assert.equal(plain.body, '{"A":"a"}');
  });

  test('very long key names: a valid one round-trips, an invalid one is named in a clipped message', async () => {
    const long = 'K'.repeat(200_000);
    const ok = await exportBody([{ schema: { keys: { [long]: { default: 1 } } } }]);
    assert.equal(ok.status, 200);
    assert.deepEqual(JSON.parse(ok.body), { [long]: 1 });
    const p = problem(await exportBody([{ schema: { keys: { [`${long} x`]: {} } } }]), 400, 'urn:cfgu:problem:invalid-schema', 'Invalid Schema');
    assert.equal(p.detail, `key "${'K'.repeat(64)}…" must match ^[A-Za-z0-9_-]+$`);
  });

  test('set paths: traversal, percent-encoding, NUL, look-alike letters and backslashes are invalid sets', async () => {
    for (const set of ['prod/../etc', '%2e%2e/prod', 'prod\u0000x', '\uff50rod', 'prod\\eu', 'prod//eu', './prod']) {
      const p = problem(await exportBody([{ set, schema: { keys: { A: {} } } }]), 400, 'urn:cfgu:problem:invalid-set', 'Invalid Set');
      assert.match(p.detail, /^set path ".*" has (an invalid segment: key ".*" must match \^\[A-Za-z0-9_-\]\+\$|an empty segment)$/s);
      assert.equal(p.issues[0].path, '/0/set');
    }
    const ok = await exportBody([{ set: '/prod/', schema: { keys: { A: {} } } }]);
    assert.equal(ok.body, '{"A":"pa"}');
  });

  test('store names: paths, a store type, and Object.prototype names are unknown stores', async () => {
    for (const store of ['../../etc/passwd', 'json-file', 'postgresql', '__proto__', 'constructor', 'toString', 'hasOwnProperty', 'main\u0000', 'MAIN']) {
      const p = problem(await exportBody([{ store, schema: { keys: { A: {} } } }]), 400, 'urn:cfgu:problem:unknown-store', 'Unknown Store');
      assert.equal(p.detail, `unknown store "${store}"; known stores: "main", "db"`);
      assert.equal(p.store, store);
      assert.deepEqual(p.knownStores, ['main', 'db']);
    }
  });

  test('an unreachable store is a 503 that names only the store, never its password', async () => {
    const r = await exportBody([{ store: 'db', schema: { keys: { A: {} } } }]);
    const p = problem(r, 503, 'urn:cfgu:problem:store-unavailable', 'Store Unavailable');
    assert.equal(p.detail, 'store "db" cannot be reached or read; retry later');
    assert.deepEqual(Object.keys(p).sort(), ['detail', 'status', 'title', 'type']);
    assert.match(String(r.headers['retry-after']), /^[1-9][0-9]*$/);
    assert.ok(!JSON.stringify(r.headers).includes(DB_PASSWORD) && !r.body.includes(DB_PASSWORD));
  });
});

describe('headers, methods and content types', () => {
  test('X-Request-Id: only a safe id is echoed; CRLF, tabs, long and unicode ids get a fresh UUID', async () => {
    const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
    const echoed = await send(`${base}/live`, { headers: { 'x-request-id': 'abc-123.x:y@z' } });
    assert.equal(echoed.headers['x-request-id'], 'abc-123.x:y@z');
    for (const id of ['a'.repeat(129), 'a\tb', 'a b', 'a"b', 'a,b', '\u00e9t\u00e9']) {
      const r = await send(`${base}/live`, { headers: { 'x-request-id': id } });
      assert.equal(r.status, 200);
      assert.match(String(r.headers['x-request-id']), UUID, id);
    }
    const rawAnswer = await raw(base, 'GET /live HTTP/1.1\r\nHost: x\r\nX-Request-Id: a\r\nSet-Cookie: injected=1\r\nConnection: close\r\n\r\n');
    assert.match(rawAnswer, /^HTTP\/1\.1 200 OK\r\n/);
    assert.doesNotMatch(rawAnswer, /set-cookie/i);
    const bare = await raw(base, 'GET /live HTTP/1.1\r\nHost: x\r\nX-Request-Id: a\rSet-Cookie: injected=1\r\nConnection: close\r\n\r\n');
    assert.match(bare, /^HTTP\/1\.1 400 Bad Request\r\n/);
    assert.doesNotMatch(bare, /set-cookie/i);
    assert.equal((await send(`${base}/live`)).status, 200);
  });

  test('content types: only JSON is parsed, and only in UTF-8 (another charset is refused, not misread)', async () => {
    const body = '[{"schema":{"keys":{"A":{}}}}]';
    for (const ct of ['application/json; charset=utf-8', 'APPLICATION/JSON', 'application/vnd.cfgu+json']) {
      const r = await post(body, { 'content-type': ct });
      assert.equal(r.status, 200, `${ct}: ${r.body}`);
      assert.equal(r.body, '{"A":"a"}');
    }
    for (const [payload, ct] of [
      [body, 'application/json; charset=utf-16'],
      [Buffer.from(body, 'utf16le'), 'application/json; charset=utf-16le'],
    ] as const) {
      const refused = problem(await post(payload, { 'content-type': ct }), 415, 'about:blank', 'Unsupported Media Type');
      assert.equal(refused.detail, 'the request body must be JSON in UTF-8 (Content-Type: application/json; charset=utf-8)');
    }
    for (const ct of ['application/x-www-form-urlencoded', 'text/plain', 'multipart/form-data; boundary=x', 'application/jsonx', 'application/json, text/plain']) {
      const p = problem(await post(body, { 'content-type': ct }), 415, 'about:blank', 'Unsupported Media Type');
      assert.equal(p.detail, 'the request body must be JSON (Content-Type: application/json)');
    }
    const none = await send(`${base}/export`, { method: 'POST', headers: { ...auth }, body });
    assert.equal(problem(none, 415, 'about:blank', 'Unsupported Media Type').detail, 'the request body must be JSON (Content-Type: application/json)');
    const form = await send(`${base}/export`, { method: 'POST', headers: { ...auth, 'content-type': 'application/x-www-form-urlencoded' }, body: 'schema[keys][A]=1' });
    assert.equal(form.status, 415);
  });

  test('method override headers are ignored', async () => {
    const overrides = { 'x-http-method-override': 'POST', 'x-http-method': 'POST', 'x-method-override': 'POST' };
    const r = await send(`${base}/export`, { method: 'GET', headers: { ...auth, ...overrides } });
    assert.equal(problem(r, 405, 'about:blank', 'Method Not Allowed').detail, 'GET is not allowed on /export; allowed: POST');
    assert.equal(r.headers.allow, 'POST');
    const live = await send(`${base}/live`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json', 'x-http-method-override': 'GET' }, body: '[]' });
    assert.equal(problem(live, 405, 'about:blank', 'Method Not Allowed').detail, 'POST is not allowed on /live; allowed: GET, HEAD');
  });

  test('bearer keys: wrong length and right length wrong keys, other schemes, a key in the query are all 401', async () => {
    const attempts: Array<Record<string, string>> = [
      {},
      { authorization: 'Bearer x' },
      { authorization: `Bearer ${'z'.repeat(KEY.length)}` },
      { authorization: `Bearer ${KEY.slice(0, -1)}X` },
      { authorization: `Bearer ${KEY}x` },
      { authorization: `Bearer ${KEY} extra` },
      { authorization: `Basic ${Buffer.from(`cfgu:${KEY}`).toString('base64')}` },
      { authorization: KEY },
      { authorization: `Bearer ${'a'.repeat(5000)}` },
    ];
    for (const headers of attempts) {
      const r = await send(`${base}/export?key=${KEY}&access_token=${KEY}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: '[{"schema":{"keys":{"A":{}}}}]' });
      const p = problem(r, 401, 'urn:cfgu:problem:unauthorized', 'Unauthorized');
      assert.equal(p.detail, 'a valid bearer key is required (Authorization: Bearer <key>)');
      assert.equal(r.headers['www-authenticate'], 'Bearer realm="cfgu"');
    }
    const lower = await send(`${base}/export`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `bearer ${KEY}` }, body: '[{"schema":{"keys":{"A":{}}}}]' });
    assert.equal(lower.status, 200);
  });

  test('/docs and /openapi.json need the key when auth is on; unknown routes answer 401 before 404', async () => {
    for (const path of ['/docs', '/docs/', '/docs/json', '/docs/static/index.html', '/openapi.json', '/nope', '/export/../docs']) {
      const r = await send(`${base}${path}`);
      assert.equal(problem(r, 401, 'urn:cfgu:problem:unauthorized', 'Unauthorized').detail, 'a valid bearer key is required (Authorization: Bearer <key>)');
    }
    const withKey = await send(`${base}/openapi.json`, { headers: auth });
    assert.equal(withKey.status, 200);
    assert.equal(JSON.parse(withKey.body).openapi, '3.1.0');
    const nope = await send(`${base}/nope`, { headers: auth });
    assert.equal(problem(nope, 404, 'about:blank', 'Not Found').detail, 'no route GET /nope');
  });

  test('with public docs, paths under /docs/ that climb out never reach /export without a key', async () => {
    const body = '[{"schema":{"keys":{"A":{}}}}]';
    for (const path of ['/docs/../export', '/docs/%2e%2e/export', '/docs/..%2fexport', '/docs/./../export', '/docs/static/../../export']) {
      const text = await raw(docsBase, `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`);
      assert.match(text, /^HTTP\/1\.1 404 Not Found\r\n/, path);
      assert.ok(text.endsWith(JSON.stringify({ type: 'about:blank', title: 'Not Found', status: 404, detail: `no route POST ${path}` })), text);
    }
    const r = await send(`${docsBase}/openapi.json`);
    assert.equal(r.status, 200);
    const exp = await send(`${docsBase}/export`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    assert.equal(exp.status, 401);
  });
});

describe('denial of service over HTTP', () => {
  test('4 runaway requests in flight (two per sandbox child): /live and requests without expressions are answered meanwhile, the runaways get 422', async () => {
    // What is checked is order, not speed (the benchmark's responsiveness check times /live under runaways): while
    // the runaways hold both sandbox children, with one more queued on each, /live and plain exports are answered
    // before the runaways finish. Each runaway costs its full second of CPU time: four make the point as well as
    // eight did, in half the CPU time.
    const loop = '(() => { while (true) {} })()';
    let done = false;
    const all = Promise.all(Array.from({ length: 4 }, () => one({ test: loop }))).finally(() => (done = true));
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const live = () =>
      new Promise<number>((resolve, reject) => {
        httpGet(`${base}/live`, { agent }, (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        }).on('error', reject);
      });
    // A few answers during the flood prove the point; polling on until the runaways end would only take CPU time from
    // them (their budget is CPU time, so they would end later, not sooner).
    let livesDuringFlood = 0;
    const poll = (async () => {
      while (!done && livesDuringFlood < 3) {
        assert.equal(await live(), 200);
        if (!done) livesDuringFlood++;
      }
      agent.destroy();
    })();
    let plainDuringFlood = 0;
    const plain = (async () => {
      for (let i = 0; i < 5; i++) {
        const r = await exportBody([{ set: 'prod', schema: { keys: { A: {} } } }]);
        assert.equal(r.body, '{"A":"pa"}');
        if (!done) plainDuringFlood++;
      }
    })();
    // Queued behind the runaways, then answered.
    const withExpression = await one({ test: '$.value === "v"' });
    const results = await all;
    await Promise.all([poll, plain]);
    for (const r of results) {
      validation(r, [{ key: 'X', rule: 'test', message: `the test ${loop} of key "X" failed: exceeded the time limit of ${TIMEOUT_MS} ms` }]);
    }
    assert.equal(withExpression.body, '{"X":"v"}');
    assert.ok(livesDuringFlood >= 1, '/live answered while the runaways ran');
    assert.equal(plainDuringFlood, 5, 'every export without expressions answered while the runaways ran');
    await stillServing();
  });

  test('memory bombs in a test and in a const: 422 naming the memory limit; the server keeps serving', async () => {
    const bomb = "'x'.repeat(2**28).split('')";
    for (let i = 0; i < 2; i++) {
      const t = await one({ test: `${bomb}.length > 0` });
      validation(t, [{ key: 'X', rule: 'test', message: `the test ${bomb}.length > 0 of key "X" failed: exceeded the sandbox memory limit of 64 MB` }]);
      const c = await one({ const: `{{ ${bomb} }}` }, null);
      validation(c, [{ key: 'X', rule: 'const', message: '`const` of key "X" failed: exceeded the sandbox memory limit of 64 MB' }]);
      await stillServing();
    }
  });
});

