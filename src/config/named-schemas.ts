/**
 * One entry of `.configu`'s `schemas` map read as the server reads it: the entry's file, or every schema file its glob
 * matches, merged into one `keys` map (a key declared by two of the files is a problem naming both, as for the CLI's
 * `--schema`). Each file goes through the same read and check as the CLI's (./schema-file.ts); what is wrong is
 * returned as one line that names the file. The server's registry of named schemas (src/server/schemas/) reads its
 * entries here, at start-up and again when a file changes.
 */
import { basename } from 'node:path';
import { setOwn } from '../core/names.js';
import type { Cfgu } from '../core/index.js';
import { expandGlob, MAGIC } from './glob.js';
import { readSchemaFileKeys, SCHEMA_FILE } from './schema-file.js';

/** A `schemas` entry that names a URL (which the server does not fetch). */
export const SCHEMA_URL = /^[a-z][a-z0-9+.-]*:\/\//i;

/** What one entry holds now: its files and their merged keys, or one line saying what is wrong. */
export type NamedSchemaText = { ok: true; files: string[]; keys: Record<string, Cfgu | null> } | { ok: false; problem: string };

/**
 * The files of an entry: the file it names, or what its glob matches (only `*.cfgu.json|yaml|yml` files, sorted).
 * `path` is absolute (config/load.ts resolved it against the `.configu` folder).
 */
export function namedSchemaFiles(path: string): { files: string[] } | { problem: string } {
  if (MAGIC.test(path)) {
    const files = expandGlob(path, '/').filter((f) => SCHEMA_FILE.test(basename(f)));
    return files.length ? { files } : { problem: `${path}: no *.cfgu.json|yaml|yml file matches` };
  }
  if (!SCHEMA_FILE.test(basename(path))) return { problem: `${path}: schema files are named *.cfgu.json, *.cfgu.yaml or *.cfgu.yml` };
  return { files: [path] };
}

/** Read an entry's files and merge their keys. Never throws for a problem of the files themselves. */
export function readNamedSchema(path: string): NamedSchemaText {
  const found = namedSchemaFiles(path);
  if ('problem' in found) return { ok: false, problem: found.problem };
  const keys: Record<string, Cfgu | null> = {};
  const owner = new Map<string, string>();
  for (const file of found.files) {
    const read = readSchemaFileKeys(file);
    if (!read.ok) return { ok: false, problem: `${file}: ${[read.problem, ...read.lines.map((l) => l.trim())].join(' ')}` };
    for (const [key, cfgu] of Object.entries(read.keys)) {
      const first = owner.get(key);
      if (first !== undefined) return { ok: false, problem: `key "${key}" is declared in both ${first} and ${file}` };
      owner.set(key, file);
      setOwn(keys, key, cfgu);
    }
  }
  return { ok: true, files: found.files, keys };
}
