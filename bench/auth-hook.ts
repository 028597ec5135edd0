/**
 * The authentication step alone, in process: what `authenticate()` costs per request for each kind of credential,
 * next to the first (uncached) verification of a JWT. Deterministic enough on a loaded machine to set against the
 * cost of a whole W10 request (bench/auth-overhead.mjs).
 * Run: npx tsx bench/auth-hook.ts   (prints microseconds per call, median of 7 rounds)
 */
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import { SignJWT, exportJWK, generateKeyPair } from 'jose';
import { createAuthenticator, type AuthResult } from '../src/server/access/credentials.js';
import { resolveSettings } from '../src/server/process/resolve-settings.js';

const { privateKey, publicKey } = await generateKeyPair('RS256');
const jwks = { keys: [{ ...(await exportJWK(publicKey)), kid: 'k', alg: 'RS256' }] };
const idp = createServer((_q, r) => r.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(jwks)));
await new Promise<void>((r) => idp.listen(0, '127.0.0.1', r));
const sign = (sub: string) =>
  new SignJWT({ sub, scope: 'cfgu:read' }).setProtectedHeader({ alg: 'RS256', kid: 'k' }).setIssuer('https://idp').setAudience('cfgu').setExpirationTime('1h').sign(privateKey);
const token = 'cfgu_bench-token-0123456789abcdefghijklmnop';
const settings = resolveSettings({
  env: {},
  fileSettings: {
    auth: {
      enabled: true,
      presharedKeys: ['preshared-bench-key'],
      credentials: Array.from({ length: 20 }, (_, i) => ({ name: `c${i}`, sha256: createHash('sha256').update(i === 0 ? token : `other-${i}`).digest('hex'), stores: ['main'], sets: ['prod/**'] })),
      jwt: {
        jwksUrl: `http://127.0.0.1:${(idp.address() as { port: number }).port}/jwks.json`,
        issuer: 'https://idp',
        audience: 'cfgu',
        grants: [{ claim: 'scope', value: 'cfgu:read', stores: ['main'], sets: ['prod/**'] }],
      },
    },
  },
});
const authn = createAuthenticator(settings)!;

async function perCall(name: string, n: number, header: () => string | Promise<string>): Promise<void> {
  const rounds: number[] = [];
  for (let r = 0; r < 8; r++) {
    const headers = await Promise.all(Array.from({ length: n }, header));
    const t = process.hrtime.bigint();
    for (const h of headers) {
      const result: AuthResult = await authn.authenticate(h);
      if (!('principal' in result)) throw new Error(`${name}: ${result.reason}`);
    }
    if (r > 0) rounds.push(Number(process.hrtime.bigint() - t) / n / 1000);
  }
  rounds.sort((a, b) => a - b);
  console.log(`| ${name} | ${rounds[rounds.length >> 1]!.toFixed(1)} |`);
}

console.log('| credential | µs per authenticate() (median of 7 rounds) |');
console.log('|---|---|');
await perCall('preshared key (21 digests compared)', 20_000, () => 'Bearer preshared-bench-key');
await perCall('scoped token (21 digests compared)', 20_000, () => `Bearer ${token}`);
const cached = `Bearer ${await sign('cached')}`;
await authn.authenticate(cached);
await perCall('JWT, cached (the same token again)', 20_000, () => cached);
let i = 0;
await perCall('JWT, first sight (RS256 signature verified)', 300, async () => `Bearer ${await sign(`s${i++}`)}`);
idp.close();
