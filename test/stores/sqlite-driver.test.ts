/**
 * The SQLite driver line per Node major (src/stores/drivers.ts). On Node 24, better-sqlite3 12 aborts the process when
 * the garbage collector frees a statement it prepared (`Assertion failed: (env) != nullptr`); the loader must take
 * the 13 line there. The churn test prepares statements and drops them, as the store's change feed and its bounded
 * statement cache do, in a child process with the collector exposed, and checks the child ends normally.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { describeSqliteBuild, sqliteBuildName, sqliteDriver } from '../../src/stores/drivers.js';
import { ROOT } from '../cli/helpers.js';

const major = Number(process.versions.node.split('.')[0]);

test('the driver line matches the running Node: 12 on Node 20, 13 (better-sqlite3-node22) from Node 22', () => {
  const expected = major >= 22 ? { alias: 'better-sqlite3-node22', line: '13' } : { alias: 'better-sqlite3', line: '12' };
  assert.equal(sqliteBuildName(), expected.alias);
  assert.match(describeSqliteBuild(), new RegExp(`^better-sqlite3 ${expected.line}\\.\\d+\\.\\d+ \\(${expected.alias}\\)$`));
  const Database = sqliteDriver();
  const db = new Database(':memory:');
  try {
    assert.deepEqual(db.prepare('SELECT 6 * 7 AS n').get(), { n: 42 });
  } finally {
    db.close();
  }
});

test('statements and databases left to the garbage collector do not abort the process', async () => {
  const driver = pathToFileURL(join(ROOT, 'dist', 'sqlite-build.js')).href;
  const script = `
    const { sqliteDriver } = await import(${JSON.stringify(driver)});
    const Database = sqliteDriver();
    let rows = 0;
    for (let round = 0; round < 60; round++) {
      const db = new Database(':memory:');
      for (let i = 0; i < 500; i++) {
        rows += db.pragma('data_version', { simple: true }) === 1 ? 1 : 0;
        rows += db.prepare('SELECT ' + (i % 40) + ' AS n').get().n >= 0 ? 1 : 0;
      }
      if (round % 2) db.close();
      globalThis.gc();
    }
    process.stdout.write(String(rows));
  `;
  const child = spawn(process.execPath, ['--expose-gc', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d));
  child.stderr.on('data', (d: Buffer) => (stderr += d));
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((done) => child.on('close', (c, s) => done([c, s])));
  assert.deepEqual({ code, signal, stdout }, { code: 0, signal: null, stdout: String(60 * 500 * 2) }, stderr.slice(0, 2000));
});
