/**
 * The README's walkthrough, run as written: its files are written into an empty folder, its `$ ` command lines run
 * in one bash session (with `npx cfgu` being the built binary and the proxy's port replaced by a free one), and each
 * command's output (standard output and error together, as a terminal shows them) must equal the documented lines.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { killChildren, removeTempDirs, ROOT, sh, tempDir, write } from './helpers.js';

after(() => {
  killChildren();
  removeTempDirs();
});

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

interface Step {
  command: string;
  output: string;
}

function walkthrough(): { files: Array<{ name: string; text: string }>; steps: Step[] } {
  const doc = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const start = doc.indexOf('\n## Walkthrough');
  assert.ok(start !== -1, 'README.md has a Walkthrough section');
  const next = doc.indexOf('\n## ', start + 1);
  const section = doc.slice(start, next === -1 ? undefined : next);
  const files = [...section.matchAll(/<!-- file: (\S+) -->\n```\w*\n([\s\S]*?)```/g)].map((m) => ({ name: m[1]!, text: m[2]! }));
  const steps: Step[] = [];
  for (const block of section.matchAll(/```console\n([\s\S]*?)```/g)) {
    for (const line of block[1]!.split('\n')) {
      if (line.startsWith('$ ')) steps.push({ command: line.slice(2), output: '' });
      else if (line !== '' || steps.at(-1)?.output) steps.at(-1)!.output += `${line}\n`;
    }
  }
  for (const s of steps) s.output = s.output.replace(/\n+$/, '\n').replace(/^\n$/, '');
  return { files, steps };
}

test('the README walkthrough runs as documented', { timeout: 120_000 }, async () => {
  const { files, steps } = walkthrough();
  assert.deepEqual(files.map((f) => f.name), ['app.cfgu.json', '.configu']);
  assert.ok(steps.length >= 8, `found ${steps.length} commands`);
  assert.ok(steps.some((s) => s.command.includes('cfgu serve')) && steps.some((s) => s.command.startsWith('curl')));

  const dir = tempDir('cfgu-walkthrough-');
  for (const f of files) write(join(dir, f.name), f.text);
  const port = String(await freePort());
  const marker = (i: number) => `@@cfgu-walkthrough-step-${i}@@`;
  const script = [
    'set +o pipefail', // as in an interactive shell
    'exec 2>&1',
    'npx() { if [ "$1" = cfgu ]; then shift; cfgu "$@"; else command npx "$@"; fi; }',
    ...steps.flatMap((s, i) => [`echo '${marker(i)}'`, s.command.replaceAll('8080', port)]),
    `echo '${marker(steps.length)}'`,
  ].join('\n');
  const r = await sh(script, { cwd: dir, timeoutMs: 90_000 });
  const outputs: string[] = [];
  for (let i = 0; i < steps.length; i++) {
    const from = r.stdout.indexOf(`${marker(i)}\n`);
    const to = r.stdout.indexOf(`${marker(i + 1)}\n`);
    assert.ok(from !== -1 && to !== -1, `step ${i} (${steps[i]!.command}) ran; output:\n${r.stdout}`);
    outputs.push(r.stdout.slice(from + marker(i).length + 1, to));
  }
  steps.forEach((s, i) => assert.equal(outputs[i], s.output, `the output of: ${s.command}`));
  assert.equal(readFileSync(join(dir, '.env'), 'utf8'), "GREETING=hello\nSUBJECT=world\nPORT=4000\nMESSAGE='hello, world!'\n");
});
