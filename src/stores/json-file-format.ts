/**
 * The `json-file` store's format: a JSON array of `{ "set", "key", "value" }` objects (the Cfgu v1 layout), parsed
 * leniently about scalars and strictly about shape, written as `JSON.stringify` indents it; the per-set snapshot the
 * change feed compares; a file's identity.
 */
import { statSync, type BigIntStats } from 'node:fs';
import { pairKey } from './common.js';
import type { Config } from '../core/ports.js';

type Parsed = { ok: true; configs: Map<string, Config> } | { ok: false; reason: string };

/** Parse the file's text. Lenient about scalars (numbers/booleans become strings); strict about shape. */
export function parseJsonConfigs(text: string): Parsed {
  if (text.trim() === '') return { ok: true, configs: new Map() };
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch {
    return { ok: false, reason: 'the file is not valid JSON' };
  }
  if (!Array.isArray(data)) return { ok: false, reason: 'the file is not a JSON array of {set, key, value} objects' };
  const configs = new Map<string, Config>();
  for (let i = 0; i < data.length; i++) {
    const item = data[i] as Record<string, unknown> | null;
    const bad = (): Parsed => ({ ok: false, reason: `item ${i} of the file is not a {set, key, value} object` });
    if (!item || typeof item !== 'object' || Array.isArray(item)) return bad();
    const set = item.set === undefined || item.set === null ? '' : item.set;
    const { key, value } = item;
    if (typeof set !== 'string' || typeof key !== 'string' || key === '') return bad();
    let v: string;
    if (value === undefined || value === null) continue;
    if (typeof value === 'string') v = value;
    else if (typeof value === 'number' || typeof value === 'boolean') v = String(value);
    else return bad();
    if (v === '') continue;
    const k = pairKey(set, key);
    configs.delete(k);
    configs.set(k, { set, key, value: v });
  }
  return { ok: true, configs };
}

/** A file's identity: inode, size and modification time in ns (what a write by rename or in place changes). */
export const fileIdentity = (st: BigIntStats): string => `${st.ino}:${st.size}:${st.mtimeNs}`;

/** The file's identity, or "missing" (also when it cannot be looked at); a synchronous stat, as the per-request check. */
export function identityOf(path: string): string {
  try {
    const st = statSync(path, { bigint: true, throwIfNoEntry: false });
    return st ? fileIdentity(st) : 'missing';
  } catch {
    return 'missing';
  }
}

/** The text of one config in the file (as `JSON.stringify` of the array, indented by two, writes it), by config. */
const entryTexts = new WeakMap<Config, string>();

/**
 * The file's text: what `JSON.stringify(configs, null, 2)` writes (keys `set`, `key`, `value`), and a newline. Each
 * config's part is kept with the config object (the store's configs are never changed in place, a write replaces
 * them), so a write only formats the configs it made.
 */
export function formatJsonConfigs(configs: readonly Config[]): string {
  if (!configs.length) return '[]\n';
  const parts = new Array<string>(configs.length);
  for (let i = 0; i < configs.length; i++) {
    const c = configs[i]!;
    let text = entryTexts.get(c);
    if (text === undefined) {
      // Joined rather than concatenated: a flat string, which the file's join copies without walking a rope each time.
      text = ['  {\n    "set": ', JSON.stringify(c.set), ',\n    "key": ', JSON.stringify(c.key), ',\n    "value": ', JSON.stringify(c.value), '\n  }'].join('');
      entryTexts.set(c, text);
    }
    parts[i] = text;
  }
  return `[\n${parts.join(',\n')}\n]\n`;
}

/** One set's configs in a canonical text (sorted by key), to tell whether a new version of the file changed the set. */
export function setText(configs: Config[]): string {
  configs.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  return JSON.stringify(configs.map((c) => [c.key, c.value]));
}

/** `set -> its configs` in a canonical text (setText), to tell which sets a new version of the file changed. */
export function setSnapshot(configs: Iterable<Config>): Map<string, string> {
  const bySet = new Map<string, Config[]>();
  for (const c of configs) {
    const list = bySet.get(c.set);
    if (list) list.push(c);
    else bySet.set(c.set, [c]);
  }
  const out = new Map<string, string>();
  for (const [set, list] of bySet) out.set(set, setText(list));
  return out;
}
