// A node:test reporter used by `npm test` beside the spec reporter: at the end, the time of each test file (the sum of
// its top-level tests, which run one after another), slowest first, so the costs of the suite are visible per file.
// The times are also recorded in .cache/test-durations.json (merged with earlier runs; scripts/test.mjs starts the
// slowest files first from them). A failed file's time is not recorded. Files are named by their source (the test
// processes run bundles of them: scripts/build-tests.mjs).
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sourceOf } from './build-tests.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const store = join(root, '.cache', 'test-durations.json');

function record(files) {
  let known = {};
  try {
    known = JSON.parse(readFileSync(store, 'utf8'));
  } catch {
    /* none yet */
  }
  for (const [file, r] of files) if (!r.failed) known[sourceOf(file) ?? relative(root, file)] = Math.round(r.ms);
  try {
    mkdirSync(dirname(store), { recursive: true });
    writeFileSync(store, `${JSON.stringify(known, null, 1)}\n`);
  } catch {
    /* a read-only checkout: the order stays alphabetical */
  }
}

export default async function* durations(source) {
  const files = new Map();
  for await (const event of source) {
    if ((event.type !== 'test:pass' && event.type !== 'test:fail') || event.data.nesting !== 0 || !event.data.file) continue;
    const row = files.get(event.data.file) ?? { ms: 0, tests: 0, failed: 0 };
    row.ms += event.data.details.duration_ms ?? 0;
    row.tests++;
    if (event.type === 'test:fail') row.failed++;
    files.set(event.data.file, row);
  }
  record(files);
  const rows = [...files].sort((a, b) => b[1].ms - a[1].ms);
  const total = rows.reduce((sum, [, r]) => sum + r.ms, 0);
  yield `\ntime per test file (sum of its top-level tests), slowest first; all files: ${(total / 1000).toFixed(1)} s\n`;
  for (const [file, r] of rows) {
    yield `${(r.ms / 1000).toFixed(1).padStart(8)} s  ${sourceOf(file) ?? relative(process.cwd(), file)}${r.failed ? `  (${r.failed} failed)` : ''}\n`;
  }
}
