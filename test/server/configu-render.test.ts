/** `.configu` is rendered with the environment, which never reaches the sandbox that serves requests. */
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { prepare, renderConfigu } from '../../src/server/process/start.js';
import { createSandboxEvaluator, type SandboxOptions } from '../../src/expressions/index.js';
import { ONE_SANDBOX_CHILD } from './helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'cfgu-render-'));
after(() => rmSync(dir, { recursive: true, force: true }));

async function load(text: string, env: Record<string, string>) {
  const file = join(dir, `${Math.random().toString(36).slice(2)}.configu`);
  writeFileSync(file, text);
  const prepared = await prepare({ config: file, flags: { workers: '1' }, env: { ...ONE_SANDBOX_CHILD, ...env, PATH: process.env.PATH ?? '' }, cwd: dir });
  return prepared;
}

test('bare names are substituted on the host; expressions render in a sandbox of their own', async () => {
  const bare = await load('stores:\n  main:\n    type: json-file\n    configuration: { path: "{{ DATA_DIR }}/data.json" }\n', { DATA_DIR: '/srv/cfg' });
  try {
    assert.equal(bare.configuration.stores[0]!.configuration.path, '/srv/cfg/data.json');
    assert.equal(await bare.evaluator.renderTemplate('[{{ typeof DATA_DIR }}]', {}), '[undefined]');
  } finally {
    await bare.evaluator.close();
  }
  const expr = await load(
    'stores:\n  main:\n    type: json-file\n    configuration: { path: "{{ (DATA_DIR || \'/fallback\').toLowerCase() }}/data.json" }\n',
    { DATA_DIR: '/SRV/CFG' },
  );
  try {
    assert.equal(expr.configuration.stores[0]!.configuration.path, '/srv/cfg/data.json');
    // The request sandbox cannot see the environment: an expression naming the variable finds nothing.
    assert.equal(await expr.evaluator.renderTemplate('[{{ typeof DATA_DIR }}]', {}), '[undefined]');
  } finally {
    await expr.evaluator.close();
  }
});

test('the render sandbox is created only for expressions, has one child, and is closed before start-up goes on', async () => {
  const made: Array<{ options: SandboxOptions; closed: boolean; rendered: string[] }> = [];
  const factory = (options: SandboxOptions) => {
    const real = createSandboxEvaluator(options);
    const record = { options, closed: false, rendered: [] as string[] };
    made.push(record);
    return {
      renderTrusted: (t: string, v: Record<string, string>) => {
        record.rendered.push(t);
        return real.renderTrusted(t, v);
      },
      close: async () => {
        record.closed = true;
        await real.close();
      },
    };
  };
  assert.equal(await renderConfigu('a: {{ A }}\nb: <% B %>\n', { A: '1', B: '2' }, { timeoutMs: 500 }, factory), 'a: 1\nb: 2\n');
  assert.equal(made.length, 0);
  assert.equal(await renderConfigu('a: {{ A + B }}\n', { A: '1', B: '2' }, { timeoutMs: 500 }, factory), 'a: 12\n');
  assert.equal(made.length, 1);
  assert.deepEqual(made[0], { options: { timeoutMs: 500, workers: 1 }, closed: true, rendered: ['a: {{ A + B }}\n'] });
});
