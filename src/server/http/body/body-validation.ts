/**
 * Request validation that remembers the bodies it passed. A body from the body cache (./body-cache.ts) is the same
 * deep-frozen object every time its text comes back, and a frozen value cannot change, so its check against a route's
 * body schema cannot give another answer: once it passed, it passes. The validators Fastify compiles (its own Ajv
 * compiler, with the server's Ajv options) are kept as they are; for a body, each one is wrapped to skip a frozen
 * value it has already passed. A body that fails is checked again each time (its errors are made fresh), and one that
 * was not frozen by the server is always checked.
 *
 * Measured: Ajv's walk of a 1,000-key body was 5.7% of the server's CPU profile for that workload (bench/RESULTS.md).
 *
 * A large pipeline (at least two commands and SLICED_KEYS keys in all) is checked one command at a time, in slices of
 * the event loop (core/slices.ts): Ajv's walk of 10,000 declarations takes about 2.5 ms, of a 1 MiB body's 90,000
 * about 25 ms, in one call. Each command is checked as a pipeline of that one command (the route's own validator,
 * whose `items` are the command schema), in order, so the first error found is the one the whole check would report,
 * with its path moved to the command's place. The check then answers Fastify with a promise, which it supports.
 */
import AjvCompiler from '@fastify/ajv-compiler';
import { isDeepFrozen, keyCount } from '../../../core/frozen.js';
import { checkpoint } from '../../../core/slices.js';

type BuildValidator = ReturnType<typeof AjvCompiler>;
type Validate = ReturnType<ReturnType<BuildValidator>>;

/** Pipelines declaring at least this many keys in all (and two commands or more) are checked in slices. */
export const SLICED_KEYS = 2048;

/** The keys a pipeline declares in all, when it is one (an array of commands); 0 otherwise. */
function declaredKeys(data: unknown): number {
  if (!Array.isArray(data) || data.length < 2) return 0;
  let n = 0;
  for (const command of data) {
    const keys = (command as { schema?: { keys?: unknown } } | null)?.schema?.keys;
    if (keys && typeof keys === 'object') n += keyCount(keys);
  }
  return n;
}

type AjvError = NonNullable<Validate['errors']>[number];

/** Wrap one compiled body validator (see the module comment). */
export function rememberPasses(validate: Validate): Validate {
  const passed = new WeakSet<object>();
  /**
   * The errors of the last sliced check that failed, until the next check starts. Fastify reads them from the
   * function it called as soon as the check's promise settles, in the same turn of the loop.
   */
  let slicedErrors: AjvError[] | undefined;
  const check = (data: unknown, context: unknown): unknown =>
    context === undefined ? validate(data) : (validate as (d: unknown, c: unknown) => unknown)(data, context);
  const inSlices = async (commands: readonly unknown[], frozen: boolean): Promise<boolean> => {
    for (let i = 0; i < commands.length; i++) {
      if (i > 0) await checkpoint();
      if (check([commands[i]], undefined) !== true) {
        // The path of an error of the one-command pipeline begins with `/0`: moved to the command's own index.
        slicedErrors = (validate.errors ?? []).map((e) => ({ ...e, instancePath: `/${i}${e.instancePath.slice(2)}` }));
        return false;
      }
    }
    if (frozen) passed.add(commands);
    return true;
  };
  const wrapped = ((data: unknown, context?: unknown) => {
    slicedErrors = undefined;
    const frozen = isDeepFrozen(data);
    if (frozen && passed.has(data as object)) return true;
    if (declaredKeys(data) >= SLICED_KEYS) return inSlices(data as unknown[], frozen);
    const ok = check(data, context);
    if (ok === true && frozen) passed.add(data as object);
    return ok;
  }) as Validate;
  // Fastify reads the errors of a failed check from the function it called, and passes the parent data when the
  // validator has a `schemaEnv` (Ajv's); both are forwarded.
  Object.defineProperty(wrapped, 'errors', { get: () => slicedErrors ?? validate.errors, configurable: true });
  Object.defineProperty(wrapped, 'schemaEnv', { value: (validate as { schemaEnv?: unknown }).schemaEnv, configurable: true });
  return wrapped;
}

/** `schemaController.compilersFactory.buildValidator` for Fastify: its default compiler, body validators wrapped. */
export function bodyValidatorFactory(): BuildValidator {
  const build = AjvCompiler();
  return ((externalSchemas, options) => {
    const compile = build(externalSchemas, options);
    return (route) => (route.httpPart === 'body' ? rememberPasses(compile(route)) : compile(route));
  }) as BuildValidator;
}
