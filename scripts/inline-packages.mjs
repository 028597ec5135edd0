// An esbuild plugin for the builds that leave packages in node_modules (`packages: 'external'`): the packages named
// here are bundled all the same. Used by scripts/build.mjs (dist/) and scripts/build-tests.mjs (the test bundles).
//
// Why: `lodash/camelCase.js` and `lodash/isEqual.js`, the two lodash functions the host uses (src/core/names.ts,
// src/core/enum-rule.ts), are 112 modules in node_modules; loading them took about 35-40 ms of CPU at every start of
// a server, a worker, a `cfgu` command and a test process (resolving, reading and compiling each file). Bundled, they
// are part of a chunk that is loaded anyway. Only pure JavaScript with no file of its own to read at run time belongs
// here (not, for example, a package that finds its assets next to itself).
import { createRequire } from 'node:module';
import { join } from 'node:path';

export const INLINE_PACKAGES = ['lodash'];

export function inlinePackages(root, names = INLINE_PACKAGES) {
  const require = createRequire(join(root, 'package.json'));
  const escaped = names.map((n) => n.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&'));
  const filter = new RegExp(`^(${escaped.join('|')})(/|$)`);
  return {
    name: 'inline-packages',
    setup(b) {
      // Resolved here to the file node would load, so esbuild bundles it (and its relative requires) instead of
      // leaving the import to node_modules.
      b.onResolve({ filter }, (args) => ({ path: require.resolve(args.path) }));
    },
  };
}
