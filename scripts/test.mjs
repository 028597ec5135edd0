// `npm test`: build, prepare the services the suites need, then run every test file with node's test runner (tsx).
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync, existsSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const run = (cmd, args, opts = {}) => {
  const r = spawnSync(cmd, args, { stdio: 'inherit', cwd: root, ...opts });
  if (r.status !== 0) process.exit(r.status ?? 1);
};

run(process.execPath, [join(root, 'scripts/build.mjs')]);
// Types first: tsx runs code it cannot type-check, so a type error would otherwise pass unnoticed.
run(join(root, 'node_modules/.bin/tsc'), ['--noEmit', '-p', root]);
// Optional service preparation steps (install/start etcd, Chromium, ...): scripts/test-setup-*.sh
for (const f of readdirSync(join(root, 'scripts')).filter((f) => /^test-setup-.+\.sh$/.test(f)).sort()) {
  run('bash', [join(root, 'scripts', f)]);
}

const walk = (dir) =>
  readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) return name === 'fixtures' || name === '.tmp' ? [] : walk(p);
    return /\.test\.ts$/.test(name) ? [p] : [];
  });
const filter = process.argv.slice(2);
let files = walk(join(root, 'test')).map((p) => relative(root, p)).sort();
if (filter.length) files = files.filter((f) => filter.some((x) => f.includes(x)));
if (!files.length) {
  console.error('no test files found');
  process.exit(1);
}
const tsx = join(root, 'node_modules/.bin/tsx');
run(existsSync(tsx) ? tsx : 'npx', existsSync(tsx) ? ['--test', '--test-reporter=spec', ...files] : ['tsx', '--test', ...files]);
