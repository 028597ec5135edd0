/**
 * The README's walkthrough, run as written and as a newcomer with only the clone would: its install step (`npm
 * install -g .` in the checkout, into a temporary npm prefix whose bin folder is then first on PATH), its files
 * written into an empty folder, and its `$ ` command lines run in one bash session with nothing redefined (the proxy's
 * port is replaced by a free one). Each command's output (standard output and error together, as a terminal shows
 * them) must equal the documented lines, and once the documented stop has run, no process of the server is left.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, realpathSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { removeTempDirs, ROOT, tempDir, write } from './helpers.js';
import { killGroups, signalGroup, spawnGroup } from '../helpers/process-groups.js';
import { freePort } from '../helpers/private.js';

after(() => {
  killGroups();
  removeTempDirs();
});

interface Step {
  command: string;
  output: string;
}

function walkthrough(): { install: string[]; files: Array<{ name: string; text: string }>; steps: Step[] } {
  const doc = readFileSync(join(ROOT, 'README.md'), 'utf8');
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

/** The environment of a newcomer's shell: no CONFIGU_* from the developer's, npm's global prefix in `prefix`. */
function shellEnv(prefix: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  // A reader's shell has neither cfgu's settings nor the npm_config_* variables that `npm test` exports to its
  // scripts (npm_config_prefix=/usr among them, which beats NPM_CONFIG_PREFIX and would install into the machine).
  for (const k of Object.keys(env)) if (k.startsWith('CONFIGU_') || /^npm_/i.test(k)) delete env[k];
  return {
    ...env,
    NPM_CONFIG_PREFIX: prefix,
    PATH: `${join(prefix, 'bin')}:${env.PATH ?? ''}`,
    // The link needs nothing from the registry, and the checkout is already built: rebuilding dist/ here would
    // rewrite it under the suites running beside this one.
    npm_config_offline: 'true',
    npm_config_ignore_scripts: 'true',
    npm_config_audit: 'false',
    npm_config_fund: 'false',
    npm_config_update_notifier: 'false',
  };
}

/** Run a bash script in its own process group (stopped by after() if it outlives the test). */
function bash(script: string, cwd: string, env: NodeJS.ProcessEnv, timeoutMs: number): Promise<{ code: number | null; output: string }> {
  const child = spawnGroup('bash', ['-c', script], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (output += d));
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (output += d));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      signalGroup(child.pid!);
      reject(new Error(`timed out after ${timeoutMs} ms; output so far:\n${output}`));
    }, timeoutMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
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

test('the README walkthrough runs as documented, from the install step to the stopped server', { timeout: 240_000 }, async () => {
  const { install, files, steps } = walkthrough();
  assert.deepEqual(install, ['npm install -g .']);
  assert.deepEqual(files.map((f) => f.name), ['app.cfgu.json', '.configu']);
  assert.ok(steps.length >= 8, `found ${steps.length} commands`);
  assert.ok(steps.some((s) => s.command.includes('cfgu serve')) && steps.some((s) => s.command.startsWith('curl')));
  assert.ok(steps.every((s) => !/\bnpx\b/.test(s.command)), 'the walkthrough runs the installed cfgu');

  // The install step, verbatim, in the checkout.
  const prefix = tempDir('cfgu-walkthrough-prefix-');
  const env = shellEnv(prefix);
  const installed = await bash(`set -e\n${install.join('\n')}`, ROOT, env, 120_000);
  assert.equal(installed.code, 0, installed.output);
  const bin = join(prefix, 'bin', 'cfgu');
  assert.ok(existsSync(bin), `npm put cfgu in ${join(prefix, 'bin')}`);
  assert.equal(realpathSync(bin), realpathSync(join(ROOT, 'bin', 'cfgu.js')), 'the installed cfgu is the clone');

  const dir = tempDir('cfgu-walkthrough-');
  for (const f of files) write(join(dir, f.name), f.text);
  const port = String(await freePort());
  const marker = (i: number) => `@@cfgu-walkthrough-step-${i}@@`;
  const script = [
    'set +o pipefail', // as in an interactive shell
    'exec 2>&1',
    'echo "@@cfgu: $(command -v cfgu)"',
    ...steps.flatMap((s, i) => [`echo '${marker(i)}'`, s.command.replaceAll('8080', port)]),
    `echo '${marker(steps.length)}'`,
  ].join('\n');
  const r = await bash(script, dir, env, 180_000);
  assert.ok(r.output.startsWith(`@@cfgu: ${bin}\n`), `cfgu on PATH is the installed one:\n${r.output.split('\n')[0]}`);
  const outputs: string[] = [];
  for (let i = 0; i < steps.length; i++) {
    const from = r.output.indexOf(`${marker(i)}\n`);
    const to = r.output.indexOf(`${marker(i + 1)}\n`);
    assert.ok(from !== -1 && to !== -1, `step ${i} (${steps[i]!.command}) ran; output:\n${r.output}`);
    outputs.push(r.output.slice(from + marker(i).length + 1, to));
  }
  steps.forEach((s, i) => assert.equal(outputs[i], s.output, `the output of: ${s.command}`));
  assert.equal(readFileSync(join(dir, '.env'), 'utf8'), "GREETING=hello\nSUBJECT=world\nPORT=4000\nMESSAGE='hello, world!'\n");

  // The documented stop waited for the server: every process that logged (the primary and its workers) is gone.
  const pids = new Set<number>();
  for (const line of readFileSync(join(dir, 'serve.log'), 'utf8').split('\n')) {
    if (line.startsWith('{')) pids.add((JSON.parse(line) as { pid: number }).pid);
  }
  assert.ok(pids.size >= 1, 'serve.log names the server processes');
  for (const pid of pids) assert.equal(alive(pid), false, `server process ${pid} still runs after the documented stop`);
  const refused = await new Promise<boolean>((resolve) => {
    const c = connect(Number(port), '127.0.0.1');
    c.once('connect', () => (c.destroy(), resolve(false)));
    c.once('error', () => resolve(true));
  });
  assert.equal(refused, true, 'nothing listens on the port any more');
});
