/**
 * Finding 1 of issue 10 over HTTP: attacker, victim and collector are requests to one server whose sandbox has one
 * child (all their jobs share one isolate). The victim gets its normal answer; the attacker and the collector learn
 * nothing of the victim's value or override. In-process (buildServer + inject) with the real sandbox.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { pino, type Logger } from 'pino';
import type { FastifyInstance } from 'fastify';
import { buildServer, settingsWith } from '../../src/server/index.js';
import { loadConfiguration } from '../../src/config/index.js';
import { createStoreRegistry, type StoreRegistry } from '../../src/stores/index.js';
import { createSandboxEvaluator } from '../../src/expressions/index.js';
import type { ExpressionEvaluator } from '../../src/core/ports.js';
import { removeTempDirs, tempDir, writeJson } from '../server/helpers.js';

const SECRET = 'victim-pa55word-5e1f0a';
const OVERRIDE = 'victim-override-77c2d9';
let registry: StoreRegistry;
let evaluator: ExpressionEvaluator;
let app: FastifyInstance;

before(async () => {
  const dir = tempDir();
  writeJson(join(dir, 'data.json'), [{ set: '', key: 'PASSWORD', value: SECRET }]);
  writeJson(join(dir, '.configu'), { stores: { main: { type: 'json-file', configuration: { path: 'data.json' } } } });
  registry = createStoreRegistry(await loadConfiguration({ file: join(dir, '.configu') }), { logger: { warn: () => undefined } });
  await registry.init();
  evaluator = await createSandboxEvaluator({ workers: 1, spares: 0, timeoutMs: 1000, memoryMb: 64 });
  app = await buildServer({ registry, evaluator, settings: settingsWith({}), logger: pino({ level: 'silent' }) as unknown as Logger, ready: true });
});

after(async () => {
  await app?.close();
  await registry?.close();
  await evaluator?.close();
  removeTempDirs();
});

const exportBody = (body: unknown) =>
  app.inject({ method: 'POST', url: '/export', headers: { 'content-type': 'application/json' }, payload: JSON.stringify(body) });

describe('isolation over HTTP (one sandbox child)', () => {
  test('finding 1: a getter hidden in a schema object never sees another request', async () => {
    const spy = `(() => {
      const spy = Function('return function spy() { const c = spy.caller; if (c) spy.loot.push(JSON.stringify(Array.from(c.arguments))); return 8 }')();
      spy.loot = [];
      const schema = { type: 'string', minLength: 8 };
      Object.defineProperty(schema, 'minLength', { get: spy, enumerable: false });
      try { JSONSchema.validate(schema, $.value) } catch (e) {}
      return true;
    })()`;
    const attacker = await exportBody([{ store: 'main', schema: { keys: { A: { test: spy } } }, configs: { A: 'attacker-value' } }]);
    assert.equal(attacker.statusCode, 200, attacker.body);
    assert.deepEqual(attacker.json(), { A: 'attacker-value' });

    const victimSchema = { keys: { PASSWORD: { schema: { type: 'string', minLength: 8 } }, TOKEN: { schema: { type: 'string', minLength: 8 } } } };
    const victim = await exportBody([{ store: 'main', schema: victimSchema, configs: { TOKEN: OVERRIDE } }]);
    assert.equal(victim.statusCode, 200, victim.body);
    assert.deepEqual(victim.json(), { PASSWORD: SECRET, TOKEN: OVERRIDE });

    const collect = `(() => {
      const found = [];
      const probe = Function('found', 'return function probe() { let f = probe.caller; for (let i = 0; f && i < 20; i++) { found.push(f); f = f.caller } return "probe-value" }')(found);
      const data = Object.defineProperty({}, 'x', { get: probe, enumerable: true });
      try { JSONSchema.validate({ type: 'object', properties: { x: { type: 'string', minLength: 8 } } }, data) } catch (e) {}
      const loot = (f) => { try { const d = f.schema && Object.getOwnPropertyDescriptor(f.schema, 'minLength'); return JSON.stringify([d && d.get && d.get.loot, Array.from(f.arguments || [])]) } catch (e) { return String(e) } };
      if (found.length) throw new Error(found.map(loot).join(' '));
      return true;
    })()`;
    const collector = await exportBody([{ store: 'main', schema: { keys: { B: { test: collect } } }, configs: { B: 'collector' } }]);
    assert.equal(collector.statusCode, 200, collector.body);
    assert.deepEqual(collector.json(), { B: 'collector' });
    for (const r of [attacker, collector]) {
      assert.ok(!r.body.includes(SECRET) && !r.body.includes(OVERRIDE), r.body);
    }
  });
});
