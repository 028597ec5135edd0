/**
 * docs/server.md, "Trying it with curl" (under "Watching for changes"): its bash blocks run as written (the port
 * replaced by a free one) against the built `cfgu serve` in a copy of examples/, with `cfgu` on the PATH; the output
 * must equal the documented text (the stream's heartbeat comments aside).
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { cpSync, readFileSync, writeFileSync, chmodSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { BIN, killChildren, removeTempDirs, ROOT, serveOnFreePort, tempDir, waitForStatus } from '../server/helpers.js';
import { requireOrSkip } from '../helpers/services.js';
import { waitFor } from '../helpers/wait.js';

const groups: ChildProcess[] = [];
after(async () => {
  for (const g of groups) {
    try {
      if (g.pid !== undefined && g.exitCode === null) process.kill(-g.pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
  await killChildren();
  removeTempDirs();
});

function blocks(): Array<{ lang: string; text: string }> {
  const doc = readFileSync(join(ROOT, 'docs', 'server.md'), 'utf8');
  const start = doc.indexOf('\n### Trying it with curl');
  assert.ok(start !== -1, 'docs/server.md has the section');
  const end = doc.indexOf('\n## ', start + 1);
  const section = doc.slice(start, end === -1 ? undefined : end);
  return [...section.matchAll(/```(\w+)\n([\s\S]*?)```/g)].map((m) => ({ lang: m[1]!, text: m[2]! }));
}

/**
 * The blocks' output does not depend on the sandbox's time limit, but a job's first run may pass the default 100 ms
 * on a machine busy with other work (a CPU hog beside the suite): the server and the commands get a generous one.
 */
const LOADED_MACHINE = { CONFIGU_EXPRESSION_TIMEOUT_MS: '10000' };

function shellEnv(shim: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!/^(CONFIGU_|npm_)/i.test(k)) env[k] = v;
  env.PATH = `${shim}:${process.env.PATH ?? ''}`;
  env.CI = 'true';
  Object.assign(env, LOADED_MACHINE);
  return env;
}

test('the curl examples of "Watching for changes" print what the docs say', async (t) => {
  try {
    execFileSync('curl', ['--version'], { stdio: 'ignore' });
  } catch {
    if (!requireOrSkip(t, 'curl', 'not on the PATH')) return;
  }
  const [first, firstOut, stream, write, streamOut] = blocks();
  assert.deepEqual([first?.lang, firstOut?.lang, stream?.lang, write?.lang, streamOut?.lang], ['bash', 'text', 'bash', 'bash', 'text']);

  const dir = tempDir('cfgu-watch-docs-');
  cpSync(join(ROOT, 'examples'), dir, { recursive: true });
  const shim = join(dir, '.bin');
  mkdirSync(shim);
  writeFileSync(join(shim, 'cfgu'), `#!/bin/sh\nexec "${process.execPath}" "${BIN}" "$@"\n`);
  chmodSync(join(shim, 'cfgu'), 0o755);

  // Start-up waits on conditions, not a clock (a busy machine may take minutes): the "listening" line, then "ready"
  // (from the primary of a cluster), and either wait ends with an error if the server exits first.
  const { p, base } = await serveOnFreePort(['--config', join(dir, '.configu')], LOADED_MACHINE, dir);
  await p.waitForLog('ready', (l) => l.role !== 'worker', Infinity);
  await waitForStatus(`${base}/ready`, 200);
  const local = (script: string) => script.replaceAll('http://localhost:8080', base);
  const env = shellEnv(shim);

  const out = execFileSync('bash', ['-c', local(first!.text)], { cwd: dir, env, encoding: 'utf8' });
  assert.equal(out, firstOut!.text);

  // The stream runs in a process group of its own (stopped at the end); the definitions come from the first block.
  const definitions = first!.text.split('\n').filter((l) => /^(URL|BODY)=/.test(l)).join('\n');
  const curl = spawn('bash', ['-c', `${local(definitions)}\n${local(stream!.text)}`], { cwd: dir, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  groups.push(curl);
  let streamed = '';
  curl.stdout!.on('data', (c: Buffer) => (streamed += c.toString('utf8')));
  const events = () => streamed.split('\n').filter((l) => !l.startsWith(':')).join('\n');
  const [firstEvent] = streamOut!.text.split('\n\n');
  // Each wait ends on its event, or with an error (naming what was streamed) once curl or the server is gone or after
  // the hang guard of waitFor.
  const alive = () => {
    if (curl.exitCode !== null || curl.signalCode !== null) throw new Error(`curl exited (${curl.exitCode ?? curl.signalCode})`);
    if (p.child.exitCode !== null || p.child.signalCode !== null) throw new Error(`cfgu serve exited (${p.child.exitCode ?? p.child.signalCode})`);
  };
  const until = async (what: string, check: () => boolean) => {
    await waitFor(what, () => {
      if (check()) return true;
      alive();
      return false;
    }).catch((e: Error) => Promise.reject(new Error(`${e.message}; streamed so far:\n${streamed}`)));
  };
  await until('the first event', () => events().startsWith(`${firstEvent}\n\n`));
  execFileSync('bash', ['-c', write!.text], { cwd: dir, env, encoding: 'utf8' });
  await until('the change event', () => events() === `${streamOut!.text}\n`);
  process.kill(-curl.pid!, 'SIGTERM');
});
