/**
 * The OpenAPI document as served at /docs/json: response headers carry their types, every operation states its
 * security, the license is the package's, the documented examples answer what they promise on the server of
 * `npm start` (examples/.configu), and an OpenAPI linter (@redocly/cli, recommended rules) finds no error when it
 * is installed (skipped loudly when it is not).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { buildServer, settingsWith } from '../../src/server/index.js';
import { loadConfiguration } from '../../src/config/index.js';
import { createStoreRegistry, type StoreRegistry } from '../../src/stores/index.js';
import { createSandboxEvaluator } from '../../src/expressions/index.js';
import type { ExpressionEvaluator } from '../../src/core/ports.js';
import { removeTempDirs, ROOT, tempDir, writeJson } from './helpers.js';
import { exportBodySchema } from '../../src/server/http/schemas.js';
import { explanationSchema } from '../../src/server/http/explain-schemas.js';
import { explainResponseExample } from '../../src/server/http/explain-example.js';
import { assertValidJsonSchema } from '../helpers/meta-schema.js';

const servers: Array<{ app: FastifyInstance; registry: StoreRegistry }> = [];
let evaluator: ExpressionEvaluator;

async function serverOn(file: string, settings = settingsWith({})): Promise<FastifyInstance> {
  const registry = createStoreRegistry(await loadConfiguration({ file }), { logger: { warn: () => undefined } });
  await registry.init();
  const app = await buildServer({ registry, evaluator, settings, logger: false, ready: true });
  servers.push({ app, registry });
  return app;
}

let example: FastifyInstance;
let doc: any;

before(async () => {
  evaluator = await createSandboxEvaluator({ workers: 1, spares: 0 });
  example = await serverOn(join(ROOT, 'examples', '.configu'));
  const r = await example.inject({ url: '/docs/json' });
  assert.equal(r.statusCode, 200);
  doc = r.json();
});

after(async () => {
  for (const s of servers) {
    await s.app.close();
    await s.registry.close();
  }
  await evaluator?.close();
  removeTempDirs();
});

const operations = () =>
  Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([path, ops]) => Object.entries(ops).map(([method, op]) => ({ path, method, op })));

test('every response header has a schema with a type (not wrapped twice)', () => {
  const seen = new Set<string>();
  for (const { path, method, op } of operations()) {
    for (const [status, response] of Object.entries(op.responses as Record<string, any>)) {
      for (const [name, header] of Object.entries((response.headers ?? {}) as Record<string, any>)) {
        const where = `${method.toUpperCase()} ${path} ${status} ${name}`;
        assert.equal(typeof header.schema?.type, 'string', `${where}: ${JSON.stringify(header)}`);
        assert.equal(header.schema.schema, undefined, `${where} is wrapped twice`);
        assert.equal(typeof header.description, 'string', `${where} has a description`);
        seen.add(`${name}:${header.schema.type}`);
      }
    }
  }
  assert.deepEqual(
    [...seen].sort(),
    ['Allow:string', 'ETag:string', 'Retry-After:integer', 'WWW-Authenticate:string', 'X-Configu-Backup:string', 'X-Request-Id:string'],
  );
});

test('every operation states its security: none for /live and /ready, bearer for /export when auth is on', async () => {
  for (const { path, method, op } of operations()) assert.deepEqual(op.security, [], `${method} ${path}`);

  const dir = tempDir();
  writeJson(join(dir, '.configu'), { stores: { main: { type: 'in-memory' } } });
  const withAuth = await serverOn(join(dir, '.configu'), settingsWith({ auth: { enabled: true, presharedKeys: ['k'.repeat(32)] }, docs: { public: true } }));
  const secured = (await withAuth.inject({ url: '/docs/json' })).json();
  assert.deepEqual(secured.paths['/export'].post.security, [{ bearer: [] }]);
  assert.deepEqual(secured.paths['/live'].get.security, []);
  assert.deepEqual(secured.paths['/ready'].get.security, []);
  assert.deepEqual(secured.components.securitySchemes.bearer, { type: 'http', scheme: 'bearer', description: 'A preshared key, a scoped token, or a JWT of the configured issuer (docs/security.md)' });
});

test('the document names its server (relative), the license and version of package.json', () => {
  assert.deepEqual(doc.servers, [{ url: '/', description: 'This server' }]);
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { license: string; version: string };
  assert.equal(doc.info.license.identifier, pkg.license);
  assert.equal(doc.info.version, pkg.version);
  assert.match(readFileSync(join(ROOT, 'LICENSE'), 'utf8'), /^\s*Apache License\s+Version 2\.0, January 2004/);
});

test('each documented request example answers 200 on the server of npm start (examples/.configu)', async () => {
  const media = doc.paths['/export'].post.requestBody.content['application/json'];
  const examples = Object.entries(media.examples as Record<string, { summary: string; value: unknown }>);
  assert.ok(examples.length >= 2, 'named examples');
  const documented = doc.paths['/export'].post.responses['200'].content['application/json'].schema.examples[0];
  for (const [name, { value }] of examples) {
    const r = await example.inject({ method: 'POST', url: '/export', headers: { 'content-type': 'application/json' }, payload: JSON.stringify(value) });
    assert.equal(r.statusCode, 200, `${name}: ${r.body}`);
    if (name === 'exampleStore') assert.deepEqual(r.json(), documented, 'the documented 200 answer is what the first example gets');
  }
});

test('the example that names no store answers 200 on a server with other stores', async () => {
  const dir = tempDir();
  writeJson(join(dir, '.configu'), { stores: { elsewhere: { type: 'in-memory' } } });
  const other = await serverOn(join(dir, '.configu'));
  const { value } = doc.paths['/export'].post.requestBody.content['application/json'].examples.anyServer;
  const r = await other.inject({ method: 'POST', url: '/export', headers: { 'content-type': 'application/json' }, payload: JSON.stringify(value) });
  assert.equal(r.statusCode, 200, r.body);
  assert.deepEqual(r.json(), { LOG_LEVEL: 'info', TIMEOUT_MS: 3000 });
});

const REDOCLY = join(ROOT, 'node_modules', '.bin', 'redocly');
const noLinter = existsSync(REDOCLY) ? false : '@redocly/cli is not installed (node_modules/.bin/redocly)';
if (noLinter) process.stderr.write(`\n*** SKIPPING the OpenAPI lint: ${noLinter} ***\n`);

test('@redocly/cli lint (recommended rules) reports no error', { skip: noLinter }, () => {
  const dir = tempDir();
  const file = writeJson(join(dir, 'openapi.json'), doc);
  const r = spawnSync(REDOCLY, ['lint', '--extends', 'recommended', '--format', 'stylish', file], { encoding: 'utf8', cwd: dir });
  assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
});

test('the request body schema of POST /export is a valid JSON Schema (Fastify compiles it without the meta-schema check)', () => {
  assertValidJsonSchema(exportBodySchema, 'exportBodySchema');
});

test('POST /explain: the body of POST /export with its named examples; the documented 200 is what the first example gets', async () => {
  const op = doc.paths['/explain'].post;
  assert.deepEqual(op.security, []);
  const media = op.requestBody.content['application/json'];
  assert.deepEqual(media.examples, doc.paths['/export'].post.requestBody.content['application/json'].examples);
  const documented = op.responses['200'].content['application/json'].schema.examples[0];
  const r = await example.inject({ method: 'POST', url: '/explain', headers: { 'content-type': 'application/json' }, payload: JSON.stringify(media.examples.exampleStore.value) });
  assert.equal(r.statusCode, 200, r.body);
  assert.deepEqual(r.json(), documented);
  assert.deepEqual(r.json(), explainResponseExample);
});

test('the response schema of POST /explain is a valid JSON Schema', () => {
  assertValidJsonSchema(explanationSchema, 'explanationSchema');
});
