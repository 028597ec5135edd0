/**
 * The browser console's files (src/server/http/routes/console.ts, console-files.ts; docs/server.md, "The console"):
 * index.html at /console and /console/, the files of assets/ at /console/assets/..., from a folder read once. Every
 * rule with its exact answer: the security headers, the cache rules (no-cache with a strong ETag and 304, immutable for
 * hashed names), gzip by Accept-Encoding with `Vary`, HEAD, 405, 404 for a missing file and for every path that tries
 * to leave the folder (sent raw over a socket, as a browser or curl --path-as-is would), open without a credential when
 * authentication is on, loopback only when it is off (inject's remoteAddress, trustProxy, and the machine's own
 * non-loopback address over the network), `console.enabled: false`, a console that was not built, and the OpenAPI
 * document that leaves the console out.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { buildServer, settingsWith } from '../../src/server/index.js';
import type { SettingsOverrides } from '../../src/server/process/settings.js';
import { loadConfiguration } from '../../src/config/index.js';
import { createStoreRegistry, type StoreRegistry } from '../../src/stores/index.js';
import { acceptsGzip, defaultConsoleDir } from '../../src/server/http/console-files.js';
import { removeTempDirs, ROOT, tempDir, writeJson } from './helpers.js';

const KEY = 'console-test-key-0123456789';
const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
const LOOPBACK_ONLY = {
  type: 'urn:cfgu:problem:console-loopback-only',
  title: 'Console on Loopback Only',
  status: 403,
  detail:
    'without authentication the console is served to loopback clients only (127.0.0.0/8, ::1); open it on this host, or turn authentication on (interface.proxy.auth.enabled with a key or credential, or CONFIGU_AUTH_ENABLED) to serve it to other addresses',
};
const NOT_BUILT = {
  type: 'about:blank',
  title: 'Not Found',
  status: 404,
  detail: 'the console was not built: run `npm run build` (it writes dist/console), then restart the server',
};
const noRoute = (method: string, path: string) => ({ type: 'about:blank', title: 'Not Found', status: 404, detail: `no route ${method} ${path}` });

const INDEX = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>cfgu console</title>
<link rel="stylesheet" href="/console/assets/index-QW3RT5YA.css"><script type="module" src="/console/assets/index-AB2CD3EF.js"></script></head>
<body><div id="app"></div>${'<!-- padding so that gzip pays -->\n'.repeat(20)}</body></html>\n`;
const SCRIPT = `export const greet = () => ${JSON.stringify('hello '.repeat(200))};\n`;
const STYLE = `body { font-family: sans-serif; }\n${'.row { margin: 0 auto; padding: 4px; }\n'.repeat(30)}`;
const LOGO = `<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10">${'<rect width="1" height="1"/>'.repeat(20)}</svg>`;
const FONT = Buffer.from(Array.from({ length: 2048 }, (_, i) => (i * 7919) % 256));
const NESTED = `.nested { color: red; }\n${'.x { color: blue; }\n'.repeat(20)}`;

let consoleDir: string;
let emptyDir: string;
let registry: StoreRegistry;
const apps: FastifyInstance[] = [];

async function app(overrides: SettingsOverrides, dir = consoleDir): Promise<FastifyInstance> {
  const a = await buildServer({ registry, settings: settingsWith(overrides), logger: false, ready: true, consoleDir: dir });
  apps.push(a);
  return a;
}
const authOn: SettingsOverrides = { auth: { enabled: true, presharedKeys: [KEY] } };

function problem(r: LightMyRequestResponse | Answer, status: number, body: unknown): void {
  const code = 'statusCode' in r ? r.statusCode : r.status;
  assert.equal(code, status, r.body);
  assert.equal(r.headers['content-type'], 'application/problem+json; charset=utf-8');
  assert.deepEqual(JSON.parse(r.body), body);
}

function securityHeaders(r: LightMyRequestResponse | Answer): void {
  assert.equal(r.headers['content-security-policy'], CSP);
  assert.equal(r.headers['x-content-type-options'], 'nosniff');
  assert.equal(r.headers['referrer-policy'], 'no-referrer');
}

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** A GET with the path exactly as given (node's client does not normalise it; a URL object would). */
function rawGet(host: string, port: number, path: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const r = httpRequest({ host, port, path, method: 'GET', agent: false, headers: { connection: 'close' } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    r.on('error', reject);
    r.end();
  });
}

/** An IPv4 address of this machine that is not loopback. */
function outsideAddress(): string | undefined {
  for (const list of Object.values(networkInterfaces())) {
    for (const a of list ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  }
  return undefined;
}

before(async () => {
  const parent = tempDir('cfgu-console-');
  consoleDir = join(parent, 'console');
  mkdirSync(join(consoleDir, 'assets', 'sub'), { recursive: true });
  writeFileSync(join(consoleDir, 'index.html'), INDEX);
  writeFileSync(join(consoleDir, 'assets', 'index-AB2CD3EF.js'), SCRIPT);
  writeFileSync(join(consoleDir, 'assets', 'index-AB2CD3EF.js.map'), JSON.stringify({ version: 3, sources: ['a.ts'], mappings: 'AAAA;'.repeat(80) }));
  writeFileSync(join(consoleDir, 'assets', 'index-QW3RT5YA.css'), STYLE);
  writeFileSync(join(consoleDir, 'assets', 'logo.svg'), LOGO);
  writeFileSync(join(consoleDir, 'assets', 'inter-ZZ7YX6WV.woff2'), FONT);
  writeFileSync(join(consoleDir, 'assets', 'sub', 'nested.css'), NESTED);
  // Beside the assets, never served: the folder's other files and what lies above it.
  writeFileSync(join(consoleDir, 'secret.txt'), 'CONTENT-OF-A-FILE-BESIDE-THE-ASSETS');
  writeFileSync(join(parent, 'cfgu-console-outside.txt'), 'CONTENT-OF-A-FILE-ABOVE-THE-FOLDER');
  // A link inside assets/ to a file outside it is not followed.
  symlinkSync(join(parent, 'cfgu-console-outside.txt'), join(consoleDir, 'assets', 'link.txt'));
  symlinkSync(parent, join(consoleDir, 'assets', 'up'));
  emptyDir = tempDir('cfgu-console-empty-');
  const storeDir = tempDir('cfgu-console-store-');
  writeJson(join(storeDir, 'data.json'), [{ set: '', key: 'A', value: '1' }]);
  const file = writeJson(join(storeDir, '.configu'), { stores: { main: { type: 'json-file', configuration: { path: 'data.json' } } } });
  registry = createStoreRegistry(await loadConfiguration({ file }), { logger: { warn: () => undefined } });
  await registry.init();
});

after(async () => {
  for (const a of apps) await a.close();
  await registry?.close();
  removeTempDirs();
});

describe('files and headers (authentication on: no credential needed)', () => {
  let a: FastifyInstance;
  before(async () => {
    a = await app(authOn);
  });

  test('GET /console and /console/ answer index.html: no-cache, a strong ETag, the CSP, nosniff, no referrer', async () => {
    for (const url of ['/console', '/console/', '/console?x=1']) {
      const r = await a.inject({ url });
      assert.equal(r.statusCode, 200, `${url}: ${r.body}`);
      assert.equal(r.body, INDEX);
      assert.equal(r.headers['content-type'], 'text/html; charset=utf-8');
      assert.equal(r.headers['cache-control'], 'no-cache');
      assert.match(String(r.headers.etag), /^"[A-Za-z0-9_-]{27}"$/);
      assert.equal(r.headers.vary, 'Accept-Encoding');
      assert.equal(r.headers['content-encoding'], undefined);
      securityHeaders(r);
    }
  });

  test('If-None-Match naming the ETag (strong, weak, the gzip one, or *): 304 without a body; another tag: 200', async () => {
    const etag = String((await a.inject({ url: '/console' })).headers.etag);
    const gzTag = `${etag.slice(0, -1)}-gz"`;
    for (const tag of [etag, `W/${etag}`, `"other", ${etag}`, gzTag, '*']) {
      const r = await a.inject({ url: '/console/', headers: { 'if-none-match': tag } });
      assert.equal(r.statusCode, 304, tag);
      assert.equal(r.body, '');
      assert.equal(r.headers.etag, etag);
      assert.equal(r.headers['cache-control'], 'no-cache');
      securityHeaders(r);
    }
    const r = await a.inject({ url: '/console', headers: { 'if-none-match': '"not-this-one"' } });
    assert.equal(r.statusCode, 200);
    assert.equal(r.body, INDEX);
  });

  test('gzip when the client accepts it (its own ETag, Vary), the file as is when it does not', async () => {
    const plain = await a.inject({ url: '/console' });
    for (const accept of ['gzip', 'br, gzip;q=0.5', 'x-gzip', '*', 'deflate, *;q=0.1']) {
      const r = await a.inject({ url: '/console', headers: { 'accept-encoding': accept } });
      assert.equal(r.statusCode, 200, accept);
      assert.equal(r.headers['content-encoding'], 'gzip', accept);
      assert.equal(r.headers.vary, 'Accept-Encoding');
      assert.equal(r.headers.etag, `${String(plain.headers.etag).slice(0, -1)}-gz"`);
      assert.ok(r.rawPayload.length < Buffer.byteLength(INDEX), 'smaller');
      assert.equal(gunzipSync(r.rawPayload).toString('utf8'), INDEX);
    }
    for (const accept of ['br', 'gzip;q=0', 'identity', '*;q=0', 'gzip;q=0, *']) {
      const r = await a.inject({ url: '/console', headers: { 'accept-encoding': accept } });
      assert.equal(r.headers['content-encoding'], undefined, accept);
      assert.equal(r.body, INDEX, accept);
      assert.equal(r.headers.etag, plain.headers.etag);
    }
    // The identity tag revalidates the gzip answer too (one content).
    const r = await a.inject({ url: '/console', headers: { 'accept-encoding': 'gzip', 'if-none-match': String(plain.headers.etag) } });
    assert.equal(r.statusCode, 304);
    assert.equal(r.headers.etag, `${String(plain.headers.etag).slice(0, -1)}-gz"`);
  });

  test('Accept-Encoding parsing', () => {
    assert.equal(acceptsGzip(undefined), false);
    assert.equal(acceptsGzip(''), false);
    assert.equal(acceptsGzip('GZIP'), true);
    assert.equal(acceptsGzip('gzip;q=0.000'), false);
    assert.equal(acceptsGzip('gzip; q=0.2'), true);
    assert.equal(acceptsGzip('gzip;q=nonsense'), false);
    assert.equal(acceptsGzip(['br', 'gzip']), true);
    assert.equal(acceptsGzip('*;q=0, gzip'), true);
  });

  test('assets: type by extension; a hashed name is immutable for a year, any other revalidated; fonts never gzipped', async () => {
    const cases: Array<[string, string, string, string | Buffer, boolean]> = [
      ['index-AB2CD3EF.js', 'text/javascript; charset=utf-8', 'public, max-age=31536000, immutable', SCRIPT, true],
      ['index-QW3RT5YA.css', 'text/css; charset=utf-8', 'public, max-age=31536000, immutable', STYLE, true],
      ['index-AB2CD3EF.js.map', 'application/json; charset=utf-8', 'public, max-age=31536000, immutable', '', true],
      ['logo.svg', 'image/svg+xml', 'no-cache', LOGO, true],
      ['inter-ZZ7YX6WV.woff2', 'font/woff2', 'public, max-age=31536000, immutable', FONT, false],
      ['sub/nested.css', 'text/css; charset=utf-8', 'no-cache', NESTED, true],
    ];
    for (const [name, type, cache, content, packed] of cases) {
      const r = await a.inject({ url: `/console/assets/${name}`, headers: { 'accept-encoding': 'gzip' } });
      assert.equal(r.statusCode, 200, `${name}: ${r.body}`);
      assert.equal(r.headers['content-type'], type, name);
      assert.equal(r.headers['cache-control'], cache, name);
      assert.match(String(r.headers.etag), packed ? /^"[A-Za-z0-9_-]{27}-gz"$/ : /^"[A-Za-z0-9_-]{27}"$/, name);
      assert.equal(r.headers['content-encoding'], packed ? 'gzip' : undefined, name);
      assert.equal(r.headers.vary, packed ? 'Accept-Encoding' : undefined, name);
      securityHeaders(r);
      const body = packed ? gunzipSync(r.rawPayload) : r.rawPayload;
      if (content !== '') assert.deepEqual(body, Buffer.isBuffer(content) ? content : Buffer.from(content), name);
      const again = await a.inject({ url: `/console/assets/${name}`, headers: { 'if-none-match': String(r.headers.etag) } });
      assert.equal(again.statusCode, 304, name);
    }
  });

  test('a file the folder does not hold: 404 problem (with the security headers)', async () => {
    for (const path of ['/console/assets/nope.js', '/console/assets/', '/console/assets/sub', '/console/assets/index-AB2CD3EF.JS', '/console/assets/link.txt', '/console/assets/up/cfgu-console-outside.txt']) {
      const r = await a.inject({ url: path });
      problem(r, 404, noRoute('GET', path));
      securityHeaders(r);
      assert.equal(r.headers['cache-control'], 'no-store');
    }
    // Not a console path: the server's usual answer to an unknown route without a key (401 before 404).
    assert.equal((await a.inject({ url: '/console/index.html' })).statusCode, 401);
    problem(await a.inject({ url: '/console/index.html', headers: { authorization: `Bearer ${KEY}` } }), 404, noRoute('GET', '/console/index.html'));
  });

  test('HEAD: the headers of GET, no body', async () => {
    for (const url of ['/console', '/console/assets/index-AB2CD3EF.js']) {
      const get = await a.inject({ url });
      const r = await a.inject({ method: 'HEAD', url });
      assert.equal(r.statusCode, 200, url);
      assert.equal(r.body, '');
      assert.equal(r.headers['content-type'], get.headers['content-type']);
      assert.equal(r.headers.etag, get.headers.etag);
      assert.equal(r.headers['cache-control'], get.headers['cache-control']);
      assert.equal(r.headers['content-length'], get.headers['content-length']);
      securityHeaders(r);
    }
  });

  test('another method: 405 with Allow, without a credential too', async () => {
    for (const [method, path] of [['POST', '/console'], ['DELETE', '/console/'], ['PUT', '/console/assets/index-AB2CD3EF.js'], ['POST', '/console/assets/nope']] as const) {
      const r = await a.inject({ method, url: path, headers: { 'content-type': 'application/json' }, payload: '{}' });
      problem(r, 405, { type: 'about:blank', title: 'Method Not Allowed', status: 405, detail: `${method} is not allowed on ${path}; allowed: GET, HEAD` });
      assert.equal(r.headers.allow, 'GET, HEAD');
    }
  });

  test('paths that try to leave the folder, sent as they are: 404, nothing outside served', async (t) => {
    await a.listen({ host: '127.0.0.1', port: 0 });
    const { port } = a.server.address() as { port: number };
    const attempts = [
      '/console/assets/../secret.txt',
      '/console/assets/../../cfgu-console-outside.txt',
      '/console/assets/%2e%2e/secret.txt',
      '/console/assets/..%2fsecret.txt',
      '/console/assets/%2e%2e%2f%2e%2e%2fpackage.json',
      '/console/assets/sub%2fnested.css',
      '/console/assets/sub/../index-AB2CD3EF.js',
      '/console/assets/./index-AB2CD3EF.js',
      '/console/assets//index-AB2CD3EF.js',
      '/console/assets/..\\secret.txt',
      '/console/assets/%2E%2E/%2E%2E/cfgu-console-outside.txt',
      '/console/assets/index-AB2CD3EF.js%00.png',
      '/console/assets/...',
    ];
    for (const path of attempts) {
      const r = await rawGet('127.0.0.1', port, path);
      problem(r, 404, noRoute('GET', path));
      assert.doesNotMatch(r.body, /CONTENT-OF-A-FILE/);
      t.diagnostic(`${path}: 404`);
    }
    // The same files by their own names are served.
    assert.equal((await rawGet('127.0.0.1', port, '/console/assets/sub/nested.css')).body, NESTED);
  });
});

describe('who may load the console', () => {
  test('authentication off: loopback clients only; any other address gets 403 saying how to turn authentication on', async () => {
    const a = await app({});
    for (const remoteAddress of ['127.0.0.1', '127.10.20.30', '::1', '::ffff:127.0.0.1']) {
      const r = await a.inject({ url: '/console', remoteAddress });
      assert.equal(r.statusCode, 200, `${remoteAddress}: ${r.body}`);
      assert.equal(r.body, INDEX);
    }
    for (const remoteAddress of ['10.1.2.3', '192.168.0.7', '::ffff:10.0.0.1', '2001:db8::1', '128.0.0.1']) {
      for (const url of ['/console', '/console/', '/console/assets/index-AB2CD3EF.js', '/console/assets/nope.js']) {
        const r = await a.inject({ url, remoteAddress });
        problem(r, 403, LOOPBACK_ONLY);
        securityHeaders(r);
      }
    }
  });

  test('authentication off behind a proxy: request.ip follows http.trustProxy', async () => {
    // Not trusted: X-Forwarded-For is ignored, the proxy on this host is the client (loopback: served).
    const untrusting = await app({});
    assert.equal((await untrusting.inject({ url: '/console', headers: { 'x-forwarded-for': '10.9.8.7' } })).statusCode, 200);
    // Trusted: the forwarded address is the client's.
    const trusting = await app({ http: { trustProxy: true } });
    problem(await trusting.inject({ url: '/console', headers: { 'x-forwarded-for': '10.9.8.7' } }), 403, LOOPBACK_ONLY);
    assert.equal((await trusting.inject({ url: '/console', headers: { 'x-forwarded-for': '127.0.0.1' } })).statusCode, 200);
  });

  const OUTSIDE = outsideAddress();
  if (!OUTSIDE) process.stderr.write('\n*** SKIPPING the console loopback test over the network: this machine has no non-loopback IPv4 address ***\n');
  test('authentication off, over the network: 403 on the machine\'s own non-loopback address, 200 on 127.0.0.1', { skip: OUTSIDE ? false : 'no non-loopback IPv4 address' }, async () => {
    const a = await app({});
    await a.listen({ host: '0.0.0.0', port: 0 });
    const { port } = a.server.address() as { port: number };
    problem(await rawGet(OUTSIDE!, port, '/console'), 403, LOOPBACK_ONLY);
    const local = await rawGet('127.0.0.1', port, '/console');
    assert.equal(local.status, 200);
    assert.equal(local.body, INDEX);
  });

  test('authentication on: served to any address, without a credential', async () => {
    const a = await app(authOn);
    const r = await a.inject({ url: '/console/assets/index-AB2CD3EF.js', remoteAddress: '10.1.2.3' });
    assert.equal(r.statusCode, 200);
    assert.equal(r.body, SCRIPT);
    // The API itself still needs one.
    assert.equal((await a.inject({ url: '/session', remoteAddress: '10.1.2.3' })).statusCode, 401);
  });
});

describe('console.enabled: false, and a console that was not built', () => {
  test('disabled: the routes do not exist (401 without a key when authentication is on, as for any unknown route; 404)', async () => {
    const on = await app({ ...authOn, console: { enabled: false } });
    for (const url of ['/console', '/console/', '/console/assets/index-AB2CD3EF.js']) {
      problem(await on.inject({ url }), 401, {
        type: 'urn:cfgu:problem:unauthorized',
        title: 'Unauthorized',
        status: 401,
        detail: 'a valid bearer key is required (Authorization: Bearer <key>)',
      });
      problem(await on.inject({ url, headers: { authorization: `Bearer ${KEY}` } }), 404, noRoute('GET', url));
    }
    problem(await on.inject({ method: 'POST', url: '/console', headers: { authorization: `Bearer ${KEY}` } }), 404, noRoute('POST', '/console'));
    const off = await app({ console: { enabled: false } });
    problem(await off.inject({ url: '/console' }), 404, noRoute('GET', '/console'));
    problem(await off.inject({ url: '/console/assets/index-AB2CD3EF.js', remoteAddress: '10.1.2.3' }), 404, noRoute('GET', '/console/assets/index-AB2CD3EF.js'));
  });

  test('not built (no index.html): /console says how to build it; assets are 404', async () => {
    const a = await app(authOn, emptyDir);
    for (const url of ['/console', '/console/']) {
      const r = await a.inject({ url });
      problem(r, 404, NOT_BUILT);
      securityHeaders(r);
    }
    problem(await a.inject({ url: '/console/assets/index-AB2CD3EF.js' }), 404, noRoute('GET', '/console/assets/index-AB2CD3EF.js'));
    const missing = await app(authOn, join(emptyDir, 'no-such-folder'));
    problem(await missing.inject({ url: '/console' }), 404, NOT_BUILT);
  });

  test('the default folder is dist/console of the package', () => {
    assert.equal(defaultConsoleDir(), join(ROOT, 'dist', 'console'));
  });
});

test('the OpenAPI document leaves the console out and has /session, /stores, /sets', async () => {
  const a = await app(authOn);
  const doc = (await a.inject({ url: '/openapi.json', headers: { authorization: `Bearer ${KEY}` } })).json();
  const paths = Object.keys(doc.paths);
  assert.deepEqual(paths.filter((p) => p.startsWith('/console')), []);
  for (const [path, tag] of [['/session', 'session'], ['/stores', 'stores'], ['/sets', 'stores']] as const) {
    assert.deepEqual(doc.paths[path].get.tags, [tag], path);
    assert.deepEqual(doc.paths[path].get.security, [{ bearer: [] }], path);
  }
});
