// The package's version, bundled into dist/ at build time (so it is the version that was built, wherever it runs).
import pkg from '../../../package.json' with { type: 'json' };

export const version: string = pkg.version;
