/** What an expression sees of one config (`$.configs.KEY`, `$` in `test`): shared by the engine, the sandbox and `cfgu export --filter`. */
import { coerceValue, declaredTypeOf } from './coerce.js';
import type { EvaluatedConfig } from './types.js';
import type { ConfigView } from './ports.js';

/** `$.labels`: always an array. */
export function labelsOf(cfgu: { label?: unknown }): string[] {
  const label = cfgu.label;
  return label === undefined ? [] : Array.isArray(label) ? (label as string[]) : [label as string];
}

export function viewOf(e: EvaluatedConfig): ConfigView {
  return {
    key: e.key,
    storedValue: e.value,
    value: coerceValue(e.value, declaredTypeOf(e.cfgu)),
    origin: e.origin,
    cfgu: e.cfgu as Record<string, unknown>,
    labels: labelsOf(e.cfgu),
  };
}
