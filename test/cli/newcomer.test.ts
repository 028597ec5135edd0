/**
 * What a newcomer meets first on the command line: `cfgu --version`, a mistyped `serve` flag, and a `.cfgu.json`
 * file with a JSON syntax error.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { UsageError } from '../../src/cli/errors.js';
import { readSchemaFile } from '../../src/cli/schema-files.js';
import { cfgu, closeSandbox, killChildren, removeTempDirs, ROOT, runCli, tempDir, write } from './helpers.js';

after(async () => {
  killChildren();
  removeTempDirs();
  await closeSandbox();
});

const version = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;

// The isolated-vm line each Node major gets (package.json optionalDependencies).
const major = Number(process.versions.node.split('.')[0]);
const alias = major >= 24 ? 'isolated-vm-node24' : major >= 22 ? 'isolated-vm-node22' : 'isolated-vm-node20';
const ivmVersion = (JSON.parse(readFileSync(join(ROOT, 'node_modules', alias, 'package.json'), 'utf8')) as { version: string }).version;

test('cfgu --version and -V print the version of package.json, then the Node and the sandbox build in use, exit 0', async () => {
  const cwd = tempDir();
  for (const flag of ['--version', '-V']) {
    const r = await cfgu([flag], { cwd });
    const stdout = `${version}\nnode ${process.versions.node}, sandbox isolated-vm ${ivmVersion} (${alias})\n`;
    assert.deepEqual(r, { code: 0, stdout, stderr: '' }, flag);
  }
  const help = await runCli(['--help'], { cwd });
  assert.equal(help.code, 0);
  assert.match(help.stdout, /\n {2}-V, --version {2}print the version\n/);
});

test('cfgu serve with a mistyped flag or a stray argument fails as the other commands do (exit 2, no usage dump)', async () => {
  const cwd = tempDir();
  const cases: Array<[string[], string]> = [
    [['serve', '--prot', '8081'], 'cfgu serve: unknown option --prot\nRun "cfgu serve --help" for usage.\n'],
    [['serve', '8081'], 'cfgu serve: unexpected argument "8081"\nRun "cfgu serve --help" for usage.\n'],
    [['serve', '--port'], 'cfgu serve: option --port needs a value\nRun "cfgu serve --help" for usage.\n'],
    [['eval', '--prot', '8081'], 'cfgu eval: unknown option --prot\nRun "cfgu eval --help" for usage.\n'],
  ];
  for (const [args, stderr] of cases) {
    const r = await runCli(args, { cwd });
    assert.deepEqual(r, { code: 2, stdout: '', stderr }, args.join(' '));
  }
});

function schemaError(name: string, text: string): string {
  const dir = tempDir();
  const file = write(join(dir, name), text);
  try {
    readSchemaFile(file, dir);
  } catch (e) {
    assert.ok(e instanceof UsageError, String(e));
    return e.message;
  }
  assert.fail(`${name} was accepted`);
}

test('a .cfgu.json file with a syntax error gets a JSON message with line and column, never quoting the text', () => {
  const cases: Array<[string, string]> = [
    ['{\n  "keys": { "A": {} },\n}\n', 'line 3, column 1: not valid JSON: expected double-quoted property name'],
    ['{"keys": {"A": {"default": 1 2}}}', 'line 1, column 30: not valid JSON: expected \',\' or \'}\' after property value'],
    ['{"keys": {"A": {"required": tru}}}', 'line 1, column 32: not valid JSON: unexpected token \'}\''],
    ['{"keys": {"A": {"description": "secret-ish\ttext"}}}', 'line 1, column 43: not valid JSON: bad control character in string literal'],
    ['{\n  "keys": {\n    "A": {}\n', "line 4, column 1: not valid JSON: expected ',' or '}' after property value"],
    ['', 'line 1, column 1: not valid JSON: unexpected end of the file'],
    ['{"keys": {"A": {}}} x', 'line 1, column 21: not valid JSON: unexpected non-whitespace character after the JSON value'],
    ['{"keys": {"A": {}, "A": {"required": true}}}', 'line 1, column 20: not valid JSON: duplicate key "A"'],
  ];
  for (const [text, expected] of cases) {
    const message = schemaError('app.cfgu.json', text);
    assert.equal(message, `schema file app.cfgu.json: ${expected}`, JSON.stringify(text));
    assert.doesNotMatch(message, /YAML|flow|Map keys|secret-ish/);
  }
});

test('JSON that YAML would accept is refused in a .cfgu.json file, and still read in a .cfgu.yaml file', () => {
  const lenient = '{"keys": {"A": {"default": hello}}}';
  assert.equal(schemaError('app.cfgu.json', lenient), "schema file app.cfgu.json: line 1, column 28: not valid JSON: unexpected token 'h'");
  const dir = tempDir();
  assert.deepEqual(readSchemaFile(write(join(dir, 'app.cfgu.yaml'), lenient), dir).keys, { A: { default: 'hello' } });
  assert.deepEqual(readSchemaFile(write(join(dir, 'bom.cfgu.json'), '\ufeff{"keys": {"B": null}}'), dir).keys, { B: null });
});

test('the binary: eval with a broken .cfgu.json exits 2 with the JSON message', async () => {
  const cwd = tempDir();
  write(join(cwd, '.configu'), { stores: { main: { type: 'in-memory' } } });
  write(join(cwd, 'app.cfgu.json'), '{\n  "keys": { "A": {} },\n}\n');
  const r = await cfgu(['eval', '--schema', 'app.cfgu.json'], { cwd });
  assert.deepEqual(r, { code: 2, stdout: '', stderr: 'cfgu eval: schema file app.cfgu.json: line 3, column 1: not valid JSON: expected double-quoted property name\n' });
});
