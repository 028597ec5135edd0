/**
 * The console's browser tests share this harness: a real cfgu server (src/server/process/start.ts in the test's own
 * process, as `cfgu serve --workers 1` runs it) over real stores (a json-file store and a SQLite store in a temporary
 * folder), with authentication on and a few credentials, and Debian's Chromium driven by playwright-core. Every page
 * is watched for console errors, page errors, failed or foreign requests and CSP violations (`assertClean`), and
 * can be scanned with axe-core (`axeScan`).
 *
 * Chromium is found as test/server/docs-browser.test.ts finds it (CHROMIUM_PATH, else PATH); without it every test
 * using the harness is skipped loudly, and under CI=true the `required` test fails.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { accessSync, constants, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { delimiter, join } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { serveInProcess, type InProcessServer } from '../helpers/in-process.js';
import { tempDir } from '../server/helpers.js';

const NAMES = ['chromium', 'chromium-browser', 'google-chrome-stable', 'google-chrome'];

function executable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

export function findChromium(): string | undefined {
  const given = process.env.CHROMIUM_PATH;
  if (given) return executable(given) ? given : undefined;
  for (const dir of (process.env.PATH ?? '').split(delimiter).filter(Boolean)) {
    for (const name of NAMES) if (executable(join(dir, name))) return join(dir, name);
  }
  return undefined;
}

export const CHROMIUM = findChromium();
/** The reason browser tests are skipped, or false. Printed loudly once per file that imports the harness. */
export const SKIP: string | false = CHROMIUM ? false : 'no Chromium (scripts/test-setup-chromium.sh installs it; CHROMIUM_PATH names one)';
if (SKIP) process.stderr.write(`\n*** SKIPPING the console browser tests: ${SKIP} ***\n`);
export const REQUIRED = process.env.CI === 'true';

export const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

export function launchBrowser(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, headless: true });
}

/** The tokens of the fixture's credentials (made per run; `.configu` holds their SHA-256). */
export interface Tokens {
  /** A preshared key: full access, may write everything. */
  admin: string;
  /** Scoped: store `main`, sets `prod/**`, read only. */
  prodReader: string;
  /** Scoped: store `main`, sets `staging/**`, may write (not break). */
  stagingWriter: string;
}

const sha256 = (s: string): string => createHash('sha256').update(s).digest('hex');
const token = (name: string): string => `cfgu_test-${name}-${Math.random().toString(36).slice(2)}`;

/** The named schema `app` of the fixture. */
export const APP_SCHEMA = {
  keys: {
    ENVIRONMENT: { description: 'Where the application runs.', enum: ['development', 'staging', 'production'], required: true },
    LOG_LEVEL: { enum: ['debug', 'info', 'warn', 'error'], default: 'info' },
    API_HOST: { description: 'Host name of the public API.', required: true, test: 'validator.isFQDN($.value, { require_tld: false })' },
    PORT: { test: 'Number.isInteger($.value) && $.value > 0 && $.value < 65536', default: 3000 },
    API_URL: { description: 'Computed from API_HOST and PORT.', const: 'https://{{ $.configs.API_HOST.value }}:{{ $.configs.PORT.value }}' },
    DB_PASSWORD: { description: 'The database password.', hidden: true },
    FEATURE_X: { description: 'A switch not every set has yet.', required: true },
  },
};

/**
 * The json-file store `main`: the root, prod, prod/eu, prod/us, staging. FEATURE_X is missing in prod/us (and at the
 * root and prod, which hold none either: a set inherits its ancestors' values, so a value at the root would reach it).
 */
export const MAIN_CONFIGS = [
  { set: '', key: 'ENVIRONMENT', value: 'development' },
  { set: '', key: 'API_HOST', value: 'localhost' },
  { set: 'prod', key: 'ENVIRONMENT', value: 'production' },
  { set: 'prod', key: 'LOG_LEVEL', value: 'warn' },
  { set: 'prod', key: 'API_HOST', value: 'api.example.com' },
  { set: 'prod', key: 'DB_PASSWORD', value: 'S3CR3T-console-db-password' },
  { set: 'prod', key: 'FEATURE_X', value: '' },
  { set: 'prod/eu', key: 'API_HOST', value: 'eu.api.example.com' },
  { set: 'prod/eu', key: 'FEATURE_X', value: 'on' },
  { set: 'prod/us', key: 'PORT', value: '8443' },
  { set: 'staging', key: 'ENVIRONMENT', value: 'staging' },
  { set: 'staging', key: 'API_HOST', value: 'staging.example.com' },
  { set: 'staging', key: 'FEATURE_X', value: 'on' },
].filter((c) => c.value !== '');

export interface ConsoleFixture {
  server: InProcessServer;
  dir: string;
  tokens: Tokens;
  /** `${base}/console` */
  url: string;
  stop(): Promise<void>;
}

/**
 * Writes the fixture's `.configu`, its schema and stores into a new temporary folder and serves it. `extra` is merged
 * into `interface.proxy` (limits, watch settings...).
 */
export async function startFixture(extra: Record<string, unknown> = {}): Promise<ConsoleFixture> {
  const dir = tempDir('cfgu-console-');
  mkdirSync(join(dir, 'schemas'), { recursive: true });
  writeFileSync(join(dir, 'schemas', 'app.cfgu.json'), JSON.stringify(APP_SCHEMA, null, 2));
  writeFileSync(join(dir, 'main.json'), JSON.stringify(MAIN_CONFIGS, null, 2));
  const tokens: Tokens = { admin: token('admin'), prodReader: token('prod-reader'), stagingWriter: token('staging-writer') };
  const configu = {
    stores: {
      main: { type: 'json-file', configuration: { path: 'main.json' } },
      local: { type: 'sqlite', configuration: { database: 'local.db' } },
    },
    schemas: { app: 'schemas/app.cfgu.json' },
    interface: {
      proxy: {
        auth: {
          enabled: true,
          presharedKeys: [tokens.admin],
          credentials: [
            { name: 'prod-reader', sha256: sha256(tokens.prodReader), stores: ['main'], sets: ['prod/**'] },
            { name: 'staging-writer', sha256: sha256(tokens.stagingWriter), stores: ['main'], sets: ['staging/**'], write: true },
          ],
        },
        watch: { debounceMs: 20 },
        ...extra,
      },
    },
  };
  const file = join(dir, '.configu');
  writeFileSync(file, JSON.stringify(configu, null, 2));
  const server = await serveInProcess(file, { cwd: dir });
  return {
    server,
    dir,
    tokens,
    url: `${server.base}/console`,
    stop: async () => void (await server.stop()),
  };
}

/** What went wrong on a page while a test used it. */
export interface PageWatch {
  page: Page;
  consoleErrors: string[];
  pageErrors: string[];
  failedRequests: string[];
  foreignRequests: string[];
  cspViolations: string[];
}

/**
 * A new page in its own browser context (its own storage), watched. CSP violations are collected by a listener the
 * browser installs before the page's own scripts (an init script runs through the DevTools protocol, which the page's
 * CSP does not govern) and also show as console errors.
 */
export async function openPage(browser: Browser, origin: string): Promise<PageWatch & { context: BrowserContext }> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  const watch: PageWatch = { page, consoleErrors: [], pageErrors: [], failedRequests: [], foreignRequests: [], cspViolations: [] };
  await page.exposeFunction('__cfguCspViolation', (text: string) => watch.cspViolations.push(text));
  await page.addInitScript(() => {
    document.addEventListener('securitypolicyviolation', (e) => {
      (window as unknown as { __cfguCspViolation(t: string): void }).__cfguCspViolation(`${e.violatedDirective} ${e.blockedURI}`);
    });
  });
  page.on('console', (m) => {
    if (m.type() === 'error') watch.consoleErrors.push(m.text());
  });
  page.on('pageerror', (e) => watch.pageErrors.push(String(e)));
  page.on('request', (r) => {
    const u = r.url();
    if (!u.startsWith(origin) && !u.startsWith('data:') && !u.startsWith('blob:')) watch.foreignRequests.push(u);
  });
  page.on('requestfailed', (r) => {
    // A stream the page closes itself (navigation, sign-out) is aborted by design, and so is a read a view no longer
    // needs (the reader moved on before it was answered: the view aborts it, net::ERR_ABORTED).
    const error = r.failure()?.errorText ?? '';
    if (!/\/changes\?/.test(r.url()) && error !== 'net::ERR_ABORTED') watch.failedRequests.push(`${r.url()} ${error}`);
  });
  return { ...watch, context };
}

/**
 * No console error, page error, CSP violation, failed or foreign request so far. `expected` lists console errors a
 * test provoked on purpose (a refused request logs its status: `401`, `403`, `409`, `422`), as regular expressions.
 */
export function assertClean(watch: PageWatch, expected: RegExp[] = []): void {
  const unexpected = watch.consoleErrors.filter((t) => !expected.some((re) => re.test(t)));
  assert.deepEqual(watch.cspViolations, [], 'no CSP violation');
  assert.deepEqual(unexpected, [], 'no console error');
  assert.deepEqual(watch.pageErrors, [], 'no page error');
  assert.deepEqual(watch.foreignRequests, [], 'no request leaves the server');
  assert.deepEqual(watch.failedRequests, [], 'no failed request');
}

const require = createRequire(import.meta.url);
const AXE_SOURCE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

export interface AxeFinding {
  id: string;
  impact: string | null;
  help: string;
  nodes: string[];
}

/**
 * axe-core's scan of the page as it is now (WCAG 2.1 A and AA rules and best practices): the findings of serious or
 * critical impact. axe is evaluated through the DevTools protocol, not added as a script tag, so the page's CSP
 * (no inline script) stays as strict as it is for users.
 */
export async function axeScan(page: Page): Promise<AxeFinding[]> {
  await page.evaluate(AXE_SOURCE);
  const findings = await page.evaluate(async () => {
    const axe = (window as unknown as { axe: { run(ctx: unknown, opts: unknown): Promise<{ violations: Array<{ id: string; impact: string | null; help: string; nodes: Array<{ target: string[] }> }> }> } }).axe;
    const result = await axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice'] } });
    return result.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => n.target.join(' ')) }));
  });
  return findings.filter((f) => f.impact === 'serious' || f.impact === 'critical');
}

/** Signs in on the console's sign-in form with `token`. */
export async function signIn(page: Page, url: string, token: string): Promise<void> {
  await page.goto(url);
  await page.getByLabel('Token or JWT').fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByText(/signed in as/).waitFor();
}
