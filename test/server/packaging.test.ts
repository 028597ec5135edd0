/**
 * `npm start` and the Dockerfile are the README's commands: `npm start` serves examples/.configu (the example the
 * binary test answers the README's curl from), and the Dockerfile's steps are `npm ci` then `npm start`.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from './helpers.js';

test('npm start runs the proxy on examples/.configu; the Dockerfile runs the README install and start commands', () => {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  assert.equal(pkg.scripts.start, 'exec node bin/cfgu.js serve --config examples/.configu');
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  assert.ok(readme.includes('npm ci && npm start'), 'README install and start commands');
  const steps = readFileSync(join(ROOT, 'Dockerfile'), 'utf8')
    .split('\n')
    .filter((l) => /^(RUN|CMD)\b/.test(l));
  assert.ok(steps.includes('RUN npm ci'), steps.join('\n'));
  assert.equal(steps.at(-1), 'CMD ["npm", "start"]');
  const example = JSON.parse(JSON.stringify(readFileSync(join(ROOT, 'examples', '.configu'), 'utf8')));
  assert.match(example, /json-file|JsonFile/i, 'the example has a JSON-file store');
});
