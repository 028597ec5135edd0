/**
 * Response serializers compiled when first used. Fastify compiles a fast-json-stringify serializer for every response
 * schema of every route at start-up: one per status code each route documents (the problem bodies of every error
 * status of `POST /export`, `/live`, `/ready`, ...), though a process rarely sends more than a few of them. Every
 * worker, every replacement of a dead worker and every in-process server paid for all of them. Here each one is
 * compiled by the same compiler with the same schema and options, on the first response that needs it, and kept: the
 * same serializer and the same bytes, and the first response of each kind pays its compilation (a few milliseconds).
 * A schema the compiler rejects fails on that first use instead of at start-up; every documented response is sent
 * by the test suite, which checks its exact body.
 */
import SerializerSelector from '@fastify/fast-json-stringify-compiler';

type BuildSerializer = ReturnType<typeof SerializerSelector>;
type Serialize = (doc: unknown) => string;

/**
 * `schemaController.compilersFactory.buildSerializer` for Fastify: its default compiler (or `build`, for tests),
 * each serializer compiled on first use.
 */
export function lazySerializerFactory(build: BuildSerializer = SerializerSelector()): BuildSerializer {
  return ((externalSchemas, options) => {
    const compile = build(externalSchemas, options);
    return (route) => {
      let serialize: Serialize | undefined;
      return (doc: unknown) => (serialize ??= compile(route) as Serialize)(doc);
    };
  }) as BuildSerializer;
}
