/**
 * `cfgu upsert` on the write path (issue 34), in-process (runCli) on a json-file store: `--preview` (the diff and the
 * impact on .configu's named schemas over the written set and the sets under it; nothing written), `--message` and
 * `--expect-revision` (recorded, and a stale revision refused with exit 1), and their usage errors.
 */
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { closeSandbox, killChildren, project, removeTempDirs, runCli } from './helpers.js';

after(async () => {
  killChildren();
  removeTempDirs();
  await closeSandbox();
});

const APP = { keys: { HOST: { required: true }, PORT: { default: 8080, test: '$.value > 1000' }, TOKEN: { hidden: true } } };
const WORKER = { keys: { PORT: { test: '$.value < 5000' }, QUEUE: {} } };
const OTHER = { keys: { NAME: {} } };
const CONFIGU = {
  stores: { main: { type: 'json-file', configuration: { path: 'data.json' } } },
  schemas: { app: 'app.cfgu.json', worker: 'worker.cfgu.json', other: 'other.cfgu.json' },
};
const DATA = [
  { set: 'prod', key: 'HOST', value: 'a' },
  { set: 'prod', key: 'PORT', value: '2000' },
  { set: 'prod/eu', key: 'HOST', value: 'eu' },
  { set: 'prod/us', key: 'PORT', value: '900' },
  { set: 'staging', key: 'HOST', value: 's' },
];
const ENV = { CFGU_SUBJECT: 'carol' };
const run = (dir: string, args: string[]) => runCli(args, { cwd: dir, env: ENV });
const fresh = () => project({ 'extra.cfgu.json': { keys: { EXTRA: {} } }, 'app.cfgu.json': APP, 'worker.cfgu.json': WORKER, 'other.cfgu.json': OTHER, 'data.json': DATA }, CONFIGU);

describe('cfgu upsert --preview, --message, --expect-revision', { concurrency: true }, () => {
  test('--preview prints the diff and the impact per named schema and set under the written one; writes nothing', async () => {
    const dir = fresh();
    const before = readFileSync(join(dir, 'data.json'), 'utf8');
    const r = await run(dir, ['upsert', '--set', 'prod', '--schema', 'app', '--kv', 'PORT=6000', '--kv', 'TOKEN=t0p', '--preview']);
    assert.deepEqual(r, {
      code: 0,
      stdout: [
        'preview, nothing written: 2 changes in store "main", set "prod" at revision 0:',
        '~ PORT = "6000" (was "2000")',
        '+ TOKEN = [hidden]',
        'impact:',
        '  schema "app", set "prod": changes (PORT, TOKEN)',
        '  schema "app", set "prod/eu": changes (PORT, TOKEN)',
        // prod/us fails before and after (its own PORT), the same way; its TOKEN, inherited from prod, changes.
        '  schema "app", set "prod/us": changes (TOKEN)',
        '    key PORT, rule test: the value of key "PORT" failed the test $.value > 1000',
        '  schema "worker", set "prod": breaks (PORT)',
        '    key PORT, rule test: the value of key "PORT" failed the test $.value < 5000',
        '  schema "worker", set "prod/eu": breaks (PORT)',
        '    key PORT, rule test: the value of key "PORT" failed the test $.value < 5000',
        '  schema "worker", set "prod/us": unchanged',
        '',
      ].join('\n'),
      stderr: '',
    });
    assert.equal(readFileSync(join(dir, 'data.json'), 'utf8'), before);
    assert.equal(existsSync(join(dir, 'data.json.history.json')), false);
  });

  test('--preview: a write that fixes a failing set, and one no named schema declares', async () => {
    const dir = fresh();
    const fix = await run(dir, ['upsert', '--set', 'prod/us', '--schema', 'app', '--kv', 'HOST=us', '--kv', 'PORT=1500', '--preview']);
    assert.deepEqual(fix, {
      code: 0,
      stdout: [
        'preview, nothing written: 2 changes in store "main", set "prod/us" at revision 0:',
        '+ HOST = "us"',
        '~ PORT = "1500" (was "900")',
        'impact:',
        // Fixed: no failure after the write (the changed keys are listed, as for every status).
        '  schema "app", set "prod/us": fixes (HOST, PORT)',
        '  schema "worker", set "prod/us": changes (PORT)',
        '',
      ].join('\n'),
      stderr: '',
    });
    const none = await run(dir, ['upsert', '--set', 'staging', '--schema', 'worker.cfgu.json', '--kv', 'QUEUE=q', '--preview']);
    assert.deepEqual(none, {
      code: 0,
      stdout: 'preview, nothing written: 1 change in store "main", set "staging" at revision 0:\n+ QUEUE = "q"\nimpact:\n  schema "worker", set "staging": changes (QUEUE)\n',
      stderr: '',
    });
    const named = await run(dir, ['upsert', '--set', 'staging', '--schema', 'other', '--kv', 'NAME=n', '--preview']);
    assert.deepEqual(named, {
      code: 0,
      stdout: 'preview, nothing written: 1 change in store "main", set "staging" at revision 0:\n+ NAME = "n"\nimpact:\n  schema "other", set "staging": changes (NAME)\n',
      stderr: '',
    });
    const undeclared = await run(dir, ['upsert', '--set', 'staging', '--schema', 'extra.cfgu.json', '--kv', 'EXTRA=x', '--preview']);
    assert.deepEqual(undeclared, {
      code: 0,
      stdout: 'preview, nothing written: 1 change in store "main", set "staging" at revision 0:\n+ EXTRA = "x"\nimpact: no named schema declares a changed key\n',
      stderr: '',
    });
    const same = await run(dir, ['upsert', '--set', 'prod', '--schema', 'app', '--kv', 'HOST=a', '--preview']);
    assert.deepEqual(same, {
      code: 0,
      stdout: [
        'preview, nothing written: no changes in store "main", set "prod" at revision 0',
        'impact: none (nothing changes)',
        '',
      ].join('\n'),
      stderr: '',
    });
  });

  test('--message and --expect-revision: recorded; a stale revision is refused with exit 1 and writes nothing', async () => {
    const dir = fresh();
    const w = await run(dir, ['upsert', '--set', 'prod', '--schema', 'app', '--kv', 'PORT=3000', '-m', 'more room', '--expect-revision', '0']);
    assert.deepEqual(w, { code: 0, stdout: '1 change in store "main", set "prod":\n~ PORT = "3000" (was "2000")\n', stderr: '' });
    const h = await run(dir, ['history', '--set', 'prod', '--format', 'json']);
    const records = (JSON.parse(h.stdout) as { records: Array<Record<string, unknown>> }).records;
    assert.deepEqual(
      records.map((r) => [r.revision, r.subject, r.message, r.recorded]),
      [
        [2, 'carol', 'more room', true],
        [1, null, 'values present before cfgu kept the history of this set; not recorded', false],
      ],
    );
    const before = readFileSync(join(dir, 'data.json'), 'utf8');
    const stale = await run(dir, ['upsert', '--set', 'prod', '--schema', 'app', '--kv', 'PORT=4000', '--expect-revision', '1']);
    assert.deepEqual(stale, {
      code: 1,
      stdout: '',
      stderr: 'cfgu upsert: set "prod" of store "main" is at revision 2, not 1: it changed since it was read; nothing was written\n',
    });
    // Also when the values would change nothing, and for a preview.
    for (const extra of [['--kv', 'PORT=3000'], ['--kv', 'PORT=4000', '--preview']]) {
      const r = await run(dir, ['upsert', '--set', 'prod', '--schema', 'app', '--expect-revision', '5', ...extra]);
      assert.deepEqual(r, { code: 1, stdout: '', stderr: 'cfgu upsert: set "prod" of store "main" is at revision 2, not 5: it changed since it was read; nothing was written\n' });
    }
    assert.equal(readFileSync(join(dir, 'data.json'), 'utf8'), before);
    const ok = await run(dir, ['upsert', '--set', 'prod', '--schema', 'app', '--kv', 'PORT=4000', '--expect-revision', '2']);
    assert.equal(ok.code, 0, ok.stderr);
  });

  test('usage errors of the write flags: exit 2, exact messages', async () => {
    const dir = fresh();
    const cases: Array<[string[], string]> = [
      [['--expect-revision', 'latest'], '--expect-revision "latest" must be a whole number of 0 or more'],
      [['--message', 'x'.repeat(501)], '--message is 501 characters long: at most 500'],
      [['--allow-breaking'], '--allow-breaking is for --server (a local write is never refused for its impact)'],
      [['--server', 'not a url'], '--server "not a url" is not a URL (e.g. http://127.0.0.1:8080)'],
    ];
    for (const [args, message] of cases) {
      const r = await run(dir, ['upsert', '--set', 'prod', '--schema', 'app', '--kv', 'PORT=3000', ...args]);
      assert.deepEqual(r, { code: 2, stdout: '', stderr: `cfgu upsert: ${message}\nRun "cfgu upsert --help" for usage.\n` }, args.join(' ').slice(0, 40));
    }
  });
});
