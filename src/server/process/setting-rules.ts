/**
 * The shape of `interface.proxy` in `.configu`, as zod schemas: which sections and properties exist, which of them
 * are objects or lists of objects. Every object is strict, so a property nobody reads (a typo) stops start-up with
 * `unknown property "prot" (did you mean "port"? allowed here: ...)`, at any depth (credentials and JWT grants
 * included).
 *
 * The values themselves (ranges, URLs, patterns) are checked by the parsers of setting-values.ts and
 * ../access/access-settings.ts, because the same setting may come from a flag or an environment variable (a string to convert) and the message
 * names the source it came from; here a leaf accepts any value.
 */
import * as z from 'zod';
import { unknownPropertyMessage } from '../../core/suggest.js';

/** A leaf: its value is checked by the setting's own parser. */
const value = z.unknown().optional();

/** A strict object; `what` replaces zod's message when the value is not an object. */
function strict<T extends z.ZodRawShape>(shape: T, what = 'must be an object') {
  return z.strictObject(shape, { error: (iss) => (iss.code === 'invalid_type' ? what : undefined) });
}

/** An optional section: absent or null means "all defaults". */
const section = <T extends z.ZodRawShape>(shape: T) => strict(shape).nullish();

const leaves = <K extends string>(...names: K[]) => Object.fromEntries(names.map((n) => [n, value])) as Record<K, typeof value>;

const GRANT = ['stores', 'sets', 'labels', 'keys', 'metrics', 'write', 'breaking'] as const;

const credential = strict(leaves('name', 'sha256', ...GRANT), 'must be an object with name, sha256, stores and sets');
const jwtGrant = strict(leaves('claim', 'value', ...GRANT), 'must be an object with claim, value, stores and sets');

export const PROXY_SETTINGS = strict({
  http: section({
    ...leaves('port', 'host'),
    tls: section(leaves('enabled', 'cert', 'key')),
    ...leaves('allowedOrigins', 'trustProxy', 'headersTimeoutMs', 'requestTimeoutMs', 'idleTimeoutMs', 'maxConnectionsPerClient'),
  }),
  auth: section({
    ...leaves('enabled', 'presharedKeys'),
    credentials: z.array(credential, { error: 'must be a list of credentials ({ name, sha256, stores, sets })' }).nullish(),
    jwt: section({
      ...leaves('jwksUrl', 'jwksFile', 'issuer', 'audience', 'algorithms', 'clockSkewSeconds', 'jwksCooldownSeconds'),
      ...leaves('jwksMaxAgeSeconds', 'jwksMaxBytes', 'jwksMaxKeys', 'cacheSize'),
      grants: z.array(jwtGrant, { error: 'must be a list of grants ({ claim, value, stores, sets })' }).nullish(),
    }),
  }),
  audit: section(leaves('enabled', 'file')),
  rateLimit: section(leaves('enabled', 'max', 'windowSeconds', 'redisUrl', 'redisPrefix')),
  log: section(leaves('enabled', 'probes')),
  metrics: section(leaves('enabled', 'key')),
  docs: section(leaves('enabled', 'public')),
  console: section(leaves('enabled')),
  limits: section(
    leaves('bodyBytes', 'commands', 'keys', 'cacheMemoryMb', 'setDepth', 'lookups', 'templateBytes', 'templateExpressions', 'valueBytes', 'outputBytes', 'matrixSets', 'matrixCells'),
  ),
  shutdown: section(leaves('gracePeriodSeconds', 'drainSeconds')),
  workers: value,
  watch: section(leaves('maxWatchers', 'maxWatchersPerClient', 'maxWaitSeconds', 'heartbeatMs', 'debounceMs', 'pollMs')),
});

/** One shape problem: the property path under `root` (`interface.proxy.http.prot`) and what is wrong there. */
export interface ShapeProblem {
  path: string;
  message: string;
}

/** The property names of the object schema at `path` (through lists and optional wrappers). */
function propertiesAt(schema: z.ZodType, path: readonly PropertyKey[]): string[] {
  let s: z.ZodType = schema;
  const unwrap = () => {
    while (s instanceof z.ZodOptional || s instanceof z.ZodNullable) s = s.unwrap() as z.ZodType;
  };
  for (const step of path) {
    unwrap();
    if (s instanceof z.ZodArray) s = s.element as z.ZodType;
    else if (s instanceof z.ZodObject) s = (s.shape as Record<string, z.ZodType>)[String(step)]!;
  }
  unwrap();
  return s instanceof z.ZodObject ? Object.keys(s.shape) : [];
}

const pathText = (root: string, path: readonly PropertyKey[]) =>
  path.reduce<string>((text, step) => (typeof step === 'number' ? `${text}[${step}]` : `${text}.${String(step)}`), root);

/** The first shape problem of `settings` (the value of `root` in `.configu`), or undefined when the shape is right. */
export function shapeProblem(schema: z.ZodType, settings: unknown, root: string): ShapeProblem | undefined {
  const result = schema.safeParse(settings);
  if (result.success) return undefined;
  const issue = result.error.issues[0]!;
  if (issue.code === 'unrecognized_keys') {
    const key = issue.keys[0]!;
    return { path: pathText(root, [...issue.path, key]), message: unknownPropertyMessage(key, key, propertiesAt(schema, issue.path)) };
  }
  return { path: pathText(root, issue.path), message: issue.message };
}
