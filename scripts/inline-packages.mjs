// An esbuild plugin for the application bundles (scripts/build.mjs, dist/) and the test bundles
// (scripts/build-tests.mjs): every package the code imports is bundled into the output, but for the ones listed in
// KEEP_EXTERNAL, which node loads from node_modules at run time as usual.
//
// Why: a server, a worker, a `cfgu` command and a test process used to load about 500 files from node_modules at
// start (fastify and its plugins, ajv, yaml, prom-client, pino, ...): resolving, reading and compiling each file cost
// 300-400 ms of CPU at every start. In a bundle that is one file read and one compile. bench/startup.mjs measured it
// (bench/RESULTS.md, "Start-up with the dependencies bundled").
//
// A package stays external when bundling would change what it does: a native addon (the `.node` file is loaded from
// the package's folder), or a package that reads a file of its own at run time, found next to its code
// (`__dirname`): in a bundle that name does not exist, or names dist/ instead. Packages loaded by a name computed at
// run time (the OpenTelemetry SDK, src/server/tracing.ts) are not seen by esbuild and stay in node_modules anyway.
import { builtinModules } from 'node:module';

/** Package names (and scopes) left to node_modules, with the reason. */
export const KEEP_EXTERNAL = [
  // Native addons, in each of the aliases package.json installs them under.
  { match: /^isolated-vm(-node\d+)?(\/|$)/, why: 'native addon' },
  { match: /^better-sqlite3(-node\d+)?(\/|$)/, why: 'native addon' },
  // Files read from the package's own folder at run time.
  { match: /^@fastify\/swagger-ui(\/|$)/, why: 'serves the Swagger UI files from its folder' },
  { match: /^@fastify\/swagger(\/|$)/, why: 'reads its package.json from its folder' },
  { match: /^(pino|thread-stream)(\/|$)/, why: 'starts worker files from its folder (transports)' },
  { match: /^(etcd3|@grpc\/.*)(\/|$)/, why: 'loads .proto files from its folder' },
  // One copy of the OpenTelemetry API with the SDK, which is loaded from node_modules (src/server/tracing.ts): the API
  // keeps its global state per copy of the module's code only through version-keyed globals, and one copy is simpler.
  { match: /^@opentelemetry\//, why: 'the SDK it works with is loaded from node_modules' },
];

const builtins = new Set(builtinModules);

/** Whether `specifier` (an import of a package or a built-in module) stays outside the bundle. */
export function staysExternal(specifier) {
  if (specifier.startsWith('node:') || builtins.has(specifier) || builtins.has(specifier.split('/')[0])) return true;
  return KEEP_EXTERNAL.some((k) => k.match.test(specifier));
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
    },
  };
}
