/** Response serializers are compiled on first use (src/server/response-serializers.ts), by Fastify's own compiler. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import Fastify from 'fastify';
import SerializerSelector from '@fastify/fast-json-stringify-compiler';
import { lazySerializerFactory } from '../../src/server/http/response-serializers.js';

test('nothing is compiled at start-up; each serializer once, on its first response, with the schema applied', async () => {
  const compiled: string[] = [];
  const real = SerializerSelector();
  const counting = ((externalSchemas: unknown, options: unknown) => {
    const compile = real(externalSchemas, options as never);
    return (route: { url: string; httpStatus: string }) => {
      compiled.push(`${route.url} ${route.httpStatus}`);
      return compile(route as never);
    };
  }) as unknown as ReturnType<typeof SerializerSelector>;
  const app = Fastify({ schemaController: { compilersFactory: { buildSerializer: lazySerializerFactory(counting) } } });
  const shape = { type: 'object', properties: { kept: { type: 'string' }, n: { type: 'integer' } } };
  app.get('/a', { schema: { response: { 200: shape, 404: shape } } }, async () => ({ kept: 'yes', n: 2, dropped: 'secret' }));
  app.get('/b', { schema: { response: { 200: shape } } }, async () => ({ kept: 'b', n: '7' }));
  await app.ready();
  try {
    assert.deepEqual(compiled, [], 'no serializer is compiled before a response needs it');
    for (let i = 0; i < 3; i++) {
      const r = await app.inject({ method: 'GET', url: '/a' });
      assert.equal(r.statusCode, 200);
      // The schema's serializer, not JSON.stringify: the undeclared property is left out.
      assert.equal(r.body, '{"kept":"yes","n":2}');
    }
    assert.deepEqual(compiled, ['/a 200'], 'compiled once, for the status that was sent');
    const b = await app.inject({ method: 'GET', url: '/b' });
    // The integer is written as the schema says (fast-json-stringify coerces "7").
    assert.equal(b.body, '{"kept":"b","n":7}');
    assert.deepEqual(compiled, ['/a 200', '/b 200']);
  } finally {
    await app.close();
  }
});
