/**
 * Live updates of the writing views: another client's write (POST /upsert from the test) reaches two open pages, each
 * in its own browser context, through the change stream (GET /changes), without a reload: the editor shows the new
 * value highlighted and keeps what the user is typing (saying what someone else wrote), the history prepends the new
 * revision.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { assertClean, CHROMIUM, launchBrowser, MAIN_CONFIGS, REQUIRED, SKIP, startFixture, type ConsoleFixture } from './harness.js';
import { historyOf, pageAt, place, PROVOKED, writeAsAdmin } from './write-helpers.js';

let fx: ConsoleFixture;
let browser: Browser;

before(async () => {
  if (SKIP) return;
  fx = await startFixture();
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await fx?.stop();
});

test('Chromium is available (required under CI=true)', { skip: !REQUIRED && !CHROMIUM ? 'chromium missing (not CI)' : false }, () => {
  assert.ok(CHROMIUM, 'no Chromium and CI=true: the console browser tests cannot run (set CHROMIUM_PATH or put chromium on PATH)');
});

/** Marks the page's window: still marked later means it was never reloaded. */
const mark = (page: Page) => page.evaluate(() => void ((window as unknown as { cfguTestMark: boolean }).cfguTestMark = true));
const marked = (page: Page) => page.evaluate(() => (window as unknown as { cfguTestMark?: boolean }).cfguTestMark === true);
const live = (page: Page) => page.locator('.live-live').waitFor();
const inputValue = (page: Page, id: string, value: string) =>
  page.waitForFunction(([i, v]) => (document.getElementById(i!) as HTMLInputElement | null)?.value === v, [id, value] as const);

test('a write by another client appears in an open editor and an open history, without reload, keeping the user\'s edit', { skip: SKIP }, async () => {
  const editor = await pageAt(browser, fx, fx.tokens.stagingWriter, place(fx, 'edit', 'staging'));
  const history = await pageAt(browser, fx, fx.tokens.stagingWriter, place(fx, 'history', 'staging'));
  const apiHost = MAIN_CONFIGS.find((c) => c.set === 'staging' && c.key === 'API_HOST')!.value;
  await inputValue(editor.page, 'edit-API_HOST', apiHost);
  await history.page.getByText(/No revision yet|Revisions, newest first/).waitFor();
  await Promise.all([live(editor.page), live(history.page)]);
  await Promise.all([mark(editor.page), mark(history.page)]);

  // A value the user does not edit follows the store, highlighted.
  const first = await writeAsAdmin(fx, 'staging', { LOG_LEVEL: 'error' }, 'louder logs, from another client');
  await inputValue(editor.page, 'edit-LOG_LEVEL', 'error');
  await editor.page.locator('tr.changed', { has: editor.page.locator('#edit-LOG_LEVEL') }).waitFor();
  const newest = history.page.locator('table.revisions tbody').first();
  await newest.locator('th', { hasText: String(first.revision) }).waitFor();
  assert.ok((await newest.innerText()).includes('louder logs, from another client'));
  assert.match((await newest.getAttribute('class')) ?? '', /\bchanged\b/, 'the new revision is highlighted');

  // An input the user changed keeps the user's value and says what someone else wrote.
  await editor.page.getByLabel('API_HOST', { exact: true }).fill('mine.example.com');
  const second = await writeAsAdmin(fx, 'staging', { API_HOST: 'theirs.example.com', FEATURE_X: 'off' }, 'another host, from another client');
  await editor.page.getByText('changed by someone else since you started: "theirs.example.com"').waitFor();
  await inputValue(editor.page, 'edit-FEATURE_X', 'off');
  assert.equal(await editor.page.getByLabel('API_HOST', { exact: true }).inputValue(), 'mine.example.com');
  await newest.locator('th', { hasText: String(second.revision) }).waitFor();
  const shown = await history.page.locator('table.revisions tbody > tr:first-child > th').allInnerTexts();
  assert.deepEqual(shown, (await historyOf(fx, 'staging')).map((r) => String(r.revision)), 'the history holds every revision, newest first');

  // Previewing now shows the user's value over the one written meanwhile.
  await editor.page.keyboard.press('Control+Enter');
  await editor.page.locator('.write-panel table.diff').waitFor();
  assert.deepEqual(await editor.page.locator('.write-panel table.diff tbody tr').allInnerTexts(), ['API_HOST\t"theirs.example.com"\t→ "mine.example.com"']);

  assert.ok(await marked(editor.page), 'the editor was not reloaded');
  assert.ok(await marked(history.page), 'the history was not reloaded');
  assertClean(editor, PROVOKED);
  assertClean(history, PROVOKED);
  await editor.context.close();
  await history.context.close();
});
