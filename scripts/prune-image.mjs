// Run by the Dockerfile's builder stage after `npm prune --omit=dev`: removes from node_modules what the runtime
// image never loads, to keep the image small. It runs on the image's own Node, so "this Node" below is the image's.
//  - the isolated-vm builds for other Node majors (the loader, src/expressions/isolated-vm.ts, takes only one);
//  - prebuilt native binaries for other platforms and C/C++ sources and objects of modules compiled here.
import { existsSync, readdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describeSandboxBuild } from '../dist/sandbox-build.js';

const root = process.argv[2] ?? process.cwd();
const modules = join(root, 'node_modules');
const kept = describeSandboxBuild();
const alias = /\((isolated-vm[\w-]*)\)$/.exec(kept)?.[1];
if (!alias) throw new Error(`prune-image: no isolated-vm build for this Node: ${kept}`);
let removed = 0;
const drop = (p) => {
  if (!existsSync(p)) return;
  rmSync(p, { recursive: true, force: true });
  removed++;
};
for (const name of readdirSync(modules)) if (/^isolated-vm(-node\d+)?$/.test(name) && name !== alias) drop(join(modules, name));

const abi = `abi${process.versions.modules}`;
const platform = `${process.platform}-${process.arch}`;
const walk = (dir, depth = 0) => {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (!statSync(p).isDirectory()) continue;
    if (name === 'prebuilds') {
      for (const target of readdirSync(p)) {
        if (target !== platform) drop(join(p, target));
        else for (const f of readdirSync(join(p, target))) if (!f.includes(abi) || f.includes('musl')) drop(join(p, target, f));
      }
    } else if (depth < 4) walk(p, depth + 1);
  }
};
walk(modules);
// Compiled here: keep build/Release/*.node only.
for (const name of ['better-sqlite3', alias]) {
  const pkg = join(modules, name);
  drop(join(pkg, 'deps'));
  drop(join(pkg, 'src'));
  drop(join(pkg, 'vendor'));
  drop(join(pkg, 'build', 'Release', 'obj.target'));
  drop(join(pkg, 'build', 'Release', '.deps'));
  drop(join(pkg, 'build', 'Release', 'obj'));
  drop(join(pkg, 'build', 'deps'));
}
console.log(`prune-image: kept ${kept}; removed ${removed} folders or files`);
