import { after } from 'node:test';
import { createSandboxEvaluator, type SandboxEvaluator } from '../../src/expressions/index.js';
import { type ConfigView, type ExpressionJob, type InputView, type TestOutcome } from '../../src/core/ports.js';

export const INPUT: InputView = {
  store: { type: 'in-memory' },
  set: { path: 'prod/eu', hierarchy: ['', 'prod', 'prod/eu'] },
  schema: { keys: { PORT: { schema: { type: 'number' } }, HOST: {} } },
};

export function view(key: string, storedValue: string, value: unknown, extra: Partial<ConfigView> = {}): ConfigView {
  return { key, storedValue, value, origin: 'store', cfgu: {}, labels: [], ...extra };
}

export const CONFIGS: Record<string, ConfigView> = {
  PORT: view('PORT', '8080', 8080, { cfgu: { schema: { type: 'number' }, label: 'net' }, labels: ['net'] }),
  HOST: view('HOST', 'db.example.com', 'db.example.com'),
};

/** A job with one test expression on key `K` (and the default configs). */
export function oneTest(expression: string, key = 'PORT'): ExpressionJob {
  return { input: INPUT, configs: CONFIGS, consts: [], tests: [{ key, expressions: [expression] }] };
}

/** The outcome of the single test of a result ('ok' when it passed). */
export function outcomeOf(tests: TestOutcome[]): { kind: string; message?: string } | 'ok' {
  const t = tests[0];
  if (!t) return 'ok';
  return { kind: t.kind!, message: t.message };
}

/**
 * An expression that walks the realm as an attacker would: prototypes, every own property, both functions of every
 * accessor, and what getters return (called on their holder, twice: a new object at each call is not shared). Per-job
 * copies (Map, Set, Date, buffers) and regexps (only `lastIndex` writable) are the documented exceptions; their
 * contents are walked. It throws, listing them, when it finds anything writable; it needs a generous time budget.
 */
export const SEALED_WALK = `(() => {
      const seen = new Set(), stack = [globalThis], open = [];
      const slot = (v) => v instanceof Map || v instanceof Set || v instanceof WeakMap || v instanceof WeakSet || v instanceof Date || v instanceof ArrayBuffer || ArrayBuffer.isView(v);
      const push = (v) => { if (v !== null && (typeof v === 'object' || typeof v === 'function') && !seen.has(v)) stack.push(v) };
      while (stack.length) {
        const o = stack.pop();
        if (seen.has(o)) continue;
        seen.add(o);
        push(Object.getPrototypeOf(o));
        if (slot(o)) { if (o instanceof Map || o instanceof Set) o.forEach((v, k) => { push(v); push(k) }); continue }
        if (o instanceof RegExp) {
          if (Object.isExtensible(o)) open.push('extensible regexp');
          for (const k of Reflect.ownKeys(o)) { const d = Object.getOwnPropertyDescriptor(o, k); if (k !== 'lastIndex' && (d.configurable || d.writable)) open.push('regexp ' + String(k)) }
        } else if (!Object.isFrozen(o)) open.push(Object.prototype.toString.call(o) + ' ' + Reflect.ownKeys(o).slice(0, 4).map(String).join(','));
        for (const k of Reflect.ownKeys(o)) {
          const d = Object.getOwnPropertyDescriptor(o, k);
          if ('value' in d) { push(d.value); continue }
          push(d.get); push(d.set);
          // A getter that builds a new object at each call (chai's \`should\`) hands out nothing shared.
          if (d.get) { try { const a = Reflect.apply(d.get, o, []); if (a === Reflect.apply(d.get, o, [])) push(a) } catch (e) {} }
        }
      }
      if (seen.size < 5000) throw new Error('walked only ' + seen.size + ' objects');
      if (open.length) throw new Error(open.length + ' writable: ' + open.slice(0, 10).join(' | '));
      return true;
    })()`;

/** A maker of sandbox pools that are all closed when the test file ends (call it once, at the file's top level). */
export function closedAfterFile(): (options: Parameters<typeof createSandboxEvaluator>[0]) => SandboxEvaluator {
  const pools: SandboxEvaluator[] = [];
  after(async () => {
    for (const p of pools) await p.close();
  });
  return (options) => {
    const p = createSandboxEvaluator(options);
    pools.push(p);
    return p;
  };
}
