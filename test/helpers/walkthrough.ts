/**
 * The README's walkthrough ("Walkthrough: from an empty folder to a running proxy"), read from README.md and run as
 * written: its install block (`<!-- install -->`), its files (`<!-- file: NAME -->`) and the `$ ` lines of its
 * `console` blocks, each followed by the output it must print. test/deploy/package.test.ts runs it in an empty folder
 * holding only the packed tarball, on each Node it installs the package on.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { spawnGroup } from './process-groups.js';

export interface Step {
  command: string;
  output: string;
}

export interface Walkthrough {
  install: string[];
  files: Array<{ name: string; text: string }>;
  steps: Step[];
}

/** The walkthrough section of the README at `root`, taken apart. */
export function readWalkthrough(root: string): Walkthrough {
  const doc = readFileSync(join(root, 'README.md'), 'utf8');
  const start = doc.indexOf('\n## Walkthrough');
  assert.ok(start !== -1, 'README.md has a Walkthrough section');
  const next = doc.indexOf('\n## ', start + 1);
  const section = doc.slice(start, next === -1 ? undefined : next);
  const install = [...section.matchAll(/<!-- install -->\n```sh\n([\s\S]*?)```/g)].flatMap((m) => m[1]!.split('\n').filter((l) => l.trim() !== ''));
  const files = [...section.matchAll(/<!-- file: (\S+) -->\n```\w*\n([\s\S]*?)```/g)].map((m) => ({ name: m[1]!, text: m[2]! }));
  const steps: Step[] = [];
  for (const block of section.matchAll(/```console\n([\s\S]*?)```/g)) {
    for (const line of block[1]!.split('\n')) {
      if (line.startsWith('$ ')) steps.push({ command: line.slice(2), output: '' });
      else if (line !== '' || steps.at(-1)?.output) steps.at(-1)!.output += `${line}\n`;
    }
  }
  for (const s of steps) s.output = s.output.replace(/\n+$/, '\n').replace(/^\n$/, '');
  return { install, files, steps };
}

/** Run a bash script in its own process group (stopped by killGroups() if it outlives the test). */
function bash(script: string, cwd: string, env: NodeJS.ProcessEnv): Promise<{ code: number | null; output: string }> {
  const child = spawnGroup('bash', ['-c', script], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (output += d));
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (output += d));
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    // A server the script left behind is not stopped here (the checks below must see it): killGroups() does.
    child.on('close', (code) => resolve({ code, output }));
  });
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
};

/**
 * In one bash session in `dir` (standard error merged into standard output, as a terminal shows them): the install
 * lines, stopping at the first that fails, then the files written, then every `$ ` line with 8080 replaced by `port`
 * and nothing redefined. Each command's output must equal the documented lines. Then: `cfgu` on the session's PATH
 * was the folder's `node_modules/.bin/cfgu`, `node` was `nodeVersion`, and once the documented stop has run no
 * process of the server is left and nothing listens on the port.
 */
export async function runWalkthrough(w: Walkthrough, dir: string, env: NodeJS.ProcessEnv, port: number, nodeVersion: string): Promise<void> {
  const marker = (i: number) => `@@cfgu-walkthrough-step-${i}@@`;
  const end = '@@cfgu-walkthrough-file@@';
  assert.ok(w.files.every((f) => !f.text.includes(end) && /^[\w.-]+$/.test(f.name)));
  const script = [
    'exec 2>&1',
    'set -e',
    ...w.install,
    // The files, written once the install is done (as the README goes), with the shell's here-documents.
    ...w.files.map((f) => `cat > '${f.name}' <<'${end}'\n${f.text}${end}`),
    'set +e +o pipefail', // as in an interactive shell
    'echo "@@cfgu: $(command -v cfgu)"',
    'echo "@@node: $(node --version)"',
    ...w.steps.flatMap((s, i) => [`echo '${marker(i)}'`, s.command.replaceAll('8080', String(port))]),
    `echo '${marker(w.steps.length)}'`,
  ].join('\n');
  const r = await bash(script, dir, env);
  assert.equal(r.code, 0, `the walkthrough's session failed:\n${r.output}`);
  assert.ok(r.output.includes(`\n@@cfgu: ${join(dir, 'node_modules/.bin/cfgu')}\n@@node: v${nodeVersion}\n`), `cfgu on PATH is the installed one, on Node ${nodeVersion}:\n${r.output}`);
  const outputs: string[] = [];
  for (let i = 0; i < w.steps.length; i++) {
    const from = r.output.indexOf(`${marker(i)}\n`);
    const to = r.output.indexOf(`${marker(i + 1)}\n`);
    assert.ok(from !== -1 && to !== -1, `step ${i} (${w.steps[i]!.command}) ran; output:\n${r.output}`);
    outputs.push(r.output.slice(from + marker(i).length + 1, to));
  }
  w.steps.forEach((s, i) => assert.equal(outputs[i], s.output, `the output of: ${s.command}`));
  for (const f of w.files) assert.equal(readFileSync(join(dir, f.name), 'utf8'), f.text, `${f.name} as the README writes it`);

  // The documented stop waited for the server: every process that logged (the primary and its workers) is gone.
  const pids = new Set<number>();
  for (const line of readFileSync(join(dir, 'serve.log'), 'utf8').split('\n')) {
    if (line.startsWith('{')) pids.add((JSON.parse(line) as { pid: number }).pid);
  }
  assert.ok(pids.size >= 1, 'serve.log names the server processes');
  for (const pid of pids) assert.equal(alive(pid), false, `server process ${pid} still runs after the documented stop`);
  const refused = await new Promise<boolean>((resolve) => {
    const c = connect(port, '127.0.0.1');
    c.once('connect', () => (c.destroy(), resolve(false)));
    c.once('error', () => resolve(true));
  });
  assert.equal(refused, true, 'nothing listens on the port any more');
}
