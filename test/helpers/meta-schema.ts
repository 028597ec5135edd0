/**
 * The project's own JSON Schemas (the Cfgu declaration shape, the `.configu` shape, the route schemas) are compiled
 * without Ajv checking them against the meta-schema first (that check compiles the meta-schema: about 60 ms of CPU at
 * every start). The tests make that check instead, with a broken copy beside it so that the check itself is seen to
 * reject a bad schema.
 */
import assert from 'node:assert/strict';
import { Ajv } from 'ajv';

export function assertValidJsonSchema(schema: object, name: string): void {
  const ajv = new Ajv({ allErrors: true, strict: false });
  assert.equal(ajv.validateSchema(schema), true, `${name}: ${ajv.errorsText(ajv.errors)}`);
  assert.equal(ajv.validateSchema({ ...schema, type: 'objekt' }), false, `${name}: a broken copy must fail the check`);
}
