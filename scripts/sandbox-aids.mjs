// The sandbox's start-up aids next to its bundle (src/expressions/child/prepared.ts): made with the running Node, in a
// process of their own (isolated-vm needs --no-node-snapshot). Run by scripts/build.mjs after bundling, and by
// scripts/postinstall.mjs in an installed package (whose dist/ was built with another Node, perhaps: V8 uses a code
// cache only with the Node that made it). Without them sandboxes start the slow way, so a failure (no isolated-vm
// build for this Node yet) is a warning, not a failure. Needs only Node and the built dist/, no development tool.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

/** Make the aids in `root`/dist; the summary for the build's last line ('' when dist/ has no preparing step). */
export function prepareSandboxAids(root, who = 'cfgu build') {
  if (!existsSync(join(root, 'dist/sandbox-prepare.js'))) return '';
  const r = spawnSync(process.execPath, ['--no-node-snapshot', join(root, 'dist/sandbox-prepare.js')], { cwd: root, encoding: 'utf8' });
  const line = (r.stdout ?? '').trim().split('\n').pop() ?? '';
  if (r.status === 0 && line.startsWith('{')) {
    const p = JSON.parse(line);
    return p.plan
      ? `; sandbox warm-up plan of ${p.plan} calls, code cache ${(p.cache.bytes / 2 ** 20).toFixed(1)} MiB (start-up ${p.startupMs.full} -> ${p.startupMs.prepared} ms)`
      : `; sandbox start-up aids: ${p.why ?? 'none made'}`;
  }
  console.warn(`${who}: warning: the sandbox start-up aids were not made (sandboxes start without them): ${(r.stderr || r.stdout || r.error?.message || '').trim().split('\n')[0]}`);
  return '';
}
