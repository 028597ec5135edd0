/**
 * Schema files (`*.cfgu.json|yaml|yml`): several files or globs merged into one `keys` map, or a name from
 * `.configu`'s `schemas`.
 */
import { basename, dirname, resolve } from 'node:path';
import { readSchemaFileKeys, SCHEMA_FILE } from '../config/schema-file.js';
import { setOwn } from '../core/names.js';
import type { Cfgu, ConfigSchema } from '../core/index.js';
import type { LoadedConfiguration } from '../config/types.js';
import { flagError, UsageError } from './errors.js';
import { expandGlob, MAGIC } from './glob.js';
import { displayPath, existsFile } from './paths.js';

/** A schema read from one file. */
export interface SchemaFile {
  file: string;
  keys: Record<string, Cfgu | null>;
}

/** Read and validate one schema file. Throws UsageError naming the file, with one line per problem. */
export function readSchemaFile(file: string, cwd: string): SchemaFile {
  const read = readSchemaFileKeys(file);
  if (!read.ok) throw new UsageError(`schema file ${displayPath(file, cwd)}: ${read.problem}`, read.lines);
  return { file, keys: read.keys };
}

/** True when evaluating the schema runs expressions (`const`, `test`) or sandboxed checks (`pattern`, `schema`). */
export function schemaNeedsSandbox(schema: ConfigSchema): boolean {
  return Object.values(schema.keys).some(
    (c) => !!c && (c.const !== undefined || c.test !== undefined || c.pattern !== undefined || c.schema !== undefined),
  );
}

export interface ResolvedSchemas {
  schema: ConfigSchema;
  files: string[];
}

/**
 * Resolve `--schema` values (files, globs, or names of `.configu`'s `schemas`) and merge them into one `keys` map, in
 * the order given. A key declared by two files is an error naming both.
 */
export function loadSchemas(specs: string[], cwd: string, configuration: LoadedConfiguration | undefined): ResolvedSchemas {
  if (!specs.length) throw flagError('--schema is required: a *.cfgu.json|yaml|yml file, a glob, or a name from .configu\'s `schemas`');
  const files: string[] = [];
  for (const spec of specs) {
    // A schema's text where its file or name belongs (the HTTP API takes the object; the CLI reads files).
    if (/^\s*\{\s*("|\}|$)/.test(spec)) {
      throw new UsageError('--schema takes a *.cfgu.json|yaml|yml file, a glob or a name from .configu\'s `schemas`, not the schema itself: save it as a *.cfgu.json file and give that file');
    }
    let pattern = spec;
    let base = cwd;
    const named = configuration?.schemas && Object.prototype.hasOwnProperty.call(configuration.schemas, spec) ? configuration.schemas[spec] : undefined;
    if (named !== undefined) {
      pattern = named;
      base = configuration!.file ? dirname(configuration!.file) : cwd;
    }
    if (MAGIC.test(pattern)) {
      const matches = expandGlob(pattern, base).filter((f) => SCHEMA_FILE.test(basename(f)));
      if (!matches.length) throw new UsageError(`--schema "${spec}": no *.cfgu.json|yaml|yml file matches`);
      files.push(...matches);
      continue;
    }
    const file = resolve(base, pattern);
    if (!existsFile(file)) {
      const looksLikeName = named === undefined && !/[/\\.]/.test(spec);
      if (looksLikeName) {
        const names = Object.keys(configuration?.schemas ?? {});
        throw new UsageError(
          `--schema "${spec}": no such file, and ${configuration ? `.configu declares no schema named "${spec}" (declared: ${names.length ? names.map((n) => `"${n}"`).join(', ') : 'none'})` : 'no .configu file was found to look up a schema name'}`,
        );
      }
      throw new UsageError(`--schema "${spec}": ${displayPath(file, cwd)}: no such file`);
    }
    if (!SCHEMA_FILE.test(basename(file))) {
      throw new UsageError(`--schema "${spec}": schema files are named *.cfgu.json, *.cfgu.yaml or *.cfgu.yml`);
    }
    files.push(file);
  }
  const unique = [...new Set(files)];
  const keys: Record<string, Cfgu | null> = {};
  const owner = new Map<string, string>();
  for (const file of unique) {
    const s = readSchemaFile(file, cwd);
    for (const [key, cfgu] of Object.entries(s.keys)) {
      const first = owner.get(key);
      if (first !== undefined) {
        throw new UsageError(`key "${key}" is declared in both ${displayPath(first, cwd)} and ${displayPath(file, cwd)}`);
      }
      owner.set(key, file);
      setOwn(keys, key, cfgu);
    }
  }
  return { schema: { keys }, files: unique };
}
