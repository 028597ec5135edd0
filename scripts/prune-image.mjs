// Run by the Dockerfile's builder stage after `npm prune --omit=dev`: removes from node_modules what the runtime
// image never loads, to keep the image small. It runs on the image's own Node, so "this Node" below is the image's.
// docs/deploy.md lists what goes and why that is safe; the build then checks it (scripts/check-image.mjs).
//  - the isolated-vm builds for other Node majors (the loader, src/expressions/isolated-vm.ts, takes only one), and the
//    better-sqlite3 line for other Node majors (src/stores/drivers.ts takes 12 on Node 20, 13 from Node 22);
//  - prebuilt native binaries for other platforms, and C/C++ sources, objects and static libraries of the modules
//    compiled here (better-sqlite3's SQLite amalgamation, isolated-vm's sources): only their `.node` files load;
//  - the debugging symbols of those `.node` files (`strip --strip-unneeded`: what the dynamic linker needs stays);
//  - files Node never loads: source maps, TypeScript sources and declarations, Markdown, packed tarballs (isolated-vm
//    7 ships a .tgz of its own sources), and test, documentation, example and benchmark folders of packages;
//  - OpenTelemetry's bundler builds (build/esm, build/esnext): Node loads build/src, the `main` entry and the
//    `default` export condition of every @opentelemetry package that has them (checked here, per package).
import { spawnSync } from 'node:child_process';
import { existsSync, lstatSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describeSandboxBuild } from '../dist/sandbox-build.js';
import { SQLITE_BUILDS, describeSqliteBuild, sqliteBuildName } from '../dist/sqlite-build.js';

const root = process.argv[2] ?? process.cwd();
const modules = join(root, 'node_modules');
const kept = describeSandboxBuild();
const alias = /\((isolated-vm[\w-]*)\)$/.exec(kept)?.[1];
if (!alias) throw new Error(`prune-image: no isolated-vm build for this Node: ${kept}`);
let removed = 0;
let bytes = 0;
/** Size of a file or folder tree (bytes), symbolic links not followed. */
const sizeOf = (p) => {
  const s = lstatSync(p);
  if (!s.isDirectory()) return s.size;
  return readdirSync(p).reduce((sum, name) => sum + sizeOf(join(p, name)), 0);
};
const drop = (p) => {
  if (!existsSync(p)) return;
  bytes += sizeOf(p);
  rmSync(p, { recursive: true, force: true });
  removed++;
};
for (const name of readdirSync(modules)) if (/^isolated-vm(-node\d+)?$/.test(name) && name !== alias) drop(join(modules, name));
const sqlite = sqliteBuildName();
if (!existsSync(join(modules, sqlite))) throw new Error(`prune-image: the SQLite driver for this Node (${sqlite}) is not installed`);
for (const { alias: other } of SQLITE_BUILDS) if (other !== sqlite) drop(join(modules, other));

const abi = `abi${process.versions.modules}`;
const platform = `${process.platform}-${process.arch}`;
const walk = (dir, depth = 0) => {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (!statSync(p).isDirectory()) continue;
    if (name === 'prebuilds') {
      for (const target of readdirSync(p)) {
        if (target === `${platform}.node`) continue; // one file per target (better-sqlite3 13); glibc, not musl
        if (target !== platform) drop(join(p, target));
        else for (const f of readdirSync(join(p, target))) if (!f.includes(abi) || f.includes('musl')) drop(join(p, target, f));
      }
    } else if (depth < 4) walk(p, depth + 1);
  }
};
walk(modules);

// Compiled here or prebuilt: only the `.node` files load (better-sqlite3 12 finds build/Release/better_sqlite3.node
// through `bindings`, 13 loads prebuilds/<platform>.node; isolated-vm loads out/isolated_vm.node).
const natives = [];
for (const name of [sqlite, alias]) {
  const pkg = join(modules, name);
  for (const sub of ['deps', 'src', 'vendor', 'include', 'native-example', 'binding.gyp', 'include.js', 'inspector-example.js']) drop(join(pkg, sub));
  for (const f of existsSync(pkg) ? readdirSync(pkg) : []) if (/^Dockerfile/.test(f)) drop(join(pkg, f));
  const build = join(pkg, 'build');
  if (existsSync(build)) {
    for (const f of readdirSync(build)) if (f !== 'Release') drop(join(build, f));
    const release = join(build, 'Release');
    if (existsSync(release)) for (const f of readdirSync(release)) if (f !== `${name === sqlite ? 'better_sqlite3' : 'isolated_vm'}.node`) drop(join(release, f));
  }
  for (const dir of [join(pkg, 'build', 'Release'), join(pkg, 'out'), join(pkg, 'prebuilds', platform)]) {
    if (existsSync(dir)) for (const f of readdirSync(dir)) if (f.endsWith('.node')) natives.push(join(dir, f));
  }
  if (existsSync(join(pkg, 'prebuilds', `${platform}.node`))) natives.push(join(pkg, 'prebuilds', `${platform}.node`));
}
let stripped = 0;
const hasStrip = spawnSync('sh', ['-c', 'command -v strip'], { stdio: 'ignore' }).status === 0;
if (hasStrip) {
  for (const f of natives) {
    const before = statSync(f).size;
    const r = spawnSync('strip', ['--strip-unneeded', f], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`prune-image: strip ${f} failed: ${r.stderr}`);
    stripped += before - statSync(f).size;
  }
}

// OpenTelemetry: build/src is what Node loads; the other builds are for bundlers. Only when package.json agrees.
const otel = join(modules, '@opentelemetry');
const BUNDLER_ONLY = new Set(['esnext', 'module', 'types', 'browser']);
if (existsSync(otel)) {
  for (const name of readdirSync(otel)) {
    const pkg = join(otel, name);
    const manifest = JSON.parse(readFileSync(join(pkg, 'package.json'), 'utf8'));
    const main = String(manifest.main ?? '').replace(/^\.\//, '');
    // What Node can load through `exports`: every target except those under bundler-only conditions.
    const targets = [];
    const collect = (v) => {
      if (typeof v === 'string') targets.push(v);
      else if (v && typeof v === 'object') for (const [k, sub] of Object.entries(v)) if (!BUNDLER_ONLY.has(k)) collect(sub);
    };
    collect(manifest.exports ?? {});
    if (!main.startsWith('build/src/') || targets.some((t) => /build\/(esm|esnext)\//.test(t))) {
      if (existsSync(join(pkg, 'build', 'esm')) || existsSync(join(pkg, 'build', 'esnext'))) console.log(`prune-image: kept every build of @opentelemetry/${name} (Node may load one)`);
      continue;
    }
    drop(join(pkg, 'build', 'esm'));
    drop(join(pkg, 'build', 'esnext'));
  }
}

// Files and folders Node never loads, in every package. Licence texts stay, whatever their extension.
const FILE = /(\.map|\.[cm]?ts|\.md|\.markdown|\.tgz)$/i;
const LICENCE = /^(licen[cs]e|copying|notice|authors)/i;
const FOLDERS = new Set(['test', 'tests', '__tests__', 'example', 'examples', 'benchmark', 'benchmarks', '.github', 'docs', 'doc']);
/** A package's files: its top folders of tests, documentation and examples go, then the file patterns throughout. */
const cleanPackage = (pkg) => {
  for (const name of readdirSync(pkg)) if (FOLDERS.has(name) && lstatSync(join(pkg, name)).isDirectory()) drop(join(pkg, name));
  cleanFiles(pkg);
};
const cleanFiles = (dir) => {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    const s = lstatSync(p);
    if (s.isDirectory()) name === 'node_modules' ? cleanModules(p) : cleanFiles(p);
    else if (s.isFile() && FILE.test(name) && !LICENCE.test(name)) drop(p);
  }
};
/** A node_modules folder: every package in it (scoped ones one level down). */
const cleanModules = (dir) => {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (!lstatSync(p).isDirectory()) continue;
    if (name.startsWith('@')) for (const sub of readdirSync(p)) lstatSync(join(p, sub)).isDirectory() && cleanPackage(join(p, sub));
    else if (name !== '.bin') cleanPackage(p);
  }
};
cleanModules(modules);
console.log(
  `prune-image: kept ${kept} and ${describeSqliteBuild()}; removed ${removed} folders or files (${(bytes / 2 ** 20).toFixed(1)} MB)` +
    (hasStrip ? `; stripped ${natives.length} native modules (${(stripped / 2 ** 20).toFixed(1)} MB)` : '; no strip here, native modules kept whole'),
);
