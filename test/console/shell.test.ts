/**
 * The console's frame in Chromium against a real server (./harness.ts): signing in (a refused token shown in the
 * 401 problem's words), signing out, a server without authentication (served to loopback only, no sign-in), the
 * store and schema selects, and the place kept in the URL: after a reload, and with the browser's back and forward.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { HANG_GUARD_MS } from '../helpers/wait.js';
import { APP_SCHEMA, CHROMIUM, REQUIRED, SKIP, assertClean, axeScan, launchBrowser, openPage, startFixture, type ConsoleFixture } from './harness.js';

let fx: ConsoleFixture;
let browser: Browser;
/** A page without a credential asks GET /session first: refused (401) by design. */
const SIGN_IN_401 = [/status of 401/];

before(async () => {
  if (SKIP) return;
  fx = await startFixture();
  browser = await launchBrowser();
});
after(async () => {
  await browser?.close();
  await fx?.stop();
});

test('Chromium is available (required under CI=true)', { skip: !REQUIRED && SKIP ? SKIP : false }, () => {
  assert.ok(CHROMIUM, 'no Chromium and CI=true: the console browser tests cannot run (set CHROMIUM_PATH or put chromium on PATH)');
});

/** A watched page whose waits give up only at the suite's hang guard (a loaded machine is slow, never wrong). */
async function open(origin: string) {
  const watched = await openPage(browser, origin);
  watched.context.setDefaultTimeout(HANG_GUARD_MS);
  return watched;
}

const param = (page: Page, name: string): string | null => new URL(page.url()).searchParams.get(name);

async function submitToken(page: Page, token: string, remember = false): Promise<void> {
  await page.getByLabel('Token or JWT').fill(token);
  if (remember) await page.getByLabel(/Keep me signed in/).check();
  await page.getByRole('button', { name: 'Sign in' }).click();
}

test('sign-in: a refused token in the 401 problem\'s words, then a good one; sign-out forgets the credential', { skip: SKIP }, async () => {
  const bad = `cfgu_not-a-token-${Math.random().toString(36).slice(2)}`;
  const refusal = await fetch(`${fx.server.base}/session`, { headers: { authorization: `Bearer ${bad}` } });
  assert.equal(refusal.status, 401);
  const problem = (await refusal.json()) as { detail: string };
  const w = await open(new URL(fx.url).origin);
  const { page } = w;
  await page.goto(fx.url);
  // The page asks GET /session first (a line says it is loading); the form comes once that answers 401.
  await page.getByLabel('Token or JWT').waitFor();
  assert.equal(await page.getByRole('heading', { name: 'cfgu console' }).count(), 1);
  await submitToken(page, bad);
  const alert = page.getByRole('alert');
  await alert.waitFor();
  const text = await alert.innerText();
  assert.ok(text.startsWith('Not signed in (401)'), text);
  assert.ok(text.includes(problem.detail), text);
  assert.deepEqual(await axeScan(page), [], 'the sign-in form with its refusal');

  await submitToken(page, fx.tokens.admin, true);
  await page.getByText('signed in as').waitFor();
  await page.locator('table.values').waitFor();
  // Only the credential is kept, in this tab's sessionStorage, because it was asked for.
  assert.deepEqual(await page.evaluate(() => [Object.keys(sessionStorage), localStorage.length]), [['cfgu-console-token'], 0]);
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByLabel('Token or JWT').waitFor();
  assert.deepEqual(await page.evaluate(() => Object.keys(sessionStorage)), []);
  await page.reload();
  await page.getByLabel('Token or JWT').waitFor();
  assertClean(w, [...SIGN_IN_401]);
  await w.context.close();
});

test('without authentication the console is served to loopback and opens without a sign-in', { skip: SKIP }, async () => {
  const own = await startFixture({ auth: { enabled: false } });
  try {
    const w = await open(new URL(own.url).origin);
    const { page } = w;
    await page.goto(`${own.url}?set=prod/eu`);
    await page.getByText('no authentication (loopback)').waitFor();
    assert.equal(await page.getByRole('button', { name: 'Sign out' }).count(), 0);
    assert.equal(await page.getByLabel('Token or JWT').count(), 0);
    await page.locator('table.values').waitFor();
    assert.equal(await page.locator('[role=treeitem]').count(), 5);
    assert.deepEqual(await axeScan(page), []);
    assertClean(w);
    await w.context.close();
  } finally {
    await own.stop();
  }
});

test('the store and schema selects: another store is another tree and other values, kept in the URL', { skip: SKIP }, async () => {
  const w = await open(new URL(fx.url).origin);
  const { page } = w;
  await page.goto(`${fx.url}?set=prod/eu`);
  await submitToken(page, fx.tokens.admin);
  await page.locator('table.values').waitFor();
  const store = page.getByRole('combobox', { name: 'Store' });
  assert.deepEqual(await store.locator('option').allInnerTexts(), ['main (json-file)', 'local (sqlite)']);
  const schema = page.getByRole('combobox', { name: 'Schema' });
  assert.deepEqual(await schema.locator('option').allInnerTexts(), [`app (${Object.keys(APP_SCHEMA.keys).length} keys)`]);
  await store.selectOption('local');
  await page.waitForFunction(() => new URL(location.href).searchParams.get('store') === 'local');
  assert.equal(param(page, 'set'), '', 'another store starts at its root');
  // The SQLite store holds nothing: its root only, and every key at its default or missing.
  await page.waitForFunction(() => document.querySelectorAll('[role=treeitem]').length === 1);
  assert.equal(await page.locator('[role=treeitem]').innerText(), '(root) (no values)');
  await page.locator('h1', { hasText: '(root)' }).waitFor();
  await page.waitForFunction(() => /\d+ not passing/.test(document.querySelector('.values-tools')?.textContent ?? ''));
  const states = await page.$$eval('table.values tbody tr', (trs) => trs.map((tr) => [tr.querySelector('th code')!.textContent, tr.querySelectorAll('td')[1]!.textContent]));
  assert.deepEqual(states, Object.entries(APP_SCHEMA.keys).map(([key, d]) => [key, 'default' in d ? 'default' : 'const' in d ? 'const' : '(empty)']));
  await page.getByRole('link', { name: 'Matrix' }).click();
  await page.getByText('The store holds no value at any set yet').waitFor();
  await store.selectOption('main');
  await page.waitForFunction(() => document.querySelectorAll('[role=treeitem]').length === 5);
  await page.getByRole('grid').waitFor();
  assert.equal(param(page, 'store'), 'main');
  assertClean(w, SIGN_IN_401);
  await w.context.close();
});

test('the place is in the URL: a reload restores it (view, set, filter), back and forward walk the places', { skip: SKIP }, async () => {
  const w = await open(new URL(fx.url).origin);
  const { page } = w;
  await page.goto(`${fx.url}?view=schema&set=prod`);
  await submitToken(page, fx.tokens.admin, true);
  await page.locator('h1', { hasText: 'at prod' }).waitFor();
  await page.locator('[data-path="prod/eu"]').click();
  await page.locator('h1', { hasText: 'prod/eu' }).waitFor();
  // A view's link is the whole place (a new tab opened from it lands at the same store, schema and set).
  const link = new URL((await page.getByRole('link', { name: 'Matrix' }).getAttribute('href'))!, page.url());
  assert.deepEqual([link.searchParams.get('view'), link.searchParams.get('store'), link.searchParams.get('set')], ['matrix', 'main', 'prod/eu']);
  await page.getByRole('link', { name: 'Matrix' }).click();
  await page.getByRole('grid').waitFor();
  await page.getByRole('checkbox', { name: 'Only problems' }).check();
  await page.waitForFunction(() => document.querySelectorAll('tbody tr[data-row]').length === 1);

  await page.reload();
  await page.getByRole('grid').waitFor();
  assert.equal(await page.getByRole('link', { name: 'Matrix' }).getAttribute('aria-current'), 'page');
  assert.equal(await page.getByRole('checkbox', { name: 'Only problems' }).isChecked(), true);
  assert.equal(await page.locator('tbody tr[data-row]').count(), 1);
  assert.equal(await page.locator('[role=treeitem][aria-selected=true]').getAttribute('data-path'), 'prod/eu');

  await page.goBack();
  await page.locator('h1', { hasText: 'Values of app at prod/eu' }).waitFor();
  assert.equal(await page.locator('[role=treeitem][aria-selected=true]').getAttribute('data-path'), 'prod/eu');
  await page.goBack();
  await page.locator('h1', { hasText: /at prod$/ }).waitFor();
  assert.equal(await page.locator('[role=treeitem][aria-selected=true]').getAttribute('data-path'), 'prod');
  await page.goForward();
  await page.locator('h1', { hasText: 'at prod/eu' }).waitFor();
  await page.goForward();
  await page.getByRole('grid').waitFor();
  assert.equal(param(page, 'problems'), '1', 'the filter was kept in its history entry');
  assert.equal(await page.locator('tbody tr[data-row]').count(), 1);
  assertClean(w, SIGN_IN_401);
  await w.context.close();
});
