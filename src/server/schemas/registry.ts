/**
 * The schemas the server knows by name: the entries of `.configu`'s `schemas` map (name -> a `*.cfgu.json|yaml|yml`
 * file or a glob, relative to the `.configu` folder), read at start-up with the CLI's checks (config/named-schemas.ts).
 * One registry per process serves every use of them:
 *   - a command of POST /export may name one (`"schema": "app"`) instead of carrying it (./resolve.ts);
 *   - scopes with `labels` are judged by the labels these schemas give keys (../access/key-labels.ts, scopes.ts);
 *   - `GET /schemas` and `GET /schemas/{name}` list and answer them (../http/routes/schemas.ts).
 *
 * A schema that is missing or invalid at start-up stops it (ConfigurationError naming the file and the problem). An
 * entry naming a URL is not fetched: start-up warns, and requests cannot name it. Afterwards the files are watched
 * (./watch.ts): a valid change replaces the schema (listeners hear `changed`), an invalid one keeps the last good
 * version (listeners hear `failed`, with the file and the problem).
 *
 * Each version's schema object is deep-frozen (core/frozen.ts): the engine prepares it once and finds the prepared form
 * by identity afterwards (core/schema.ts), so naming a schema costs no serialising and no re-preparation.
 */
import { ConfigurationError } from '../../core/errors.js';
import { freezeDeep, labelsOf, prepareSchema, type Cfgu, type ConfigSchema } from '../../core/index.js';
import { readNamedSchema, SCHEMA_URL } from '../../config/named-schemas.js';
import type { LoadedConfiguration } from '../../config/types.js';
import { etagOf } from '../watch/etags.js';

/** Key name -> the labels one schema (or all the server's schemas, ../access/key-labels.ts) gives it. */
export type KeyLabels = ReadonlyMap<string, ReadonlySet<string>>;

/** One version of a named schema. */
export interface NamedSchema {
  readonly name: string;
  /** The entry as `.configu` resolved it (absolute path or glob). */
  readonly path: string;
  /** The files read (one, or what the glob matched), absolute. */
  readonly files: readonly string[];
  /** `{ keys }`, deep-frozen. */
  readonly schema: ConfigSchema;
  /** The labels this schema gives each of its keys. */
  readonly labels: KeyLabels;
  /** Every label of its keys, sorted. */
  readonly labelNames: readonly string[];
  readonly keyCount: number;
  /** What GET /schemas/{name} answers: the declaration as JSON (`{"keys":{...}}`), and its strong ETag. */
  readonly text: string;
  readonly etag: string;
}

/** What the registry tells its listeners after start-up. */
export type SchemaEvent =
  | { kind: 'changed'; name: string; schema: NamedSchema }
  | { kind: 'failed'; name: string; path: string; problem: string };

export type SchemaListener = (event: SchemaEvent) => void;

/** A version of the entry `name` from the files' current text. */
export function namedSchemaOf(name: string, path: string, files: readonly string[], keys: Record<string, Cfgu | null>): NamedSchema {
  const schema = freezeDeep({ keys }) as ConfigSchema;
  // Prepared now (and found by identity at the first request): readNamedSchema checked it, so this cannot throw.
  prepareSchema(schema);
  const labels = new Map<string, ReadonlySet<string>>();
  const all = new Set<string>();
  for (const key of Object.keys(keys)) {
    const cfgu = keys[key];
    const own = new Set(cfgu ? labelsOf(cfgu) : []);
    labels.set(key, own);
    for (const l of own) all.add(l);
  }
  const text = JSON.stringify(schema);
  return { name, path, files: Object.freeze([...files]), schema, labels, labelNames: [...all].sort(), keyCount: labels.size, text, etag: etagOf(text) };
}

export class NamedSchemas {
  private readonly current = new Map<string, NamedSchema>();
  /** Entries naming a URL: name -> URL. */
  readonly skipped: ReadonlyMap<string, string>;
  private readonly byObject = new WeakMap<object, NamedSchema>();
  private readonly listeners = new Set<SchemaListener>();
  /** Per entry: the problem last reported (one report per distinct problem, not one per look). */
  private readonly failing = new Map<string, string>();

  constructor(entries: Iterable<NamedSchema>, skipped: ReadonlyMap<string, string> = new Map()) {
    for (const s of entries) this.put(s);
    this.skipped = skipped;
  }

  /** No named schemas (an app built without `.configu`'s schemas). */
  static empty(): NamedSchemas {
    return new NamedSchemas([]);
  }

  /**
   * Read every entry of `configuration.schemas`. Throws ConfigurationError (property `schemas.<name>`) for the first
   * entry that cannot be read or is not a valid schema. `warnings` (for the start-up log) name the URL entries.
   */
  static load(configuration: Pick<LoadedConfiguration, 'file' | 'schemas'>): { schemas: NamedSchemas; warnings: string[] } {
    const entries: NamedSchema[] = [];
    const skipped = new Map<string, string>();
    const warnings: string[] = [];
    for (const [name, path] of Object.entries(configuration.schemas)) {
      if (SCHEMA_URL.test(path)) {
        skipped.set(name, path);
        warnings.push(`schema "${name}" is a URL, which the server does not fetch: requests cannot name it and its labels grant nothing`);
        continue;
      }
      const read = readNamedSchema(path);
      if (!read.ok) throw new ConfigurationError(`schema "${name}" cannot be read: ${read.problem}`, configuration.file, `schemas.${name}`);
      entries.push(namedSchemaOf(name, path, read.files, read.keys));
    }
    return { schemas: new NamedSchemas(entries, skipped), warnings };
  }

  private put(s: NamedSchema): void {
    this.current.set(s.name, s);
    this.byObject.set(s.schema, s);
  }

  /** The current version of `name`; undefined for a name the server does not hold. */
  get(name: string): NamedSchema | undefined {
    return this.current.get(name);
  }

  /** The names held, in `.configu`'s order. */
  names(): string[] {
    return [...this.current.keys()];
  }

  /** Every current version, in `.configu`'s order. */
  all(): NamedSchema[] {
    return [...this.current.values()];
  }

  get size(): number {
    return this.current.size;
  }

  /** Schemas whose file changed to something invalid since the version now serving was read. */
  staleCount(): number {
    return this.failing.size;
  }

  /**
   * The named schema a schema object is (a version the registry made, current or not); undefined for any other
   * object, e.g. a schema a request carried.
   */
  versionOf(schema: unknown): NamedSchema | undefined {
    return schema !== null && typeof schema === 'object' ? this.byObject.get(schema) : undefined;
  }

  /** Listen to changes and failed reloads; returns the way to stop listening. */
  on(listener: SchemaListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * Read the entry `name` again (the watcher calls this when its files may have changed). A valid text that differs
   * from the current one replaces it (`changed`); an invalid one is reported once (`failed`) and the current version
   * stays. Returns what listeners were told, if anything.
   */
  reload(name: string): SchemaEvent | undefined {
    const held = this.current.get(name);
    if (!held) return undefined;
    const read = readNamedSchema(held.path);
    let event: SchemaEvent | undefined;
    if (!read.ok) {
      if (this.failing.get(name) === read.problem) return undefined;
      this.failing.set(name, read.problem);
      event = { kind: 'failed', name, path: held.path, problem: read.problem };
    } else {
      this.failing.delete(name);
      const next = namedSchemaOf(name, held.path, read.files, read.keys);
      if (next.text === held.text && next.files.join('\0') === held.files.join('\0')) return undefined;
      this.put(next);
      event = { kind: 'changed', name, schema: next };
    }
    for (const l of this.listeners) l(event);
    return event;
  }
}
