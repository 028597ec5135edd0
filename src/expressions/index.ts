/**
 * The expression sandbox's public surface (src/server, src/cli, bench/ and the tests import it from here).
 *
 * The code is organised by the process it runs in:
 * - host/: the server process: the pool (pool.ts) composed of the scheduler and fair share, the child handle, the
 *   request budgets, the kept answers and the runaways; the options.
 * - child/: the sandbox child process (dist/sandbox-child.js) and the build step that prepares its start-up aids.
 * - isolate/: what runs inside the isolate (the library bundle, dist/sandbox/libraries.js).
 * - wire/: the line protocol and the job wire, which the host, the child and the isolate all speak.
 * - isolated-vm.ts, errors.ts: the isolated-vm loader (host, child, build) and the error.
 * The contract it implements (ExpressionEvaluator and its job and result types) is a port of the engine: import it
 * from src/core/ports.ts.
 */
export { ExpressionError } from './errors.js';
export { DEFAULT_SANDBOX_OPTIONS, ENV_OPTIONS, expressionOptionsFromEnv, type SandboxEvaluator, type SandboxOptions } from './host/options.js';
export { createSandboxEvaluator } from './host/pool.js';
