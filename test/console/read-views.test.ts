/**
 * The console's reading views in Chromium against a real server (./harness.ts): the set tree (its hierarchy, its
 * keyboard, a scoped credential's part of it), the values of a schema at a set with "why?", the matrix (its grid, its
 * filters, its keyboard, a diff of two sets), a write by another client showing without a reload, and an axe scan of
 * every view at 1280x800 and at 640x400 (the same as 1280x800 at 200% zoom).
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { APP_SCHEMA, CHROMIUM, MAIN_CONFIGS, REQUIRED, SKIP, assertClean, axeScan, launchBrowser, openPage, signIn, startFixture, type ConsoleFixture } from './harness.js';
import { HANG_GUARD_MS, waitFor } from '../helpers/wait.js';

let fx: ConsoleFixture;
let browser: Browser;
/** Signing in starts from a page without a credential: its GET /session is refused (401) by design. */
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

/** A watched page whose waits give up only at the suite's hang guard (a loaded machine is slow, never wrong). */
async function open(origin: string) {
  const watched = await openPage(browser, origin);
  watched.context.setDefaultTimeout(HANG_GUARD_MS);
  return watched;
}

test('Chromium is available (required under CI=true)', { skip: !REQUIRED && SKIP ? SKIP : false }, () => {
  assert.ok(CHROMIUM, 'no Chromium and CI=true: the console browser tests cannot run (set CHROMIUM_PATH or put chromium on PATH)');
});

/** The stored value of `key` at exactly `set` in the fixture's store. */
const stored = (set: string, key: string): string | undefined => MAIN_CONFIGS.find((c) => c.set === set && c.key === key)?.value;

const param = (page: Page, name: string): string | null => new URL(page.url()).searchParams.get(name);

/** The tree's items as shown: name (its own text), level, selected, expanded. */
function treeItems(page: Page) {
  return page.$$eval('[role=treeitem]', (items) =>
    items.map((li) => ({
      name: li.querySelector('.set-name')!.childNodes[0]!.textContent!,
      level: Number(li.getAttribute('aria-level')),
      selected: li.getAttribute('aria-selected') === 'true',
      expanded: li.getAttribute('aria-expanded'),
      tabindex: li.getAttribute('tabindex'),
    })),
  );
}

/** The set of the focused tree item, once the focus is on `expected` (or the hang guard's end). */
async function focusedPath(page: Page, expected: string): Promise<string | null | undefined> {
  await page.waitForFunction((path) => document.activeElement?.getAttribute('data-path') === path, expected).catch(() => undefined);
  return page.evaluate(() => document.activeElement?.getAttribute('data-path'));
}

/** The row of `key` in the values table. */
const valueRow = (page: Page, key: string) => page.locator('table.values tbody tr', { has: page.locator(`th code:text-is("${key}")`) });

/** The rows of the values table: key -> the text of its value, from and state cells. */
async function valueRows(page: Page): Promise<Map<string, { value: string; from: string; state: string }>> {
  const rows = await page.$$eval('table.values tbody tr:not(.why-row)', (trs) =>
    trs.map((tr) => [tr.querySelector('th code')!.textContent!, ...[...tr.querySelectorAll('td')].slice(0, 3).map((td) => (td as HTMLElement).innerText.trim())]),
  );
  return new Map(rows.map(([key, value, from, state]) => [key!, { value: value!, from: from!, state: state! }]));
}

async function scanBothSizes(page: Page, what: string): Promise<void> {
  assert.deepEqual(await axeScan(page), [], `${what}: no serious or critical axe finding at 1280x800`);
  await page.setViewportSize({ width: 640, height: 400 });
  assert.deepEqual(await axeScan(page), [], `${what}: no serious or critical axe finding at 640x400`);
  const [scroll, client] = await page.evaluate(() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]);
  assert.ok(scroll <= client, `${what}: no horizontal scroll of the page at 640x400 (${scroll} > ${client})`);
  await page.setViewportSize({ width: 1280, height: 800 });
}

test('the set tree: the hierarchy with the root first, and its keyboard (arrows, Home, End, Enter, Space)', { skip: SKIP }, async () => {
  const w = await open(new URL(fx.url).origin);
  const { page } = w;
  await signIn(page, `${fx.url}?view=schema`, fx.tokens.admin);
  await page.getByRole('tree', { name: 'Sets' }).waitFor();
  // A page opened without a set starts at the root.
  await page.waitForFunction(() => new URL(location.href).searchParams.get('set') === '');
  const items = await treeItems(page);
  assert.deepEqual(
    items.map((i) => [i.name, i.level, i.expanded]),
    [
      ['(root)', 1, null],
      ['prod', 1, 'true'],
      ['eu', 2, null],
      ['us', 2, null],
      ['staging', 1, null],
    ],
  );
  assert.deepEqual(items.map((i) => i.selected), [true, false, false, false, false]);
  assert.deepEqual(items.map((i) => i.tabindex), ['0', '-1', '-1', '-1', '-1'], 'one tab stop: the selected set');

  await page.locator('[role=treeitem][aria-selected=true]').focus();
  await page.keyboard.press('ArrowDown');
  assert.equal(await focusedPath(page, 'prod'), 'prod');
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => new URL(location.href).searchParams.get('set') === 'prod');
  assert.equal(await page.getByRole('treeitem', { name: 'prod', exact: true }).getAttribute('aria-selected'), 'true');
  await page.keyboard.press('ArrowRight'); // open: to the first child
  assert.equal(await focusedPath(page, 'prod/eu'), 'prod/eu');
  await page.keyboard.press('ArrowDown');
  await page.keyboard.press(' ');
  await page.waitForFunction(() => new URL(location.href).searchParams.get('set') === 'prod/us');
  await page.locator('h1', { hasText: 'prod/us' }).waitFor();
  await page.keyboard.press('ArrowLeft'); // a leaf: to its parent
  assert.equal(await focusedPath(page, 'prod'), 'prod');
  await page.keyboard.press('ArrowLeft'); // open: closes
  assert.equal(await page.locator('[data-path=prod]').getAttribute('aria-expanded'), 'false');
  assert.deepEqual((await treeItems(page)).map((i) => i.name), ['(root)', 'prod', 'staging']);
  await page.keyboard.press('ArrowRight'); // closed: opens, stays
  assert.equal(await page.locator('[data-path=prod]').getAttribute('aria-expanded'), 'true');
  assert.equal(await focusedPath(page, 'prod'), 'prod');
  await page.keyboard.press('End');
  assert.equal(await focusedPath(page, 'staging'), 'staging');
  await page.keyboard.press('Home');
  assert.equal(await focusedPath(page, ''), '');
  assert.equal(param(page, 'set'), 'prod/us', 'moving the focus selects nothing');

  await page.getByRole('searchbox', { name: 'Filter sets' }).fill('us');
  await page.waitForFunction(() => document.querySelectorAll('[role=treeitem]').length === 2);
  assert.deepEqual((await treeItems(page)).map((i) => i.name), ['prod', 'us']);
  await page.getByRole('searchbox', { name: 'Filter sets' }).fill('');
  assert.equal(await page.getByText('hidden by your scope').count(), 0, 'full access: nothing hidden');
  await scanBothSizes(page, 'the tree and the values view');
  assertClean(w, SIGN_IN_401);
  await w.context.close();
});

test('the values view: each key with its value, its origin and its state; hidden values masked and never in the page', { skip: SKIP }, async () => {
  const w = await open(new URL(fx.url).origin);
  const { page } = w;
  await signIn(page, `${fx.url}?view=schema&set=prod/eu`, fx.tokens.admin);
  await page.locator('table.values').waitFor();
  let rows = await valueRows(page);
  assert.deepEqual([...rows.keys()], Object.keys(APP_SCHEMA.keys), 'one row per key, in the schema order');
  assert.deepEqual(rows.get('API_HOST'), { value: stored('prod/eu', 'API_HOST'), from: 'prod/eu', state: '✓ passing' });
  assert.deepEqual(rows.get('LOG_LEVEL'), { value: stored('prod', 'LOG_LEVEL'), from: 'prod (inherited)', state: '✓ passing' });
  assert.deepEqual(rows.get('PORT'), { value: String(APP_SCHEMA.keys.PORT.default), from: 'default', state: '✓ passing' });
  assert.equal(rows.get('API_URL')!.value, `https://${stored('prod/eu', 'API_HOST')}:${APP_SCHEMA.keys.PORT.default}`);
  assert.equal(rows.get('API_URL')!.from, 'const');
  assert.deepEqual(rows.get('DB_PASSWORD'), { value: '•••••• (hidden)', from: 'prod (inherited)', state: '✓ passing' });
  assert.ok(stored('prod', 'DB_PASSWORD')!.includes('S3CR3T'));
  assert.ok(!(await page.content()).includes('S3CR3T'), 'the hidden value is nowhere in the page');
  assert.equal(await valueRow(page, 'API_HOST').locator('.description').innerText(), APP_SCHEMA.keys.API_HOST.description);

  // prod/us: FEATURE_X has no value anywhere up its hierarchy.
  await page.locator('[data-path="prod/us"]').click();
  await page.locator('h1', { hasText: 'prod/us' }).waitFor();
  await page.waitForFunction(() => document.querySelector('table.values')?.textContent?.includes('8443'));
  rows = await valueRows(page);
  assert.deepEqual(rows.get('FEATURE_X'), { value: '— no value', from: '(empty)', state: '✗ missing\nkey "FEATURE_X" is required but has no value' });
  assert.deepEqual(rows.get('PORT'), { value: stored('prod/us', 'PORT'), from: 'prod/us', state: '✓ passing' });
  assert.equal(await page.getByText('7 keys · 1 not passing').count(), 1);
  assertClean(w, SIGN_IN_401);
  await w.context.close();
});

test('why? opens the explanation under its row: the candidates (winner marked, shadowed struck and named), tests, failures; Escape closes the last opened; / filters the keys', { skip: SKIP }, async () => {
  const w = await open(new URL(fx.url).origin);
  const { page } = w;
  await signIn(page, `${fx.url}?view=schema&set=prod/eu`, fx.tokens.admin);
  const why = page.getByRole('button', { name: 'why? API_HOST' });
  assert.equal(await why.getAttribute('aria-expanded'), 'false');
  await why.click();
  assert.equal(await why.getAttribute('aria-expanded'), 'true');
  const region = page.locator(`#${await why.getAttribute('aria-controls')}`);
  const candidates = await region.locator('.candidate').evaluateAll((lis) =>
    lis.map((li) => [li.querySelector('.candidate-set')!.textContent, li.querySelector('.candidate-value')!.textContent, li.querySelector('.candidate-status')!.textContent!.trim(), !!li.querySelector('s')]),
  );
  assert.deepEqual(candidates, [
    ['(root)', stored('', 'API_HOST'), '↷ shadowed', true],
    ['prod', stored('prod', 'API_HOST'), '↷ shadowed', true],
    ['prod/eu', stored('prod/eu', 'API_HOST'), '✓ won', false],
  ]);
  assert.match(await region.innerText(), /passed validator\.isFQDN/);
  assert.equal(param(page, 'why'), 'API_HOST', 'the open explanation is in the URL');

  await page.getByRole('button', { name: 'why? PORT' }).click();
  assert.match(await page.locator('#why-PORT').innerText(), /Default: 3000 \(used\)/);
  await page.keyboard.press('Escape');
  await page.locator('#why-PORT').waitFor({ state: 'detached' });
  assert.equal(await page.evaluate(() => document.activeElement?.getAttribute('data-why')), 'PORT', 'the focus goes back to its button');
  assert.equal(await region.count(), 1, 'the first one stays open');
  await page.keyboard.press('Escape');
  await region.waitFor({ state: 'detached' });

  await page.keyboard.press('/');
  const filter = page.getByRole('searchbox', { name: /Filter keys/ });
  assert.equal(await filter.evaluate((el) => el === document.activeElement), true);
  await page.keyboard.type('host');
  await page.waitForFunction(() => document.querySelectorAll('table.values tbody tr').length === 2);
  assert.deepEqual([...(await valueRows(page)).keys()], ['API_HOST', 'API_URL'], 'by key name or description');
  await filter.fill('');

  // A failing key's explanation at prod/us, opened from the URL.
  await page.getByRole('button', { name: 'why? DB_PASSWORD' }).click();
  assert.match(await page.locator('#why-DB_PASSWORD').innerText(), /prod\s+•••••• \(hidden\)\s+✓ won/);
  await scanBothSizes(page, 'the values view with an explanation open');
  assertClean(w, SIGN_IN_401);
  await w.context.close();
});

/** The matrix's grid: the set of each column header and, per row, the key and each cell's symbol. */
async function gridOf(page: Page): Promise<{ sets: string[]; rows: string[][] }> {
  return page.$eval('[role=grid]', (grid) => ({
    sets: [...grid.querySelectorAll('thead .set-path')].map((e) => e.textContent!),
    rows: [...grid.querySelectorAll('tbody tr[data-row]')].map((tr) => [tr.querySelector('th')!.textContent!, ...[...tr.querySelectorAll('td')].map((td) => td.textContent!)]),
  }));
}

/** The grid cell of `key` in column `column` (from 0). */
const cell = (page: Page, key: string, column: number) => page.locator('[role=grid] tbody tr', { has: page.locator(`th:text-is("${key}")`) }).locator('td').nth(column);

/** The key and set of the focused grid cell. */
const focusedCell = (page: Page) =>
  page.evaluate(() => {
    const td = document.activeElement as HTMLElement;
    const tr = td.closest('tr')!;
    const column = [...tr.children].indexOf(td);
    return [tr.querySelector('th')!.textContent, document.querySelectorAll('thead .set-path')[column - 1]?.textContent];
  });

test('the matrix: keys down, sets across, states by symbol; filters kept in the URL; a grid by keyboard; Enter opens the values view', { skip: SKIP }, async () => {
  const w = await open(new URL(fx.url).origin);
  const { page } = w;
  await signIn(page, `${fx.url}?view=matrix`, fx.tokens.admin);
  await page.getByRole('grid').waitFor();
  const grid = await gridOf(page);
  assert.deepEqual(grid.sets, ['(root)', 'prod', 'prod/eu', 'prod/us', 'staging']);
  assert.deepEqual(grid.rows.map((r) => r[0]), Object.keys(APP_SCHEMA.keys));
  // FEATURE_X is held by prod/eu and staging only; every other cell passes.
  assert.deepEqual(grid.rows.find((r) => r[0] === 'FEATURE_X'), ['FEATURE_X', '∅', '∅', '✓', '∅', '✓']);
  assert.ok(grid.rows.filter((r) => r[0] !== 'FEATURE_X').every((r) => r.slice(1).every((s) => s === '✓')));
  const usCell = cell(page, 'FEATURE_X', 3);
  assert.equal(await usCell.getAttribute('aria-label'), 'missing · no value · key "FEATURE_X" is required but has no value');
  assert.equal(await cell(page, 'API_HOST', 2).getAttribute('aria-label'), `passing · "${stored('prod/eu', 'API_HOST')}" from prod/eu`);
  assert.equal(await cell(page, 'DB_PASSWORD', 1).getAttribute('aria-label'), 'passing · (hidden) from prod');

  // The value on hover.
  await cell(page, 'LOG_LEVEL', 2).hover();
  assert.equal(await page.locator('.matrix-tip').innerText(), `LOG_LEVEL at prod/eu: passing · "${stored('prod', 'LOG_LEVEL')}" from prod`);

  await page.getByRole('checkbox', { name: 'Only problems' }).check();
  await page.waitForFunction(() => document.querySelectorAll('tbody tr[data-row]').length === 1);
  assert.equal(param(page, 'problems'), '1');
  assert.deepEqual((await gridOf(page)).rows.map((r) => r[0]), ['FEATURE_X']);
  await page.getByRole('checkbox', { name: 'Only problems' }).uncheck();
  await page.waitForFunction(() => document.querySelectorAll('tbody tr[data-row]').length === 7);
  assert.equal(param(page, 'problems'), null);

  // The keyboard: one tab stop, arrows, Home, End, Ctrl+End.
  assert.equal(await page.locator('td[tabindex="0"]').count(), 1);
  await cell(page, 'ENVIRONMENT', 0).click();
  assert.deepEqual(await focusedCell(page), ['ENVIRONMENT', '(root)']);
  await page.keyboard.press('ArrowRight');
  assert.deepEqual(await focusedCell(page), ['ENVIRONMENT', 'prod']);
  await page.keyboard.press('ArrowDown');
  await page.keyboard.press('ArrowDown');
  assert.deepEqual(await focusedCell(page), ['API_HOST', 'prod']);
  await page.keyboard.press('End');
  assert.deepEqual(await focusedCell(page), ['API_HOST', 'staging']);
  await page.keyboard.press('Home');
  assert.deepEqual(await focusedCell(page), ['API_HOST', '(root)']);
  await page.keyboard.press('Control+End');
  assert.deepEqual(await focusedCell(page), ['FEATURE_X', 'staging']);
  assert.equal(await page.locator('td[tabindex="0"]').count(), 1);
  await page.keyboard.press('ArrowLeft');
  assert.equal(await page.locator('.matrix-tip').innerText(), 'FEATURE_X at prod/us: missing · no value · key "FEATURE_X" is required but has no value', 'the value on focus');
  await scanBothSizes(page, 'the matrix');

  await page.keyboard.press('Enter');
  await page.locator('#why-FEATURE_X').waitFor();
  assert.deepEqual([param(page, 'view'), param(page, 'set'), param(page, 'why')], ['schema', 'prod/us', 'FEATURE_X']);
  assert.match(await page.locator('#why-FEATURE_X').innerText(), /required: key "FEATURE_X" is required but has no value/);
  assertClean(w, SIGN_IN_401);
  await w.context.close();
});

test('two sets picked in the matrix: a diff of the keys whose values differ, old beside new', { skip: SKIP }, async () => {
  const w = await open(new URL(fx.url).origin);
  const { page } = w;
  await signIn(page, `${fx.url}?view=matrix`, fx.tokens.admin);
  await page.getByRole('checkbox', { name: 'Compare prod/eu' }).check();
  assert.equal(await page.locator('.diff').count(), 0, 'one set: no diff');
  await page.getByRole('checkbox', { name: 'Compare prod/us' }).check();
  const table = page.locator('.diff-table');
  await table.waitFor();
  assert.equal(param(page, 'compare'), 'prod/eu,prod/us');
  assert.deepEqual(await table.locator('thead th').allInnerTexts(), ['Key', 'prod/eu', 'prod/us']);
  const rows = await table.locator('tbody tr').evaluateAll((trs) => trs.map((tr) => [...tr.children].map((c) => (c as HTMLElement).innerText.trim())));
  const port = String(APP_SCHEMA.keys.PORT.default);
  // API_URL is computed from API_HOST and PORT, which differ, so it differs too; DB_PASSWORD comes from prod for both.
  assert.deepEqual(rows, [
    ['API_HOST', stored('prod/eu', 'API_HOST'), stored('prod', 'API_HOST')],
    ['PORT', `${port} (default)`, stored('prod/us', 'PORT')],
    ['API_URL', `https://${stored('prod/eu', 'API_HOST')}:${port} (const)`, `https://${stored('prod', 'API_HOST')}:${stored('prod/us', 'PORT')} (const)`],
    ['FEATURE_X', stored('prod/eu', 'FEATURE_X'), '— no value ✗ missing'],
  ]);
  assert.equal(await page.getByText('4 of 7 keys differ.').count(), 1);
  // A third pick replaces the first.
  await page.getByRole('checkbox', { name: 'Compare staging' }).check();
  await page.waitForFunction(() => new URL(location.href).searchParams.get('compare') === 'prod/us,staging');
  assert.equal(await page.getByRole('checkbox', { name: 'Compare prod/eu' }).isChecked(), false);
  await page.locator('#diff-title', { hasText: 'prod/us and staging' }).waitFor();
  await scanBothSizes(page, 'the matrix with a diff');
  assertClean(w, SIGN_IN_401);
  await w.context.close();
});

test('a scoped reader (prod/**): its sets only, "hidden by your scope", the matrix of its sets, a set outside refused in the 403 problem\'s words', { skip: SKIP }, async () => {
  const w = await open(new URL(fx.url).origin);
  const { page } = w;
  await signIn(page, fx.url, fx.tokens.prodReader);
  await page.getByRole('tree').waitFor();
  // Without the root, the page starts at the first set it may read.
  await page.waitForFunction(() => new URL(location.href).searchParams.get('set') === 'prod');
  assert.deepEqual((await treeItems(page)).map((i) => i.name), ['prod', 'eu', 'us']);
  assert.equal(await page.locator('aside').getByText('2 sets hidden by your scope').count(), 1);
  await page.locator('table.values').waitFor();
  // A value shadowed at a set outside the scope is withheld in the explanation.
  await page.locator('[data-path="prod/eu"]').click();
  await page.locator('h1', { hasText: 'prod/eu' }).waitFor();
  await page.getByRole('button', { name: 'why? API_HOST' }).click();
  const first = page.locator('#why-API_HOST .candidate').first();
  assert.equal(await first.locator('.candidate-set').innerText(), '(root)');
  assert.equal(await first.locator('.candidate-value').innerText(), '(withheld: a set outside your scope)');
  assert.ok(!(await page.content()).includes(`>${stored('', 'API_HOST')}<`), 'the root value is not in the page');

  await page.getByRole('link', { name: 'Matrix' }).click();
  await page.getByRole('grid').waitFor();
  assert.deepEqual((await gridOf(page)).sets, ['prod', 'prod/eu', 'prod/us']);
  assert.match(await page.locator('.matrix-summary').innerText(), /7 keys × 3 sets · 2 cells not passing · 2 sets hidden by your scope/);
  await page.getByRole('checkbox', { name: 'Only differences' }).check();
  await page.waitForFunction(() => document.querySelectorAll('tbody tr[data-row]').length === 4);
  // ENVIRONMENT, LOG_LEVEL and DB_PASSWORD come from prod at all three sets.
  assert.deepEqual((await gridOf(page)).rows.map((r) => r[0]), ['API_HOST', 'PORT', 'API_URL', 'FEATURE_X']);
  assert.equal(param(page, 'differences'), '1');
  await scanBothSizes(page, 'the matrix of a scoped reader');
  assertClean(w, SIGN_IN_401);
  await w.context.close();

  // A link to a set outside the scope: the server's 403, in its own words.
  const answer = await fetch(`${fx.server.base}/explain`, {
    method: 'POST',
    headers: { authorization: `Bearer ${fx.tokens.prodReader}`, 'content-type': 'application/json' },
    body: JSON.stringify([{ store: 'main', set: 'staging', schema: 'app' }]),
  });
  assert.equal(answer.status, 403);
  const problem = (await answer.json()) as { title: string; detail: string };
  const o = await open(new URL(fx.url).origin);
  await signIn(o.page, `${fx.url}?view=schema&set=staging`, fx.tokens.prodReader);
  const alert = o.page.locator('main [role=alert]');
  await alert.waitFor();
  const text = await alert.innerText();
  assert.ok(text.startsWith(`${problem.title} (403)`), text);
  assert.ok(text.includes(problem.detail), text);
  assertClean(o, [...SIGN_IN_401, /status of 403/]);
  await o.context.close();
});

test('a write by another client shows in the open values view and matrix without a reload, highlighted, the reader\'s place kept; a new set appears in the tree', { skip: SKIP }, async () => {
  const own = await startFixture();
  try {
    const origin = new URL(own.url).origin;
    const v = await open(origin);
    const m = await open(origin);
    await signIn(v.page, `${own.url}?view=schema&set=prod/eu&why=LOG_LEVEL`, own.tokens.admin);
    await signIn(m.page, `${own.url}?view=matrix&set=prod/eu`, own.tokens.admin);
    await v.page.locator('#why-LOG_LEVEL').waitFor();
    await m.page.getByRole('grid').waitFor();
    for (const page of [v.page, m.page]) await page.locator('.live-live').waitFor();
    // The reader's place: a focused button, a focused cell.
    await v.page.getByRole('button', { name: 'why? FEATURE_X' }).focus();
    await cell(m.page, 'API_HOST', 2).focus();
    // Every element that gets the highlight, from now on.
    for (const page of [v.page, m.page])
      await page.evaluate(() => {
        const seen: string[] = ((window as unknown as { changedSeen: string[] }).changedSeen = []);
        new MutationObserver((records) => {
          for (const r of records) {
            const el = r.target as HTMLElement;
            const th = el.closest('tr')?.querySelector('th');
            if (el.classList.contains('changed')) seen.push((th?.querySelector('code') ?? th)?.textContent ?? '?');
          }
        }).observe(document.body, { subtree: true, attributes: true, attributeFilter: ['class'] });
      });

    const write = await fetch(`${own.server.base}/upsert`, {
      method: 'POST',
      headers: { authorization: `Bearer ${own.tokens.admin}`, 'content-type': 'application/json' },
      body: JSON.stringify({ store: 'main', set: 'prod/eu', schema: 'app', values: { API_HOST: 'eu2.api.example.com' }, message: 'console test' }),
    });
    assert.equal(write.status, 200, await write.clone().text());
    await valueRow(v.page, 'API_HOST').getByText('eu2.api.example.com').waitFor();
    await m.page.waitForFunction(() => document.querySelector('td[data-cell][aria-label*="eu2.api.example.com"]'));
    const seen = (page: Page) => page.evaluate(() => (window as unknown as { changedSeen: string[] }).changedSeen);
    assert.deepEqual([...new Set(await seen(v.page))].sort(), ['API_HOST', 'API_URL'], 'the rows whose value changed are highlighted');
    assert.deepEqual([...new Set(await seen(m.page))].sort(), ['API_HOST', 'API_URL']);
    assert.equal(await v.page.evaluate(() => document.activeElement?.getAttribute('data-why')), 'FEATURE_X', 'the focus stays');
    assert.equal(await v.page.locator('#why-LOG_LEVEL').count(), 1, 'the open explanation stays open');
    assert.deepEqual(await focusedCell(m.page), ['API_HOST', 'prod/eu']);

    // A new set: it appears in the tree and as a column.
    const add = await fetch(`${own.server.base}/upsert`, {
      method: 'POST',
      headers: { authorization: `Bearer ${own.tokens.admin}`, 'content-type': 'application/json' },
      body: JSON.stringify({ store: 'main', set: 'prod/asia', schema: 'app', values: { API_HOST: 'asia.api.example.com' } }),
    });
    assert.equal(add.status, 200, await add.clone().text());
    await v.page.locator('[data-path="prod/asia"]').waitFor();
    await m.page.locator('thead .set-path', { hasText: 'prod/asia' }).waitFor();
    assert.deepEqual((await gridOf(m.page)).sets, ['(root)', 'prod', 'prod/asia', 'prod/eu', 'prod/us', 'staging']);
    assertClean(v, SIGN_IN_401);
    assertClean(m, SIGN_IN_401);
    await v.context.close();
    await m.context.close();
  } finally {
    await own.stop();
  }
});

test('1,000 keys by 50 sets: only the rows in view are rendered; the scroll, the keyboard and the filters reach every key', { skip: SKIP }, async () => {
  const own = await startFixture();
  try {
    // The schema and the store written again while the server runs: it reloads both.
    const name = (i: number) => `KEY_${String(i).padStart(4, '0')}`;
    const keys: Record<string, unknown> = {};
    for (let i = 0; i < 1000; i++) keys[name(i)] = i % 10 === 0 ? { required: true } : i % 7 === 0 ? { enum: ['a', 'b'] } : { default: 'd' };
    const sets = Array.from({ length: 50 }, (_, s) => `r${s % 5}/s${String(s).padStart(2, '0')}`);
    const configs = sets.flatMap((set, s) => Array.from({ length: 334 }, (_, j) => ({ set, key: name(j * 3), value: (j * 3) % 7 === 0 ? (s % 3 ? 'a' : 'zz') : `v${s}-${j}` })));
    writeFileSync(join(own.dir, 'schemas', 'app.cfgu.json'), JSON.stringify({ keys }));
    writeFileSync(join(own.dir, 'main.json'), JSON.stringify(configs));
    const auth = { authorization: `Bearer ${own.tokens.admin}` };
    await waitFor('the schema reloaded', async () => ((await (await fetch(`${own.server.base}/schemas`, { headers: auth })).json()) as { schemas: Array<{ keys: number }> }).schemas[0]!.keys === 1000);
    await waitFor('the sets listed', async () => ((await (await fetch(`${own.server.base}/sets?store=main`, { headers: auth })).json()) as { sets: string[] }).sets.length === 50);

    const w = await open(new URL(own.url).origin);
    const { page } = w;
    await signIn(page, `${own.url}?view=matrix`, own.tokens.admin);
    const grid = page.getByRole('grid');
    await grid.waitFor();
    assert.equal(await grid.getAttribute('aria-rowcount'), '1001');
    assert.equal(await page.locator('thead .set-path').count(), 50, 'the sets the store holds (their parents hold nothing)');
    const rendered = () => page.locator('tbody tr[data-row]').count();
    assert.ok((await rendered()) < 80, `only the rows in view: ${await rendered()}`);

    await cell(page, name(0), 0).click();
    await page.keyboard.press('Control+End');
    await page.waitForFunction(() => document.activeElement?.closest('tr')?.querySelector('th')?.textContent === 'KEY_0999');
    assert.deepEqual(await focusedCell(page), [name(999), [...sets].sort().pop()]);
    assert.ok((await rendered()) < 80);
    assert.equal(await page.locator('tbody tr[data-row] th', { hasText: name(0) }).count(), 0, 'the first rows are not rendered any more');
    await page.keyboard.press('Control+Home');
    await page.waitForFunction(() => document.activeElement?.closest('tr')?.querySelector('th')?.textContent === 'KEY_0000');
    assert.deepEqual(await focusedCell(page), [name(0), [...sets].sort()[0]]);
    await page.locator('.matrix-scroll').evaluate((el) => (el.scrollTop = el.scrollHeight / 2));
    await page.waitForFunction(() => [...document.querySelectorAll('tbody tr[data-row] th')].some((th) => th.textContent === 'KEY_0500'));
    assert.ok((await rendered()) < 80);

    // Required keys without a value (no multiple of 3) and enum keys with "zz" at a third of the sets.
    let problems = 0;
    for (let i = 0; i < 1000; i++) if (i % 10 === 0 ? i % 3 !== 0 : i % 7 === 0 && i % 3 === 0) problems++;
    await page.getByRole('checkbox', { name: 'Only problems' }).check();
    await page.waitForFunction((n) => document.querySelector('[role=grid]')?.getAttribute('aria-rowcount') === String(n + 1), problems);
    assert.ok((await rendered()) < 80);

    // The parents of the sets hold no value: shown all the same, and selectable (their values are the root's).
    const parent = page.locator('[data-path="r3"]');
    assert.equal(await parent.locator('.set-name').innerText(), 'r3 (no values)');
    await parent.click();
    await page.waitForFunction(() => new URL(location.href).searchParams.get('set') === 'r3');
    assert.equal(await parent.getAttribute('aria-selected'), 'true');
    assertClean(w, SIGN_IN_401);
    await w.context.close();
  } finally {
    await own.stop();
  }
});
