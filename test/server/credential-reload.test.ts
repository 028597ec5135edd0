/**
 * SIGHUP reloads the credentials of a running `cfgu serve` (issue 30: a stream obeys its credential for its whole
 * life, including when the operator removes it). The real binary, one process and a cluster. Waits are on log lines,
 * stream ends and statuses; never on a clock.
 */
import { after, afterEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { isProblem, killChildren, postJson, removeTempDirs, serveOnFreePort, tempDir, writeJson } from './helpers.js';
import { openStream } from './sse-client.js';
import { waitFor } from '../helpers/wait.js';

after(removeTempDirs);
afterEach(killChildren);

const sha256 = (t: string) => createHash('sha256').update(t, 'utf8').digest('hex');
const token = () => `cfgu_${randomBytes(32).toString('base64url')}`;
const UNAUTHORIZED = {
  type: 'urn:cfgu:problem:unauthorized',
  title: 'Unauthorized',
  status: 401,
  detail: 'a valid bearer key is required (Authorization: Bearer <key>)',
};
const BODY = [{ store: 'main', set: 'staging', schema: { keys: { HOST: {} } } }];

function configu(dir: string, credentials: Array<{ name: string; token: string }>, extra: Record<string, unknown> = {}): string {
  return writeJson(join(dir, '.configu'), {
    stores: { main: { type: 'json-file', configuration: { path: 'data.json' } } },
    interface: {
      proxy: {
        auth: { enabled: true, credentials: credentials.map((c) => ({ name: c.name, sha256: sha256(c.token), stores: ['main'], sets: ['staging/**'] })) },
        ...extra,
      },
    },
  });
}

describe('SIGHUP reloads the credentials', () => {
  for (const workers of ['1', '2']) {
    test(`--workers ${workers}: a removed token's stream ends with 401, the token is refused, a new one works; a broken file changes nothing`, async () => {
      const dir = tempDir();
      writeJson(join(dir, 'data.json'), [{ set: 'staging', key: 'HOST', value: 'staging.internal' }]);
      const [old, kept, added] = [token(), token(), token()];
      const file = configu(dir, [
        { name: 'old-ci', token: old },
        { name: 'kept-ci', token: kept },
      ]);
      const { p, base } = await serveOnFreePort(['--config', file, '--workers', workers], {}, dir);
      await p.waitForLog('ready', (l) => workers === '1' || l.workers === 2);
      const bearer = (t: string) => ({ authorization: `Bearer ${t}` });
      assert.equal((await postJson(`${base}/export`, BODY, bearer(old))).status, 200);

      // With two workers each stream lands on one of them: open enough that both are likely used; each must end.
      const streams = await Promise.all([0, 1, 2, 3].map(() => openStream(`${base}/export`, BODY, bearer(old))));
      const keptStream = await openStream(`${base}/export`, BODY, bearer(kept));
      for (const st of [...streams, keptStream]) await waitFor('the first event', () => st.events.length >= 1);

      configu(dir, [
        { name: 'kept-ci', token: kept },
        { name: 'added-ci', token: added },
      ]);
      p.child.kill('SIGHUP');
      await waitFor('every process reloaded', () => p.logs().filter((l) => l.msg === 'credentials reloaded').length === Number(workers));
      const reloaded = p.logs().find((l) => l.msg === 'credentials reloaded')!;
      assert.deepEqual([reloaded.credentials, reloaded.preshared, reloaded.jwt], [2, 0, false], JSON.stringify(reloaded));

      for (const st of streams) {
        await st.ended;
        const end = st.events.at(-1)!;
        assert.equal(end.event, 'end');
        assert.deepEqual(JSON.parse(end.data), UNAUTHORIZED);
      }
      assert.deepEqual(isProblem(await postJson(`${base}/export`, BODY, bearer(old)), 401), UNAUTHORIZED);
      const fresh = await postJson(`${base}/export`, BODY, bearer(added));
      assert.equal(fresh.status, 200, fresh.body);
      assert.deepEqual(fresh.json(), { HOST: 'staging.internal' });
      // The credential that stayed keeps its stream.
      assert.ok(!keptStream.events.some((e) => e.event === 'end'), 'the kept credential\'s stream goes on');
      keptStream.close();

      // A file that cannot be used: nothing changes, the error is logged.
      writeFileSync(file, '{ not: valid: yaml: [');
      p.child.kill('SIGHUP');
      await waitFor('the refusal is logged', () => p.logs().filter((l) => l.msg === 'credentials not reloaded: the old ones stay in force').length === Number(workers));
      assert.equal((await postJson(`${base}/export`, BODY, bearer(added))).status, 200);
      assert.equal(p.child.exitCode, null, 'still running');
    });
  }
});
