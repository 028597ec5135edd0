/**
 * The rows of the error catalogue (src/core/error-catalogue.ts), one per code: each maps an error of its code to the
 * problem with its own status, type and title, with the body members, headers and log level the row derives, and to
 * its CLI exit code and lines. Every class in src/ that extends CfguError has a row.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  BodyRefusedError,
  BudgetExceededError,
  ReadOnlyStoreError,
  WriteBreaksError,
  WriteForbiddenError,
  CfguError,
  ConfigurationError,
  ConsoleLoopbackOnlyError,
  ERROR_CATALOGUE,
  ErrorCodes,
  EXIT_FAILED,
  EXIT_USAGE,
  ForbiddenError,
  InputError,
  LimitError,
  RateLimitedError,
  RevisionConflictError,
  SandboxBusyError,
  SandboxUnavailableError,
  StoreUnavailableError,
  UnauthorizedError,
  UnknownSchemaError,
  UnknownStoreError,
  ValidationError,
  type ErrorCode,
} from '../../src/core/index.js';
import { toProblem, unauthorizedReply, type ProblemReply } from '../../src/server/http/problem.js';
import { errorLines, exitCodeOf } from '../../src/cli/errors.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '../..');

/** For every code: an error of it, the whole answer the server gives, and the CLI's exit code and lines. */
const cases: Record<ErrorCode, { error: CfguError; reply: ProblemReply; exit: number; lines: string[] }> = {
  [ErrorCodes.INVALID_INPUT]: {
    error: new InputError(ErrorCodes.INVALID_INPUT, 'the pipeline is empty', [{ path: '', message: 'is empty' }]),
    reply: { problem: { type: 'urn:cfgu:problem:invalid-request', title: 'Invalid Request', status: 400, detail: 'the pipeline is empty', issues: [{ path: '', message: 'is empty' }] } },
    exit: 2,
    lines: ['cfgu eval: the pipeline is empty'],
  },
  [ErrorCodes.INVALID_SCHEMA]: {
    error: new InputError(ErrorCodes.INVALID_SCHEMA, 'bad schema:\n  two lines', [
      { path: '/0/schema', message: 'bad' },
      { path: '', message: 'worse' },
    ]),
    reply: {
      problem: {
        type: 'urn:cfgu:problem:invalid-schema',
        title: 'Invalid Schema',
        status: 400,
        detail: 'bad schema:\n  two lines',
        issues: [
          { path: '/0/schema', message: 'bad' },
          { path: '', message: 'worse' },
        ],
      },
    },
    exit: 2,
    lines: ['cfgu eval: bad schema:; two lines', '  /0/schema: bad', '  worse'],
  },
  [ErrorCodes.INVALID_KEY]: {
    error: new InputError(ErrorCodes.INVALID_KEY, 'bad key', [{ path: '/0/schema/keys/a b', message: 'bad key' }]),
    reply: { problem: { type: 'urn:cfgu:problem:invalid-key', title: 'Invalid Key', status: 400, detail: 'bad key', issues: [{ path: '/0/schema/keys/a b', message: 'bad key' }] } },
    exit: 2,
    lines: ['cfgu eval: bad key'],
  },
  [ErrorCodes.INVALID_SET]: {
    error: new InputError(ErrorCodes.INVALID_SET, 'bad set', Array.from({ length: 25 }, (_, i) => ({ path: `/${i}/set`, message: 'bad' }))),
    reply: {
      problem: {
        type: 'urn:cfgu:problem:invalid-set',
        title: 'Invalid Set',
        status: 400,
        detail: 'bad set',
        // At most 20 issues in a body; the CLI prints them all.
        issues: Array.from({ length: 20 }, (_, i) => ({ path: `/${i}/set`, message: 'bad' })),
      },
    },
    exit: 2,
    lines: ['cfgu eval: bad set', ...Array.from({ length: 25 }, (_, i) => `  /${i}/set: bad`)],
  },
  [ErrorCodes.UNKNOWN_STORE]: {
    error: new UnknownStoreError('prod', ['main']),
    reply: {
      problem: { type: 'urn:cfgu:problem:unknown-store', title: 'Unknown Store', status: 400, detail: 'unknown store "prod"; known stores: "main"', knownStores: ['main'], store: 'prod' },
    },
    exit: 2,
    lines: ['cfgu eval: unknown store "prod"; known stores: "main"'],
  },
  [ErrorCodes.UNKNOWN_SCHEMA]: {
    error: new UnknownSchemaError('ap', ['app', 'api']),
    reply: {
      problem: {
        type: 'urn:cfgu:problem:unknown-schema',
        title: 'Unknown Schema',
        status: 400,
        detail: 'unknown schema "ap": did you mean "app" or "api"?',
        schema: 'ap',
        closestSchemas: ['app', 'api'],
      },
    },
    exit: 2,
    lines: ['cfgu eval: unknown schema "ap": did you mean "app" or "api"?'],
  },
  [ErrorCodes.LIMIT_EXCEEDED]: {
    error: new LimitError('too many commands'),
    reply: { problem: { type: 'urn:cfgu:problem:limit-exceeded', title: 'Limit Exceeded', status: 413, detail: 'too many commands' } },
    exit: 2,
    lines: ['cfgu eval: too many commands'],
  },
  [ErrorCodes.VALIDATION_FAILED]: {
    error: new ValidationError([{ command: 0, key: 'A', rule: 'required', message: 'key "A" is required' }]),
    reply: {
      problem: {
        type: 'urn:cfgu:problem:validation-failed',
        title: 'Validation Failed',
        status: 422,
        detail: '1 key failed validation',
        errors: [{ command: 0, key: 'A', rule: 'required', message: 'key "A" is required' }],
      },
    },
    exit: 1,
    lines: ['cfgu eval: 1 key failed validation:', 'command 0, key A, rule required: key "A" is required'],
  },
  [ErrorCodes.BUDGET_EXCEEDED]: {
    error: new BudgetExceededError('cpu-budget', 'over budget'),
    reply: { problem: { type: 'urn:cfgu:problem:budget-exceeded', title: 'Budget Exceeded', status: 422, detail: 'over budget', rule: 'cpu-budget' } },
    exit: 1,
    lines: ['cfgu eval: over budget'],
  },
  [ErrorCodes.STORE_UNAVAILABLE]: {
    error: new StoreUnavailableError('main', 'connection refused', 6.2),
    reply: {
      problem: { type: 'urn:cfgu:problem:store-unavailable', title: 'Store Unavailable', status: 503, detail: 'store "main" cannot be reached or read; retry later' },
      headers: { 'retry-after': '7' },
      log: 'warn',
    },
    exit: 1,
    lines: ['cfgu eval: store "main" is unavailable: connection refused'],
  },
  [ErrorCodes.SANDBOX_UNAVAILABLE]: {
    error: new SandboxUnavailableError('no child'),
    reply: {
      problem: { type: 'urn:cfgu:problem:sandbox-unavailable', title: 'Expressions Unavailable', status: 503, detail: 'the expression sandbox is not available; retry later' },
      headers: { 'retry-after': '5' },
      log: 'error',
    },
    exit: 1,
    lines: ['cfgu eval: no child'],
  },
  [ErrorCodes.SANDBOX_BUSY]: {
    error: new SandboxBusyError('queue full', 0.2),
    reply: { problem: { type: 'urn:cfgu:problem:sandbox-busy', title: 'Expressions Busy', status: 503, detail: 'queue full' }, headers: { 'retry-after': '1' } },
    exit: 1,
    lines: ['cfgu eval: queue full'],
  },
  [ErrorCodes.UNAUTHORIZED]: {
    error: new UnauthorizedError('token expired'),
    reply: {
      problem: { type: 'urn:cfgu:problem:unauthorized', title: 'Unauthorized', status: 401, detail: 'a valid bearer key is required (Authorization: Bearer <key>)' },
      headers: { 'www-authenticate': 'Bearer realm="cfgu"' },
    },
    exit: 2,
    lines: ['cfgu eval: a valid bearer key is required (Authorization: Bearer <key>)'],
  },
  [ErrorCodes.FORBIDDEN]: {
    error: new ForbiddenError([{ command: 1, store: 'main', set: 'prod' }], 3),
    reply: {
      problem: {
        type: 'urn:cfgu:problem:forbidden',
        title: 'Forbidden',
        status: 403,
        detail: '1 of 3 commands is outside the scope of this credential: command 1 (store "main", set "prod")',
        refused: [{ command: 1, store: 'main', set: 'prod' }],
      },
    },
    exit: 2,
    lines: ['cfgu eval: 1 of 3 commands is outside the scope of this credential: command 1 (store "main", set "prod")'],
  },
  [ErrorCodes.RATE_LIMITED]: {
    error: new RateLimitedError(10, 60, 12),
    reply: {
      problem: { type: 'urn:cfgu:problem:rate-limited', title: 'Too Many Requests', status: 429, detail: 'more than 10 requests in 60 s; retry after 12 s' },
      headers: { 'retry-after': '12' },
    },
    exit: 1,
    lines: ['cfgu eval: more than 10 requests in 60 s; retry after 12 s'],
  },
  [ErrorCodes.UNSUPPORTED_CHARSET]: {
    error: new BodyRefusedError(ErrorCodes.UNSUPPORTED_CHARSET),
    reply: {
      problem: {
        type: 'about:blank',
        title: 'Unsupported Media Type',
        status: 415,
        detail: 'the request body must be JSON in UTF-8 (Content-Type: application/json; charset=utf-8)',
      },
    },
    exit: 2,
    lines: ['cfgu eval: the request body must be JSON in UTF-8 (Content-Type: application/json; charset=utf-8)'],
  },
  [ErrorCodes.FORBIDDEN_PROPERTY]: {
    error: new BodyRefusedError(ErrorCodes.FORBIDDEN_PROPERTY),
    reply: {
      problem: {
        type: 'urn:cfgu:problem:invalid-request',
        title: 'Invalid Request',
        status: 400,
        detail: 'the request body contains a `__proto__` or `constructor.prototype` property, which the server refuses',
      },
    },
    exit: 2,
    lines: ['cfgu eval: the request body contains a `__proto__` or `constructor.prototype` property, which the server refuses'],
  },
  [ErrorCodes.REVISION_CONFLICT]: {
    error: new RevisionConflictError('main', 'prod', 5, 7),
    reply: {
      problem: {
        type: 'urn:cfgu:problem:revision-conflict',
        title: 'Revision Conflict',
        status: 409,
        detail: 'set "prod" of store "main" is at revision 7, not 5: it changed since it was read; nothing was written',
        store: 'main',
        set: 'prod',
        expectedRevision: 5,
        currentRevision: 7,
      },
    },
    exit: 1,
    lines: ['cfgu eval: set "prod" of store "main" is at revision 7, not 5: it changed since it was read; nothing was written'],
  },
  [ErrorCodes.WRITE_BREAKS]: {
    error: new WriteBreaksError([{ schema: 'app', set: 'prod', status: 'breaks', changed: ['A'], failures: [{ key: 'A', rule: 'enum', message: 'bad' }] }]),
    reply: {
      problem: {
        type: 'urn:cfgu:problem:write-breaks',
        title: 'Write Breaks a Schema',
        status: 422,
        detail: 'the write would make schema "app" at set "prod" fail, which passed before; nothing was written (allowBreaking needs the right to break)',
        impact: [{ schema: 'app', set: 'prod', status: 'breaks', changed: ['A'], failures: [{ key: 'A', rule: 'enum', message: 'bad' }] }],
      },
    },
    exit: 1,
    lines: ['cfgu eval: the write would make schema "app" at set "prod" fail, which passed before; nothing was written (allowBreaking needs the right to break)'],
  },
  [ErrorCodes.READ_ONLY_STORE]: {
    error: new ReadOnlyStoreError('main'),
    reply: {
      problem: {
        type: 'urn:cfgu:problem:read-only-store',
        title: 'Read-Only Store',
        status: 403,
        detail: 'store "main" is read-only (.configu declares it readOnly: true); nothing was written',
        store: 'main',
      },
    },
    exit: 2,
    lines: ['cfgu eval: store "main" is read-only (.configu declares it readOnly: true); nothing was written'],
  },
  [ErrorCodes.WRITE_FORBIDDEN]: {
    error: new WriteForbiddenError('main', 'prod', 'write', ['A']),
    reply: {
      problem: {
        type: 'urn:cfgu:problem:forbidden',
        title: 'Forbidden',
        status: 403,
        detail: 'this credential may not write key "A" of set "prod" in store "main"; nothing was written',
        store: 'main',
        set: 'prod',
        right: 'write',
        keys: ['A'],
      },
    },
    exit: 2,
    lines: ['cfgu eval: this credential may not write key "A" of set "prod" in store "main"; nothing was written'],
  },
  [ErrorCodes.CONSOLE_LOOPBACK_ONLY]: {
    error: new ConsoleLoopbackOnlyError(),
    reply: {
      problem: {
        type: 'urn:cfgu:problem:console-loopback-only',
        title: 'Console on Loopback Only',
        status: 403,
        detail: 'without authentication the console is served to loopback clients only (127.0.0.0/8, ::1); open it on this host, or turn authentication on (interface.proxy.auth.enabled with a key or credential, or CONFIGU_AUTH_ENABLED) to serve it to other addresses',
      },
    },
    exit: 2,
    lines: ['cfgu eval: without authentication the console is served to loopback clients only (127.0.0.0/8, ::1); open it on this host, or turn authentication on (interface.proxy.auth.enabled with a key or credential, or CONFIGU_AUTH_ENABLED) to serve it to other addresses'],
  },
  [ErrorCodes.INVALID_CONFIGURATION]: {
    error: new ConfigurationError('is not an object', join(process.cwd(), 'conf', '.configu'), 'stores'),
    // Never an answer to a request: met during one anyway, it is an unexpected error.
    reply: {
      problem: { type: 'about:blank', title: 'Internal Server Error', status: 500, detail: 'the server could not process the request; quote the request id to the operator', requestId: 'req-1' },
      log: 'error',
    },
    exit: 2,
    lines: [`cfgu eval: ${join('conf', '.configu')}: stores: is not an object`],
  },
};

test('each row answers an error of its code with its own status, type, title, members, headers and log level', () => {
  assert.deepEqual(Object.keys(cases).sort(), Object.keys(ERROR_CATALOGUE).sort());
  for (const [code, c] of Object.entries(cases)) {
    const entry = ERROR_CATALOGUE[code as ErrorCode];
    assert.equal(c.error.code, code);
    assert.ok(c.error instanceof entry.raisedAs, `${code}: raised as ${entry.errorClass}`);
    const reply = toProblem(c.error, 'req-1');
    assert.deepEqual(reply, c.reply, code);
    // The body's members come in the order the server always wrote them.
    assert.deepEqual(Object.keys(reply.problem), Object.keys(c.reply.problem), code);
    if (entry.http) assert.deepEqual([reply.problem.status, reply.problem.type, reply.problem.title], [entry.http.status, entry.http.type, entry.http.title], code);
  }
});

test('each row gives the CLI its exit code and lines', () => {
  for (const [code, c] of Object.entries(cases)) {
    const entry = ERROR_CATALOGUE[code as ErrorCode];
    assert.equal(exitCodeOf(c.error), entry.exit, code);
    assert.equal(entry.exit, c.exit, code);
    assert.ok(entry.exit === EXIT_FAILED || entry.exit === EXIT_USAGE, code);
    assert.deepEqual(errorLines('eval', c.error), c.lines, code);
  }
});

test('Retry-After: a store\'s falls back to 5 s, the queue\'s and the rate limit\'s are at least 1 s', () => {
  const retryAfter = (e: CfguError) => toProblem(e, 'r').headers?.['retry-after'];
  assert.equal(retryAfter(new StoreUnavailableError('main', 'x', 0)), '5');
  assert.equal(retryAfter(new StoreUnavailableError('main', 'x', Number.NaN)), '5');
  assert.equal(retryAfter(new StoreUnavailableError('main', 'x')), '5');
  assert.equal(retryAfter(new StoreUnavailableError('main', 'x', 30)), '30');
  assert.equal(retryAfter(new SandboxBusyError('busy')), '1');
  assert.equal(retryAfter(new SandboxBusyError('busy', 0)), '1');
  assert.equal(retryAfter(new SandboxBusyError('busy', 4.5)), '5');
  assert.equal(retryAfter(new RateLimitedError(1, 1, 0)), '1');
});

test('an error whose code belongs to another class gets the row\'s status, type and title with its own message, nothing derived', () => {
  assert.deepEqual(toProblem(new CfguError(ErrorCodes.STORE_UNAVAILABLE, 'the reason'), 'r'), {
    problem: { type: 'urn:cfgu:problem:store-unavailable', title: 'Store Unavailable', status: 503, detail: 'the reason' },
  });
  assert.deepEqual(errorLines('eval', new CfguError(ErrorCodes.VALIDATION_FAILED, 'two\nlines')), ['cfgu eval: two; lines']);
  assert.equal(exitCodeOf(new CfguError(ErrorCodes.VALIDATION_FAILED, 'x')), 1);
});

test('the 401 of the API: the row of CFGU_UNAUTHORIZED, whatever the reason', () => {
  assert.deepEqual(unauthorizedReply(), cases[ErrorCodes.UNAUTHORIZED].reply);
  assert.deepEqual(unauthorizedReply(), toProblem(new UnauthorizedError('another reason'), 'r'));
});

/** The .ts files under a folder. */
const sources = (dir: string): string[] =>
  readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? sources(p) : /\.ts$/.test(name) && !/\.d\.ts$/.test(name) ? [p] : [];
  });

test('every class in src/ that extends CfguError is in src/core/errors.ts and has a row', () => {
  const parents = new Map<string, { parent: string; file: string }>();
  for (const file of sources(join(root, 'src'))) {
    for (const [, name, parent] of readFileSync(file, 'utf8').matchAll(/\bclass\s+(\w+)\s+extends\s+(\w+)/g)) {
      parents.set(name!, { parent: parent!, file: relative(root, file) });
    }
  }
  const extendsCfgu = (name: string): boolean => {
    for (let at = parents.get(name), seen = 0; at && seen < 20; at = parents.get(at.parent), seen++) if (at.parent === 'CfguError') return true;
    return false;
  };
  const classes = [...parents.keys()].filter(extendsCfgu).sort();
  assert.ok(classes.length >= 12, classes.join(', '));
  const rows = new Set(Object.values(ERROR_CATALOGUE).map((e) => e.errorClass));
  for (const name of classes) {
    assert.equal(parents.get(name)!.file, join('src', 'core', 'errors.ts'), `${name} is declared outside the catalogue's errors`);
    assert.ok(rows.has(name), `${name} has no row in the error catalogue`);
  }
  // Nothing in src/ throws the base class itself with a code of a class's row.
  const bare = sources(join(root, 'src')).filter((f) => /\bnew CfguError\(/.test(readFileSync(f, 'utf8')));
  assert.deepEqual(bare.map((f) => relative(root, f)), []);
});
