/** File-system checks and path display shared by the command-line modules. */
import { statSync } from 'node:fs';
import { isAbsolute, relative } from 'node:path';

/** A path as the user would like to read it: relative to the working folder when inside it. */
export function displayPath(file: string, cwd = process.cwd()): string {
  const rel = relative(cwd, file);
  return rel && !rel.startsWith('..') && !isAbsolute(rel) ? rel : file;
}

export const existsFile = (p: string): boolean => {
  try {
    return statSync(p).isFile();
  } catch {
    return false;
  }
};
