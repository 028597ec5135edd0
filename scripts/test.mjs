// `npm test`: build, install what the suites need when missing, then run every test file with node's test runner (each
// file bundled to JavaScript first by scripts/build-tests.mjs).
// Nothing here starts a service: tests that need a server of their own start it and stop it (test/helpers/private.ts).
import { spawn, spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, statSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { CAPTURE_SOURCE, bundleOf } from './build-tests.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const run = (cmd, args, opts = {}) => {
  const r = spawnSync(cmd, args, { stdio: 'inherit', cwd: root, ...opts });
  if (r.status !== 0) process.exit(r.status ?? 1);
};

const walk = (dir) =>
  readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) return name === 'fixtures' || name === '.tmp' ? [] : walk(p);
    return /\.test\.ts$/.test(name) ? [p] : [];
  });
const filter = process.argv.slice(2);
let files = walk(join(root, 'test')).map((p) => relative(root, p)).sort();
if (filter.length) files = files.filter((f) => filter.some((x) => f.includes(x)));
// The build, the type check, the layering check and the test build side by side (they read the sources and write
// nothing the others read); any failure stops the run with its exit code. Types: neither esbuild nor tsx checks them,
// so a type error would otherwise pass unnoticed; the check is incremental (its state in .cache/tsc.tsbuildinfo), so a
// run after one that changed no source takes about 1 s of the type checker's 6-7. Layering (docs/architecture.md):
// each folder of src/ imports only what its row of the table allows. Sizes: no file of src/ over 400 lines, no
// function over 100 (scripts/check-sizes.mjs). The test build (scripts/build-tests.mjs): each
// test file as one JavaScript bundle, so that test processes run on plain node.
const together = (...steps) =>
  Promise.all(steps.map(([cmd, args]) => new Promise((resolve) => spawn(cmd, args, { stdio: 'inherit', cwd: root }).on('close', (code) => resolve(code ?? 1)))));
for (const code of await together(
  [process.execPath, [join(root, 'scripts/build.mjs')]],
  [join(root, 'node_modules/.bin/tsc'), ['--noEmit', '-p', root, '--incremental', '--tsBuildInfoFile', join(root, '.cache/tsc.tsbuildinfo')]],
  // The browser console has its own project (DOM types, JSX for Preact): src/console/tsconfig.json.
  [join(root, 'node_modules/.bin/tsc'), ['--noEmit', '-p', join(root, 'src/console'), '--incremental', '--tsBuildInfoFile', join(root, '.cache/tsc-console.tsbuildinfo')]],
  [process.execPath, [join(root, 'scripts/check-layers.mjs')]],
  [process.execPath, [join(root, 'scripts/check-sizes.mjs')]],
  [process.execPath, [join(root, 'scripts/build-tests.mjs'), ...files]],
)) {
  if (code !== 0) process.exit(code);
}
// Optional install steps (etcd, Chromium, ...): scripts/test-setup-*.sh; they start nothing.
for (const f of readdirSync(join(root, 'scripts')).filter((f) => /^test-setup-.+\.sh$/.test(f)).sort()) {
  run('bash', [join(root, 'scripts', f)]);
}

// Slowest first, by the times of earlier runs (.cache/test-durations.json, written by scripts/test-durations.mjs), so
// the files running side by side finish together instead of one long file starting last; files without a recorded
// time go first.
const recorded = (() => {
  try {
    return JSON.parse(readFileSync(join(root, '.cache/test-durations.json'), 'utf8'));
  } catch {
    return {};
  }
})();
files.sort((a, b) => (recorded[b] ?? Infinity) - (recorded[a] ?? Infinity) || a.localeCompare(b));
// The container image test waits on an image build of minutes (seconds once cached): the build starts now, in the
// background, and that test runs last, so the build overlaps the rest of the suite instead of holding it up.
const IMAGE_TEST = 'test/deploy/image.test.ts';
if (files.includes(IMAGE_TEST)) {
  files = [...files.filter((f) => f !== IMAGE_TEST), IMAGE_TEST];
  const has = (cmd) => spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;
  if (has('buildah') && has('debootstrap')) {
    const log = join(mkdtempSync(join(tmpdir(), 'cfgu-image-build-')), 'build.log');
    const tag = `localhost/cfgu-test:${process.pid}`;
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k)));
    const fd = openSync(log, 'w');
    // `sh` writes the exit code next to the log; the test reads both (and removes the image when done).
    spawn('sh', ['-c', 'node scripts/image-local.mjs "$1"; echo $? > "$2.rc"', 'sh', tag, log], { cwd: root, env, stdio: ['ignore', fd, fd] }).unref();
    process.env.CFGU_IMAGE_BUILD_LOG = log;
    process.env.CFGU_IMAGE_BUILD_TAG = tag;
  }
}
if (!files.length) {
  console.error('no test files found');
  process.exit(1);
}
const started = Date.now();
process.on('exit', () => console.error(`cfgu test: ${files.length} file(s) in ${((Date.now() - started) / 1000).toFixed(1)} s`));
// Two files at a time by default: most of a file's time is waiting on child processes and servers (README.md,
// Development, has the figures). CFGU_TEST_CONCURRENCY=1 runs one at a time, for a machine that is already busy.
const reporters = ['--test-reporter=spec', '--test-reporter-destination=stdout', `--test-reporter=${join(root, 'scripts/test-durations.mjs')}`, '--test-reporter-destination=stderr'];
const concurrency = [`--test-concurrency=${/^[1-9]$/.test(process.env.CFGU_TEST_CONCURRENCY ?? '') ? process.env.CFGU_TEST_CONCURRENCY : 2}`];
// The whole-suite secret scan (docs/security.md): every test process captures what the shared helpers saw into a
// temporary folder (test/helpers/capture.ts, loaded first in each), scanned for planted secrets once the tests end.
// The processes run the test build's bundles (scripts/build-tests.mjs) on plain node, source maps on for stack traces.
const capture = mkdtempSync(join(tmpdir(), 'cfgu-capture-'));
const testArgs = ['--enable-source-maps', '--test', '--import', pathToFileURL(bundleOf(relative(root, CAPTURE_SOURCE))).href, ...concurrency, ...reporters, ...files.map(bundleOf)];
const tests = spawnSync(process.execPath, testArgs, { stdio: 'inherit', cwd: root, env: { ...process.env, CFGU_TEST_CAPTURE: capture } });
// The 2,000-record floor holds for a whole-suite run; a run of some files only reports (CFGU_SECRET_SCAN_MIN overrides).
const min = filter.length ? ['--min', process.env.CFGU_SECRET_SCAN_MIN ?? '0'] : [];
const scanned = spawnSync(process.execPath, [join(root, 'scripts/secret-scan.mjs'), capture, ...min], { stdio: 'inherit', cwd: root });
rmSync(capture, { recursive: true, force: true });
process.exit(tests.status !== 0 ? (tests.status ?? 1) : (scanned.status ?? 1));
