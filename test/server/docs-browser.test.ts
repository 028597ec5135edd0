/**
 * /docs in a real browser: Debian's Chromium (installed by scripts/test-setup-chromium.sh) driven by playwright-core
 * against a running server. The page must render from this server alone (every request it makes stays on the
 * server's origin: no CDN) and show the `/export` operation. Without Chromium the test is skipped loudly; under
 * CI=true a missing Chromium fails the suite.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { chromium, type Browser } from 'playwright-core';
import { buildServer, settingsWith } from '../../src/server/index.js';
import { createStoreRegistry, loadConfiguration, type StoreRegistry } from '../../src/config/index.js';
import { removeTempDirs, tempDir, writeJson } from './helpers.js';

const CHROMIUM = '/usr/bin/chromium';
const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
const haveChromium = existsSync(CHROMIUM);
const inCI = process.env.CI === 'true';

if (!haveChromium) {
  const msg = `\n*** SKIPPING the /docs browser test: ${CHROMIUM} is missing (scripts/test-setup-chromium.sh installs it) ***\n`;
  process.stderr.write(msg);
}

let app: FastifyInstance | undefined;
let registry: StoreRegistry | undefined;
let browser: Browser | undefined;
let base = '';

before(async () => {
  if (!haveChromium) return;
  const dir = tempDir();
  writeJson(join(dir, 'data.json'), []);
  writeJson(join(dir, '.configu'), { stores: { main: { type: 'json-file', configuration: { path: 'data.json' } } } });
  registry = createStoreRegistry(await loadConfiguration({ file: join(dir, '.configu') }), { logger: { warn: () => undefined } });
  await registry.init();
  app = await buildServer({ registry, settings: settingsWith({}), logger: false, ready: true });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const a = app.server.address();
  base = `http://127.0.0.1:${typeof a === 'object' && a ? a.port : 0}`;
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true });
});

after(async () => {
  await browser?.close();
  await app?.close();
  await registry?.close();
  removeTempDirs();
});

test('Chromium is available (required under CI=true)', { skip: !inCI && !haveChromium ? 'chromium missing (not CI)' : false }, () => {
  assert.ok(haveChromium, `${CHROMIUM} is missing and CI=true: the /docs browser check cannot run`);
});

test('/docs renders in Chromium from this server alone and shows the /export operation', { skip: haveChromium ? false : 'chromium missing' }, async () => {
  const page = await browser!.newPage();
  const foreign: string[] = [];
  const failed: string[] = [];
  const origin = new URL(base).origin;
  page.on('request', (req) => {
    const u = req.url();
    if (!u.startsWith(origin) && !u.startsWith('data:') && !u.startsWith('blob:')) foreign.push(u);
  });
  page.on('requestfailed', (req) => failed.push(`${req.url()} ${req.failure()?.errorText ?? ''}`));
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(String(e)));

  const res = await page.goto(`${base}/docs`, { waitUntil: 'networkidle' });
  assert.equal(res?.status(), 200);
  await page.waitForSelector('.swagger-ui .opblock', { timeout: 15_000 });
  const title = await page.textContent('.swagger-ui .info .title');
  assert.match(title ?? '', /cfgu configuration proxy/);

  const exportOp = page.locator('.opblock-post .opblock-summary-path', { hasText: '/export' });
  assert.equal(await exportOp.count(), 1, 'the POST /export operation is listed');
  for (const path of ['/live', '/ready']) {
    assert.equal(await page.locator('.opblock-get .opblock-summary-path', { hasText: path }).count(), 1, `GET ${path} is listed`);
  }

  // Expand /export: the request body example and the error responses are documented.
  await exportOp.click();
  await page.waitForSelector('.opblock-post.is-open .responses-table', { timeout: 10_000 });
  const responses = await page.locator('.opblock-post.is-open .responses-table .response-col_status').allTextContents();
  for (const status of ['200', '400', '401', '413', '415', '422', '500', '503']) {
    assert.ok(responses.some((t) => t.trim().startsWith(status)), `response ${status} shown (got ${responses.join(',')})`);
  }

  assert.deepEqual(foreign, [], 'no request leaves the server (works offline)');
  assert.deepEqual(failed, []);
  assert.deepEqual(errors, []);
  await page.close();
});
