/** The `cfgu` binary's entry point (bundled to dist/cli.js, started by bin/cfgu.js): run main and exit with its code. */
import { EXIT_FAILED } from '../core/error-catalogue.js';
import { main } from './main.js';

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
    // Exit once the command is done: handles it leaves behind (pools, sandbox children) must not keep it alive.
    setImmediate(() => process.exit(code));
  },
  (e: unknown) => {
    process.stderr.write(`cfgu: ${(e as Error)?.message?.split('\n')[0] ?? String(e)}\n`);
    process.exit(EXIT_FAILED);
  },
);
