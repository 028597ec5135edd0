/**
 * The files of the browser console (docs/server.md, "The console"), read once when the app is built: `index.html` and
 * every file under `assets/` of the console's folder (dist/console, made by `npm run build`), each kept in memory
 * with its content type, a strong ETag, its cache rule and, for text, a gzip copy made then (on libuv's threads). A request reads no file:
 * it looks its path up in a map that holds only what was found at start-up, so no request path can name a file
 * outside the folder.
 */
import { createHash } from 'node:crypto';
import { existsSync, lstatSync, readdirSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { constants, gzip } from 'node:zlib';

const gzipAsync = promisify(gzip);

/** One file, ready to send. */
export interface ConsoleFile {
  body: Buffer;
  /** The gzip copy, when the type is text and the copy is smaller. */
  gzip: Buffer | undefined;
  type: string;
  /** The strong ETag of the file as stored (`"<digest>"`). */
  etag: string;
  /** The strong ETag of its gzip copy (`"<digest>-gz"`). */
  gzipEtag: string;
  cacheControl: string;
}

export interface ConsoleFiles {
  /** `index.html`; undefined when the folder has none (the console was not built). */
  index: ConsoleFile | undefined;
  /** The files under `assets/`, by their path below it (`index-5TQXH2MA.js`, `fonts/a.woff2`). */
  assets: ReadonlyMap<string, ConsoleFile>;
}

/** The content types served, by extension; anything else is `application/octet-stream` (with `nosniff`). */
const TYPES: Record<string, string> = {
  html: 'text/html; charset=utf-8',
  js: 'text/javascript; charset=utf-8',
  mjs: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
  map: 'application/json; charset=utf-8',
  json: 'application/json; charset=utf-8',
  txt: 'text/plain; charset=utf-8',
  svg: 'image/svg+xml',
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  gif: 'image/gif',
  webp: 'image/webp',
  ico: 'image/vnd.microsoft.icon',
  woff2: 'font/woff2',
  woff: 'font/woff',
};

/** Types worth compressing (images and fonts of these formats are compressed already). */
const COMPRESSIBLE = new Set(['html', 'js', 'mjs', 'css', 'map', 'json', 'txt', 'svg']);

/** A name that carries esbuild's content hash (`[name]-[hash]`, 8 characters of A-Z and 2-7): its content never changes. */
const HASHED = /-[A-Z0-9]{8}(\.[A-Za-z0-9]+)+$/;

export const IMMUTABLE = 'public, max-age=31536000, immutable';
export const REVALIDATE = 'no-cache';

/** A path below `assets/` the console may serve: segments of letters, digits, `.`, `_` and `-`, none only dots. */
const SEGMENT = /^(?!\.+$)[A-Za-z0-9._-]+$/;
export const servablePath = (path: string): boolean => path.length > 0 && path.length <= 512 && path.split('/').every((s) => SEGMENT.test(s));

/** The package's dist/console: the nearest folder above this module holding package.json, then dist/console. */
export function defaultConsoleDir(): string | undefined {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(join(dir, 'package.json'))) return join(dir, 'dist', 'console');
    const up = dirname(dir);
    if (up === dir) return undefined;
    dir = up;
  }
}

/** Every regular file under `dir` (symbolic links are not followed), as paths relative to it with `/`. */
function filesUnder(dir: string, prefix = '', depth = 0): string[] {
  if (depth > 8) return [];
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const out: string[] = [];
  for (const name of names.sort()) {
    const path = join(dir, name);
    const stat = lstatSync(path, { throwIfNoEntry: false });
    if (stat?.isDirectory()) out.push(...filesUnder(path, `${prefix}${name}/`, depth + 1));
    else if (stat?.isFile()) out.push(`${prefix}${name}`);
  }
  return out;
}

async function prepare(path: string, name: string, cacheControl: string): Promise<ConsoleFile> {
  const body = await readFile(path);
  const ext = /\.([A-Za-z0-9]+)$/.exec(name)?.[1]?.toLowerCase() ?? '';
  const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`;
  let packed: Buffer | undefined;
  if (COMPRESSIBLE.has(ext) && body.length > 256) {
    const z = await gzipAsync(body, { level: constants.Z_BEST_COMPRESSION });
    if (z.length < body.length) packed = z;
  }
  return { body, gzip: packed, type: TYPES[ext] ?? 'application/octet-stream', etag, gzipEtag: `${etag.slice(0, -1)}-gz"`, cacheControl };
}

/**
 * Read the console's folder: its `index.html` (revalidated on every load: `no-cache` with its ETag) and the files under
 * `assets/` (a hashed name cached for a year as immutable, any other revalidated). A folder that is missing or has no
 * `index.html` gives no index (the route says the console was not built). Files whose path is not servable, or that
 * cannot be read, are left out (never a start-up failure: the console is not what the server is for).
 */
export async function loadConsoleFiles(dir: string | undefined): Promise<ConsoleFiles> {
  const assets = new Map<string, ConsoleFile>();
  if (!dir) return { index: undefined, assets };
  const indexPath = join(dir, 'index.html');
  const hasIndex = existsSync(indexPath) && lstatSync(indexPath).isFile();
  const names = filesUnder(join(dir, 'assets')).filter(servablePath);
  const [index, ...files] = await Promise.allSettled([
    hasIndex ? prepare(indexPath, 'index.html', REVALIDATE) : Promise.reject(new Error('no index.html')),
    ...names.map((name) => prepare(join(dir, 'assets', name), name, HASHED.test(name) ? IMMUTABLE : REVALIDATE)),
  ]);
  names.forEach((name, i) => {
    const file = files[i]!;
    if (file.status === 'fulfilled') assets.set(name, file.value);
  });
  return { index: index!.status === 'fulfilled' ? index!.value : undefined, assets };
}

/** Whether the client accepts gzip (`Accept-Encoding`, with its q-values: `gzip;q=0` refuses it, `*` allows it). */
export function acceptsGzip(header: string | string[] | undefined): boolean {
  const text = Array.isArray(header) ? header.join(',') : header;
  if (!text) return false;
  let gzipQ: number | undefined;
  let anyQ: number | undefined;
  for (const part of text.split(',')) {
    const [coding, ...params] = part.trim().toLowerCase().split(';');
    const qParam = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
    const q = qParam === undefined ? 1 : Number(qParam.slice(2));
    const weight = Number.isFinite(q) ? q : 0;
    if (coding === 'gzip' || coding === 'x-gzip') gzipQ = Math.max(gzipQ ?? 0, weight);
    else if (coding === '*') anyQ = weight;
  }
  return (gzipQ ?? anyQ ?? 0) > 0;
}

/** Whether `If-None-Match` names the file (either of its ETags: they tag one content), or is `*`. */
export function notModified(header: string | string[] | undefined, file: ConsoleFile): boolean {
  const text = Array.isArray(header) ? header.join(',') : header;
  if (!text) return false;
  return text.split(',').some((tag) => {
    const t = tag.trim().replace(/^W\//, '');
    return t === '*' || t === file.etag || t === file.gzipEtag;
  });
}
