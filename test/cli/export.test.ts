/**
 * `cfgu export`, in-process through the command runner (runCli) and through the built binary (no standard input, --run
 * with the process's own streams, the shell pipeline): every format read back by a parser for that format (or exact text),
 * hidden keys, --filter, --template, --out (atomic), --run (environment and exit code), the removed v0 flags, usage
 * errors, and the pipeline `cfgu eval | cfgu eval | cfgu export` through a real shell pipe.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import YAML from 'yaml';
import { cfgu, closeSandbox, killChildren, parseDotenv, parseIni, parseProperties, project, removeTempDirs, runCli, sh, tempDir, write } from './helpers.js';

after(async () => {
  killChildren();
  removeTempDirs();
  await closeSandbox();
});

const TRICKY = 'it\'s "q" $HOME ${X} %{y} \\ back\nline 2 = a:b #!';
const SCHEMA = {
  keys: {
    NAME: { label: 'app' },
    PORT: { label: ['app', 'net'] },
    DEBUG: {},
    TAGS: {},
    DB: { label: 'db' },
    ZIP: { schema: { type: 'string' } },
    TRICKY: {},
    UNI: {},
    EMPTY: {},
    TOKEN: { hidden: true },
  },
};
const VALUES: Record<string, string> = {
  NAME: 'web',
  PORT: '8080',
  DEBUG: 'false',
  TAGS: '["a","b"]',
  DB: '{"host":"db.local","port":5432}',
  ZIP: '01234',
  TRICKY,
  UNI: 'héllo €',
  TOKEN: 'secret',
};
/** What the export holds: hidden TOKEN left out, values coerced (ZIP stays a string by its schema.type). */
const EXPORTED = { NAME: 'web', PORT: 8080, DEBUG: false, TAGS: ['a', 'b'], DB: { host: 'db.local', port: 5432 }, ZIP: '01234', TRICKY, UNI: 'héllo €', EMPTY: '' };
/** As text (flat formats): strings as they are, the rest as JSON. */
const AS_TEXT: Record<string, string> = { NAME: 'web', PORT: '8080', DEBUG: 'false', TAGS: '["a","b"]', DB: '{"host":"db.local","port":5432}', ZIP: '01234', TRICKY, UNI: 'héllo €', EMPTY: '' };

let dir: string;
let evaluated: string;

before(async () => {
  dir = project({ 'app.cfgu.json': SCHEMA, 'data.json': Object.entries(VALUES).map(([key, value]) => ({ set: '', key, value })) });
  const r = await runCli(['eval', '--schema', 'app.cfgu.json'], { cwd: dir });
  assert.equal(r.code, 0, r.stderr);
  evaluated = r.stdout;
});

const exportWith = (args: string[], cwd = dir) => runCli(['export', ...args], { cwd, stdin: evaluated });

describe('cfgu export formats', { concurrency: true }, () => {
  test('json (default)', async () => {
    const r = await exportWith([]);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout), EXPORTED);
    assert.deepEqual(Object.keys(JSON.parse(r.stdout)), Object.keys(EXPORTED));
    const explicit = await exportWith(['--format', 'json']);
    assert.equal(explicit.stdout, r.stdout);
  });

  test('yaml', async () => {
    const r = await exportWith(['--format', 'yaml']);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(YAML.parse(r.stdout), EXPORTED);
  });

  test('dotenv', async () => {
    const r = await exportWith(['--format', 'dotenv']);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(parseDotenv(r.stdout), AS_TEXT);
    assert.match(r.stdout, /^NAME=web\nPORT=8080\nDEBUG=false\nTAGS='\["a","b"\]'\n/);
    assert.match(r.stdout, /\nEMPTY=\n$/);
    // The value holding both a quote and a newline is double-quoted with escapes.
    assert.ok(r.stdout.includes(`TRICKY="it's \\"q\\" \\$HOME \\\${X} %{y} \\\\ back\\nline 2 = a:b #!"\n`), r.stdout);
  });

  test('ini', async () => {
    const r = await exportWith(['--format', 'ini']);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(parseIni(r.stdout), AS_TEXT);
    assert.match(r.stdout, /^NAME=web\nPORT=8080\n/);
  });

  test('properties', async () => {
    const r = await exportWith(['--format', 'properties']);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(parseProperties(r.stdout), AS_TEXT);
    assert.ok(r.stdout.includes('UNI=h\\u00e9llo \\u20ac\n'), r.stdout);
    assert.ok(/^[\x00-\x7f]*$/.test(r.stdout), 'properties output is ASCII');
  });

  test('tfvars: exact text', async () => {
    const r = await exportWith(['--format', 'tfvars']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(
      r.stdout,
      [
        'NAME = "web"',
        'PORT = 8080',
        'DEBUG = false',
        'TAGS = [',
        '  "a",',
        '  "b",',
        ']',
        'DB = {',
        '  "host" = "db.local"',
        '  "port" = 5432',
        '}',
        'ZIP = "01234"',
        'TRICKY = "it\'s \\"q\\" $HOME $${X} %%{y} \\\\ back\\nline 2 = a:b #!"',
        'UNI = "héllo €"',
        'EMPTY = ""',
        '',
      ].join('\n'),
    );
  });

  test('configmap and secret manifests', async () => {
    const cm = await exportWith(['--format', 'configmap', '--name', 'web-config']);
    assert.equal(cm.code, 0, cm.stderr);
    assert.deepEqual(YAML.parse(cm.stdout), { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'web-config' }, data: AS_TEXT });
    assert.match(cm.stdout, /^apiVersion: v1\nkind: ConfigMap\nmetadata:\n {2}name: web-config\ndata:\n {2}NAME: "web"\n {2}PORT: "8080"\n/);
    const secret = await exportWith(['--format', 'secret', '--name', 'web-secret']);
    assert.equal(secret.code, 0, secret.stderr);
    const parsed = YAML.parse(secret.stdout);
    assert.equal(parsed.kind, 'Secret');
    assert.equal(parsed.type, 'Opaque');
    assert.deepEqual(parsed.metadata, { name: 'web-secret' });
    const decoded = Object.fromEntries(Object.entries(parsed.data as Record<string, string>).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]));
    assert.deepEqual(decoded, AS_TEXT);
  });
});

describe('cfgu export: filters, templates, files, commands', { concurrency: true }, () => {
  test('--filter: every filter must hold; hidden keys stay out but are visible in $.configs', async () => {
    const labels = await exportWith(['--filter', '$.labels.includes("app")']);
    assert.deepEqual(JSON.parse(labels.stdout), { NAME: 'web', PORT: 8080 });
    const two = await exportWith(['--filter', '$.labels.includes("app")', '--filter', 'typeof $.value === "number"']);
    assert.deepEqual(JSON.parse(two.stdout), { PORT: 8080 });
    const origin = await exportWith(['--filter', '$.origin !== "empty"', '--filter', '$.key !== "TRICKY"', '--format', 'dotenv']);
    assert.equal(origin.code, 0, origin.stderr);
    assert.deepEqual(Object.keys(parseDotenv(origin.stdout)), ['NAME', 'PORT', 'DEBUG', 'TAGS', 'DB', 'ZIP', 'UNI']);
    const hidden = await exportWith(['--filter', '$.cfgu.hidden === true']);
    assert.deepEqual(JSON.parse(hidden.stdout), {});
    const configs = await exportWith(['--filter', '$.configs.TOKEN.value === "secret" && $.storedValue === "01234"']);
    assert.deepEqual(JSON.parse(configs.stdout), { ZIP: '01234' });
  });

  test('--filter that throws: exit 1 naming the key and the filter', async () => {
    const r = await exportWith(['--filter', '$.key === "NAME" ? $.value.no.such : true']);
    assert.equal(r.code, 1);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /^cfgu export: a --filter failed:\nkey NAME, --filter "\$\.key === \\"NAME\\" \? \$\.value\.no\.such : true": .*undefined.*\n$/);
  });

  test('--template renders $.configs of the exported keys; --out writes atomically', async () => {
    write(join(dir, 'tmpl', 'app.conf.tmpl'), 'server {{ $.configs.NAME.value }}:{{ $.configs.PORT.value + 1 }}\ndb={{ $.configs.DB.value.host }} origin={{ $.configs.NAME.origin }}\n');
    const out = join(dir, 'tmpl', 'app.conf');
    const r = await exportWith(['--template', 'tmpl/app.conf.tmpl', '--out', 'tmpl/app.conf']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, '');
    assert.equal(readFileSync(out, 'utf8'), 'server web:8081\ndb=db.local origin=store\n');
    assert.deepEqual(readdirSync(join(dir, 'tmpl')).sort(), ['app.conf', 'app.conf.tmpl'], 'no temporary file is left behind');
    // Overwrites the file in place; the folder must exist.
    const again = await exportWith(['--format', 'dotenv', '--out', 'tmpl/app.conf']);
    assert.equal(again.code, 0, again.stderr);
    assert.deepEqual(parseDotenv(readFileSync(out, 'utf8')), AS_TEXT);
    const missing = await exportWith(['--out', 'no/such/folder/x.json']);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /^cfgu export: --out no\/such\/folder\/x\.json: cannot write \(ENOENT\)/);
    // A hidden key is not in the template's $.configs.
    write(join(dir, 'tmpl', 'hidden.tmpl'), '{{ $.configs.TOKEN === undefined }}');
    const hidden = await exportWith(['--template', 'tmpl/hidden.tmpl']);
    assert.equal(hidden.stdout, 'true');
    // An expression that throws: exit 1 naming the template; nothing is written.
    write(join(dir, 'tmpl', 'broken.tmpl'), 'x={{ $.configs.NOPE.value }}');
    const broken = await exportWith(['--template', 'tmpl/broken.tmpl', '--out', 'tmpl/broken.out']);
    assert.equal(broken.code, 1);
    assert.match(broken.stderr, /^cfgu export: --template tmpl\/broken\.tmpl: .*NOPE|undefined.*\n$/);
    assert.ok(!readdirSync(join(dir, 'tmpl')).includes('broken.out'));
  });

  test('--run: the values are in the command\'s environment; its exit code is passed through', async () => {
    // Through the binary: the command inherits cfgu's own streams.
    const r = await cfgu(['export', '--filter', '$.key !== "TRICKY"', '--run', 'echo "$NAME|$PORT|$DEBUG|$TAGS|$UNI|${TOKEN:-none}"; exit 7'], { cwd: dir, input: evaluated });
    assert.equal(r.code, 7, r.stderr);
    assert.equal(r.stdout, 'web|8080|false|["a","b"]|héllo €|none\n');
    const ok = await exportWith(['--run', 'test "$TRICKY" = "$EXPECTED"'], dir);
    assert.equal(ok.code, 1, 'EXPECTED is not set: the test fails');
    const env = await runCli(['export', '--run', 'printf %s "$TRICKY"'], { cwd: dir, stdin: evaluated });
    assert.equal(env.stdout, TRICKY);
    const status = await exportWith(['--run', 'echo "$NAME" >&2; exit 3']);
    assert.deepEqual(status, { code: 3, stdout: '', stderr: 'web\n' });
  });

  test('the pipeline: cfgu eval | cfgu eval | cfgu export through a shell pipe', async () => {
    const p = project({
      'base.cfgu.yaml': 'keys:\n  HOST:\n    required: true\n  PORT:\n    default: 80\n  SECRET:\n    hidden: true\n',
      'prod.cfgu.yaml': 'keys:\n  PORT:\n    default: 443\n  URL:\n    const: "https://{{ $.configs.HOST.value }}:{{ $.configs.PORT.value }}"\n',
      'data.json': [
        { set: '', key: 'HOST', value: 'example.org' },
        { set: 'prod', key: 'HOST', value: 'prod.example.org' },
        { set: '', key: 'SECRET', value: 'x' },
      ],
    });
    const r = await sh(
      'cfgu eval --set prod --schema base.cfgu.yaml | cfgu eval --set prod --schema prod.cfgu.yaml --override PORT=8443 | cfgu export --format dotenv',
      { cwd: p },
    );
    assert.equal(r.stderr, '');
    assert.equal(r.code, 0);
    assert.equal(r.stdout, 'HOST=prod.example.org\nPORT=8443\nURL=https://prod.example.org:8443\n');
    // A failure in the middle of the pipe: its exit code and message reach the shell; export sees no input.
    const failed = await sh('cfgu eval --schema base.cfgu.yaml --override NOPE=1 | cfgu export', { cwd: p });
    assert.equal(failed.code, 2, 'pipefail: the last failing command is export (empty input)');
    assert.equal(
      failed.stderr,
      'cfgu eval: 1 key failed validation:\ncommand 0, key NOPE, rule override: override for key "NOPE", which the command\'s schema does not declare\n' +
        'cfgu export: standard input is empty: pipe the output of `cfgu eval` into `cfgu export`\n',
    );
  });
});

describe('cfgu export usage errors: exit 2, exact messages', { concurrency: true }, () => {
  const cases: Array<{ name: string; args: string[]; stderr: string; stdin?: null; input?: string }> = [
    {
      name: '--pick-label (v0)',
      args: ['--pick-label', 'db'],
      stderr:
        'cfgu export: the --pick-* and --omit-* flags were removed in v1: use --filter EXPR, e.g. --filter \'$.labels.includes("db")\', --filter \'$.key !== "DEBUG"\', --filter \'$.origin !== "empty"\'\nRun "cfgu export --help" for usage.\n',
    },
    {
      name: '--omit-hidden (v0)',
      args: ['--omit-hidden'],
      stderr:
        'cfgu export: the --pick-* and --omit-* flags were removed in v1: use --filter EXPR, e.g. --filter \'$.labels.includes("db")\', --filter \'$.key !== "DEBUG"\', --filter \'$.origin !== "empty"\'\nRun "cfgu export --help" for usage.\n',
    },
    {
      name: '--template-input (v0)',
      args: ['--template', 'x.tmpl', '--template-input', 'y'],
      stderr: 'cfgu export: --template-input was removed in v1: a --template sees $.configs of the exported keys\nRun "cfgu export --help" for usage.\n',
    },
    {
      name: 'unknown format',
      args: ['--format', 'toml'],
      stderr: 'cfgu export: unknown --format "toml"; formats: json, dotenv, yaml, ini, properties, tfvars, configmap, secret\nRun "cfgu export --help" for usage.\n',
    },
    {
      name: 'a manifest without --name',
      args: ['--format', 'secret'],
      stderr: "cfgu export: --format secret needs --name NAME (the manifest's metadata.name)\nRun \"cfgu export --help\" for usage.\n",
    },
    {
      name: 'a bad --name',
      args: ['--format', 'configmap', '--name', 'Web_Config'],
      stderr:
        'cfgu export: --name "Web_Config" is not a valid Kubernetes name (lower-case letters, digits, \'-\' and \'.\', at most 253 characters)\nRun "cfgu export --help" for usage.\n',
    },
    {
      name: '--run with --out',
      args: ['--run', 'true', '--out', 'x'],
      stderr: 'cfgu export: --run passes the values in the environment: it cannot be combined with --out, --format or --template\nRun "cfgu export --help" for usage.\n',
    },
    {
      name: '--template with --format',
      args: ['--template', 'x.tmpl', '--format', 'yaml'],
      stderr: 'cfgu export: --template and --format cannot be combined\nRun "cfgu export --help" for usage.\n',
    },
    {
      name: 'a missing template',
      args: ['--template', 'missing.tmpl'],
      stderr: 'cfgu export: --template missing.tmpl: no such file\n',
    },
    {
      name: 'no standard input',
      args: [],
      stdin: null,
      stderr: 'cfgu export: export reads the output of `cfgu eval` from standard input, e.g.: cfgu eval --schema app.cfgu.json | cfgu export\n',
    },
    {
      name: 'standard input is not an eval result',
      args: [],
      input: '{"A": {"key": "A", "value": 1}}',
      stderr: 'cfgu export: standard input is not the JSON output of `cfgu eval`: "A".value must be a string\n',
    },
  ];
  for (const c of cases) {
    test(c.name, async () => {
      const cwd = tempDir();
      const r = await runCli(['export', ...c.args], { cwd, stdin: c.stdin === null ? null : (c.input ?? '{}') });
      assert.equal(r.stderr, c.stderr);
      assert.equal(r.code, 2);
      assert.equal(r.stdout, '');
    });
  }
  test('the binary with standard input from /dev/null (not a pipe)', async () => {
    const r = await cfgu(['export'], { cwd: tempDir(), stdin: 'ignore' });
    assert.deepEqual(r, { code: 2, stdout: '', stderr: 'cfgu export: export reads the output of `cfgu eval` from standard input, e.g.: cfgu eval --schema app.cfgu.json | cfgu export\n' });
  });
});
