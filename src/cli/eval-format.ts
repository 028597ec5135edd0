/**
 * The `cfgu eval` output format (docs/cli.md, "The eval format"), written by `eval` and read back from standard input
 * by `eval` (the pipe) and `export`.
 */
import { setOwn } from '../core/names.js';
import type { Cfgu, EvalResult, EvaluatedConfig, Origin } from '../core/index.js';
import { UsageError } from './errors.js';

const ORIGINS: readonly Origin[] = ['empty', 'store', 'override', 'default', 'const'];

/**
 * The `cfgu eval` output format (docs/cli.md, "The eval format"): a JSON object, key -> `{ key, value, origin, cfgu,
 * set }`, exactly the engine's EvalResult. `value` is the stored (string) form.
 */
export function formatEvalResult(result: EvalResult): string {
  return `${JSON.stringify(result, null, 2)}\n`;
}

/** Parse and check an eval result (standard input of `eval` and `export`). Throws UsageError saying what is wrong. */
export function parseEvalResult(text: string, source = 'standard input'): EvalResult {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch {
    throw new UsageError(`${source} is not the JSON output of \`cfgu eval\` (not valid JSON)`);
  }
  const bad = (why: string) => new UsageError(`${source} is not the JSON output of \`cfgu eval\`: ${why}`);
  if (!data || typeof data !== 'object' || Array.isArray(data)) throw bad('expected an object of key -> { key, value, origin, cfgu, set }');
  const result: EvalResult = {};
  for (const [name, entry] of Object.entries(data as Record<string, unknown>)) {
    if (!entry || typeof entry !== 'object' || Array.isArray(entry)) throw bad(`"${name}" is not an object`);
    const e = entry as Record<string, unknown>;
    if (e.key !== name) throw bad(`"${name}".key must be "${name}"`);
    if (typeof e.value !== 'string') throw bad(`"${name}".value must be a string`);
    if (typeof e.origin !== 'string' || !ORIGINS.includes(e.origin as Origin)) throw bad(`"${name}".origin must be one of ${ORIGINS.join(', ')}`);
    const cfgu = e.cfgu ?? {};
    if (typeof cfgu !== 'object' || Array.isArray(cfgu)) throw bad(`"${name}".cfgu must be an object`);
    if (e.set !== undefined && typeof e.set !== 'string') throw bad(`"${name}".set must be a string`);
    const config: EvaluatedConfig = { key: name, value: e.value, origin: e.origin as Origin, cfgu: cfgu as Cfgu, set: (e.set as string | undefined) ?? '' };
    setOwn(result, name, config); // `__proto__` is an ordinary key: plain assignment would drop it
  }
  return result;
}
