/**
 * The error catalogue (src/core/error-catalogue.ts) is the one place that decides an error's HTTP answer and CLI exit
 * code: the server and the CLI answer from it, docs/engine.md shows it row for row, every HTTP answer in it is a row
 * of docs/server.md's error table, and every exit code in it is a row of docs/cli.md's exit-code table.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as errors from '../../src/core/errors.js';
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
  ForbiddenError,
  InputError,
  RateLimitedError,
  RevisionConflictError,
  UnauthorizedError,
  LimitError,
  SandboxBusyError,
  SandboxUnavailableError,
  StoreUnavailableError,
  UnknownSchemaError,
  UnknownStoreError,
  ValidationError,
  type ErrorCode,
} from '../../src/core/index.js';
import { toProblem } from '../../src/server/http/problem.js';
import { exitCodeOf } from '../../src/cli/errors.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
const doc = (name: string) => readFileSync(join(root, 'docs', name), 'utf8');

/** The `|`-table rows (header and separator dropped) of the section that starts with `heading`. */
function tableOf(text: string, heading: string): string[][] {
  const start = text.indexOf(`\n${heading}\n`);
  assert.notEqual(start, -1, `no section "${heading}"`);
  const rest = text.slice(start + heading.length + 2);
  const end = rest.search(/\n#{2,3} /);
  const lines = (end === -1 ? rest : rest.slice(0, end)).split('\n').filter((l) => l.startsWith('|'));
  return lines.slice(2).map((l) => l.slice(1, -1).split(' | ').map((c) => c.trim()));
}

/** One error of every code, as the engine, the stores and the sandbox raise them. */
const samples: Record<ErrorCode, CfguError> = {
  [ErrorCodes.INVALID_INPUT]: new InputError(ErrorCodes.INVALID_INPUT, 'the pipeline is empty', [{ path: '', message: 'is empty' }]),
  [ErrorCodes.INVALID_SCHEMA]: new InputError(ErrorCodes.INVALID_SCHEMA, 'bad schema', [{ path: '/0/schema', message: 'bad' }]),
  [ErrorCodes.INVALID_KEY]: new InputError(ErrorCodes.INVALID_KEY, 'bad key'),
  [ErrorCodes.INVALID_SET]: new InputError(ErrorCodes.INVALID_SET, 'bad set'),
  [ErrorCodes.UNKNOWN_STORE]: new UnknownStoreError('prod', ['main']),
  [ErrorCodes.UNKNOWN_SCHEMA]: new UnknownSchemaError('ap', ['app']),
  [ErrorCodes.LIMIT_EXCEEDED]: new LimitError('too many commands'),
  [ErrorCodes.VALIDATION_FAILED]: new ValidationError([{ command: 0, key: 'A', rule: 'required', message: 'key "A" is required' }]),
  [ErrorCodes.BUDGET_EXCEEDED]: new BudgetExceededError('cpu-budget', 'over budget'),
  [ErrorCodes.STORE_UNAVAILABLE]: new StoreUnavailableError('main', 'connection refused', 7),
  [ErrorCodes.SANDBOX_UNAVAILABLE]: new SandboxUnavailableError('no child'),
  [ErrorCodes.SANDBOX_BUSY]: new SandboxBusyError('queue full', 1),
  [ErrorCodes.UNAUTHORIZED]: new UnauthorizedError('token expired'),
  [ErrorCodes.FORBIDDEN]: new ForbiddenError([{ command: 1, store: 'main', set: 'prod' }], 3),
  [ErrorCodes.RATE_LIMITED]: new RateLimitedError(10, 60, 12),
  [ErrorCodes.INVALID_CONFIGURATION]: new ConfigurationError('bad .configu', '/srv/.configu', 'stores'),
  [ErrorCodes.UNSUPPORTED_CHARSET]: new BodyRefusedError(ErrorCodes.UNSUPPORTED_CHARSET),
  [ErrorCodes.FORBIDDEN_PROPERTY]: new BodyRefusedError(ErrorCodes.FORBIDDEN_PROPERTY),
  [ErrorCodes.REVISION_CONFLICT]: new RevisionConflictError('main', 'prod', 5, 7),
  [ErrorCodes.WRITE_BREAKS]: new WriteBreaksError([{ schema: 'app', set: 'prod', status: 'breaks', changed: ['A'], failures: [{ key: 'A', rule: 'enum', message: 'bad' }] }]),
  [ErrorCodes.READ_ONLY_STORE]: new ReadOnlyStoreError('main'),
  [ErrorCodes.WRITE_FORBIDDEN]: new WriteForbiddenError('main', 'prod', 'write', ['A']),
  [ErrorCodes.CONSOLE_LOOPBACK_ONLY]: new ConsoleLoopbackOnlyError(),
};

test('every error code has one entry, and every CfguError class has entries', () => {
  assert.deepEqual(Object.keys(ERROR_CATALOGUE).sort(), Object.values(ErrorCodes).sort());
  const classes = Object.entries(errors)
    .filter(([, v]) => typeof v === 'function' && v.prototype instanceof CfguError)
    .map(([name]) => name)
    .sort();
  assert.deepEqual([...new Set(Object.values(ERROR_CATALOGUE).map((e) => e.errorClass))].sort(), classes);
  for (const [code, e] of Object.entries(samples)) {
    assert.equal(e.code, code);
    assert.equal(e.name, ERROR_CATALOGUE[code as ErrorCode].errorClass, code);
  }
});

test('docs/engine.md shows the catalogue row for row', () => {
  const rows = tableOf(doc('engine.md'), '## Errors');
  const documented = rows.map(([cls, code, status, type, title, exit]) => [cls, code, status, type, title, exit].map((c) => c!.replace(/`/g, '')));
  const actual = Object.entries(ERROR_CATALOGUE).map(([code, e]) => [
    e.errorClass,
    code,
    e.http ? String(e.http.status) : '—',
    e.http?.type ?? '—',
    e.http?.title ?? '—',
    String(e.exit),
  ]);
  assert.deepEqual(documented.sort(), actual.sort());
});

test('the server answers from the catalogue, and each answer is a row of docs/server.md\'s error table', () => {
  const rows = tableOf(doc('server.md'), '## Errors');
  for (const [code, err] of Object.entries(samples)) {
    const entry = ERROR_CATALOGUE[code as ErrorCode];
    const { problem } = toProblem(err, 'req-1');
    if (!entry.http) {
      // Never an answer to a request: met during one anyway, it is an unexpected error.
      assert.deepEqual([problem.status, problem.type, problem.title], [500, 'about:blank', 'Internal Server Error'], code);
      assert.ok(rows.some(([, status, type]) => status === '500' && type === '`about:blank`'), 'the 500 row');
      continue;
    }
    assert.deepEqual([problem.status, problem.type, problem.title], [entry.http.status, entry.http.type, entry.http.title], code);
    const row = rows.find(([, status, type]) => status!.startsWith(String(entry.http!.status)) && type!.includes(`\`${entry.http!.type}\``));
    assert.ok(row, `${code}: no row of docs/server.md "Errors" with status ${entry.http.status} and type ${entry.http.type}`);
  }
});

test('the CLI exits with the catalogue\'s code, and each code is a row of docs/cli.md\'s exit-code table', () => {
  const rows = tableOf(doc('cli.md'), '## Exit codes and messages');
  for (const [code, err] of Object.entries(samples)) {
    const entry = ERROR_CATALOGUE[code as ErrorCode];
    assert.equal(exitCodeOf(err), entry.exit, code);
    assert.ok(rows.some(([exit]) => exit === String(entry.exit)), `${code}: exit ${entry.exit} is not in docs/cli.md`);
  }
  // Not cfgu's own: something unexpected.
  assert.equal(exitCodeOf(new TypeError('x')), 1);
  assert.ok(rows.some(([exit, when]) => exit === '1' && when!.includes('anything unexpected')));
});

test('a configuration error is documented as exit 2 for cfgu serve too', () => {
  assert.equal(ERROR_CATALOGUE[ErrorCodes.INVALID_CONFIGURATION].exit, 2);
  assert.match(doc('cli.md'), /`cfgu serve` exits 0 after a shutdown[^]*?; 2 for a start-up\nfailure caused by the configuration/);
  assert.match(doc('server.md'), /### Start-up failures\n[^#]*and exit code 2, never a stack/);
});
