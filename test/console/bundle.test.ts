/**
 * The console as built (scripts/build-console.mjs): within its size budget, its page loading only its own two assets
 * (no inline script or style, which the console's Content-Security-Policy would refuse anyway), every asset present.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { ROOT } from '../server/helpers.js';
// @ts-expect-error a build script in plain JavaScript, without types
import { CONSOLE_BUDGET } from '../../scripts/build-console.mjs';

const dir = join(ROOT, 'dist/console');
const manifest = JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8')) as {
  js: string;
  css: string;
  files: Record<string, { bytes: number; gzip: number }>;
};

test('the console ships one script and one style sheet, each within its gzipped budget', () => {
  const budget = CONSOLE_BUDGET as { js: number; css: number };
  assert.deepEqual(readdirSync(join(dir, 'assets')).sort(), [manifest.css, manifest.js].map((f) => f.slice('assets/'.length)).sort());
  for (const [file, limit] of [[manifest.js, budget.js], [manifest.css, budget.css]] as const) {
    const bytes = readFileSync(join(dir, file));
    // The manifest tells the truth about the file.
    assert.equal(manifest.files[file]!.bytes, bytes.length);
    assert.equal(manifest.files[file]!.gzip, gzipSync(bytes, { level: 9 }).length);
    assert.ok(manifest.files[file]!.gzip <= limit, `${file}: ${manifest.files[file]!.gzip} bytes gzipped, over the budget of ${limit}`);
  }
});

test('index.html loads exactly its two assets, by hashed name, with no inline script or style', () => {
  const html = readFileSync(join(dir, 'index.html'), 'utf8');
  const scripts = [...html.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/g)];
  assert.equal(scripts.length, 1);
  assert.equal(scripts[0]![2]!.trim(), '', 'no inline script');
  assert.match(scripts[0]![1]!, new RegExp(`src="/console/${manifest.js.replace(/[.]/g, '\\.')}"`));
  assert.match(manifest.js, /^assets\/app-[A-Z0-9]{8}\.js$/);
  assert.match(manifest.css, /^assets\/app-[A-Z0-9]{8}\.css$/);
  assert.ok(html.includes(`<link rel="stylesheet" href="/console/${manifest.css}" />`));
  assert.doesNotMatch(html, /<style\b|\sstyle=|\son[a-z]+=/i, 'no inline style or event handler attribute');
  for (const f of [manifest.js, manifest.css]) assert.ok(existsSync(join(dir, f)));
});
