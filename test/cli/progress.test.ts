/**
 * In-process unit tests of the CLI helpers that the binary tests cannot reach well: the progress indicator (needs a
 * TTY), glob expansion, and -k/-v pairing.
 */
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expandGlob } from '../../src/cli/glob.js';
import { withProgress } from '../../src/cli/progress.js';
import { collectValues } from '../../src/cli/commands/upsert.js';
import { requireOrSkip } from '../helpers/services.js';

/** A stream that records what is written; `onWrite` runs after each write (a test's condition to finish a step). */
function fakeStream(isTTY: boolean, onWrite?: (writes: string[]) => void) {
  const writes: string[] = [];
  const write = (s: string) => {
    writes.push(s);
    onWrite?.(writes);
    return true;
  };
  return { isTTY, writes, write } as unknown as NodeJS.WritableStream & { isTTY: boolean; writes: string[] };
}

/**
 * A step that ends when `finish` is called (conditions, not clocks, decide when a step is slow). The spinner's timers
 * do not keep a process alive (a CLI must exit when its work is done), so the pending step holds a timer of its own
 * that does, until it ends.
 */
function step<T>(): { run: () => Promise<T>; finish: (v: T) => void; fail: (e: Error) => void } {
  let finish!: (v: T) => void;
  let fail!: (e: Error) => void;
  const keepAlive = setInterval(() => undefined, 60_000);
  const promise = new Promise<T>((resolve, reject) => ((finish = resolve), (fail = reject))).finally(() => clearInterval(keepAlive));
  return { run: () => promise, finish, fail };
}

describe('withProgress', () => {
  test('a step slower than the delay shows a spinner line on a TTY, erased at the end', async () => {
    // The step ends only once the spinner was drawn: slower than the delay by construction.
    const slow = step<number>();
    const s = fakeStream(true, () => slow.finish(42));
    const value = await withProgress('reading store "main"', slow.run, s, 50);
    assert.equal(value, 42);
    assert.ok(s.writes.length >= 2, 'drawn at least once');
    assert.match(s.writes[0]!, /^\r\x1b\[2K. reading store "main"… 0s$/);
    assert.equal(s.writes.at(-1), '\r\x1b[2K');
  });
  test('a fast step shows nothing', async () => {
    const s = fakeStream(true);
    // Settled before any timer can fire (a resolved promise settles in the same turn).
    await withProgress('fast', () => Promise.resolve(), s, 100);
    assert.deepEqual(s.writes, []);
  });
  test('silent when the stream is not a TTY, even for a slow step; errors pass through', async () => {
    const s = fakeStream(false);
    // Slow: it ends after a timer longer than the delay has fired (timers fire in the order they expire).
    await withProgress('slow', () => new Promise<void>((r) => setTimeout(r, 30)), s, 10);
    assert.deepEqual(s.writes, []);
    const failing = step<never>();
    const t = fakeStream(true, () => failing.fail(new Error('boom')));
    await assert.rejects(withProgress('failing', failing.run, t, 10), /boom/);
    assert.equal(t.writes.at(-1), '\r\x1b[2K', 'the line is erased on failure too');
  });
});

describe('globs', () => {
  const root = mkdtempSync(join(tmpdir(), 'cfgu-glob-'));
  after(() => rmSync(root, { recursive: true, force: true }));
  for (const f of ['a.cfgu.json', 'b.cfgu.yaml', 's/c.cfgu.yml', 's/t/d.cfgu.json', 's/.hidden/e.cfgu.json', 'node_modules/x/f.cfgu.json', '.g.cfgu.json', 'a1.txt']) {
    mkdirSync(join(root, f, '..'), { recursive: true });
    writeFileSync(join(root, f), '');
  }
  const rel = (files: string[]) => files.map((f) => f.slice(root.length + 1));
  test('*, ?, [..], {a,b} and ** (not into hidden folders or node_modules)', () => {
    assert.deepEqual(rel(expandGlob('*.cfgu.*', root)), ['a.cfgu.json', 'b.cfgu.yaml']);
    assert.deepEqual(rel(expandGlob('**/*.cfgu.json', root)), ['a.cfgu.json', 's/t/d.cfgu.json']);
    assert.deepEqual(rel(expandGlob('**/*.cfgu.{yaml,yml}', root)), ['b.cfgu.yaml', 's/c.cfgu.yml']);
    assert.deepEqual(rel(expandGlob('?.cfgu.json', root)), ['a.cfgu.json']);
    assert.deepEqual(rel(expandGlob('[ab].cfgu.*', root)), ['a.cfgu.json', 'b.cfgu.yaml']);
    assert.deepEqual(rel(expandGlob('[!a].cfgu.*', root)), ['b.cfgu.yaml']);
    assert.deepEqual(rel(expandGlob('.*.cfgu.json', root)), ['.g.cfgu.json']);
    assert.deepEqual(rel(expandGlob(join(root, 's', '*', '*.json'), '/')), ['s/t/d.cfgu.json']);
    assert.deepEqual(expandGlob('nothing/**/*.json', root), []);
  });
  test('a pattern that names node_modules enters it; file names with ( ) + ! are literal; ../ and absolute roots', () => {
    assert.deepEqual(rel(expandGlob('node_modules/*/*.cfgu.json', root)), ['node_modules/x/f.cfgu.json']);
    const odd = join(root, 's', 't');
    writeFileSync(join(odd, 'a+b(c)!.cfgu.json'), '');
    assert.deepEqual(rel(expandGlob('a+b(c)!.*', odd).concat(expandGlob('*(c)!.cfgu.json', odd))), ['s/t/a+b(c)!.cfgu.json', 's/t/a+b(c)!.cfgu.json']);
    assert.deepEqual(rel(expandGlob('../*.cfgu.yml', odd)), ['s/c.cfgu.yml']);
    assert.deepEqual(rel(expandGlob(`${root}/{s,nothing}/*.cfgu.yml`, '/')), ['s/c.cfgu.yml']);
  });
});

describe('-k/-v pairing', () => {
  const opt = (name: string, value: string) => ({ kind: 'option', name, value });
  test('a -v pairs with the -k just before it; an unpaired -k deletes; --kv mixes in order', () => {
    assert.deepEqual(
      collectValues([opt('key', 'A'), opt('value', '1'), opt('key', 'B'), opt('kv', 'C=x=y'), opt('key', 'D'), opt('key', 'E'), opt('value', '')]),
      { A: '1', B: '', C: 'x=y', D: '', E: '' },
    );
    assert.throws(() => collectValues([opt('value', '1')]), /: a -v\/--value has no -k\/--key before it$/);
    assert.throws(() => collectValues([opt('kv', 'A=1'), opt('kv', 'A=2')]), /key "A" is given twice \(--kv\)/);
  });
});

describe('the binary under a terminal', () => {
  test('a slow store shows the spinner on standard error (a TTY); nothing without a TTY', async (t) => {
    const { spawnSync } = await import('node:child_process');
    if (spawnSync('script', ['--version']).status !== 0) {
      return void requireOrSkip(t, 'util-linux `script` (a pseudo-terminal)', 'not installed');
    }
    const { createServer } = await import('node:net');
    const { cfgu, sh, project, removeTempDirs, killChildren } = await import('./helpers.js');
    // A "database" that accepts connections and never answers.
    const silent = createServer(() => undefined);
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', () => r()));
    const port = (silent.address() as { port: number }).port;
    try {
      const dir = project(
        { 'a.cfgu.json': { keys: { A: {} } } },
        { stores: { pg: { type: 'postgres', configuration: { host: '127.0.0.1', port, username: 'x', database: 'y', timeout: 2500 } } } },
      );
      const tty = await sh(`script -qec "cfgu eval --schema a.cfgu.json" /dev/null`, { cwd: dir });
      assert.equal(tty.code, 1);
      assert.match(tty.stdout, /\r\x1b\[2K. connecting to store "pg"… 1s/);
      assert.match(tty.stdout, /\r\x1b\[2Kcfgu eval: store "pg" is unavailable: /);
      const plain = await cfgu(['eval', '--schema', 'a.cfgu.json'], { cwd: dir });
      assert.equal(plain.code, 1);
      assert.match(plain.stderr, /^cfgu eval: store "pg" is unavailable: [^\r\x1b]*\n$/);
    } finally {
      silent.close();
      killChildren();
      removeTempDirs();
    }
  });
});
