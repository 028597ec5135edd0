/**
 * Which isolated-vm build this Node runs. No single isolated-vm release covers every supported Node major: 5.0.x
 * compiles on Node 20 only, 6.x needs Node 22 or later, 7.x Node 24 or later. package.json therefore installs each
 * line under an alias of its own, as an optional dependency: on a given Node the builds that cannot work there fail
 * their install step and npm leaves them out, without failing the install. One lockfile serves every Node.
 *
 * The loader takes the newest line whose minimum Node major the running Node meets and that is installed and loads.
 * A checkout whose node_modules predates the aliases still has a plain `isolated-vm`, tried last.
 */
import { createRequire } from 'node:module';
import type IsolatedVm from 'isolated-vm';

export type Ivm = typeof IsolatedVm;

/** The aliases in package.json's optionalDependencies, newest first, with the oldest Node major each supports. */
export const SANDBOX_BUILDS: ReadonlyArray<{ alias: string; minNodeMajor: number }> = [
  { alias: 'isolated-vm-node24', minNodeMajor: 24 },
  { alias: 'isolated-vm-node22', minNodeMajor: 22 },
  { alias: 'isolated-vm-node20', minNodeMajor: 20 },
  { alias: 'isolated-vm', minNodeMajor: 0 },
];

export interface SandboxBuild {
  /** The package name it was installed under (an alias such as `isolated-vm-node24`). */
  alias: string;
  /** isolated-vm's own version. */
  version: string;
  ivm: Ivm;
}

const nodeMajor = (): number => Number(process.versions.node.split('.')[0]);

let loaded: SandboxBuild | undefined;

/** Loads (once) the isolated-vm build for the running Node; throws with every attempt listed when none loads. */
export function loadSandboxBuild(): SandboxBuild {
  if (loaded) return loaded;
  const require = createRequire(import.meta.url);
  const major = nodeMajor();
  const tried: string[] = [];
  for (const { alias, minNodeMajor } of SANDBOX_BUILDS) {
    if (major < minNodeMajor) continue;
    try {
      const ivm = require(alias) as Ivm;
      const { version } = require(`${alias}/package.json`) as { version: string };
      loaded = { alias, version, ivm };
      return loaded;
    } catch (error) {
      tried.push(`${alias}: ${(error as { code?: string }).code ?? (error as Error).message.split('\n')[0]}`);
    }
  }
  throw new Error(`no isolated-vm build loads on Node ${process.versions.node} (${tried.join('; ')})`);
}

/**
 * "isolated-vm 5.0.4 (isolated-vm-node20)": the build the sandbox children will load, found from the installed
 * packages without loading the native module (so the server process does not pay for it); for `cfgu --version` and
 * the start-up log line.
 */
export function describeSandboxBuild(): string {
  const require = createRequire(import.meta.url);
  const major = nodeMajor();
  for (const { alias, minNodeMajor } of SANDBOX_BUILDS) {
    if (major < minNodeMajor) continue;
    try {
      const { version } = require(`${alias}/package.json`) as { version: string };
      return `isolated-vm ${version} (${alias})`;
    } catch {
      // not installed on this Node: try the next line
    }
  }
  return 'unavailable (no isolated-vm build is installed for this Node)';
}
