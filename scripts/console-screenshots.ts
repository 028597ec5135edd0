/**
 * Pictures of every page of the console for docs/console.md, taken from a real run: the browser tests' fixture
 * (test/console/harness.ts: a cfgu server over a json-file and a SQLite store, authentication on) in Debian's
 * Chromium, at 1280x800, the light scheme. Each picture is the page as a user reaches it (signed in, clicked through),
 * never a page assembled for the picture.
 *
 *   npm run build && node --import tsx scripts/console-screenshots.ts [--out docs/images]
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { Page } from 'playwright-core';
import { launchBrowser, openPage, SKIP, startFixture, type ConsoleFixture } from '../test/console/harness.js';

const { values: args } = parseArgs({ options: { out: { type: 'string', default: 'docs/images' } } });
if (SKIP) throw new Error(SKIP);
mkdirSync(args.out, { recursive: true });

const place = (fx: ConsoleFixture, view: string, set: string, extra: Record<string, string> = {}): string =>
  `${fx.url}?${new URLSearchParams({ view, store: 'main', schema: 'app', set, ...extra }).toString()}`;

async function shoot(page: Page, name: string): Promise<void> {
  // No animation or caret in a picture: the change highlight and the text cursor are stopped at their end.
  await page.evaluate(() => document.getAnimations().forEach((a) => a.finish()));
  await page.screenshot({ path: join(args.out, `console-${name}.png`), fullPage: false, caret: 'hide' });
  process.stdout.write(`${join(args.out, `console-${name}.png`)}\n`);
}

async function post(fx: ConsoleFixture, path: string, body: unknown): Promise<void> {
  const r = await fetch(`${fx.server.base}${path}`, { method: 'POST', headers: { authorization: `Bearer ${fx.tokens.admin}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  if (!r.ok) throw new Error(`${path}: ${r.status} ${await r.text()}`);
}

const fx = await startFixture();
const browser = await launchBrowser();
try {
  // Some history to show: two earlier writes to staging, by the admin, with messages.
  await post(fx, '/upsert', { store: 'main', set: 'staging', schema: 'app', values: { LOG_LEVEL: 'info' }, message: 'quieter staging logs' });
  await post(fx, '/upsert', { store: 'main', set: 'staging', schema: 'app', values: { LOG_LEVEL: 'debug', PORT: '8080' }, message: 'debug the release candidate' });

  const { page, context } = await openPage(browser, fx.server.base);
  await page.emulateMedia({ colorScheme: 'light' });
  await page.goto(place(fx, 'schema', 'prod/eu'));
  await page.getByLabel('Token or JWT').waitFor();
  await shoot(page, 'sign-in');

  // Signed in with "keep me signed in in this tab", so that each page below can be opened by its address.
  await page.getByLabel('Token or JWT').fill(fx.tokens.admin);
  await page.getByLabel(/Keep me signed in/).check();
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByText(/signed in as/).waitFor();
  await page.locator('table.values').waitFor();
  await page.getByRole('button', { name: 'why? API_HOST' }).click();
  await page.locator('#why-API_HOST').waitFor();
  await shoot(page, 'values');

  await page.goto(place(fx, 'matrix', 'prod/eu'));
  await page.getByRole('grid').waitFor();
  await page.locator('[role=grid] [role=gridcell]').nth(8).focus();
  await shoot(page, 'matrix');
  await page.goto(place(fx, 'matrix', 'prod/eu', { compare: 'prod/eu,prod/us' }));
  await page.locator('.diff table').waitFor();
  await page.locator('.diff').scrollIntoViewIfNeeded();
  await shoot(page, 'diff');

  await page.goto(place(fx, 'edit', 'staging'));
  await page.getByLabel('LOG_LEVEL', { exact: true }).selectOption('warn');
  await page.getByLabel('API_HOST', { exact: true }).fill('rc.staging.example.com');
  await page.getByRole('button', { name: 'Preview' }).click();
  await page.getByRole('region', { name: /Preview of the write/ }).getByLabel(/Message/).fill('point staging at the release candidate');
  await shoot(page, 'edit-preview');

  // A conflict: someone else writes staging while the preview is open, then Save.
  await post(fx, '/upsert', { store: 'main', set: 'staging', schema: 'app', values: { API_HOST: 'hotfix.staging.example.com' }, message: 'hotfix: move staging' });
  await page.getByRole('region', { name: /Preview of the write/ }).getByRole('button', { name: 'Save' }).click();
  await page.getByRole('button', { name: 'Review again' }).waitFor();
  await page.getByRole('region', { name: /Conflict/ }).evaluate((e) => e.scrollIntoView({ block: 'end' }));
  await shoot(page, 'conflict');

  await page.goto(place(fx, 'history', 'staging'));
  const first = page.getByRole('button', { name: /^Changes of revision/ }).first();
  await first.click();
  await page.getByRole('button', { name: /^Roll back to revision/ }).last().click();
  await page.getByRole('region', { name: /rollback/i }).first().waitFor();
  await shoot(page, 'history');
  await context.close();
} finally {
  await browser.close();
  await fx.stop();
}
