/**
 * The whole-suite secret scan itself (docs/security.md, "The whole-suite scan"): scripts/secret-scan.mjs over
 * captures written here, and test/helpers/capture.ts in a child test process. A leak is found (exit 1, the kind and
 * test file named, the secret masked), including a cut value found by its random tail; the by-design kinds are
 * skipped; a capture too small to mean anything fails, unless the minimum is lowered.
 */
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, removeTempDirs, tempDir } from '../server/helpers.js';
import { SECRET_MARKER } from '../helpers/capture.js';

after(() => removeTempDirs());

const SCANNER = join(ROOT, 'scripts', 'secret-scan.mjs');
/** Fixed secrets of these captures (not planted: they are written as records directly). */
const SECRET = `${SECRET_MARKER}scan-0a1b2c3d4e`;
const OTHER = `${SECRET_MARKER}other-9f8e7d6c5b`;

interface Rec {
  kind: string;
  file: string;
  text: string;
}
const clean = (n: number, file = 'test/x.test.ts'): Rec[] => Array.from({ length: n }, (_, i) => ({ kind: 'response-body', file, text: `{"n":${i}}` }));

/** A capture folder holding `records` split over two process files. */
function capture(records: Rec[]): string {
  const dir = tempDir('cfgu-scan-');
  const half = Math.ceil(records.length / 2);
  writeFileSync(join(dir, '101.jsonl'), records.slice(0, half).map((r) => `${JSON.stringify(r)}\n`).join(''));
  writeFileSync(join(dir, '102.jsonl'), records.slice(half).map((r) => `${JSON.stringify(r)}\n`).join(''));
  return dir;
}

function scan(dir: string, args: string[] = [], env: Record<string, string> = {}): { code: number | null; stdout: string; stderr: string } {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => k !== 'CFGU_SECRET_SCAN_MIN'));
  const r = spawnSync(process.execPath, [SCANNER, dir, ...args], { encoding: 'utf8', env: { ...base, ...env } });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('scripts/secret-scan.mjs', { concurrency: true }, () => {
  test('a leak is found: exit 1, kind, test file and the text around it, the secret masked', () => {
    const dir = capture([
      ...clean(2000),
      { kind: 'log-line', file: 'test/server/a.test.ts', text: `{"msg":"request","detail":"bad value ${SECRET} here"}` },
      { kind: 'response-header', file: 'test/server/b.test.ts', text: `{"x-debug":"${OTHER}"}` },
    ]);
    const r = scan(dir);
    assert.equal(r.code, 1);
    assert.equal(r.stdout, '');
    assert.equal(
      r.stderr,
      'secret scan: 2002 records (log-line 1, response-body 2000, response-header 1)\n' +
        'secret scan: LEAK in log-line of test/server/a.test.ts: {"msg":"request","detail":"bad value «secret» here"}\n' +
        'secret scan: LEAK in response-header of test/server/b.test.ts: {"x-debug":"«secret»"}\n' +
        'secret scan: FAILED, 2 record(s) hold a planted secret\n',
    );
    assert.ok(!r.stderr.includes(SECRET_MARKER), 'never the secret itself');
  });

  test('a value whose start was cut off is found by its random tail (the planted values are in the capture)', () => {
    const dir = capture([...clean(3), { kind: 'planted', file: 'test/x.test.ts', text: SECRET }, { kind: 'cli-stderr', file: 'test/cli/y.test.ts', text: '…scan-0a1b2c3d4e\n' }]);
    const r = scan(dir, ['--min', '0']);
    assert.equal(r.code, 1);
    assert.equal(
      r.stderr,
      'secret scan: 4 records (cli-stderr 1, planted 1, response-body 3)\n' +
        'secret scan: LEAK in cli-stderr of test/cli/y.test.ts: …scan-«secret»\\n\n' +
        'secret scan: FAILED, 1 record(s) hold a planted secret\n',
    );
  });

  test('the by-design kinds (eval-pipe, const-value) and the planted list are not scanned', () => {
    const dir = capture([
      ...clean(2000),
      { kind: 'eval-pipe', file: 'test/cli/e.test.ts', text: JSON.stringify({ T: { key: 'T', value: SECRET, origin: 'store' } }) },
      { kind: 'const-value', file: 'test/security/s.test.ts', text: `{"URL":"u=${SECRET}"}` },
      { kind: 'planted', file: 'test/x.test.ts', text: SECRET },
    ]);
    const r = scan(dir);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(
      r.stderr,
      'secret scan: 2002 records (const-value 1, eval-pipe 1, planted 1, response-body 2000)\nsecret scan: no planted secret outside the by-design outputs\n',
    );
  });

  test('too small a capture fails (2,000 records for a whole suite); --min and CFGU_SECRET_SCAN_MIN lower the floor', () => {
    const dir = capture(clean(1999));
    const r = scan(dir);
    assert.equal(r.code, 1);
    assert.equal(
      r.stderr,
      'secret scan: 1999 records (response-body 1999)\n' +
        'secret scan: FAILED, 1999 records is fewer than the 2000 a meaningful scan needs (--min or CFGU_SECRET_SCAN_MIN)\n',
    );
    assert.equal(scan(dir, [], { CFGU_SECRET_SCAN_MIN: '1999' }).code, 0);
    assert.equal(scan(dir, ['--min', '10'], { CFGU_SECRET_SCAN_MIN: '5000' }).code, 0, '--min wins over the environment');
    const empty = tempDir('cfgu-scan-');
    assert.deepEqual(scan(empty, ['--min', '1']), {
      code: 1,
      stdout: '',
      stderr: 'secret scan: 0 records (none)\nsecret scan: FAILED, 0 records is fewer than the 1 a meaningful scan needs (--min or CFGU_SECRET_SCAN_MIN)\n',
    });
  });

  test('usage errors: exit 2', () => {
    const r = spawnSync(process.execPath, [SCANNER], { encoding: 'utf8' });
    assert.equal(r.status, 2);
    assert.equal(r.stderr, 'secret scan: one capture folder expected\nusage: node scripts/secret-scan.mjs <capture folder> [--min N]\n');
    const bad = scan(tempDir('cfgu-scan-'), ['--min', 'many']);
    assert.equal(bad.code, 2);
    assert.equal(bad.stderr, 'secret scan: --min needs a whole number\nusage: node scripts/secret-scan.mjs <capture folder> [--min N]\n');
  });
});

describe('test/helpers/capture.ts in a test process', { concurrency: true }, () => {
  /** Run the child fixture with CFGU_TEST_CAPTURE set to a fresh folder; its records. */
  function child(mode: 'leak' | 'clean'): { dir: string; records: Array<Rec & { as?: string }> } {
    const dir = join(tempDir('cfgu-capture-'), 'capture');
    mkdirSync(dir);
    const r = spawnSync(process.execPath, ['--import', 'tsx', join(ROOT, 'test', 'security', 'fixtures', 'capture-child.ts'), mode], {
      cwd: ROOT,
      encoding: 'utf8',
      env: { ...process.env, CFGU_TEST_CAPTURE: dir },
    });
    assert.equal(r.status, 0, r.stderr);
    const files = readdirSync(dir);
    assert.equal(files.length, 1, 'one file per process');
    assert.match(files[0]!, /^\d+\.jsonl$/);
    return { dir, records: readFileSync(join(dir, files[0]!), 'utf8').trim().split('\n').map((l) => JSON.parse(l)) };
  }

  test('Fastify answers are captured without the test doing anything; eval output and declared const values get their by-design kinds', () => {
    const { dir, records } = child('clean');
    assert.deepEqual(new Set(records.map((r) => r.file)), new Set(['test/security/fixtures/capture-child.ts']));
    assert.deepEqual(
      records.map((r) => (r.as ? `${r.kind} (as ${r.as})` : r.kind)),
      ['planted', 'response-body', 'response-header', 'eval-pipe (as cli-stdout)', 'const-value (as cli-stdout)', 'cli-stderr'],
    );
    assert.equal(records[1]!.text, '{"value":"nothing to see"}');
    assert.equal(scan(dir, ['--min', '5']).code, 0);
  });

  test('a secret in a Fastify answer fails the scan', () => {
    const { dir, records } = child('leak');
    assert.equal(records[1]!.kind, 'response-body');
    const r = scan(dir, ['--min', '0']);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /^secret scan: LEAK in response-body of test\/security\/fixtures\/capture-child\.ts: \{"value":"«secret»"\}$/m);
    assert.ok(!r.stderr.includes(SECRET_MARKER));
  });
});
