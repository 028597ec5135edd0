import type { ConfigView, ExpressionJob, InputView, TestOutcome } from '../../src/expressions/index.js';

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
