/**
 * `npm start` and the Dockerfile are the README's commands: `npm start` serves examples/.configu unless
 * CONFIGU_CONFIG / CONFIGU_CONFIGURATION names another `.configu`; the Dockerfile's builder installs with `npm ci` and
 * its image runs cfgu itself (`serve` by default, test/deploy/image.test.ts builds and runs it). The repository
 * carries the license package.json names.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { call, removeTempDirs, ROOT, tempDir, writeJson } from './helpers.js';
import { killGroups, signalGroup, spawnGroup } from '../helpers/process-groups.js';

const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string>; license: string; bin: Record<string, string> };
after(() => {
  killGroups();
  removeTempDirs();
});

test('the Dockerfile installs with npm ci and runs cfgu serve; the package has its bin and license', () => {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  assert.ok(readme.includes('npm ci && npm start'), 'README install and start commands');
  const steps = readFileSync(join(ROOT, 'Dockerfile'), 'utf8')
    .split('\n')
    .filter((l) => /^(RUN|CMD|ENTRYPOINT)\b/.test(l));
  assert.ok(steps.some((s) => /^RUN .*\bnpm ci\b/.test(s)), steps.join('\n'));
  assert.deepEqual(steps.slice(-2), ['ENTRYPOINT ["node", "/app/bin/cfgu.js"]', 'CMD ["serve"]']);
  assert.deepEqual(pkg.bin, { cfgu: 'bin/cfgu.js' });
  assert.equal(pkg.license, 'Apache-2.0');
  const license = readFileSync(join(ROOT, 'LICENSE'), 'utf8');
  assert.match(license, /^\s*Apache License\s+Version 2\.0, January 2004\s+http:\/\/www\.apache\.org\/licenses\//);
  assert.match(license, /END OF TERMS AND CONDITIONS/);
});

/**
 * Run `npm start` in the checkout with `env` (port 0 on loopback, one process); resolves once the server is ready,
 * with the port it listens on.
 */
async function npmStart(env: Record<string, string>): Promise<{ port: number; stop: () => Promise<void> }> {
  const childEnv: NodeJS.ProcessEnv = { ...process.env };
  for (const k of Object.keys(childEnv)) if (k.startsWith('CONFIGU_')) delete childEnv[k];
  Object.assign(childEnv, { CONFIGU_HTTP_PORT: '0', CONFIGU_HTTP_HOST: '127.0.0.1', CONFIGU_WORKERS: '1', ...env });
  // Its own process group: npm, the shell and the server are stopped together.
  const child = spawnGroup('npm', ['start'], { cwd: ROOT, env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let out = '';
  const port = await new Promise<number>((resolve, reject) => {
    // The server's `ready` log line (stores initialised) carries the bound port.
    const look = () => {
      for (const line of out.split('\n').slice(0, -1)) {
        if (!line.startsWith('{')) continue;
        const entry = JSON.parse(line) as { msg?: string; port?: number };
        if (entry.msg === 'ready' && typeof entry.port === 'number') return resolve(entry.port);
      }
    };
    child.stdout!.setEncoding('utf8').on('data', (d: string) => ((out += d), look()));
    child.stderr!.setEncoding('utf8').on('data', (d: string) => (out += d));
    child.once('exit', (code) => reject(new Error(`npm start exited (${code}) before it was ready:\n${out}`)));
  });
  return {
    port,
    stop: async () => {
      signalGroup(child.pid!, 'SIGTERM');
      await exited;
    },
  };
}

async function exportFrom(port: number, body: unknown) {
  const r = await call(`http://127.0.0.1:${port}/export`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: r.status, body: r.body };
}

test('npm start serves examples/.configu by default', { timeout: 60_000 }, async () => {
  assert.match(pkg.scripts.start!, /examples\/\.configu/);
  const s = await npmStart({});
  try {
    const r = await exportFrom(s.port, [{ store: 'example', set: 'production/eu', schema: { keys: { API_HOST: {} } } }]);
    assert.deepEqual(r, { status: 200, body: '{"API_HOST":"eu.api.example.com"}' });
  } finally {
    await s.stop();
  }
});

test('CONFIGU_CONFIGURATION and CONFIGU_CONFIG point npm start at another .configu', { timeout: 60_000 }, async () => {
  for (const variable of ['CONFIGU_CONFIGURATION', 'CONFIGU_CONFIG']) {
    const dir = tempDir();
    writeJson(join(dir, 'values.json'), [{ set: '', key: 'WHERE', value: variable }]);
    const file = writeJson(join(dir, '.configu'), { stores: { elsewhere: { type: 'json-file', configuration: { path: 'values.json' } } } });
    const s = await npmStart({ [variable]: file });
    try {
      const r = await exportFrom(s.port, [{ store: 'elsewhere', schema: { keys: { WHERE: { required: true } } } }]);
      assert.deepEqual(r, { status: 200, body: JSON.stringify({ WHERE: variable }) }, variable);
      const example = await exportFrom(s.port, [{ store: 'example', schema: { keys: { A: {} } } }]);
      assert.equal(example.status, 400, 'the example store is not served');
      assert.match(JSON.parse(example.body).detail, /unknown store "example"/);
    } finally {
      await s.stop();
    }
  }
});
