/**
 * Glob expansion for `--schema` and for `.configu`'s `schemas` (tinyglobby: `*`, `?`, `[...]`, `{a,b}`, and `**` for
 * any number of folders).
 */
import { resolve, sep } from 'node:path';
import { globSync } from 'tinyglobby';

/** Characters that make a `--schema` value a glob. */
export const MAGIC = /[*?[{]/;

/**
 * Files matching a glob, sorted, as absolute paths. Relative patterns resolve against `cwd`. Names starting with `.`
 * match only a segment that starts with `.`; `**` does not descend into hidden folders, nor into `node_modules` unless
 * the pattern names it.
 */
export function expandGlob(pattern: string, cwd: string): string[] {
  // The folders before the first segment with a glob character are the walk's root, so an absolute pattern or one
  // starting with `..` is walked from where it points, not from `cwd`.
  const segments = resolve(cwd, pattern).split(sep);
  let i = 0;
  while (i < segments.length - 1 && !MAGIC.test(segments[i]!)) i++;
  const root = segments.slice(0, i).join(sep) || sep;
  // picomatch reads `(...)` as a regular-expression group even without extglobs: escaped, parentheses are literal.
  return globSync(segments.slice(i).join('/').replace(/[()]/g, '\\$&'), {
    cwd: root,
    absolute: true,
    onlyFiles: true,
    expandDirectories: false,
    extglob: false, // `(`, `)`, `+`, `@` and `!` are ordinary characters in file names
    ignore: /(^|[/\\])node_modules([/\\]|$)/.test(pattern) ? [] : ['**/node_modules/**'],
  }).sort();
}
