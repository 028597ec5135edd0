/**
 * Store type names. A `.configu` may spell a type `json-file`, `JsonFile`, `json_file`, `JSON File` or even
 * `JsonFileConfigStore`: all normalise to the canonical `json-file`. Aliases: `postgres` -> `postgresql`,
 * `memory` -> `in-memory`. `mariadb` stays `mariadb` (its own canonical name, served by the MySQL implementation),
 * so `$.input.store.type` shows what the operator declared, in canonical spelling.
 */

/** Canonical store type names this build implements. */
export const STORE_TYPES = ['json-file', 'in-memory', 'sqlite', 'postgresql', 'mysql', 'mariadb', 'redis', 'etcd'] as const;
export type StoreType = (typeof STORE_TYPES)[number];

const COMPACT: Record<string, StoreType> = {
  jsonfile: 'json-file',
  json: 'json-file',
  inmemory: 'in-memory',
  memory: 'in-memory',
  sqlite: 'sqlite',
  sqlite3: 'sqlite',
  postgresql: 'postgresql',
  postgres: 'postgresql',
  mysql: 'mysql',
  mariadb: 'mariadb',
  redis: 'redis',
  etcd: 'etcd',
  etcd3: 'etcd',
};

/** Lower-case, drop everything but letters and digits, drop a `ConfigStore`/`Store` suffix. */
function compact(type: string): string {
  let c = type.toLowerCase().replace(/[^a-z0-9]/g, '');
  for (const suffix of ['configstore', 'store']) {
    if (c.length > suffix.length && c.endsWith(suffix)) {
      c = c.slice(0, -suffix.length);
      break;
    }
  }
  return c;
}

/** The canonical type for a type name as written, or undefined when this build has no such store kind. */
export function normaliseStoreType(type: string): StoreType | undefined {
  return COMPACT[compact(type)];
}
