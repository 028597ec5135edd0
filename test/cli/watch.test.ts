/**
 * `--watch` through the built binary: `cfgu eval --watch` (a new document per change, none for a write that changes
 * nothing), piped into `cfgu export --watch --out` (the file rewritten), and `cfgu export --watch --run CMD` with a
 * real child printing its environment (restarted with the new values: SIGTERM, then SIGKILL after --grace; cfgu's exit
 * code is the last child's).
 */
import { after, afterEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BIN, removeTempDirs, tempDir, write } from './helpers.js';
import { readDocuments } from '../../src/cli/watch.js';
import { waitFor } from '../helpers/wait.js';

const running = new Set<ChildProcess>();

/** Every process below `pid` (Linux: /proc/<pid>/task/<tid>/children), deepest last. */
function descendants(pid: number): number[] {
  let direct: number[] = [];
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      direct = direct.concat(readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').split(' ').filter(Boolean).map(Number));
    }
  } catch {
    /* gone */
  }
  return direct.flatMap((child) => [child, ...descendants(child)]);
}

/**
 * SIGKILL for every cfgu this file started and for what they started: a `--run` child lives in a process group of
 * its own and outlives a killed cfgu, holding the output pipe it inherited (a test that failed half-way would leave the
 * file waiting on that pipe for ever).
 */
async function stopAll(): Promise<void> {
  await Promise.all(
    [...running].map(
      (c) =>
        new Promise<void>((resolve) => {
          if (c.exitCode !== null || c.signalCode !== null) return resolve();
          const below = c.pid === undefined ? [] : descendants(c.pid);
          c.once('exit', () => resolve());
          c.kill('SIGKILL');
          for (const pid of below) {
            try {
              process.kill(pid, 'SIGKILL');
            } catch {
              /* already gone */
            }
          }
        }),
    ),
  );
  running.clear();
}
afterEach(stopAll);
after(async () => {
  await stopAll();
  removeTempDirs();
});

interface Proc {
  child: ChildProcess;
  out: () => string;
  err: () => string;
  exited: Promise<number | string>;
}

function start(args: string[], cwd: string, stdin: 'pipe' | 'ignore' = 'pipe'): Proc {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!/^(CONFIGU_|npm_)/i.test(k)) env[k] = v;
  env.CI = 'true';
  const child = spawn(process.execPath, [BIN, ...args], { cwd, env, stdio: [stdin, 'pipe', 'pipe'] });
  running.add(child);
  let out = '';
  let err = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString('utf8')));
  child.stderr!.on('data', (c: Buffer) => (err += c.toString('utf8')));
  const exited = new Promise<number | string>((r) => child.on('exit', (code, signal) => r(code ?? signal ?? -1)));
  return { child, out: () => out, err: () => err, exited };
}

async function documents(text: string): Promise<string[]> {
  const docs: string[] = [];
  for await (const d of readDocuments(text)) docs.push(d);
  return docs;
}

/** Replace the store file the way editors do: write a temporary file, rename it over the old one. */
function replaceData(dir: string, value: string): void {
  const tmp = join(dir, 'data.json.tmp');
  writeFileSync(tmp, JSON.stringify([{ set: 'prod', key: 'GREETING', value }, { set: '', key: 'TOKEN', value: 'hidden-value' }]));
  renameSync(tmp, join(dir, 'data.json'));
}

function project(): string {
  const dir = tempDir('cfgu-watch-');
  replaceData(dir, 'one');
  write(join(dir, '.configu'), { stores: { main: { type: 'json-file', configuration: { path: 'data.json', feedIntervalMs: 100 } } } });
  write(join(dir, 'app.cfgu.json'), { keys: { GREETING: {}, TOKEN: { hidden: true } } });
  return dir;
}

const evalDoc = (value: string) =>
  `${JSON.stringify({ GREETING: { key: 'GREETING', value, origin: 'store', cfgu: {}, set: 'prod' } }, null, 2)}\n`;

describe('cfgu eval --watch', () => {
  test('one document first, one per change that alters the result, none for a write that changes nothing', async () => {
    const dir = project();
    const p = start(['eval', '--watch', '--set', 'prod/eu', '--schema', 'app.cfgu.json'], dir, 'ignore');
    await waitFor('the first document', async () => (await documents(p.out())).length === 1);
    const first = JSON.parse((await documents(p.out()))[0]!);
    assert.equal(first.GREETING.value, 'one');

    replaceData(dir, 'one'); // a new file with the same values
    replaceData(dir, 'two');
    await waitFor('the second document', async () => (await documents(p.out())).length === 2);
    replaceData(dir, 'two');
    replaceData(dir, 'three');
    await waitFor('the third document', async () => (await documents(p.out())).length === 3);
    const values = (await documents(p.out())).map((d) => JSON.parse(d).GREETING.value);
    assert.deepEqual(values, ['one', 'two', 'three']);

    p.child.kill('SIGTERM');
    assert.equal(await p.exited, 0);
  });

  test('--watch with --defaults is a usage error', async () => {
    const dir = project();
    const p = start(['eval', '--watch', '--defaults', '--schema', 'app.cfgu.json'], dir, 'ignore');
    assert.equal(await p.exited, 2);
    assert.match(p.err(), /--watch follows a store: it cannot be combined with --defaults/);
  });
});

describe('cfgu eval --watch | cfgu export --watch', () => {
  test('--out is rewritten after each change; standard output gets a new document; both end with the upstream', async () => {
    const dir = project();
    const upstream = start(['eval', '--watch', '--set', 'prod', '--schema', 'app.cfgu.json'], dir, 'ignore');
    const toFile = start(['export', '--watch', '--format', 'dotenv', '--out', '.env'], dir);
    const toStdout = start(['export', '--watch'], dir);
    upstream.child.stdout!.on('data', (c: Buffer) => {
      toFile.child.stdin!.write(c);
      toStdout.child.stdin!.write(c);
    });
    upstream.child.stdout!.on('end', () => {
      toFile.child.stdin!.end();
      toStdout.child.stdin!.end();
    });
    const env = () => {
      try {
        return readFileSync(join(dir, '.env'), 'utf8');
      } catch {
        return '';
      }
    };
    await waitFor('the first export', () => env() === 'GREETING=one\n');
    replaceData(dir, 'two');
    await waitFor('the file rewritten', () => env() === 'GREETING=two\n');
    await waitFor('two documents on standard output', async () => (await documents(toStdout.out())).length === 2);
    assert.deepEqual((await documents(toStdout.out())).map((d) => JSON.parse(d)), [{ GREETING: 'one' }, { GREETING: 'two' }]);
    assert.ok(!toStdout.out().includes('hidden-value'));

    upstream.child.kill('SIGTERM');
    assert.equal(await upstream.exited, 0);
    assert.equal(await toFile.exited, 0);
    assert.equal(await toStdout.exited, 0);
  });
});

describe('cfgu export --watch --run', () => {
  // The handler is in place before the line the test waits on: a restart right after the line always prints `stop`.
  const PRINTER = `node -e "process.on('SIGTERM', () => { console.log('stop GREETING=' + process.env.GREETING); process.exit(7); }); console.log('start GREETING=' + process.env.GREETING); setInterval(() => {}, 1000);"`;

  test('the child is restarted with the new environment; cfgu ends with the last child\'s exit code', async () => {
    const dir = project();
    const p = start(['export', '--watch', '--run', PRINTER], dir);
    p.child.stdin!.write(evalDoc('one'));
    await waitFor('the first child', () => p.out().includes('start GREETING=one\n'));
    p.child.stdin!.write(evalDoc('two'));
    await waitFor('the restart', () => p.out().includes('start GREETING=two\n'));
    p.child.stdin!.write(evalDoc('two')); // the same values: no restart
    p.child.stdin!.write(evalDoc('three'));
    await waitFor('the second restart', () => p.out().includes('start GREETING=three\n'));
    assert.deepEqual(p.out().trim().split('\n'), [
      'start GREETING=one',
      'stop GREETING=one',
      'start GREETING=two',
      'stop GREETING=two',
      'start GREETING=three',
    ]);
    p.child.kill('SIGTERM');
    assert.equal(await p.exited, 7);
    assert.ok(p.out().endsWith('stop GREETING=three\n'));
  });

  test('a child that ignores SIGTERM gets SIGKILL after --grace; a bad document is reported and skipped', async () => {
    const dir = project();
    // The handler is in place before the line the test waits on: a SIGTERM sent right after it is always ignored.
    const stubborn = `node -e "process.on('SIGTERM', () => console.log('ignored')); console.log('start GREETING=' + process.env.GREETING); setInterval(() => {}, 1000);"`;
    const p = start(['export', '--watch', '--grace', '0.2', '--run', stubborn], dir);
    p.child.stdin!.write(evalDoc('one'));
    await waitFor('the first child', () => p.out().includes('start GREETING=one\n'));
    p.child.stdin!.write('{"GREETING": 5}\n');
    p.child.stdin!.write(evalDoc('two'));
    await waitFor('the restart', () => p.out().includes('start GREETING=two\n'));
    assert.match(p.err(), /cfgu export: standard input is not the JSON output of `cfgu eval`: "GREETING" is not an object/);
    assert.ok(p.out().includes('ignored\n'));
    p.child.kill('SIGTERM');
    assert.equal(await p.exited, 137);
  });

  test('a child that ends by itself ends the watch with its exit code', async () => {
    const dir = project();
    const p = start(['export', '--watch', '--run', 'echo "GREETING=$GREETING"; exit 3'], dir);
    p.child.stdin!.write(evalDoc('bye'));
    assert.equal(await p.exited, 3);
    assert.equal(p.out(), 'GREETING=bye\n');
  });

  test('--grace without --watch --run is a usage error', async () => {
    const dir = project();
    const p = start(['export', '--grace', '1'], dir);
    p.child.stdin!.end(evalDoc('x'));
    assert.equal(await p.exited, 2);
    assert.match(p.err(), /--grace is for --watch --run/);
  });
});

describe('execForm: which --run commands the shell replaces itself with', () => {
  test('simple commands get exec; operators, assignments and keywords run as written', async () => {
    const { execForm } = await import('../../src/cli/watch.js');
    assert.equal(execForm('node server.js --port 8080'), 'exec node server.js --port 8080');
    assert.equal(execForm(`node -e "a(); b('x | y')"`), `exec node -e "a(); b('x | y')"`);
    for (const compound of ['a; b', 'a && b', 'a | b', 'a > f', 'FOO=1 node x', 'if x; then y; fi', 'echo $(date)', 'a &', '{ a; }', 'echo "open']) {
      assert.equal(execForm(compound), compound, compound);
    }
  });
});
