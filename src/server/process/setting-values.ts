/**
 * The value parsers of the proxy settings: each takes a raw value (a string from a flag or the environment, or a JSON
 * value from `.configu`) and its source, and returns the typed value or throws a ConfigurationError naming the source
 * (`fail`). Shared by ./resolve-settings.ts and ../access/access-settings.ts.
 */
import { ConfigurationError } from '../../core/errors.js';
import type { TrustProxy } from './settings.js';

/** One place a value came from, for messages. */
export interface Source {
  /** e.g. `CONFIGU_HTTP_PORT`, `--port`, `interface.proxy.http.port` */
  name: string;
  /** the .configu path when the value came from the file */
  file?: string;
  kind: 'flag' | 'env' | 'file';
}

export function fail(source: Source, message: string): never {
  if (source.kind === 'file') throw new ConfigurationError(`${source.name}: ${message}`, source.file, source.name);
  if (source.kind === 'env') throw new ConfigurationError(`environment variable ${source.name}: ${message}`, undefined, source.name);
  throw new ConfigurationError(`flag ${source.name}: ${message}`, undefined, source.name);
}

export const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

const TRUE = new Set(['true', '1', 'yes', 'on']);
const FALSE = new Set(['false', '0', 'no', 'off']);

export function toBoolean(raw: unknown, source: Source): boolean {
  if (typeof raw === 'boolean') return raw;
  if (typeof raw === 'string') {
    const s = raw.trim().toLowerCase();
    if (TRUE.has(s)) return true;
    if (FALSE.has(s)) return false;
  }
  return fail(source, `must be true or false, got ${describe(raw)}`);
}

export function toInteger(raw: unknown, source: Source, min: number, max: number): number {
  let n: number | undefined;
  if (typeof raw === 'number') n = raw;
  else if (typeof raw === 'string' && /^\s*\d+\s*$/.test(raw)) n = Number(raw.trim());
  if (n === undefined || !Number.isInteger(n) || n < min || n > max) {
    return fail(source, `must be a whole number from ${min} to ${max}, got ${describe(raw)}`);
  }
  return n;
}

export function toText(raw: unknown, source: Source): string {
  if (typeof raw !== 'string' || raw.trim() === '') return fail(source, `must be a non-empty string, got ${describe(raw)}`);
  return raw.trim();
}

/** A list given as an array (file) or a comma-separated string (env, or file). Empty items are dropped. */
export function toList(raw: unknown, source: Source): string[] {
  if (typeof raw === 'string') return raw.split(',').map((s) => s.trim()).filter(Boolean);
  if (Array.isArray(raw) && raw.every((s) => typeof s === 'string')) return raw.map((s) => s.trim()).filter(Boolean);
  return fail(source, `must be a list of strings or a comma-separated string, got ${describe(raw)}`);
}

/** Describe a bad value without echoing secrets or long text. */
export function describe(raw: unknown): string {
  if (raw === null) return 'null';
  if (Array.isArray(raw)) return 'a list';
  if (typeof raw === 'string') return raw.length > 40 ? `a ${raw.length}-character string` : JSON.stringify(raw);
  if (typeof raw === 'object') return 'an object';
  return String(raw);
}

export function toTrustProxy(raw: unknown, source: Source): TrustProxy {
  if (typeof raw === 'boolean') return raw;
  if (typeof raw === 'number') return toInteger(raw, source, 0, 100);
  if (typeof raw === 'string') {
    const s = raw.trim().toLowerCase();
    if (TRUE.has(s) && s !== '1') return true;
    if (FALSE.has(s) && s !== '0') return false;
    if (/^\d+$/.test(s)) return toInteger(s, source, 0, 100);
  }
  const list = toList(raw, source);
  if (!list.length) return false;
  for (const item of list) {
    if (!/^[0-9A-Fa-f:.]+(\/\d{1,3})?$/.test(item) && !['loopback', 'linklocal', 'uniquelocal'].includes(item)) {
      fail(source, `"${item}" is not an address, a CIDR range, or one of loopback, linklocal, uniquelocal`);
    }
  }
  return list;
}

export function toOrigins(raw: unknown, source: Source): string[] {
  const list = toList(raw, source);
  for (const origin of list) {
    if (origin === '*') continue;
    let ok = false;
    try {
      const u = new URL(origin);
      ok = (u.protocol === 'http:' || u.protocol === 'https:') && u.origin === origin.replace(/\/$/, '');
    } catch {
      ok = false;
    }
    if (!ok) fail(source, `"${origin}" is not an origin such as https://app.example.com (or *)`);
  }
  if (list.includes('*') && list.length > 1) fail(source, '"*" cannot be combined with other origins');
  return list.map((o) => o.replace(/\/$/, ''));
}

/** The value at `path` of a plain-object tree (undefined when a step is missing). */
export function get(obj: unknown, path: string[]): unknown {
  let cur = obj;
  for (const p of path) {
    if (!isPlainObject(cur)) return undefined;
    cur = cur[p];
  }
  return cur;
}
