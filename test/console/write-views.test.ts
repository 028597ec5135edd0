/**
 * The console's writing views in Chromium, against a real server (test/console/harness.ts): the editor (preview with
 * diff and impact, save with a message, refusals in the problem's words, a conflict with the other change), the
 * history (diffs, filters in the URL, rollback with its preview), what a credential may not write, hidden values,
 * the keyboard alone, and axe at 1280x800 and 640x400.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { assertClean, CHROMIUM, launchBrowser, MAIN_CONFIGS, REQUIRED, SKIP, startFixture, type ConsoleFixture } from './harness.js';
import { accessible, call, exportAt, historyOf, pageAndStorage, pageAt, place, PROVOKED, writeAsAdmin } from './write-helpers.js';

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

const stored = (set: string, key: string): string | undefined => MAIN_CONFIGS.find((c) => c.set === set && c.key === key)?.value;
const panel = (page: Page, name: RegExp) => page.getByRole('region', { name });
const rowText = (page: Page, selector: string) => page.locator(selector).allInnerTexts();

test('edit: a preview shows the diff and the impact; Save needs a message; the history shows the revision; rollback restores', { skip: SKIP }, async () => {
  const watch = await pageAt(browser, fx, fx.tokens.stagingWriter, place(fx, 'edit', 'staging'));
  const { page } = watch;
  const level = page.getByLabel('LOG_LEVEL', { exact: true });
  await level.waitFor();
  assert.equal(await level.inputValue(), '', 'staging stores no LOG_LEVEL of its own');
  assert.equal(await page.getByLabel('API_HOST', { exact: true }).inputValue(), stored('staging', 'API_HOST'));
  await level.selectOption('debug');
  await page.getByRole('button', { name: 'Preview' }).click();
  const preview = panel(page, /Preview of the write at staging/);
  await preview.locator('table.impact').waitFor();
  assert.deepEqual(await rowText(page, 'table.diff tbody tr'), ['LOG_LEVEL\t(absent)\t→ "debug"']);
  const impact = (await rowText(page, 'table.impact tbody tr'))[0]!;
  for (const part of ['app', 'staging', 'changes', 'LOG_LEVEL']) assert.ok(impact.includes(part), `impact row "${impact}" names ${part}`);
  await accessible(page, 'the editor with its preview');

  const revisionsBefore = await historyOf(fx, 'staging');
  await preview.getByRole('button', { name: 'Save' }).click();
  await preview.getByText('Say why: the console saves a change only with a message.').waitFor();
  assert.deepEqual(await historyOf(fx, 'staging'), revisionsBefore, 'nothing is written without a message');
  await preview.getByLabel(/Message/).fill('debug the staging logs');
  await preview.getByRole('button', { name: 'Save' }).click();
  await page.getByText(/Saved as revision/).waitFor();
  const [top] = await historyOf(fx, 'staging');
  assert.equal(top!.subject, 'staging-writer');
  assert.equal(top!.message, 'debug the staging logs');
  assert.deepEqual(top!.changes.map((c) => c.key), ['LOG_LEVEL']);
  assert.ok((await page.locator('.write-panel').innerText()).includes(`Saved as revision ${top!.revision} of staging`));
  await page.locator('p.status', { hasText: `staging is now at revision ${top!.revision}` }).waitFor();
  assert.equal((await exportAt(fx, 'staging')).LOG_LEVEL, 'debug');

  await page.getByRole('link', { name: 'History', exact: true }).click();
  const first = page.locator('table.revisions tbody tr').first();
  await first.locator('th', { hasText: String(top!.revision) }).waitFor();
  const firstText = await first.innerText();
  assert.ok(firstText.includes('staging-writer') && firstText.includes('debug the staging logs'), firstText);
  const outside = (await historyOf(fx, 'staging')).find((r) => !r.recorded);
  if (outside) await page.locator('table.revisions tr', { hasText: 'changed outside cfgu (not recorded who)' }).first().waitFor();
  const open = page.getByRole('button', { name: `Changes of revision ${top!.revision}` });
  await open.click();
  await page.getByRole('button', { name: `Hide changes of revision ${top!.revision}` }).waitFor();
  assert.equal(await page.getByRole('button', { name: `Hide changes of revision ${top!.revision}` }).getAttribute('aria-expanded'), 'true');
  assert.deepEqual(await rowText(page, `#rev-${top!.revision}-diff table.diff tbody tr`), ['LOG_LEVEL\t(absent)\t→ "debug"']);
  assert.equal(new URL(page.url()).searchParams.get('rev'), String(top!.revision));
  await accessible(page, 'the history with a revision open');

  // Filters: in the URL, and the list is the server's answer for them.
  await page.getByLabel('Key', { exact: true }).fill('API_HOST');
  await page.getByRole('button', { name: 'Filter' }).click();
  await page.waitForFunction(() => new URL(location.href).searchParams.get('key') === 'API_HOST');
  const filtered = (await call(fx, fx.tokens.admin, 'GET', '/history?store=main&set=staging&key=API_HOST')).body.records.map((r: { revision: number }) => String(r.revision));
  await page.waitForFunction((n) => document.querySelectorAll('table.revisions tbody > tr:first-child').length === n || (n === 0 && !!document.body.innerText.match(/No revision matches/)), filtered.length);
  assert.deepEqual(await page.locator('table.revisions tbody > tr:first-child > th').allInnerTexts(), filtered);
  await page.getByRole('button', { name: 'Clear filters' }).click();
  await page.waitForFunction(() => !new URL(location.href).searchParams.has('key'));

  // Rollback to the revision before ours: LOG_LEVEL goes back to none at staging (the default answers).
  const target = (await historyOf(fx, 'staging')).find((r) => r.revision < top!.revision);
  assert.ok(target, 'the set has a revision before the write (the values it held before cfgu kept its history)');
  await page.getByRole('button', { name: `Roll back to revision ${target.revision}` }).click();
  const rollback = panel(page, new RegExp(`Preview of the rollback of staging to revision ${target.revision}`));
  await rollback.locator('table.diff').waitFor();
  assert.deepEqual(await rowText(page, '.write-panel table.diff tbody tr'), ['LOG_LEVEL\t"debug"\t→ (absent)']);
  assert.equal(await rollback.getByLabel(/Message/).inputValue(), `rollback to revision ${target.revision}`);
  await accessible(page, 'the rollback preview');
  await rollback.getByRole('button', { name: 'Save' }).click();
  await page.getByText(/Saved as revision/).waitFor();
  assert.equal((await exportAt(fx, 'staging')).LOG_LEVEL, 'info', 'LOG_LEVEL back to its default');
  const [restored] = await historyOf(fx, 'staging');
  assert.equal(restored!.message, `rollback to revision ${target.revision}`);
  await page.locator('table.revisions tbody tr').first().locator('th', { hasText: String(restored!.revision) }).waitFor();
  assertClean(watch, PROVOKED);
  await watch.context.close();
});

test('edit: invalid values show the 422 failures in the server\'s words and save nothing', { skip: SKIP }, async () => {
  const watch = await pageAt(browser, fx, fx.tokens.stagingWriter, place(fx, 'edit', 'staging'));
  const { page } = watch;
  await page.getByLabel('PORT', { exact: true }).fill('0');
  await page.getByLabel('API_HOST', { exact: true }).fill('not a host!');
  const before = { history: await historyOf(fx, 'staging'), values: await exportAt(fx, 'staging') };
  await page.getByRole('button', { name: 'Preview' }).click();
  await panel(page, /Preview of the write/).getByText('The write would be refused').waitFor();
  const refusal = await call(fx, fx.tokens.stagingWriter, 'POST', '/upsert', { store: 'main', set: 'staging', schema: 'app', values: { PORT: '0', API_HOST: 'not a host!' }, dryRun: true });
  assert.equal(refusal.status, 422);
  assert.equal(refusal.type, 'application/problem+json; charset=utf-8');
  assert.equal(refusal.body.type, 'urn:cfgu:problem:validation-failed');
  const text = await page.locator('.write-panel').innerText();
  assert.ok(text.includes(refusal.body.detail), text);
  assert.deepEqual(refusal.body.errors.map((e: { key: string }) => e.key).sort(), ['API_HOST', 'PORT']);
  for (const e of refusal.body.errors) assert.ok(text.includes(e.message), `the panel shows "${e.message}"`);
  assert.equal(await page.locator('.write-panel').getByRole('button', { name: /Save/ }).count(), 0, 'nothing to save');
  assert.deepEqual(await historyOf(fx, 'staging'), before.history);
  assert.deepEqual(await exportAt(fx, 'staging'), before.values);
  await accessible(page, 'the editor with a refusal');
  // Escape closes the panel.
  await page.getByLabel('PORT', { exact: true }).press('Escape');
  await page.locator('.write-panel').waitFor({ state: 'detached' });
  assertClean(watch, PROVOKED);
  await watch.context.close();
});

test('edit: a conflict (409) shows the other change; "Review again" keeps the edit over the new values and saves', { skip: SKIP }, async () => {
  const watch = await pageAt(browser, fx, fx.tokens.stagingWriter, place(fx, 'edit', 'staging'));
  const { page } = watch;
  await page.getByLabel('API_HOST', { exact: true }).fill('conflict.example.com');
  await page.getByRole('button', { name: 'Preview' }).click();
  const preview = panel(page, /Preview of the write/);
  await preview.locator('table.diff').waitFor();
  const other = await writeAsAdmin(fx, 'staging', { FEATURE_X: 'off' }, 'switch X off from the test');
  const [otherRecord] = await historyOf(fx, 'staging');
  await preview.getByLabel(/Message/).fill('move the staging API');
  await preview.getByRole('button', { name: 'Save' }).click();
  const conflict = panel(page, /Conflict: the set changed/);
  await conflict.locator('ul.others li').first().waitFor();
  const text = await conflict.innerText();
  assert.match(text, new RegExp(`set "staging" of store "main" is at revision ${other.revision}, not \\d+: it changed since it was read; nothing was written`));
  const line = await conflict.locator('ul.others li').first().innerText();
  for (const part of [`revision ${other.revision}`, otherRecord!.subject!, 'switch X off from the test', 'FEATURE_X']) assert.ok(line.includes(part), `"${line}" names ${part}`);
  assert.notEqual((await exportAt(fx, 'staging')).API_HOST, 'conflict.example.com', 'nothing was written');
  await accessible(page, 'the conflict panel');

  await conflict.getByRole('button', { name: 'Review again' }).click();
  const again = panel(page, /Preview of the write/);
  await again.locator('table.diff').waitFor();
  assert.deepEqual(await rowText(page, '.write-panel table.diff tbody tr'), [`API_HOST\t"${stored('staging', 'API_HOST')}"\t→ "conflict.example.com"`]);
  await page.waitForFunction(() => (document.getElementById('edit-FEATURE_X') as HTMLInputElement | null)?.value === 'off');
  assert.equal(await page.getByLabel('API_HOST', { exact: true }).inputValue(), 'conflict.example.com', 'the edit is kept');
  await again.getByLabel(/Message/).fill('move the staging API');
  await again.getByRole('button', { name: 'Save' }).click();
  await page.getByText(/Saved as revision/).waitFor();
  const values = await exportAt(fx, 'staging');
  assert.equal(values.API_HOST, 'conflict.example.com');
  assert.equal(values.FEATURE_X, 'off');
  assertClean(watch, PROVOKED);
  await watch.context.close();
});

test('what a credential may not write: no Edit view for prodReader (a direct URL says why), no rollback, 403 in its words', { skip: SKIP }, async () => {
  const reader = await pageAt(browser, fx, fx.tokens.prodReader, place(fx, 'edit', 'prod'));
  await reader.page.getByText('This set cannot be edited: your credential has no write grant for store "main".').waitFor();
  assert.deepEqual(await reader.page.getByRole('navigation', { name: 'Views' }).getByRole('link').allInnerTexts(), ['Values', 'Matrix', 'History']);
  await accessible(reader.page, 'the editor refused');
  assertClean(reader, PROVOKED);
  await reader.context.close();

  const history = await pageAt(browser, fx, fx.tokens.prodReader, place(fx, 'history', 'prod'));
  await history.page.getByText(/Rollback is not offered: your credential has no write grant for store "main"/).waitFor();
  assert.equal(await history.page.getByRole('button', { name: /Roll back/ }).count(), 0);
  assertClean(history, PROVOKED);
  await history.context.close();

  const outside = await pageAt(browser, fx, fx.tokens.prodReader, place(fx, 'history', 'staging'));
  const refused = await call(fx, fx.tokens.prodReader, 'GET', '/history?store=main&set=staging');
  assert.equal(refused.status, 403);
  assert.equal(refused.body.type, 'urn:cfgu:problem:forbidden');
  await outside.page.getByRole('alert').getByText(refused.body.detail).waitFor();
  assertClean(outside, PROVOKED);
  await outside.context.close();

  const writer = await pageAt(browser, fx, fx.tokens.stagingWriter, place(fx, 'edit', 'prod'));
  await writer.page.getByText('This set cannot be edited: your credential\'s write grants for store "main" cover only the sets staging/**.').waitFor();
  assertClean(writer, PROVOKED);
  await writer.context.close();
});

test('hidden: DB_PASSWORD is typed into a password input, masked in the preview and the history, never in the HTML or storage', { skip: SKIP }, async () => {
  const secret = 'N3W-console-hidden-password';
  const watch = await pageAt(browser, fx, fx.tokens.admin, place(fx, 'edit', 'staging'));
  const { page } = watch;
  const input = page.getByLabel('DB_PASSWORD', { exact: true });
  assert.equal(await input.getAttribute('type'), 'password');
  assert.equal(await input.getAttribute('placeholder'), 'unchanged unless typed');
  assert.equal(await input.inputValue(), '');
  await input.fill(secret);
  await page.getByRole('button', { name: 'Preview' }).click();
  const preview = panel(page, /Preview of the write/);
  await preview.locator('table.diff').waitFor();
  assert.deepEqual(await rowText(page, '.write-panel table.diff tbody tr'), ['DB_PASSWORD\t(absent)\t→ •••••• (hidden)']);
  await preview.getByLabel(/Message/).fill('a password for staging');
  await preview.getByRole('button', { name: 'Save' }).click();
  await page.getByText(/Saved as revision/).waitFor();
  await page.waitForFunction(() => (document.getElementById('edit-DB_PASSWORD') as HTMLInputElement).value === '');
  await page.getByText('hidden: a value is stored here, never shown').waitFor(); // the typed password gave way to the stored one
  await page.getByRole('link', { name: 'History', exact: true }).click();
  const [top] = await historyOf(fx, 'staging');
  await page.getByRole('button', { name: `Changes of revision ${top!.revision}` }).click();
  await page.locator(`#rev-${top!.revision}-diff`).getByText('(hidden)').waitFor();
  // The set with the fixture's password: stored there, never shown, removable.
  await page.evaluate((url) => (history.pushState(null, '', url), dispatchEvent(new PopStateEvent('popstate'))), place(fx, 'edit', 'prod'));
  await page.getByText('hidden: a value is stored here, never shown').waitFor();
  await page.getByRole('button', { name: 'Remove at this set: DB_PASSWORD' }).waitFor();
  const everything = await pageAndStorage(page);
  assert.ok(!everything.includes(secret), 'the new password is nowhere in the page or its storage');
  assert.ok(!everything.includes(stored('prod', 'DB_PASSWORD')!), "prod's password is nowhere in the page or its storage");
  assertClean(watch, PROVOKED);
  await watch.context.close();
});

test('keyboard only: Tab to an input, type, Ctrl+Enter previews, the message and Enter save, Escape closes', { skip: SKIP }, async () => {
  const watch = await pageAt(browser, fx, fx.tokens.stagingWriter, place(fx, 'edit', 'staging'));
  const { page } = watch;
  await page.getByLabel('PORT', { exact: true }).waitFor();
  const focused = () => page.evaluate(() => document.activeElement?.id ?? '');
  for (let i = 0; i < 100 && (await focused()) !== 'edit-PORT'; i++) await page.keyboard.press('Tab');
  assert.equal(await focused(), 'edit-PORT', 'Tab reaches the PORT input');
  assert.notEqual(await page.evaluate(() => getComputedStyle(document.activeElement!).outlineStyle), 'none', 'the focus is visible');
  await page.keyboard.type('8081');
  await page.keyboard.press('Control+Enter');
  await panel(page, /Preview of the write/).locator('table.diff').waitFor();
  await page.waitForFunction(() => document.activeElement?.id === 'write-message');
  assert.deepEqual(await rowText(page, '.write-panel table.diff tbody tr'), ['PORT\t(absent)\t→ "8081"']);
  await page.keyboard.type('port by keyboard');
  await page.keyboard.press('Enter');
  await page.getByText(/Saved as revision/).waitFor();
  assert.equal((await exportAt(fx, 'staging')).PORT, 8081);
  await page.keyboard.press('Escape');
  await page.locator('.write-panel').waitFor({ state: 'detached' });
  assertClean(watch, PROVOKED);
  await watch.context.close();
});

const sha256 = (s: string): string => createHash('sha256').update(s).digest('hex');

test('a breaking write: "Save anyway" only with the right to break, which sends allowBreaking', { skip: SKIP }, async (t) => {
  const tokens = { admin: `cfgu_test-admin-${Math.random().toString(36).slice(2)}`, writer: `cfgu_test-w-${Math.random().toString(36).slice(2)}`, breaker: `cfgu_test-b-${Math.random().toString(36).slice(2)}` };
  const grant = { stores: ['main'], sets: ['', '**'], write: true };
  const own = await startFixture({
    auth: {
      enabled: true,
      presharedKeys: [tokens.admin],
      credentials: [
        { name: 'root-writer', sha256: sha256(tokens.writer), ...grant },
        { name: 'root-breaker', sha256: sha256(tokens.breaker), ...grant, breaking: true },
      ],
    },
  });
  t.after(() => own.stop());
  const removeApiHost = async (token: string) => {
    const watch = await pageAt(browser, own, token, place(own, 'edit', ''));
    await watch.page.getByRole('button', { name: 'Remove at this set: API_HOST' }).click();
    await watch.page.getByRole('button', { name: 'Preview' }).click();
    return watch;
  };
  // The root must pass before the write for the write to break it: the fixture leaves FEATURE_X missing there.
  const fixed = await call(own, tokens.admin, 'POST', '/upsert', { store: 'main', set: '', schema: 'app', values: { FEATURE_X: 'off' }, message: 'the root passes' });
  assert.equal(fixed.status, 200);
  const refusal = await call(own, tokens.writer, 'POST', '/upsert', { store: 'main', set: '', schema: 'app', values: { API_HOST: null }, dryRun: true });
  assert.equal(refusal.status, 422);
  assert.equal(refusal.body.type, 'urn:cfgu:problem:write-breaks');

  const writer = await removeApiHost(tokens.writer);
  await writer.page.getByText('The write would be refused').waitFor();
  assert.ok((await writer.page.locator('.write-panel').innerText()).includes(refusal.body.detail));
  await writer.page.locator('.write-panel table.impact tr.impact-breaks').first().waitFor();
  assert.equal(await writer.page.getByRole('button', { name: /Save/ }).count(), 0, 'no Save anyway without the right to break');
  assertClean(writer, PROVOKED);
  await writer.context.close();

  const breaker = await removeApiHost(tokens.breaker);
  const preview = panel(breaker.page, /Preview of the write/);
  await preview.getByRole('button', { name: 'Save anyway' }).waitFor();
  assert.ok((await preview.innerText()).includes(refusal.body.detail), 'the breaks are said in the problem\'s words');
  await preview.locator('table.impact tr.impact-breaks').first().waitFor();
  await accessible(breaker.page, 'a breaking preview');
  await preview.getByLabel(/Message/).fill('the root has no API host any more');
  await preview.getByRole('button', { name: 'Save anyway' }).click();
  await breaker.page.getByText(/Saved as revision/).waitFor();
  const exported = await call(own, tokens.admin, 'POST', '/export', [{ store: 'main', set: '', schema: 'app' }]);
  assert.equal(exported.status, 422, 'the root now fails its schema, as the preview said');
  assertClean(breaker, PROVOKED);
  await breaker.context.close();
});

test('history: pages of revisions with "Older"; a new revision goes on top of the pages read', { skip: SKIP }, async () => {
  const set = 'staging/paging';
  for (let i = 0; i < 30; i++) await writeAsAdmin(fx, set, { LOG_LEVEL: i % 2 ? 'warn' : 'error' }, `paging ${i}`);
  const all = async () => (await call(fx, fx.tokens.admin, 'GET', `/history?store=main&set=${set}&limit=1000`)).body.records.map((r: { revision: number }) => String(r.revision));
  const watch = await pageAt(browser, fx, fx.tokens.stagingWriter, place(fx, 'history', set));
  const { page } = watch;
  const shown = () => page.locator('table.revisions tbody > tr:first-child > th').allInnerTexts();
  await page.locator('table.revisions').waitFor();
  const first = await shown();
  const expected = await all();
  assert.ok(first.length < expected.length, `a first page (${first.length} of ${expected.length} revisions)`);
  assert.deepEqual(first, expected.slice(0, first.length));
  while (await page.getByRole('button', { name: 'Older' }).count()) {
    const before = (await shown()).length;
    await page.getByRole('button', { name: 'Older' }).click();
    await page.waitForFunction((n) => document.querySelectorAll('table.revisions tbody').length > n, before);
  }
  assert.deepEqual(await shown(), expected, 'every revision once, newest first');
  await page.locator('.live-live').waitFor();
  const added = await writeAsAdmin(fx, set, { LOG_LEVEL: 'debug' }, 'one more');
  await page.locator('table.revisions tbody').first().locator('th', { hasText: String(added.revision) }).waitFor();
  assert.deepEqual(await shown(), await all(), 'the new revision on top, the older pages kept');
  assertClean(watch, PROVOKED);
  await watch.context.close();
});
