// Run by the Dockerfile's builder stage right after scripts/prune-image.mjs: proves the pruned node_modules still
// works, so a pruning rule that removed something needed fails the image build instead of the running container.
//  - every production dependency of package.json is imported (ESM) and required (CommonJS, where the package offers
//    it), which loads the files each one needs at start-up;
//  - the better-sqlite3 line this Node uses (through cfgu's own loader) runs a query on an in-memory database (its
//    native module, as stripped); the line for other Node majors was pruned, so it is not imported;
//  - the isolated-vm build the sandbox uses runs a script in a new isolate (its native module, as stripped).
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadSandboxBuild } from '../dist/sandbox-build.js';
import { SQLITE_BUILDS, sqliteDriver } from '../dist/sqlite-build.js';

const root = process.argv[2] ?? process.cwd();
const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const require = createRequire(join(root, 'package.json'));
const failures = [];
const sqliteLines = new Set(SQLITE_BUILDS.map((b) => b.alias));
const names = Object.keys(manifest.dependencies ?? {}).filter((n) => !sqliteLines.has(n)).sort();
// Bare names resolve from this script's folder, inside the build folder: its node_modules.
for (const name of names) {
  try {
    await import(name);
  } catch (error) {
    failures.push(`import ${name}: ${error.message.split('\n')[0]}`);
  }
  try {
    require(name);
  } catch (error) {
    // An ESM-only package cannot be required on every Node; importing it above is its check.
    if (!['ERR_REQUIRE_ESM', 'ERR_PACKAGE_PATH_NOT_EXPORTED', 'ERR_REQUIRE_ASYNC_MODULE'].includes(error?.code)) {
      failures.push(`require ${name}: ${error.message.split('\n')[0]}`);
    }
  }
}

const Database = sqliteDriver();
const db = new Database(':memory:');
db.exec('CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT)');
db.prepare('INSERT INTO kv VALUES (?, ?)').run('GREETING', 'hello');
const row = db.prepare('SELECT v, sqlite_version() AS version FROM kv WHERE k = ?').get('GREETING');
db.close();
if (row?.v !== 'hello') failures.push(`better-sqlite3: unexpected row ${JSON.stringify(row)}`);

const { ivm, alias, version } = loadSandboxBuild();
const isolate = new ivm.Isolate({ memoryLimit: 16 });
const answer = isolate.createContextSync().evalSync('[1, 2, 3].map((n) => n * 7).reduce((a, b) => a + b)', { timeout: 10_000 });
isolate.dispose();
if (answer !== 42) failures.push(`isolated-vm: the isolate answered ${answer}`);

if (failures.length) {
  console.error(`check-image: the pruned node_modules is broken:\n  ${failures.join('\n  ')}`);
  process.exit(1);
}
console.log(`check-image: ${names.length} dependencies load; SQLite ${row.version} query; ${alias} ${version} isolate ran`);
