/**
 * Schema files (`*.cfgu.json|yaml|yml`): several files or globs merged into one `keys` map, or a name from
 * `.configu`'s `schemas`.
 */
import { readFileSync } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import { parseYaml } from '../config/yaml.js';
import { InputError, prepareSchema } from '../core/index.js';
import { setOwn } from '../core/names.js';
import type { Cfgu, ConfigSchema } from '../core/index.js';
import type { LoadedConfiguration } from '../config/types.js';
import { flagError, UsageError } from './errors.js';
import { expandGlob, MAGIC } from './glob.js';
import { parseJsonText } from './json-text.js';
import { displayPath, existsFile } from './paths.js';

const SCHEMA_FILE = /\.cfgu\.(json|ya?ml)$/;

/** A schema read from one file. */
export interface SchemaFile {
  file: string;
  keys: Record<string, Cfgu | null>;
}

/** Read and validate one schema file. Throws UsageError naming the file, with one line per problem. */
export function readSchemaFile(file: string, cwd: string): SchemaFile {
  const shown = displayPath(file, cwd);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new UsageError(`schema file ${shown}: ${code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'is a folder' : (e as Error).message}`);
  }
  let data: unknown;
  if (/\.json$/.test(file)) {
    // A .json file is strict JSON, and its errors are told in JSON's words.
    const parsed = parseJsonText(text);
    if (!parsed.ok) {
      const { line, column, message } = parsed.problem;
      throw new UsageError(`schema file ${shown}: line ${line}, column ${column}: not valid JSON: ${message}`);
    }
    data = parsed.value;
  } else {
    const parsed = parseYaml(text, 1000);
    if (!parsed.ok) {
      const { line, column, message } = parsed.problem;
      throw new UsageError(`schema file ${shown}: ${line ? `line ${line}, column ${column}: ` : ''}not valid YAML: ${message}`);
    }
    data = parsed.value;
  }
  try {
    prepareSchema(data);
  } catch (e) {
    if (!(e instanceof InputError)) throw e;
    const issues = e.issues.length ? e.issues : [{ path: '', message: e.message }];
    if (issues.length === 1) throw new UsageError(`schema file ${shown}: ${issues[0]!.path ? `${issues[0]!.path}: ` : ''}${issues[0]!.message}`);
    throw new UsageError(
      `schema file ${shown}: ${issues.length} problems:`,
      issues.map((i) => `  ${i.path ? `${i.path}: ` : ''}${i.message}`),
    );
  }
  return { file, keys: (data as ConfigSchema).keys };
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
