/**
 * Scopes: what a credential may read. A grant names the stores a command may name, the set paths it may name (as
 * patterns), and optionally the keys or labels its schema may declare. A principal (who a request is for) holds
 * either full access (preshared keys, or no authentication at all) or a list of grants; a command is allowed when
 * one grant covers all of it. The check looks at the request body only, so it runs before any store is read.
 *
 * A scope only narrows: which labels a key carries is read from the schemas the server holds (key-labels.ts), never
 * from the schema the caller sends, so writing `label: [public]` on a secret key in a request grants nothing. Each
 * grant is compiled with the set of keys its labels allow; a request only looks its keys up in it.
 */
import { parseSet, type EvalCommandInput, type RefusedCommand } from '../../core/index.js';
import { keysWithLabels, NO_KEY_LABELS, type KeyLabels } from './key-labels.js';

export interface Grant {
  /** Store names; `*` for every store. */
  stores: string[];
  /** Set path patterns: `prod/**`, `staging`, `* /eu` (without the space); `""` or `/` for the root set. */
  sets: string[];
  /**
   * When given (with or without `keys`), only keys carrying one of these labels in the server's own schemas, or named
   * in `keys`, may be declared.
   */
  labels?: string[];
  /** When given, only these keys (patterns with `*`) may be declared (or keys with a label of `labels`). */
  keys?: string[];
  /** May read `GET /metrics` (without the metrics key). */
  metrics?: boolean;
  /** May also write (POST /upsert, POST /rollback) the keys it covers, in the stores and sets it covers. */
  write?: boolean;
  /** With `write`: may make a write that breaks a schema (`allowBreaking: true`). */
  breaking?: boolean;
}

/**
 * A grant as the operator wrote it, for `GET /session`: only what it allows, never the credential it belongs to (no
 * name, token hash or JWT claim).
 */
export interface WrittenGrant {
  stores: readonly string[];
  sets: readonly string[];
  keys?: readonly string[];
  labels?: readonly string[];
  write: boolean;
  breaking: boolean;
  metrics: boolean;
}

/** A grant compiled for matching. */
export interface CompiledGrant {
  /** The grant as written (GET /session shows it). */
  written: WrittenGrant;
  anyStore: boolean;
  stores: ReadonlySet<string>;
  sets: RegExp[];
  /** The keys the grant's labels allow (from the server's schemas); undefined when the grant lists no labels. */
  labelKeys: ReadonlySet<string> | undefined;
  /** The grant's labels as written (a named schema's keys are judged by that schema's own labels). */
  labelNames: readonly string[] | undefined;
  keys: RegExp[] | undefined;
  metrics: boolean;
  /** The set patterns ending in `**` (`prod/**`, `**`): each covers every set below a set it matches (POST /matrix). */
  subtrees?: RegExp[];
  write: boolean;
  breaking: boolean;
}

/** `expiresAt` (a JWT's): its `exp`, in seconds since the epoch (without the clock skew the server allows). */
export type Principal =
  | { kind: 'anonymous' | 'preshared'; subject: string | null; identity: string; grants: 'all' }
  | { kind: 'credential' | 'jwt'; subject: string; identity: string; grants: readonly CompiledGrant[]; metrics: boolean; expiresAt?: number };

/** Who a request is for, or why there is none (the reason and its log level are for the operator, never the client). */
export type AuthResult = { principal: Principal } | { reason: string; level?: 'warn' | 'error' };

/** Whether a principal may read `GET /metrics` when no metrics key is set: full access, or a grant that says so. */
export const mayReadMetrics = (principal: Principal): boolean => principal.grants === 'all' || principal.metrics;

const escape = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** A segment with `*` wildcards (each matches within one segment). */
const segmentRegex = (segment: string, what: string): string => {
  if (segment === '*') return '[^/]+';
  return segment.split('*').map(escape).join(what);
};

/**
 * Compile a set pattern. Segments are `/`-separated: `*` matches one segment, `**` any number of segments (zero
 * included, so `prod/**` matches `prod` itself), `ab*` part of one. The root set is matched only by `""` or `/`.
 * Returns a problem message for a pattern that is not a set path with wildcards.
 */
export function compileSetPattern(pattern: string): RegExp | { problem: string } {
  let p = pattern.trim();
  if (p === '' || p === '/') return /^$/;
  if (p.startsWith('/')) p = p.slice(1);
  if (p.endsWith('/')) p = p.slice(0, -1);
  let re = '';
  for (const segment of p.split('/')) {
    if (segment === '**') {
      re += '(?:/[^/]+)*';
      continue;
    }
    if (segment === '') return { problem: `"${pattern}" is not a set pattern (it has an empty segment)` };
    const literal = segment.replace(/\*/g, 'x');
    const checked = parseSet(literal);
    if ('problem' in checked || segment.includes('**')) return { problem: `"${pattern}" is not a set pattern (segments of letters, digits, _ and -, with * or **)` };
    re += `/${segmentRegex(segment, '[^/]*')}`;
  }
  // Matched against "/" + set path; a non-root pattern never matches the root (whose subject is "").
  return new RegExp(`^${re}$`);
}

/** Compile a key pattern (`*` matches any run of characters). */
export function compileKeyPattern(pattern: string): RegExp {
  return new RegExp(`^${pattern.split('*').map(escape).join('.*')}$`);
}

/** Compile a grant; `keyLabels` is the label table of the server's schemas (labels grant nothing without one). */
export function compileGrant(g: Grant, keyLabels: KeyLabels = NO_KEY_LABELS): CompiledGrant {
  const written: WrittenGrant = Object.freeze({
    stores: Object.freeze([...g.stores]),
    sets: Object.freeze([...g.sets]),
    ...(g.keys ? { keys: Object.freeze([...g.keys]) } : {}),
    ...(g.labels ? { labels: Object.freeze([...g.labels]) } : {}),
    write: g.write === true,
    breaking: g.write === true && g.breaking === true,
    metrics: g.metrics === true,
  });
  return {
    written,
    anyStore: g.stores.includes('*'),
    stores: new Set(g.stores),
    sets: g.sets.map((s) => {
      const r = compileSetPattern(s);
      if (!(r instanceof RegExp)) throw new TypeError(r.problem);
      return r;
    }),
    labelKeys: g.labels ? keysWithLabels(keyLabels, g.labels) : undefined,
    labelNames: g.labels ? [...g.labels] : undefined,
    keys: g.keys ? g.keys.map(compileKeyPattern) : g.labels ? [] : undefined,
    metrics: g.metrics === true,
    subtrees: g.sets.filter((s) => /(^|\/)\*\*$/.test(s.trim().replace(/\/$/, ''))).map((s) => compileSetPattern(s) as RegExp),
    write: g.write === true,
    breaking: g.write === true && g.breaking === true,
  };
}

/** The subject a set path is matched as: "" for the root, "/a/b" for `a/b`. */
export function setSubject(set: unknown): string | undefined {
  const parsed = parseSet(typeof set === 'string' ? set : '');
  if ('problem' in parsed) return undefined;
  return parsed.path === '' ? '' : `/${parsed.path}`;
}

/**
 * A schema of the server's own (a named schema, ../schemas/registry.ts) as the scope check sees it: the labels it gives
 * each of its keys. `ServerSchemaOf` says which schema objects are such (by identity), for a command whose name was
 * resolved to one.
 */
export type ServerSchemaOf = (schema: unknown) => { readonly labels: KeyLabels } | undefined;

/** Per grant: the named-schema versions it covers whole (computed once per version). */
const coverage = new WeakMap<CompiledGrant, WeakMap<object, boolean>>();

/** Every key of a server schema is named by the grant's `keys` or carries one of its labels in that schema. */
export function grantCoversServerSchema(g: CompiledGrant, named: { readonly labels: KeyLabels }): boolean {
  if (!g.keys) return true;
  let known = coverage.get(g);
  if (!known) coverage.set(g, (known = new WeakMap()));
  let covers = known.get(named);
  if (covers === undefined) {
    covers = true;
    for (const [key, labels] of named.labels) {
      if (g.labelNames?.some((l) => labels.has(l))) continue;
      if (g.keys.some((k) => k.test(key))) continue;
      covers = false;
      break;
    }
    known.set(named, covers);
  }
  return covers;
}

/** Whether a principal may see a server schema at all: some grant of it covers every key of the schema. */
export function mayUseServerSchema(principal: Principal, named: { readonly labels: KeyLabels }): boolean {
  return principal.grants === 'all' || principal.grants.some((g) => grantCoversServerSchema(g, named));
}

/**
 * Every key the command declares is named by the grant's `keys` or carries one of its labels in the server's schemas:
 * a command whose schema is one of the server's (`serverSchema` knows it) by the labels of that schema, any other by
 * the label table of all of them.
 */
function keysCovered(g: CompiledGrant, command: EvalCommandInput, serverSchema: ServerSchemaOf | undefined): boolean {
  if (!g.keys) return true;
  const named = serverSchema?.(command.schema);
  if (named) return grantCoversServerSchema(g, named);
  const keys = (command.schema as { keys?: Record<string, unknown> } | undefined)?.keys ?? {};
  // The caller's declarations (its `label` included) are not read: only the key names.
  for (const key of Object.keys(keys)) {
    if (g.labelKeys?.has(key)) continue;
    if (g.keys.some((k) => k.test(key))) continue;
    return false;
  }
  return true;
}

/**
 * The commands of a pipeline the principal may not run, in order (empty: all allowed). `defaultStore` is the name of
 * the store a command without `store` reads (undefined when there is none). `serverSchema` tells the schemas of the
 * server's own that commands naming one were given (their keys are judged by that schema's labels).
 */
export function refusedCommands(
  principal: Principal,
  commands: readonly EvalCommandInput[],
  defaultStore: string | undefined,
  serverSchema?: ServerSchemaOf,
): RefusedCommand[] {
  if (principal.grants === 'all') return [];
  const refused: RefusedCommand[] = [];
  for (let i = 0; i < commands.length; i++) {
    const command = commands[i]!;
    const store = typeof command.store === 'string' ? command.store : defaultStore;
    const setText = typeof command.set === 'string' ? command.set : '';
    const subject = setSubject(setText);
    const ok =
      subject !== undefined &&
      principal.grants.some(
        (g) => (g.anyStore || (store !== undefined && g.stores.has(store))) && g.sets.some((r) => r.test(subject)) && keysCovered(g, command, serverSchema),
      );
    if (!ok) refused.push({ command: i, store: store ?? null, set: subject === undefined ? setText : subject.slice(1) });
  }
  return refused;
}

/** The stores a principal may name, to filter the known names an unknown-store answer lists. */
export function visibleStores(principal: Principal, names: readonly string[]): string[] {
  if (principal.grants === 'all') return [...names];
  return names.filter((n) => (principal.grants as readonly CompiledGrant[]).some((g) => g.anyStore || g.stores.has(n)));
}

/**
 * Whether the principal may list the sets under `prefix` in `store` (POST /matrix with a prefix): one grant must cover
 * the store, every key `schema` declares, and the prefix's whole subtree, which only a set pattern ending in `**`
 * (`prod/**`, `**`) does: matching the prefix, it matches every set below it. A grant of single sets (`prod`,
 * `prod/*`) does not, as the listing would name sets outside it.
 */
export function mayListPrefix(principal: Principal, store: string | undefined, prefix: string, schema: unknown, serverSchema?: ServerSchemaOf): boolean {
  if (principal.grants === 'all') return true;
  const subject = setSubject(prefix);
  if (subject === undefined) return false;
  const command = { schema } as EvalCommandInput;
  return principal.grants.some(
    (g) => (g.anyStore || (store !== undefined && g.stores.has(store))) && (g.subtrees ?? []).some((r) => r.test(subject)) && keysCovered(g, command, serverSchema),
  );
}
