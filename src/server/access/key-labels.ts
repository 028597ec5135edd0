/**
 * The labels a scope may grant keys by, taken only from schemas the server holds: the files `.configu` names under
 * `schemas`. The schema a caller sends is never asked which labels its keys carry, since the caller writes it.
 *
 * Read once at start-up, and only when a credential or a JWT grant lists `labels`: a key carries label L (for access)
 * when at least one server-held schema declares the key and every server-held schema that declares it gives it L.
 * Schemas that disagree therefore grant only what they all agree on. A schema named by URL is not fetched (a warning
 * says so); a schema file that cannot be read or checked stops start-up. The request path only looks keys up in the
 * sets each grant is compiled with (./scopes.ts).
 */
import { basename, dirname } from 'node:path';
import { labelsOf } from '../../core/index.js';
import { ConfigurationError } from '../../core/errors.js';
import { expandGlob, MAGIC } from '../../config/glob.js';
import { readSchemaFileKeys, SCHEMA_FILE } from '../../config/schema-file.js';
import type { LoadedConfiguration } from '../../config/types.js';
import type { Grant } from './scopes.js';
import type { ServerSettings } from '../process/settings.js';

/** Key name -> the labels every server-held schema declaring the key gives it. Keys no such schema declares are absent. */
export type KeyLabels = ReadonlyMap<string, ReadonlySet<string>>;

export const NO_KEY_LABELS: KeyLabels = new Map();

const IS_URL = /^[a-z][a-z0-9+.-]*:\/\//i;

/** Every grant of the settings with where it is written, for messages. */
function labelGrants(settings: ServerSettings): Array<{ where: string; grant: Grant }> {
  const out: Array<{ where: string; grant: Grant }> = [];
  settings.auth.credentials.forEach((c) => {
    if (c.labels) out.push({ where: `credential "${c.name}"`, grant: c });
  });
  settings.auth.jwt?.grants.forEach((g, i) => {
    if (g.labels) out.push({ where: `JWT grant ${i} (${g.claim} ${g.value})`, grant: g });
  });
  return out;
}

export interface LoadedKeyLabels {
  table: KeyLabels;
  /** For the start-up log (`warn`): schemas not read, labels no schema gives. */
  warnings: string[];
}

/**
 * The label table for `settings` from the schemas of `configuration`. Reads nothing (and warns of nothing) unless
 * authentication is on and some grant lists labels. Throws ConfigurationError for a schema file that cannot be read.
 */
export function loadKeyLabels(configuration: LoadedConfiguration, settings: ServerSettings): LoadedKeyLabels {
  const grants = settings.auth.enabled ? labelGrants(settings) : [];
  if (!grants.length) return { table: NO_KEY_LABELS, warnings: [] };
  const warnings: string[] = [];
  const base = configuration.file ? dirname(configuration.file) : process.cwd();
  const fail = (name: string, message: string): never => {
    throw new ConfigurationError(
      `schema "${name}" cannot be read for the labels of credentials and JWT grants: ${message}`,
      configuration.file,
      `schemas.${name}`,
    );
  };

  // Each file once, whichever names list it.
  const files = new Map<string, string>();
  for (const [name, path] of Object.entries(configuration.schemas)) {
    if (IS_URL.test(path)) {
      warnings.push(`schema "${name}" is a URL, which the server does not fetch: its labels grant nothing`);
      continue;
    }
    if (MAGIC.test(path)) {
      const matches = expandGlob(path, base).filter((f) => SCHEMA_FILE.test(basename(f)));
      if (!matches.length) fail(name, `${path}: no *.cfgu.json|yaml|yml file matches`);
      for (const f of matches) if (!files.has(f)) files.set(f, name);
      continue;
    }
    if (!SCHEMA_FILE.test(basename(path))) fail(name, `${path}: schema files are named *.cfgu.json, *.cfgu.yaml or *.cfgu.yml`);
    if (!files.has(path)) files.set(path, name);
  }

  const table = new Map<string, Set<string>>();
  for (const [file, name] of files) {
    const read = readSchemaFileKeys(file);
    if (!read.ok) fail(name, `${file}: ${[read.problem, ...read.lines.map((l) => l.trim())].join(' ')}`);
    const keys = (read as { keys: Record<string, { label?: unknown } | null> }).keys;
    for (const key of Object.keys(keys)) {
      const cfgu = keys[key];
      const labels = new Set(cfgu ? labelsOf(cfgu) : []);
      const held = table.get(key);
      if (!held) table.set(key, labels);
      else for (const l of held) if (!labels.has(l)) held.delete(l);
    }
  }

  const used = new Set<string>();
  for (const labels of table.values()) for (const l of labels) used.add(l);
  for (const { where, grant } of grants) {
    const unused = grant.labels!.filter((l) => !used.has(l));
    if (unused.length) {
      warnings.push(
        `${where} grants label${unused.length === 1 ? '' : 's'} ${unused.map((l) => `"${l}"`).join(', ')}, which no schema of .configu gives any key: ${unused.length === 1 ? 'it grants' : 'they grant'} nothing (its keys patterns still apply)`,
      );
    }
  }
  return { table, warnings };
}

/** The keys a grant's labels allow: those the table gives at least one of `labels`. Computed once per grant. */
export function keysWithLabels(table: KeyLabels, labels: readonly string[]): ReadonlySet<string> {
  const keys = new Set<string>();
  for (const [key, held] of table) if (labels.some((l) => held.has(l))) keys.add(key);
  return keys;
}
