/**
 * `cfgu rollback`, in-process (runCli) on json-file and sqlite stores: back to a revision (all keys or --key ones),
 * --preview with the impact on .configu's named schemas, revision 0, and the refusals (a revision that does not exist,
 * a key that did not change, values the schema now refuses, a stale --expect-revision): exact output and exit codes,
 * and nothing written by a refused rollback.
 */
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { closeSandbox, killChildren, project, removeTempDirs, runCli, write } from './helpers.js';

after(async () => {
  killChildren();
  removeTempDirs();
  await closeSandbox();
});

const SCHEMA = { keys: { HOST: { required: true }, PORT: { default: 8080, test: '$.value > 1000' }, MODE: { enum: ['dev', 'prod'] } } };
const ENV = { CFGU_SUBJECT: 'bob' };
const ISO = /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z/g;
const timeless = (text: string) => text.replace(ISO, 'TIME');
const run = (dir: string, args: string[]) => runCli(args, { cwd: dir, env: ENV });

const STORES: Record<string, Record<string, unknown>> = {
  'json-file': { stores: { main: { type: 'json-file', configuration: { path: 'data.json' } } }, schemas: { app: 'app.cfgu.json' } },
  sqlite: { stores: { main: { type: 'sqlite', configuration: { database: 'configs.sqlite' } } }, schemas: { app: 'app.cfgu.json' } },
};

/** Three revisions of set prod: 1 HOST=a PORT=2000; 2 PORT=3000; 3 HOST=b MODE=prod. */
async function threeRevisions(configu: Record<string, unknown>): Promise<string> {
  const dir = project({ 'app.cfgu.json': SCHEMA }, configu);
  for (const kv of [['HOST=a', 'PORT=2000'], ['PORT=3000'], ['HOST=b', 'MODE=prod']]) {
    const r = await run(dir, ['upsert', '--set', 'prod', '--schema', 'app', ...kv.flatMap((x) => ['--kv', x])]);
    assert.equal(r.code, 0, r.stderr);
  }
  return dir;
}

describe('cfgu rollback', { concurrency: true }, () => {
  for (const [kind, configu] of Object.entries(STORES)) {
    test(`${kind}: preview, then back to revision 1 as revision 4, recorded with its message`, async () => {
      const dir = await threeRevisions(configu);
      const preview = await run(dir, ['rollback', '--set', 'prod', '--to', '1', '--schema', 'app', '--preview']);
      assert.deepEqual(preview, {
        code: 0,
        stdout: [
          'preview, nothing written: 3 changes in store "main", set "prod" (back to revision 1) at revision 3:',
          '~ HOST = "a" (was "b")',
          '- MODE (was "prod")',
          '~ PORT = "2000" (was "3000")',
          'impact:',
          '  schema "app", set "prod": changes (HOST, PORT, MODE)',
          '',
        ].join('\n'),
        stderr: '',
      });
      const done = await run(dir, ['rollback', '--set', 'prod', '--to', '1', '--schema', 'app.cfgu.json']);
      assert.deepEqual(done, {
        code: 0,
        stdout: '3 changes in store "main", set "prod" (back to revision 1, now revision 4):\n~ HOST = "a" (was "b")\n- MODE (was "prod")\n~ PORT = "2000" (was "3000")\n',
        stderr: '',
      });
      const h = await run(dir, ['history', '--set', 'prod', '--limit', '1']);
      assert.equal(
        timeless(h.stdout),
        'history of store "main", set "prod", newest first:\nrevision 4  TIME  bob  "rollback to revision 1"\n  ~ HOST = "a" (was "b")\n  - MODE (was "prod")\n  ~ PORT = "2000" (was "3000")\nolder records: add --before 4\n',
      );
      // Back to where it is: nothing to do.
      const same = await run(dir, ['rollback', '--set', 'prod', '--to', '4', '--schema', 'app']);
      assert.deepEqual(same, { code: 0, stdout: 'no changes in store "main", set "prod" (back to revision 4, now revision 4)\n', stderr: '' });
    });
  }

  test('--key restores only the keys named; --message is recorded; --to 0 removes what cfgu wrote', async () => {
    const dir = await threeRevisions(STORES['json-file']!);
    const one = await run(dir, ['rollback', '--set', 'prod', '--to', '1', '-k', 'PORT', '--schema', 'app', '-m', 'port back']);
    assert.deepEqual(one, { code: 0, stdout: '1 change in store "main", set "prod" (back to revision 1, now revision 4):\n~ PORT = "2000" (was "3000")\n', stderr: '' });
    const h = await run(dir, ['history', '--set', 'prod', '--limit', '1', '--format', 'json']);
    assert.equal((JSON.parse(h.stdout) as { records: Array<{ message: string }> }).records[0]!.message, 'port back');
    // Revision 0 is the set before cfgu wrote it. Removing values is validated as `cfgu upsert` validates it (a
    // removal is never refused), but the preview shows that the named schema would then fail.
    const zero = await run(dir, ['rollback', '--set', 'prod', '--to', '0', '--schema', 'app', '--preview']);
    assert.deepEqual(zero, {
      code: 0,
      stdout: [
        'preview, nothing written: 3 changes in store "main", set "prod" (back to revision 0) at revision 4:',
        '- PORT (was "2000")',
        '- HOST (was "b")',
        '- MODE (was "prod")',
        'impact:',
        '  schema "app", set "prod": breaks (HOST, PORT, MODE)',
        '    key HOST, rule required: key "HOST" is required but has no value',
        '',
      ].join('\n'),
      stderr: '',
    });
    const zeroPort = await run(dir, ['rollback', '--set', 'prod', '--to', '0', '--key', 'PORT', '--key', 'MODE', '--schema', 'app']);
    assert.deepEqual(zeroPort, { code: 0, stdout: '2 changes in store "main", set "prod" (back to revision 0, now revision 5):\n- PORT (was "2000")\n- MODE (was "prod")\n', stderr: '' });
  });

  test('refusals: no such revision, a key that did not change, values the schema refuses now, a stale --expect-revision; nothing written', async () => {
    const dir = await threeRevisions(STORES['json-file']!);
    const data = () => readFileSync(join(dir, 'data.json'), 'utf8');
    const before = data();
    const cases: Array<[string[], number, string]> = [
      [['--to', '9'], 2, 'cfgu rollback: revision 9 does not exist: set "prod" is at revision 3\n'],
      [['--to', '2', '--key', 'NOTE'], 2, 'cfgu rollback: key "NOTE" did not change in set "prod" since revision 2\n'],
      [['--to', '1', '--expect-revision', '2'], 1, 'cfgu rollback: set "prod" of store "main" is at revision 3, not 2: it changed since it was read; nothing was written\n'],
      [['--to=-1'], 2, 'cfgu rollback: --to "-1" must be a whole number of 0 or more\nRun "cfgu rollback --help" for usage.\n'],
      [[], 2, 'cfgu rollback: --to is required: the revision to go back to (see `cfgu history`)\nRun "cfgu rollback --help" for usage.\n'],
      [['--to', '1', '--allow-breaking'], 2, 'cfgu rollback: --allow-breaking is for --server (a local write is never refused for its impact)\nRun "cfgu rollback --help" for usage.\n'],
    ];
    for (const [args, code, stderr] of cases) {
      const r = await run(dir, ['rollback', '--set', 'prod', '--schema', 'app', ...args]);
      assert.deepEqual(r, { code, stdout: '', stderr }, args.join(' '));
    }
    // The schema changed since revision 1: PORT must now be above 2500.
    write(join(dir, 'strict.cfgu.json'), { keys: { ...SCHEMA.keys, PORT: { test: '$.value > 2500' } } });
    const refused = await run(dir, ['rollback', '--set', 'prod', '--to', '1', '--schema', 'strict.cfgu.json']);
    assert.deepEqual(refused, { code: 1, stdout: '', stderr: 'cfgu rollback: 1 key failed validation:\ncommand 0, key PORT, rule test: the value of key "PORT" failed the test $.value > 2500\n' });
    assert.equal(data(), before);
    const h = await run(dir, ['history', '--set', 'prod', '--limit', '1']);
    assert.match(h.stdout, /\nrevision 3 /);
  });

  test('a revision the history no longer holds (retention) cannot be rolled back to: exit 2', async () => {
    const dir = await threeRevisions({
      stores: { main: { type: 'json-file', configuration: { path: 'data.json', history: { keep: 2 } } } },
      schemas: { app: 'app.cfgu.json' },
    });
    for (const to of ['0', '1']) {
      const r = await run(dir, ['rollback', '--set', 'prod', '--to', to, '--schema', 'app']);
      assert.deepEqual(r, { code: 2, stdout: '', stderr: `cfgu rollback: revision ${to} of set "prod" is no longer in its history\n` }, to);
    }
    const kept = await run(dir, ['rollback', '--set', 'prod', '--to', '2', '--schema', 'app', '--preview']);
    assert.equal(kept.code, 0, kept.stderr);
    assert.match(kept.stdout, /^preview, nothing written: 2 changes in store "main", set "prod" \(back to revision 2\) at revision 3:\n/);
  });
});
