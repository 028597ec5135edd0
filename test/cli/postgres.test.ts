/**
 * The CLI against the real PostgreSQL at 127.0.0.1:5432 (user postgres, database test): upsert, eval, export (the
 * first upsert through the built binary, the rest through the dispatcher in this process: runCli), and the rows
 * checked with `pg`. Skips loudly when PostgreSQL is not reachable (fails under CI=true).
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';
import { requireService } from '../helpers/services.js';
import { cfgu, closeSandbox, killChildren, project, removeTempDirs, runCli } from './helpers.js';

const PG = { host: '127.0.0.1', port: 5432, user: 'postgres', database: 'test' };
const table = `cfgu_cli_${process.pid}_${Date.now().toString(36)}`;

const probe = async () => {
  const c = new pg.Client({ ...PG, connectionTimeoutMillis: 2000 });
  await c.connect();
  await c.end();
};

after(async () => {
  await closeSandbox();
  killChildren();
  removeTempDirs();
  const c = new pg.Client(PG);
  try {
    await c.connect();
    await c.query(`DROP TABLE IF EXISTS "${table}"`);
  } catch {
    /* not reachable: nothing was created */
  } finally {
    await c.end().catch(() => undefined);
  }
});

test('upsert, eval and export with a postgresql store', async (t) => {
  if (!(await requireService(t, 'postgresql', probe))) return;
  const dir = project(
    { 'app.cfgu.yaml': 'keys:\n  HOST:\n    required: true\n  PORT:\n    default: 5432\n    test: $.value > 0\n' },
    {
      stores: {
        pg: { type: 'postgres', configuration: { host: PG.host, port: PG.port, username: PG.user, database: PG.database, tableName: table } },
      },
    },
  );
  const up = await cfgu(['upsert', '--store', 'pg', '--set', 'prod', '--schema', 'app.cfgu.yaml', '--kv', 'HOST=pg.local', '--kv', 'PORT=6543'], { cwd: dir });
  assert.equal(up.stderr, '');
  assert.equal(up.code, 0);
  assert.equal(up.stdout, '2 changes in store "pg", set "prod":\n+ HOST = "pg.local"\n+ PORT = "6543"\n');

  const c = new pg.Client(PG);
  await c.connect();
  try {
    const { rows } = await c.query(`SELECT id, "set", key, value FROM "${table}" ORDER BY key`);
    assert.deepEqual(rows.map((r) => [r.set, r.key, r.value]), [
      ['prod', 'HOST', 'pg.local'],
      ['prod', 'PORT', '6543'],
    ]);
  } finally {
    await c.end();
  }

  const ev = await runCli(['eval', '--store', 'pg', '--set', 'prod/eu', '--schema', 'app.cfgu.yaml'], { cwd: dir });
  assert.equal(ev.code, 0, ev.stderr);
  const ex = await runCli(['export', '--format', 'dotenv'], { cwd: dir, stdin: ev.stdout });
  assert.equal(ex.code, 0, ex.stderr);
  assert.equal(ex.stdout, 'HOST=pg.local\nPORT=6543\n');

  const bad = await runCli(['upsert', '--store', 'pg', '--set', 'prod', '--schema', 'app.cfgu.yaml', '-k', 'PORT', '-v', '-1'], { cwd: dir });
  assert.equal(bad.code, 2, 'a value starting with "-" must be attached: --value=-1');
  const neg = await runCli(['upsert', '--store', 'pg', '--set', 'prod', '--schema', 'app.cfgu.yaml', '-k', 'PORT', '--value=-1'], { cwd: dir });
  assert.equal(neg.code, 1);
  assert.equal(neg.stderr, 'cfgu upsert: 1 key failed validation:\ncommand 0, key PORT, rule test: the value of key "PORT" failed the test $.value > 0\n');
});
