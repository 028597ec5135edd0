/**
 * What the tests of the console's writing views share (write-views.test.ts, live.test.ts): the server's answers read
 * from the test (fetch with a bearer token), a page signed in at a place of the console, and the checks every page
 * of these views gets (axe, the 640x400 viewport without a page-wide horizontal scroll).
 */
import assert from 'node:assert/strict';
import type { Browser, Page } from 'playwright-core';
import { HANG_GUARD_MS } from '../helpers/wait.js';
import { axeScan, openPage, signIn, type ConsoleFixture } from './harness.js';

export interface Answer {
  status: number;
  type: string | null;
  /** The parsed JSON body (read by the test, so typed loosely). */
  body: any;
}

/** One request to the fixture's server, as a client other than the page. */
export async function call(fx: ConsoleFixture, token: string, method: 'GET' | 'POST', path: string, body?: unknown): Promise<Answer> {
  const response = await fetch(`${fx.server.base}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: response.status, type: response.headers.get('content-type'), body: await response.json() };
}

/** The export of schema `app` at a set of store `main`, read with the admin token. */
export async function exportAt(fx: ConsoleFixture, set: string): Promise<Record<string, unknown>> {
  const answer = await call(fx, fx.tokens.admin, 'POST', '/export', [{ store: 'main', set, schema: 'app' }]);
  assert.equal(answer.status, 200, JSON.stringify(answer.body));
  return answer.body;
}

/** The newest revisions of a set (admin). */
export async function historyOf(fx: ConsoleFixture, set: string): Promise<Array<{ revision: number; subject: string | null; message: string | null; recorded: boolean; changes: Array<{ key: string }> }>> {
  const answer = await call(fx, fx.tokens.admin, 'GET', `/history?store=main&set=${encodeURIComponent(set)}`);
  assert.equal(answer.status, 200, JSON.stringify(answer.body));
  return answer.body.records;
}

/** A write from the test (admin), checked to succeed; its answer. */
export async function writeAsAdmin(fx: ConsoleFixture, set: string, values: Record<string, string | null>, message: string): Promise<{ revision: number }> {
  const answer = await call(fx, fx.tokens.admin, 'POST', '/upsert', { store: 'main', set, schema: 'app', values, message });
  assert.equal(answer.status, 200, JSON.stringify(answer.body));
  return answer.body;
}

/** The console's address for a place: `?view=edit&store=main&schema=app&set=staging`. */
export const place = (fx: ConsoleFixture, view: string, set: string, extra: Record<string, string> = {}): string =>
  `${fx.url}?${new URLSearchParams({ view, store: 'main', schema: 'app', set, ...extra }).toString()}`;

/** A new page (its own browser context), signed in with `token` at a place; waits never longer than the hang guard. */
export async function pageAt(browser: Browser, fx: ConsoleFixture, token: string, url: string) {
  const watch = await openPage(browser, fx.server.base);
  watch.page.setDefaultTimeout(HANG_GUARD_MS);
  await signIn(watch.page, url, token);
  return watch;
}

/** axe finds nothing serious or critical, at 1280x800 and at 640x400 (200% zoom), where nothing scrolls sideways. */
export async function accessible(page: Page, what: string): Promise<void> {
  assert.deepEqual(await axeScan(page), [], `${what}: axe findings at 1280x800`);
  await page.setViewportSize({ width: 640, height: 400 });
  try {
    assert.deepEqual(await axeScan(page), [], `${what}: axe findings at 640x400`);
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    assert.ok(overflow <= 0, `${what}: the page scrolls sideways by ${overflow}px at 640x400`);
  } finally {
    await page.setViewportSize({ width: 1280, height: 800 });
  }
}

/** The page's HTML and both storages, as text (for what must never appear in them). */
export async function pageAndStorage(page: Page): Promise<string> {
  // One expression without named functions (the test build keeps names with a helper the page does not have).
  const storage = await page.evaluate(() =>
    [sessionStorage, localStorage].map((s) => Array.from({ length: s.length }, (_, i) => `${s.key(i)}=${s.getItem(s.key(i) ?? '')}`).join('\n')).join('\n'),
  );
  return `${await page.content()}\n${storage}`;
}

/** Console errors a test provokes on purpose: the sign-in's first request without a token, refused writes. */
export const PROVOKED = [/status of 401/, /status of 403/, /status of 409/, /status of 422/];
