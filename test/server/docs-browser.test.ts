/**
 * /docs in a real browser: Chromium driven by playwright-core against a running server on examples/.configu, opened
 * over plain HTTP on an address that is not localhost (the machine's own non-loopback address: browsers treat
 * localhost as trustworthy and forgive what breaks the page everywhere else, such as a CSP that upgrades every asset
 * to https). The page must render from this server alone (no CDN), say cfgu (title, logo), show the operations,
 * and its "Try it out" example must answer 200. Chromium is found through CHROMIUM_PATH, else on PATH
 * (scripts/test-setup-chromium.sh installs Debian's). Without Chromium, or without a non-loopback address, the test is
 * skipped loudly; under CI=true a missing Chromium fails the suite.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { accessSync, constants } from 'node:fs';
import { networkInterfaces } from 'node:os';
import { delimiter, join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { chromium, type Browser } from 'playwright-core';
import { buildServer, settingsWith } from '../../src/server/index.js';
import { loadConfiguration } from '../../src/config/index.js';
import { createStoreRegistry, type StoreRegistry } from '../../src/stores/index.js';
import { createSandboxEvaluator } from '../../src/expressions/index.js';
import type { ExpressionEvaluator } from '../../src/core/ports.js';
import { exportResponseExample } from '../../src/server/http/schemas.js';
import { DOCS_TITLE } from '../../src/server/http/docs-ui.js';
import { ROOT } from './helpers.js';

const NAMES = ['chromium', 'chromium-browser', 'google-chrome-stable', 'google-chrome'];

function executable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function findChromium(): string | undefined {
  const given = process.env.CHROMIUM_PATH;
  if (given) return executable(given) ? given : undefined;
  for (const dir of (process.env.PATH ?? '').split(delimiter).filter(Boolean)) {
    for (const name of NAMES) if (executable(join(dir, name))) return join(dir, name);
  }
  return undefined;
}

/** An IPv4 address of this machine that is not loopback (the page must work where users open it). */
function outsideAddress(): string | undefined {
  for (const list of Object.values(networkInterfaces())) {
    for (const a of list ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  }
  return undefined;
}

const CHROMIUM = findChromium();
const ADDRESS = outsideAddress();
const inCI = process.env.CI === 'true';
const skip = !CHROMIUM
  ? `no Chromium (${process.env.CHROMIUM_PATH ? `CHROMIUM_PATH=${process.env.CHROMIUM_PATH} is not executable` : `none of ${NAMES.join(', ')} on PATH`}; scripts/test-setup-chromium.sh installs it)`
  : !ADDRESS
    ? 'this machine has no non-loopback IPv4 address to open /docs on'
    : false;
if (skip) process.stderr.write(`\n*** SKIPPING the /docs browser test: ${skip} ***\n`);

const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

let app: FastifyInstance | undefined;
let registry: StoreRegistry | undefined;
let evaluator: ExpressionEvaluator | undefined;
let browser: Browser | undefined;
let base = '';

before(async () => {
  if (skip) return;
  registry = createStoreRegistry(await loadConfiguration({ file: join(ROOT, 'examples', '.configu') }), { logger: { warn: () => undefined } });
  await registry.init();
  evaluator = await createSandboxEvaluator({ workers: 1, spares: 0 });
  app = await buildServer({ registry, evaluator, settings: settingsWith({}), logger: false, ready: true });
  await app.listen({ port: 0, host: ADDRESS });
  const a = app.server.address();
  base = `http://${ADDRESS}:${typeof a === 'object' && a ? a.port : 0}`;
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true });
});

after(async () => {
  await browser?.close();
  await app?.close();
  await registry?.close();
  await evaluator?.close();
});

test('Chromium is available (required under CI=true)', { skip: !inCI && !CHROMIUM ? 'chromium missing (not CI)' : false }, () => {
  assert.ok(CHROMIUM, 'no Chromium and CI=true: the /docs browser check cannot run (set CHROMIUM_PATH or put chromium on PATH)');
});

test('/docs over plain HTTP on a non-localhost address renders from this server alone, says cfgu, and its example answers 200', { skip }, async () => {
  const page = await browser!.newPage();
  const foreign: string[] = [];
  const failed: string[] = [];
  const consoleErrors: string[] = [];
  const errors: string[] = [];
  const origin = new URL(base).origin;
  page.on('request', (req) => {
    const u = req.url();
    if (!u.startsWith(origin) && !u.startsWith('data:') && !u.startsWith('blob:')) foreign.push(u);
  });
  page.on('requestfailed', (req) => failed.push(`${req.url()} ${req.failure()?.errorText ?? ''}`));
  // CSP violations are reported on the console.
  page.on('console', (m) => {
    if (m.type() === 'error') consoleErrors.push(m.text());
  });
  page.on('pageerror', (e) => errors.push(String(e)));

  const res = await page.goto(`${base}/docs`, { waitUntil: 'networkidle' });
  assert.equal(res?.status(), 200);
  assert.doesNotMatch(res?.headers()['content-security-policy'] ?? '', /upgrade-insecure-requests/);
  await page.waitForSelector('.swagger-ui .opblock', { timeout: 0 });
  assert.equal(await page.title(), DOCS_TITLE);
  assert.match((await page.textContent('.swagger-ui .info .title')) ?? '', /cfgu configuration proxy/);
  const logo = page.locator('.swagger-ui .topbar img');
  await logo.waitFor({ timeout: 10_000 });
  assert.match((await logo.getAttribute('src')) ?? '', /^data:image\/svg\+xml;base64,/);
  assert.match(Buffer.from(((await logo.getAttribute('src')) ?? '').split(',')[1] ?? '', 'base64').toString(), /cfgu/);
  assert.equal(await page.locator('.swagger-ui .topbar', { hasText: /swagger/i }).count(), 0, 'no Swagger branding in the top bar');
  assert.match((await page.textContent('.swagger-ui .info')) ?? '', /Apache-2\.0|Apache License 2\.0/, 'the license is shown');

  const exportOp = page.locator('.opblock-post .opblock-summary-path', { hasText: '/export' });
  assert.equal(await exportOp.count(), 1, 'the POST /export operation is listed');
  for (const path of ['/live', '/ready']) {
    assert.equal(await page.locator('.opblock-get .opblock-summary-path', { hasText: path }).count(), 1, `GET ${path} is listed`);
  }

  // Expand /export: the error responses are documented; "Try it out" with the first example answers 200.
  await exportOp.click();
  await page.waitForSelector('.opblock-post.is-open .responses-table', { timeout: 10_000 });
  const responses = await page.locator('.opblock-post.is-open .responses-table .response-col_status').allTextContents();
  for (const status of ['200', '400', '401', '413', '415', '422', '500', '503']) {
    assert.ok(responses.some((t) => t.trim().startsWith(status)), `response ${status} shown (got ${responses.join(',')})`);
  }
  await page.locator('.opblock-post.is-open .try-out__btn').click();
  await page.locator('.opblock-post.is-open .execute').click();
  const live = page.locator('.opblock-post.is-open .live-responses-table .response .response-col_status');
  await live.first().waitFor({ timeout: 0 });
  assert.equal((await live.first().textContent())?.trim(), '200');
  const body = await page.locator('.opblock-post.is-open .live-responses-table .response-col_description pre').first().textContent();
  assert.deepEqual(JSON.parse(body ?? ''), exportResponseExample);

  assert.deepEqual(foreign, [], 'no request leaves the server (works offline)');
  assert.deepEqual(failed, []);
  assert.deepEqual(consoleErrors, []);
  assert.deepEqual(errors, []);
  await page.close();
});
