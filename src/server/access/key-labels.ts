/**
 * The labels a scope may grant keys by, taken only from schemas the server holds: the named schemas of `.configu`'s
 * `schemas` (../schemas/registry.ts, read at start-up, watched afterwards). The schema a caller sends is never asked
 * which labels its keys carry, since the caller writes it.
 *
 * For a command that carries its schema, a key carries label L (for access) when at least one server-held schema
 * declares the key and every server-held schema that declares it gives it L: schemas that disagree grant only what
 * they all agree on. A command that names a server schema is judged by that schema's own labels (./scopes.ts). The
 * table is computed when the credentials are built, and again when a schema changes; the request path only looks keys
 * up in the sets each grant is compiled with.
 */
import type { LoadedConfiguration } from '../../config/types.js';
import { NamedSchemas, type KeyLabels } from '../schemas/registry.js';
import type { Grant } from './scopes.js';
import type { ServerSettings } from '../process/settings.js';

export type { KeyLabels } from '../schemas/registry.js';

export const NO_KEY_LABELS: KeyLabels = new Map();

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
  /** For the start-up log (`warn`): labels no schema gives. */
  warnings: string[];
}

/** The label table of the server's schemas: key -> the labels every schema declaring it gives it. */
export function labelTable(schemas: NamedSchemas): KeyLabels {
  const table = new Map<string, Set<string>>();
  for (const s of schemas.all()) {
    for (const [key, labels] of s.labels) {
      const held = table.get(key);
      if (!held) table.set(key, new Set(labels));
      else for (const l of held) if (!labels.has(l)) held.delete(l);
    }
  }
  return table;
}

/**
 * The label table for `settings` from the server's schemas, and a warning for each grant label no schema gives. Empty
 * (and no warning) unless authentication is on and some grant lists labels.
 */
export function keyLabelsFor(schemas: NamedSchemas, settings: ServerSettings): LoadedKeyLabels {
  const grants = settings.auth.enabled ? labelGrants(settings) : [];
  if (!grants.length) return { table: NO_KEY_LABELS, warnings: [] };
  const table = labelTable(schemas);
  const used = new Set<string>();
  for (const s of schemas.all()) for (const l of s.labelNames) used.add(l);
  const warnings: string[] = [];
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

/**
 * The label table for `settings` from the schemas of `configuration`, read now (NamedSchemas.load): throws
 * ConfigurationError for a schema file that cannot be read; the warnings include those of the load (URL entries).
 */
export function loadKeyLabels(configuration: Pick<LoadedConfiguration, 'file' | 'schemas'>, settings: ServerSettings): LoadedKeyLabels {
  const { schemas, warnings } = NamedSchemas.load(configuration);
  const labels = keyLabelsFor(schemas, settings);
  return { table: labels.table, warnings: [...warnings, ...labels.warnings] };
}

/** The keys a grant's labels allow: those the table gives at least one of `labels`. Computed once per grant. */
export function keysWithLabels(table: KeyLabels, labels: readonly string[]): ReadonlySet<string> {
  const keys = new Set<string>();
  for (const [key, held] of table) if (labels.some((l) => held.has(l))) keys.add(key);
  return keys;
}
