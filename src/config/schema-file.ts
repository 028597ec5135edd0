/**
 * Reading one schema file (`*.cfgu.json|yaml|yml`): strict JSON or YAML, then the engine's schema check. Shared by
 * the CLI (`--schema`, src/cli/schema-files.ts) and the server (the label table of `.configu`'s `schemas`,
 * src/server/key-labels.ts); each words the file's name its own way around the problem returned here.
 */
import { readFileSync } from 'node:fs';
import { InputError, prepareSchema, type Cfgu, type ConfigSchema } from '../core/index.js';
import { parseJsonText } from './json-text.js';
import { parseYaml } from './yaml.js';

/** The names a schema file may have. */
export const SCHEMA_FILE = /\.cfgu\.(json|ya?ml)$/;

/** A schema file's keys, or what is wrong with it (`problem`, with one line per issue in `lines` when several). */
export type SchemaFileText = { ok: true; keys: Record<string, Cfgu | null> } | { ok: false; problem: string; lines: string[] };

/** Read, parse and check one schema file. Never throws for a problem of the file itself. */
export function readSchemaFileKeys(file: string): SchemaFileText {
  const fail = (problem: string, lines: string[] = []): SchemaFileText => ({ ok: false, problem, lines });
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    return fail(code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'is a folder' : (e as Error).message);
  }
  let data: unknown;
  if (/\.json$/.test(file)) {
    // A .json file is strict JSON, and its errors are told in JSON's words.
    const parsed = parseJsonText(text);
    if (!parsed.ok) {
      const { line, column, message } = parsed.problem;
      return fail(`line ${line}, column ${column}: not valid JSON: ${message}`);
    }
    data = parsed.value;
  } else {
    const parsed = parseYaml(text, 1000);
    if (!parsed.ok) {
      const { line, column, message } = parsed.problem;
      return fail(`${line ? `line ${line}, column ${column}: ` : ''}not valid YAML: ${message}`);
    }
    data = parsed.value;
  }
  try {
    prepareSchema(data);
  } catch (e) {
    if (!(e instanceof InputError)) throw e;
    const issues = e.issues.length ? e.issues : [{ path: '', message: e.message }];
    if (issues.length === 1) return fail(`${issues[0]!.path ? `${issues[0]!.path}: ` : ''}${issues[0]!.message}`);
    return fail(
      `${issues.length} problems:`,
      issues.map((i) => `  ${i.path ? `${i.path}: ` : ''}${i.message}`),
    );
  }
  return { ok: true, keys: (data as ConfigSchema).keys };
}
