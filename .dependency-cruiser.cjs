// The layering of src/ (docs/architecture.md, "Folders"), checked by scripts/check-layers.mjs as part of `npm test`.
// Paths are those of src/ as the check sees them: `src/<folder>/<file>.js` (the .ts sources transpiled one to one).
// One rule per folder: what it may import of src/ (npm packages and node built-ins are allowed everywhere). The table
// has no cycle by construction; the cycle rule stays as a second line of defence for folders added later.
const folder = (name, comment, mayImport) => ({
  name: `${name}-imports-only-${mayImport.length ? mayImport.join('-') : 'itself'}`,
  comment,
  severity: 'error',
  from: { path: `^src/${name}/` },
  to: { path: '^src/', pathNot: `^src/(${[name, ...mayImport].join('|')})/` },
});

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      ...folder('core', 'src/core is the engine: it defines the ports (stores, evaluator) and depends on no other folder of src/.', []),
      name: 'core-imports-only-core',
    },
    folder('stores', 'A store kind implements the store port of core; it knows nothing of the sandbox, the file or the server.', ['core']),
    folder('expressions', 'The sandbox implements the evaluator port of core; it knows nothing of stores, the file or the server.', ['core']),
    folder('config', 'Reading .configu and schema files: core for the types, stores for the store kinds and their settings.', ['core', 'stores']),
    folder('server', 'The HTTP API: it composes the engine, the stores, the sandbox and the file; never the CLI.', ['core', 'stores', 'expressions', 'config']),
    folder('client', 'The Node client of the HTTP API (cfgu/client): it speaks HTTP only and needs nothing of src/ (no dependency beyond Node).', []),
    folder('console', 'The browser console (dist/console/): it runs in the browser and speaks HTTP only, so it needs nothing of src/.', []),
    {
      name: 'no-unknown-folder',
      comment: 'Every folder of src/ has a row in the table of docs/architecture.md (and a rule here) before it holds code.',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/(core|stores|expressions|config|server|client|console|cli)/' },
      to: { path: '^src/' },
    },
    {
      name: 'no-folder-cycle',
      comment: 'Folders of src/ depend on each other in one direction only.',
      severity: 'error',
      scope: 'folder',
      from: { path: '^src/[^/]+$' },
      to: { path: '^src/[^/]+$', circular: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    includeOnly: '^src/',
  },
};
