/** `cfgu export --filter`: which exported keys every filter expression accepts, evaluated in the sandbox. */
import { redactorForResult, viewOf, type EvalResult, type Redactor } from '../core/index.js';
import { setOwn } from '../core/names.js';
import type { ConfigView, ExpressionJob } from '../core/ports.js';
import { ExitError } from './errors.js';
import type { Session } from './session.js';

/**
 * The keys (not hidden) that every filter accepts, in result order. All filters of all keys go to the sandbox in one
 * round trip. A filter that throws or hits a sandbox limit is an error naming the key and the filter.
 */
export async function applyFilters(session: Session, result: EvalResult, keys: string[], filters: string[]): Promise<string[]> {
  if (!filters.length || !keys.length) return keys;
  const configs: Record<string, ConfigView> = {};
  for (const key of Object.keys(result)) setOwn(configs, key, viewOf(result[key]!));
  const job: ExpressionJob = {
    input: { store: { type: '' }, set: { path: '', hierarchy: [''] }, schema: { keys: Object.fromEntries(Object.entries(result).map(([k, e]) => [k, e.cfgu])) } },
    configs,
    consts: [],
    tests: keys.map((key) => ({ key, expressions: filters })),
  };
  const outcome = await session.progress('filtering', () => session.evaluator.run(job));
  const rejected = new Set<string>();
  const errors: string[] = [];
  // A filter sees every value, hidden ones included: they are redacted from its messages.
  let redactor: Redactor | undefined;
  for (const t of outcome.tests) {
    if (t.ok) continue;
    if (t.kind === 'falsy') rejected.add(t.key);
    else {
      redactor ??= redactorForResult(result);
      errors.push(`key ${t.key}, --filter ${JSON.stringify(filters[t.index] ?? '')}: ${redactor.redact(t.message ?? t.kind ?? '')}`);
    }
  }
  if (errors.length) {
    throw new ExitError(1, `${errors.length === 1 ? 'a --filter' : `${errors.length} --filter evaluations`} failed:`, errors);
  }
  return keys.filter((k) => !rejected.has(k));
}

