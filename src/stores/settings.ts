/**
 * The `configuration` each store kind accepts, as zod schemas: the names (an object is strict, so a misspelt
 * `tablename` is an error instead of data silently going to the default table), the types, the ranges and the
 * defaults. Values may arrive as text (a `{{VARIABLE}}` rendered into `.configu`), so numbers and booleans are also
 * read from their text form. `parseStoreSettings` turns the first problem into a ConfigurationError naming the store
 * and the property; the store kinds get typed options and read nothing else.
 */
import * as z from 'zod';
import { unknownPropertyMessage } from '../core/suggest.js';
import { ConfigurationError } from '../core/errors.js';
import { DEFAULT_TIMEOUT_MS } from './common.js';
import { DEFAULT_HISTORY, type HistorySettings } from './history.js';
import type { StoreType } from './normalise.js';

/** Absent: `undefined` or `null` (numbers also take the empty text a missing variable renders to as absent). */
const absent = (v: unknown) => v === undefined || v === null;

/** Text (a number is taken as its text: `password: 1234`). */
const text = z
  .union([z.string(), z.number()], { error: 'must be a string' })
  .transform((v) => String(v))
  .nullish()
  .transform((v) => v ?? undefined);

const requiredText = z.preprocess(
  (v) => (typeof v === 'number' ? String(v) : v),
  z.string({ error: 'must be a non-empty string' }).min(1, { error: 'must be a non-empty string' }),
);

/** A number from a number or its text; `what` is the message's expectation. */
function numberIn(what: string, min: number, max = Infinity) {
  return z.preprocess(
    (v) => (absent(v) || v === '' ? undefined : typeof v === 'string' ? Number(v) : v),
    z
      .number({ error: `must be ${what}` })
      .min(min, { error: `must be ${what}` })
      .max(max, { error: `must be ${what}` })
      .optional(),
  );
}

const count = numberIn('a non-negative number', 0);

const flag = z.preprocess(
  (v) => (absent(v) ? undefined : v === 'true' ? true : v === 'false' ? false : v),
  z.boolean({ error: 'must be a boolean' }).optional(),
);

const feedIntervalMs = numberIn('a number of milliseconds from 10 to 3600000', 10, 3_600_000);

/**
 * `history`: `false` (revisions only, no records), `true` or absent (the defaults), or `{ keep, maxAgeDays }`: records
 * kept per set (default 1000, at least 1) and their greatest age in days (default none). docs/stores.md, "Revisions and
 * history".
 */
/** The properties of a `history` object. */
const HISTORY_SETTINGS = ['keep', 'maxAgeDays'];

const history = z
  .union(
    [
      z.boolean(),
      z.enum(['true', 'false']).transform((v) => v === 'true'),
      z.strictObject({
        keep: numberIn('a whole number of records from 1', 1).refine((v) => v === undefined || Number.isInteger(v), { error: 'must be a whole number of records from 1' }),
        maxAgeDays: numberIn('a number of days above 0', Number.MIN_VALUE),
      }),
    ],
    { error: 'must be true, false or an object { keep, maxAgeDays }' },
  )
  .nullish()
  .transform((v): HistorySettings | undefined => {
    if (v === undefined || v === null) return undefined;
    if (v === true) return { ...DEFAULT_HISTORY };
    if (v === false) return { ...DEFAULT_HISTORY, enabled: false };
    return { enabled: true, keep: v.keep ?? DEFAULT_HISTORY.keep, maxAgeDays: v.maxAgeDays };
  });

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/** A plain SQL identifier (letters, digits, `_`; at most 63 characters); `config` when absent. */
const tableName = text.transform((name, ctx) => {
  const value = name ?? 'config';
  if (!IDENTIFIER.test(value)) {
    ctx.addIssue({
      code: 'custom',
      message: `"${value.slice(0, 80)}" is not a valid table name (letters, digits and _, not starting with a digit, at most 63 characters)`,
    });
    return z.NEVER;
  }
  return value;
});

const timeout = count.transform((v) => v ?? DEFAULT_TIMEOUT_MS);

const sqlServer = {
  url: text,
  host: text,
  port: count,
  username: text,
  user: text,
  password: text,
  database: text,
  ssl: z.unknown().optional(),
  tableName,
  timeout,
  poolSize: count,
  feedIntervalMs,
  history,
};

/** One URL or a list of them. */
const urls = z
  .union([z.string(), z.array(z.string())], { error: 'must be a URL or a list of URLs (e.g. http://127.0.0.1:2379)' })
  .nullish()
  .transform((v) => (v === null || v === undefined ? undefined : typeof v === 'string' ? [v] : v));

export const STORE_SCHEMAS = {
  'json-file': z.strictObject({
    path: requiredText,
    watch: flag,
    recheckMs: count,
    lockTimeoutMs: count,
    staleLockMs: count,
    feedIntervalMs,
    history,
  }),
  'in-memory': z.strictObject({}),
  sqlite: z.strictObject({ database: requiredText, tableName, timeout, feedIntervalMs, history }),
  postgresql: z.strictObject({ ...sqlServer, notify: flag }),
  mysql: z.strictObject(sqlServer),
  mariadb: z.strictObject(sqlServer),
  redis: z.strictObject({
    url: text,
    host: text,
    port: count,
    username: text,
    password: text,
    db: count,
    timeout,
    feedIntervalMs,
    history,
  }),
  etcd: z
    .strictObject({ hosts: urls, host: urls, url: urls, username: text, password: text, timeout, history })
    .superRefine((s, ctx) => {
      const list = s.hosts ?? s.host ?? s.url ?? [];
      if (!list.length || !list.every((h) => h !== '')) {
        ctx.addIssue({ code: 'custom', path: ['hosts'], message: 'must be a URL or a list of URLs (e.g. http://127.0.0.1:2379)' });
      }
    }),
} satisfies Record<StoreType, z.ZodType>;

/** The typed settings of one store kind, as its factory receives them. */
export type StoreSettingsOf<K extends StoreType> = z.output<(typeof STORE_SCHEMAS)[K]>;

/** The `configuration` properties of each store kind, in the documented order. */
export const STORE_SETTINGS = Object.fromEntries(
  Object.entries(STORE_SCHEMAS).map(([kind, schema]) => [kind, Object.keys(schema.shape)]),
) as unknown as Readonly<Record<StoreType, readonly string[]>>;

/**
 * Parse a store's `configuration` for its kind. Throws ConfigurationError with the first problem: an unknown
 * property first (with the closest known name), then a value, as `store "s": configuration.port must be ...`.
 * `base` is the property path of the configuration in messages (`.configu` loading quotes store names that are not
 * identifiers: `stores["my store"].configuration`).
 */
export function parseStoreSettings<K extends StoreType>(
  kind: K,
  configuration: unknown,
  store: string,
  base = `stores.${store}.configuration`,
): StoreSettingsOf<K> {
  const where = (property: string) => `${base}.${property}`;
  const result = STORE_SCHEMAS[kind].safeParse(configuration ?? {});
  if (result.success) return result.data as StoreSettingsOf<K>;
  const issues = result.error.issues;
  const unknown = issues.find((i) => i.code === 'unrecognized_keys');
  if (unknown && unknown.code === 'unrecognized_keys') {
    const key = unknown.keys[0]!;
    // The only nested object is `history`.
    const at = [...unknown.path.map(String), key].join('.');
    throw new ConfigurationError(unknownPropertyMessage(where(at), key, unknown.path.length ? HISTORY_SETTINGS : STORE_SETTINGS[kind]), undefined, where(at));
  }
  const issue = issues[0]!;
  const property = issue.path.map(String).join('.');
  if (!property) {
    throw new ConfigurationError(`store "${store}": configuration must be an object`, undefined, base);
  }
  throw new ConfigurationError(`store "${store}": configuration.${property} ${issue.message}`, undefined, where(property));
}
