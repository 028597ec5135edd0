/**
 * Each `cfgu export --format` read back by an independent, third-party parser for that format (not by code of this
 * project): python-dotenv for dotenv, the `ini` npm package for ini (it also writes it: there the check is the round
 * trip), java.util.Properties for properties, Terraform itself (`terraform console -var-file`) for tfvars, the `yaml`
 * package for yaml/configmap/secret, JSON.parse for json. A missing tool skips its test with the reason (and fails
 * under CI=true, like the service checks). */
import { after, before, describe, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import ini from 'ini';
import YAML from 'yaml';
import { requireOrSkip } from '../helpers/services.js';
import { closeSandbox, killChildren, project, removeTempDirs, runCli, tempDir } from './helpers.js';

after(async () => {
  killChildren();
  removeTempDirs();
  await closeSandbox();
});

const TRICKY = 'it\'s "q" $HOME ${X} %{y} \\ back\nline 2 = a:b #!';
const VALUES: Record<string, string> = {
  NAME: 'web',
  PORT: '8080',
  DEBUG: 'false',
  TAGS: '["a","b"]',
  DB: '{"host":"db.local","port":5432}',
  ZIP: '01234',
  TRICKY,
  UNI: 'héllo €',
  QUOTE: "it's",
  LEAD: ' lead and trail ',
  EQ: 'a=b:c',
  HASH: 'x # not a comment',
};
const KEYS: Record<string, unknown> = Object.fromEntries(Object.keys(VALUES).map((k) => [k, {}]));
KEYS.ZIP = { schema: { type: 'string' } };
KEYS.EMPTY = {};
KEYS.TOKEN = { hidden: true };
/** The export: typed values; hidden TOKEN left out. */
const TYPED: Record<string, unknown> = {
  ...VALUES,
  PORT: 8080,
  DEBUG: false,
  TAGS: ['a', 'b'],
  DB: { host: 'db.local', port: 5432 },
  EMPTY: '',
};
/** Flat formats: the same as text. */
const TEXT: Record<string, string> = { ...VALUES, EMPTY: '' };

let dir: string;
let evaluated: string;

before(async () => {
  dir = project({
    'app.cfgu.json': { keys: KEYS },
    'data.json': [...Object.entries(VALUES).map(([key, value]) => ({ set: '', key, value })), { set: '', key: 'TOKEN', value: 'secret' }],
  });
  const r = await runCli(['eval', '--schema', 'app.cfgu.json'], { cwd: dir });
  assert.equal(r.code, 0, r.stderr);
  evaluated = r.stdout;
});

async function exported(format: string, extra: string[] = []): Promise<string> {
  const r = await runCli(['export', '--format', format, ...extra], { cwd: dir, stdin: evaluated });
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stderr, '');
  return r.stdout;
}

/** Skip (or fail under CI) when a tool is missing. */
function need(t: TestContext, what: string, ok: boolean): boolean {
  return ok || requireOrSkip(t, what, 'not installed');
}

const runs = (cmd: string, args: string[]) => spawnSync(cmd, args, { encoding: 'utf8' }).status === 0;

describe('every export format, read back by a third-party parser', { concurrency: true }, () => {
  test('json: JSON.parse', async () => {
    assert.deepEqual(JSON.parse(await exported('json')), TYPED);
  });

  test('yaml: the yaml package', async () => {
    assert.deepEqual(YAML.parse(await exported('yaml')), TYPED);
  });

  test('configmap and secret: Kubernetes manifests parsed as YAML', async () => {
    const cm = YAML.parse(await exported('configmap', ['--name', 'app']));
    assert.deepEqual(cm, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'app' }, data: TEXT });
    const secret = YAML.parse(await exported('secret', ['--name', 'app']));
    assert.deepEqual({ ...secret, data: undefined }, { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'app' }, type: 'Opaque', data: undefined });
    const decoded = Object.fromEntries(Object.entries(secret.data as Record<string, string>).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]));
    assert.deepEqual(decoded, TEXT);
  });

  test('dotenv: python-dotenv', async (t) => {
    if (!need(t, 'python3 with python-dotenv', runs('python3', ['-c', 'import dotenv']))) return;
    const file = join(tempDir(), '.env');
    writeFileSync(file, await exported('dotenv'));
    const py = 'import json,sys\nfrom dotenv import dotenv_values\nprint(json.dumps(dotenv_values(sys.argv[1], interpolate=False)))';
    const r = spawnSync('python3', ['-c', py, file], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const parsed = JSON.parse(r.stdout) as Record<string, string>;
    // python-dotenv does not know the `\$` escape cfgu writes in double-quoted values (docs/cli.md, Formats): it
    // keeps the backslash. Every other value, TRICKY's quote, backslash and newline included, reads back exactly.
    assert.equal(parsed.TRICKY, TRICKY.replace(/\$/g, '\\$'));
    assert.deepEqual({ ...parsed, TRICKY: undefined }, { ...TEXT, TRICKY: undefined });
  });

  test('ini: the ini npm package', async () => {
    const parsed = ini.parse(await exported('ini'));
    // The ini package reads the bare words true/false as booleans: compare as text.
    assert.deepEqual(Object.fromEntries(Object.entries(parsed).map(([k, v]) => [k, String(v)])), TEXT);
  });

  test('properties: java.util.Properties', async (t) => {
    if (!need(t, 'java', runs('java', ['-version']))) return;
    const work = tempDir();
    writeFileSync(join(work, 'out.properties'), await exported('properties'));
    writeFileSync(
      join(work, 'Read.java'),
      [
        'import java.io.*; import java.util.*; import java.nio.charset.StandardCharsets;',
        'public class Read { public static void main(String[] a) throws Exception {',
        '  Properties p = new Properties(); try (InputStream in = new FileInputStream(a[0])) { p.load(in); }',
        '  for (String k : p.stringPropertyNames()) System.out.println(k + "\\t" + Base64.getEncoder().encodeToString(p.getProperty(k).getBytes(StandardCharsets.UTF_8)));',
        '} }',
      ].join('\n'),
    );
    const r = spawnSync('java', [join(work, 'Read.java'), join(work, 'out.properties')], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const parsed = Object.fromEntries(
      r.stdout
        .split('\n')
        .filter(Boolean)
        .map((l) => {
          const [k, v] = l.split('\t');
          return [k, Buffer.from(v ?? '', 'base64').toString('utf8')];
        }),
    );
    assert.deepEqual(parsed, TEXT);
  });

  test('tfvars: Terraform reads the file as variable values with their types', async (t) => {
    if (!need(t, 'terraform', runs('terraform', ['version']))) return;
    const work = tempDir();
    const keys = Object.keys(TYPED);
    writeFileSync(join(work, 'main.tf'), keys.map((k) => `variable "${k}" {\n  type = any\n}\n`).join(''));
    writeFileSync(join(work, 'values.tfvars'), await exported('tfvars'));
    const r = spawnSync('terraform', ['console', '-var-file=values.tfvars'], {
      cwd: work,
      encoding: 'utf8',
      input: `jsonencode({${keys.map((k) => `${k} = var.${k}`).join(', ')}})\n`,
      env: { ...process.env, TF_IN_AUTOMATION: '1', CHECKPOINT_DISABLE: '1', TF_CLI_CONFIG_FILE: '/dev/null' },
    });
    assert.equal(r.status, 0, r.stderr);
    // The console prints the JSON text as an HCL string.
    assert.deepEqual(JSON.parse(JSON.parse(r.stdout.trim()) as string), TYPED);
  });
});

