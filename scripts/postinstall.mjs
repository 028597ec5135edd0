// `postinstall` (package.json). Two cases:
// - a checkout of the repository (src/ is there): `npm ci` builds dist/ with scripts/build.mjs, as it always did
//   (esbuild is a development dependency, installed by `npm ci`);
// - the installed package (`npm install ./cfgu-<version>.tgz` or from a registry): dist/ was built by `prepack`
//   and ships in the tarball, and there are no sources and no development dependencies; only the sandbox's start-up
//   aids are made again, for the Node that installs (scripts/sandbox-aids.mjs; a failure is a warning).
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
if (existsSync(join(root, 'src'))) {
  await import(pathToFileURL(join(root, 'scripts/build.mjs')).href);
} else {
  const { prepareSandboxAids } = await import('./sandbox-aids.mjs');
  const started = Date.now();
  const made = prepareSandboxAids(root, 'cfgu postinstall');
  console.log(`cfgu postinstall: the package's dist/ is used as built${made ? `; sandbox start-up aids made for Node ${process.versions.node} in ${Date.now() - started} ms${made}` : ''}`);
}
