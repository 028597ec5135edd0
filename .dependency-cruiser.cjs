// The layering of src/ (docs/architecture.md), checked by scripts/check-layers.mjs as part of `npm test`.
// Paths are those of src/ as the check sees them: `src/<folder>/<file>.js` (the .ts sources transpiled one to one).
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'core-imports-only-core',
      comment: 'src/core is the engine: it defines the ports (stores, evaluator) and depends on no other folder of src/.',
      severity: 'error',
      from: { path: '^src/core/' },
      to: { path: '^src/', pathNot: '^src/core/' },
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
    // npm packages and node built-ins are allowed everywhere: only src/ is cruised.
    doNotFollow: { path: 'node_modules' },
    includeOnly: '^src/',
  },
};
