/**
 * The engine as a library: an in-memory store, an upsert, and a two-command pipeline with a `const` and a `test`
 * evaluated in the sandbox.
 *
 *   npx tsx examples/library.ts
 */
import { exportPipeline, upsert, ValidationError } from '../src/core/index.js';
import { createStoreRegistry } from '../src/config/index.js';
import { createSandboxEvaluator } from '../src/expressions/index.js';

const stores = createStoreRegistry({
  file: undefined,
  stores: [{ name: 'main', type: 'in-memory', configuration: {}, default: true, backup: false }],
  defaultStore: 'main',
  backup: '',
  schemas: {},
  scripts: {},
  interface: {},
});
await stores.init();
const expressions = createSandboxEvaluator();

const schema = {
  keys: {
    HOST: { required: true, test: 'validator.isFQDN($.value) || $.value === "localhost"' },
    PORT: { default: 8080, schema: { type: 'integer', minimum: 1 } },
    URL: { const: 'http://{{ $.configs.HOST.value }}:{{ $.configs.PORT.value }}' },
  },
};

try {
  const { changes } = await upsert({ store: stores.resolve('main'), set: 'prod', schema, values: { HOST: 'api.example.com' }, expressions });
  console.log('upsert:', changes);

  const { configs } = await exportPipeline(
    [
      { store: 'main', set: 'prod/eu', schema },
      { schema: { keys: { TIMEOUT_MS: { default: 3000 } } } },
    ],
    { stores, expressions },
  );
  console.log('export:', configs);

  await exportPipeline([{ set: 'prod', schema, configs: { PORT: 0 } }], { stores, expressions });
} catch (e) {
  if (!(e instanceof ValidationError)) throw e;
  console.log('failures:', e.failures);
} finally {
  await expressions.close();
  await stores.close();
}
