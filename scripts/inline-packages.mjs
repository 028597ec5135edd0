// An esbuild plugin for the application bundles (scripts/build.mjs, dist/) and the test bundles
// (scripts/build-tests.mjs): every package the code imports is bundled into the output, but for the ones listed in
// KEEP_EXTERNAL, which node loads from node_modules at run time as usual.
//
// Why: a server, a worker, a `cfgu` command and a test process used to load about 500 files from node_modules at
// start (fastify and its plugins, ajv, yaml, prom-client, pino, ...): resolving, reading and compiling each file cost
// 300-400 ms of CPU at every start. In a bundle that is one file read and one compile. bench/startup.mjs measured it
// (bench/RESULTS.md, "Start-up with the dependencies bundled").
//
// Files a package reads from its own folder at run time (Swagger UI's pages and logo, a package.json, a worker
// script) stay where they are: in a bundled file of a package, `__dirname` and `__filename` (which an ES module bundle
// does not have) are replaced by that file's folder and path inside the package as installed, found at run time from
// where node resolves the package (BANNER below). So the code is bundled and
// the files are still read from node_modules.
//
// A package stays external when bundling would change what it does (a native addon: its `.node` file is loaded by
// the package itself), or when it is only loaded on demand and large (the etcd client and gRPC). Packages loaded by a
// name computed at run time (the OpenTelemetry SDK, src/server/observe/tracing.ts) are not seen by esbuild and stay in
// node_modules anyway.
import { builtinModules } from 'node:module';
import { readFile } from 'node:fs/promises';
import { sep } from 'node:path';

/** Package names (and scopes) left to node_modules, with the reason. */
export const KEEP_EXTERNAL = [
  // Native addons, in each of the aliases package.json installs them under.
  { match: /^isolated-vm(-node\d+)?(\/|$)/, why: 'native addon' },
  { match: /^better-sqlite3(-node\d+)?(\/|$)/, why: 'native addon' },
  // Loaded only when a .configu declares an etcd store; its gRPC stack reads .proto files and is large.
  { match: /^(etcd3|@grpc\/.*)(\/|$)/, why: 'loaded on demand' },
  // One copy of the OpenTelemetry API with the SDK, which is loaded from node_modules (src/server/observe/tracing.ts): the API
  // keeps its global state per copy of the module's code only through version-keyed globals, and one copy is simpler.
  { match: /^@opentelemetry\//, why: 'the SDK it works with is loaded from node_modules' },
];

/**
 * The banner of every output file: `require` for the bundled CommonJS packages (an ES module has none), and
 * `__cfguPackagePath(name, inside)`: the absolute path of `inside` (relative to the package's folder) in the installed
 * package `name`, found from where node resolves the package from this file.
 */
export const BANNER = `import { createRequire as __cfguCreateRequire } from 'node:module';
import { join as __cfguJoin, sep as __cfguSep } from 'node:path';
const require = __cfguCreateRequire(import.meta.url);
const __cfguPackagePath = (name, inside) => {
  let entry;
  try { entry = require.resolve(name); } catch { entry = require.resolve(name + '/package.json'); }
  const folder = __cfguSep + 'node_modules' + __cfguSep + name.split('/').join(__cfguSep);
  return __cfguJoin(entry.slice(0, entry.lastIndexOf(folder + __cfguSep) + folder.length), inside);
};`;

const builtins = new Set(builtinModules);
/** `__dirname` or `__filename` as a name of its own (not a property); the name's end is the first group. */
const OWN_PATHS = /(?<![.$\w])__(dirname|filename)\b/g;

/** Whether `specifier` (an import of a package or a built-in module) stays outside the bundle. */
export function staysExternal(specifier) {
  if (specifier.startsWith('node:') || builtins.has(specifier) || builtins.has(specifier.split('/')[0])) return true;
  return KEEP_EXTERNAL.some((k) => k.match.test(specifier));
}

/** The package name and the path inside it of a file under node_modules, or undefined. */
function insidePackage(path) {
  const marker = `${sep}node_modules${sep}`;
  const at = path.lastIndexOf(marker);
  if (at < 0) return undefined;
  const parts = path.slice(at + marker.length).split(sep);
  const nameParts = parts[0]?.startsWith('@') ? 2 : 1;
  return { name: parts.slice(0, nameParts).join('/'), inside: parts.slice(nameParts).join('/') };
}

/**
 * The plugin. `alsoExternal`: more package names kept in node_modules (the test build keeps the development
 * dependencies there: test tools such as playwright-core are not what the binary loads, and some read files of
 * their own).
 */
export function inlinePackages({ alsoExternal = [] } = {}) {
  const more = new Set(alsoExternal);
  const packageOf = (specifier) => specifier.split('/').slice(0, specifier.startsWith('@') ? 2 : 1).join('/');
  return {
    name: 'inline-packages',
    setup(b) {
      // Bare specifiers only (not ./relative or /absolute paths): external when listed, else esbuild resolves the
      // package as node would (its `exports` conditions for this platform) and bundles it.
      b.onResolve({ filter: /^[^./]/ }, (args) =>
        staysExternal(args.path) || more.has(packageOf(args.path)) ? { path: args.path, external: true } : undefined,
      );
      // A bundled package file that names its own folder or path: both become the installed file's (see above). The
      // text read here is handed to esbuild, so no file is read twice. Only the bare names are replaced, not a
      // property of the same name (`x.__dirname`).
      b.onLoad({ filter: /[\\/]node_modules[\\/].*\.[cm]?js$/ }, async (args) => {
        const text = await readFile(args.path, 'utf8');
        const where = insidePackage(args.path);
        if (!where) return { contents: text, loader: 'js' };
        const folder = where.inside.split('/').slice(0, -1).join('/');
        const contents = text.replace(
          OWN_PATHS,
          (_, which) => `__cfguPackagePath(${JSON.stringify(where.name)}, ${JSON.stringify(which === 'dirname' ? folder : where.inside)})`,
        );
        return { contents, loader: 'js' };
      });
    },
  };
}
