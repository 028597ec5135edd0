// The CPU time of the first and the second job of fresh sandbox children (what the per-isolate warm-up saves).
// Run: npm run build && npx tsx bench/first-job.ts
import { createSandboxEvaluator } from '../src/expressions/index.js';
import { requestContext } from '../src/core/ports.js';
const job = (i: number) => ({
  input: { store: { type: 'in-memory' }, set: { path: '', hierarchy: [''] }, schema: { keys: { HOST: { schema: { type: 'string' } }, PORT: { schema: { type: 'number' } }, URL: { const: '{{ $.configs.HOST.value }}:{{ $.configs.PORT.value }}' } } } },
  configs: {
    HOST: { key: 'HOST', storedValue: `h${i}.example.com`, value: `h${i}.example.com`, origin: 'store', cfgu: { schema: { type: 'string' } }, labels: [] },
    PORT: { key: 'PORT', storedValue: '8080', value: 8080, origin: 'store', cfgu: { schema: { type: 'number' } }, labels: [] },
    URL: { key: 'URL', storedValue: '', value: '', origin: 'empty', cfgu: { const: '{{ $.configs.HOST.value }}:{{ $.configs.PORT.value }}' }, labels: [] },
  },
  consts: [{ key: 'URL', template: '{{ $.configs.HOST.value }}:{{ $.configs.PORT.value }}' }],
  tests: [{ key: 'HOST', expressions: ['validator.isFQDN($.value)', 'expect($.value).to.be.a("string")'] }, { key: 'PORT', expressions: ['Number.isInteger($.value) && $.value > 0'] }],
});
const out: number[] = [];
for (let round = 0; round < 5; round++) {
  const ev = await createSandboxEvaluator({ workers: 1, spares: 0 } as any);
  const ctx = requestContext('x');
  await ev.run(job(round) as any, ctx);
  const first = ctx.usage!.cpuMs;
  const ctx2 = requestContext('x');
  await ev.run(job(round + 100) as any, ctx2);
  out.push(first, ctx2.usage!.cpuMs);
  await ev.close();
}
console.log('first/second job CPU ms per fresh child:', out.map((x) => x.toFixed(1)).join(' '));
