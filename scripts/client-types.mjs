// The type declarations of cfgu/client (package.json "exports", "types"): dist/client-types/*.d.ts, from src/client
// with the TypeScript compiler (a development dependency; esbuild emits no types). Run by `prepack`, so the tarball
// carries them; `npm run build` does not need them.
import { spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const out = join(root, 'dist/client-types');
rmSync(out, { recursive: true, force: true });
const args = ['--ignoreConfig', '--declaration', '--emitDeclarationOnly', '--outDir', out, '--module', 'nodenext', '--moduleResolution', 'nodenext', '--target', 'es2022', '--strict', '--types', 'node', '--skipLibCheck', join(root, 'src/client/index.ts')];
const r = spawnSync(join(root, 'node_modules/.bin/tsc'), args, { cwd: root, stdio: 'inherit' });
if (r.status !== 0) process.exit(r.status ?? 1);
console.log('cfgu client types: dist/client-types/index.d.ts');
