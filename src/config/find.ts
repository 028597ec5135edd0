/** Where the store-definition file is: an explicit path, else CONFIGU_CONFIG / CONFIGU_CONFIGURATION, else the nearest
 * `.configu` walking up from the working folder. */
import { statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';

export const CONFIG_FILE_NAME = '.configu';

/** What `serve`, `eval` and `upsert` say when `findConfigFile` finds nothing. */
export const NO_CONFIG_FILE = 'no .configu file found: pass --config PATH, set CONFIGU_CONFIG, or create a .configu in this folder or a parent';

export interface FindConfigFileOptions {
  /** `--config PATH` (relative to `cwd`). Returned even when it does not exist: loading reports that clearly. */
  explicit?: string | undefined;
  env?: Record<string, string | undefined>;
  cwd?: string;
}

const isFile = (p: string): boolean => {
  try {
    return statSync(p).isFile();
  } catch {
    return false;
  }
};

/** The absolute path of the `.configu` to load, or undefined when there is none. Never throws. */
export function findConfigFile(options: FindConfigFileOptions = {}): string | undefined {
  const env = options.env ?? process.env;
  const cwd = resolve(options.cwd ?? process.cwd());
  const explicit = options.explicit || env.CONFIGU_CONFIG || env.CONFIGU_CONFIGURATION;
  if (explicit) return resolve(cwd, explicit);
  let dir = cwd;
  for (;;) {
    const candidate = join(dir, CONFIG_FILE_NAME);
    if (isFile(candidate)) return candidate;
    const parent = dirname(dir);
    if (parent === dir) return undefined;
    dir = parent;
  }
}
