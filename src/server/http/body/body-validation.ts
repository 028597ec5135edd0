/**
 * Request validation that remembers the bodies it passed. A body from the body cache (./body-cache.ts) is the same
 * deep-frozen object every time its text comes back, and a frozen value cannot change, so its check against a route's
 * body schema cannot give another answer: once it passed, it passes. The validators Fastify compiles (its own Ajv
 * compiler, with the server's Ajv options) are kept as they are; for a body, each one is wrapped to skip a frozen
 * value it has already passed. A body that fails is checked again each time (its errors are made fresh), and one that
 * was not frozen by the server is always checked.
 *
 * Measured: Ajv's walk of a 1,000-key body was 5.7% of the server's CPU profile for that workload (bench/RESULTS.md).
 */
import AjvCompiler from '@fastify/ajv-compiler';
import { isDeepFrozen } from '../../../core/frozen.js';

type BuildValidator = ReturnType<typeof AjvCompiler>;
type Validate = ReturnType<ReturnType<BuildValidator>>;

/** Wrap one compiled body validator (see the module comment). */
export function rememberPasses(validate: Validate): Validate {
  const passed = new WeakSet<object>();
  const wrapped = ((data: unknown, context?: unknown) => {
    const frozen = isDeepFrozen(data);
    if (frozen && passed.has(data as object)) return true;
    const ok = context === undefined ? validate(data) : (validate as (d: unknown, c: unknown) => unknown)(data, context);
    if (ok === true && frozen) passed.add(data as object);
    return ok;
  }) as Validate;
  // Fastify reads the errors of a failed check from the function it called, and passes the parent data when the
  // validator has a `schemaEnv` (Ajv's); both are forwarded.
  Object.defineProperty(wrapped, 'errors', { get: () => validate.errors, configurable: true });
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
