/**
 * `cfgu history`, in-process (runCli) on real stores: json-file, sqlite and PostgreSQL (127.0.0.1:5432; skips loudly
 * when unreachable, fails under CI=true). Writes are made with `cfgu upsert --message` and `cfgu rollback`; the output
 * is asserted whole, with each record's time (the writer's clock) replaced by TIME after checking its form.
 */
import { after, describe, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { userInfo } from 'node:os';
import pg from 'pg';
import { requireService } from '../helpers/services.js';
import { closeSandbox, killChildren, project, removeTempDirs, runCli } from './helpers.js';

const PG = { host: '127.0.0.1', port: 5432, user: 'postgres', database: 'test' };
const table = `cfgu_hist_${process.pid}_${Date.now().toString(36)}`;

after(async () => {
  killChildren();
  removeTempDirs();
  await closeSandbox();
  const c = new pg.Client(PG);
  try {
    await c.connect();
    for (const t of [table, `${table}_revisions`, `${table}_history`]) await c.query(`DROP TABLE IF EXISTS "${t}"`);
  } catch {
    /* not reachable: nothing was created */
  } finally {
    await c.end().catch(() => undefined);
  }
});

const SCHEMA = { keys: { HOST: { required: true }, PORT: { default: 8080, test: '$.value > 1000' }, TOKEN: { hidden: true } } };
const ENV = { CFGU_SUBJECT: 'alice' };
const ISO = /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z/g;
const timeless = (text: string) => text.replace(ISO, 'TIME');

const KINDS: Record<string, { configu: () => Record<string, unknown>; probe?: () => Promise<void> }> = {
  'json-file': { configu: () => ({ stores: { main: { type: 'json-file', configuration: { path: 'data.json' } } } }) },
  sqlite: { configu: () => ({ stores: { main: { type: 'sqlite', configuration: { database: 'configs.sqlite' } } } }) },
  postgresql: {
    configu: () => ({
      stores: { main: { type: 'postgres', configuration: { host: PG.host, port: PG.port, username: PG.user, database: PG.database, tableName: table } } },
    }),
    probe: async () => {
      const c = new pg.Client({ ...PG, connectionTimeoutMillis: 2000 });
      await c.connect();
      await c.end();
    },
  },
};

async function ready(t: TestContext, kind: string): Promise<string | undefined> {
  const k = KINDS[kind]!;
  if (k.probe && !(await requireService(t, kind, k.probe))) return undefined;
  return project({ 'app.cfgu.json': SCHEMA }, k.configu());
}

const run = (dir: string, args: string[], env: Record<string, string | undefined> = ENV) => runCli(args, { cwd: dir, env });

describe('cfgu history', { concurrency: false }, () => {
  for (const kind of Object.keys(KINDS)) {
    test(`${kind}: newest first, with subject, message, changes; --key, --limit/--before, --schema masks`, async (t) => {
      const dir = await ready(t, kind);
      if (!dir) return;
      const set = `hist-${kind}`;
      const w1 = await run(dir, ['upsert', '--set', set, '--schema', 'app.cfgu.json', '--kv', 'HOST=a', '--kv', 'PORT=2000', '--kv', 'TOKEN=s3cr3t', '-m', 'first']);
      assert.deepEqual(w1, { code: 0, stdout: `3 changes in store "main", set "${set}":\n+ HOST = "a"\n+ PORT = "2000"\n+ TOKEN = [hidden]\n`, stderr: '' });
      const w2 = await run(dir, ['upsert', '--set', set, '--schema', 'app.cfgu.json', '--kv', 'PORT=3000', '--message', 'port up', '--expect-revision', '1']);
      assert.deepEqual(w2, { code: 0, stdout: `1 change in store "main", set "${set}":\n~ PORT = "3000" (was "2000")\n`, stderr: '' });
      // Without CFGU_SUBJECT the subject is the user of the process; without --message there is none.
      const w3 = await run(dir, ['upsert', '--set', set, '--schema', 'app.cfgu.json', '--kv', 'HOST='], { CFGU_SUBJECT: undefined });
      assert.equal(w3.code, 0, w3.stderr);

      const h = await run(dir, ['history', '--set', set]);
      assert.equal(h.code, 0, h.stderr);
      assert.equal(h.stderr, '');
      assert.equal(h.stdout.match(ISO)?.length, 3);
      assert.equal(
        timeless(h.stdout),
        [
          `history of store "main", set "${set}", newest first:`,
          `revision 3  TIME  ${userInfo().username}`,
          '  - HOST (was "a")',
          'revision 2  TIME  alice  "port up"',
          '  ~ PORT = "3000" (was "2000")',
          'revision 1  TIME  alice  "first"',
          '  + HOST = "a"',
          '  + PORT = "2000"',
          '  + TOKEN = "s3cr3t"',
          '',
        ].join('\n'),
      );
      const byKey = await run(dir, ['history', '--set', set, '--key', 'PORT', '--schema', 'app.cfgu.json']);
      assert.equal(
        timeless(byKey.stdout),
        `history of store "main", set "${set}", newest first:\nrevision 2  TIME  alice  "port up"\n  ~ PORT = "3000" (was "2000")\nrevision 1  TIME  alice  "first"\n  + HOST = "a"\n  + PORT = "2000"\n  + TOKEN = [hidden]\n`,
      );
      const page1 = await run(dir, ['history', '--set', set, '--limit', '1']);
      assert.equal(timeless(page1.stdout), `history of store "main", set "${set}", newest first:\nrevision 3  TIME  ${userInfo().username}\n  - HOST (was "a")\nolder records: add --before 3\n`);
      const page2 = await run(dir, ['history', '--set', set, '--limit', '2', '--before', '3', '--format', 'json', '--schema', 'app.cfgu.json']);
      assert.equal(page2.code, 0, page2.stderr);
      const json = JSON.parse(page2.stdout) as { records: Array<{ time: string }> };
      for (const r of json.records) assert.match(r.time, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
      assert.deepEqual(JSON.parse(timeless(page2.stdout)), {
        store: 'main',
        set,
        records: [
          { revision: 2, time: 'TIME', subject: 'alice', requestId: null, message: 'port up', recorded: true, changes: [{ key: 'PORT', before: '2000', after: '3000' }] },
          {
            revision: 1,
            time: 'TIME',
            subject: 'alice',
            requestId: null,
            message: 'first',
            recorded: true,
            changes: [
              { key: 'HOST', before: null, after: 'a' },
              { key: 'PORT', before: null, after: '2000' },
              { key: 'TOKEN', before: null, after: { hidden: true } },
            ],
          },
        ],
      });
      // --since after the last write: nothing; a set never written: nothing.
      const none = await run(dir, ['history', '--set', set, '--since', '2999-01-01']);
      assert.deepEqual(none, { code: 0, stdout: `no history in store "main", set "${set}"\n`, stderr: '' });
      const empty = await run(dir, ['history', '--set', `${set}/never`]);
      assert.deepEqual(empty, { code: 0, stdout: `no history in store "main", set "${set}/never"\n`, stderr: '' });
    });
  }

  test('a change made outside cfgu is shown where cfgu found it', async () => {
    const dir = project({ 'app.cfgu.json': SCHEMA, 'data.json': [{ set: 'prod', key: 'HOST', value: 'by-hand' }] });
    const w = await run(dir, ['upsert', '--set', 'prod', '--schema', 'app.cfgu.json', '--kv', 'PORT=2000']);
    assert.equal(w.code, 0, w.stderr);
    const h = await run(dir, ['history', '--set', 'prod']);
    assert.equal(
      timeless(h.stdout),
      'history of store "main", set "prod", newest first:\nrevision 2  TIME  alice\n  + PORT = "2000"\nrevision 1  TIME  outside cfgu (not recorded)  "values present before cfgu kept the history of this set; not recorded"\n  + HOST = "by-hand"\n',
    );
  });

  test('usage errors: exit 2, exact messages', async () => {
    const dir = project({ 'app.cfgu.json': SCHEMA });
    const cases: Array<[string[], string]> = [
      [['--limit', '0'], '--limit 0 must be between 1 and 1000'],
      [['--limit', 'ten'], '--limit "ten" must be a whole number of 0 or more'],
      [['--since', 'yesterday'], '--since "yesterday" must be an ISO 8601 time, e.g. 2026-05-01 or 2026-05-01T12:00:00Z'],
      [['--format', 'yaml'], '--format "yaml" is not one of text, json'],
      [['--set', 'a//b'], '--set "a//b": set path "a//b" has an empty segment'],
      [['--server', 'ftp://x'], '--server "ftp://x" must be an http:// or https:// URL'],
      [['--server', 'http://127.0.0.1:1', '--schema', 'app.cfgu.json'], '--schema is not taken with --server: the server masks what the token may not see'],
    ];
    for (const [args, message] of cases) {
      const r = await run(dir, ['history', ...args]);
      assert.deepEqual(r, { code: 2, stdout: '', stderr: `cfgu history: ${message}\nRun "cfgu history --help" for usage.\n` }, args.join(' '));
    }
    const unknown = await run(dir, ['history', '--store', 'nope']);
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /^cfgu history: .*"nope".*\n$/);
    const help = await run(dir, ['history', '--help']);
    assert.equal(help.code, 0);
    assert.match(help.stdout, /^Usage: cfgu history --store NAME --set PATH/);
  });
});
