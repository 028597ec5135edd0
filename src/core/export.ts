/** The export: hidden keys left out, every value coerced (coerce.ts). */
import { coerceValue, declaredTypeOf } from './coerce.js';
import { newRecord, setOwn } from './names.js';
import { evaluatePipeline, type EngineDeps, type PipelineOptions } from './eval.js';
import type { EvalCommandInput, EvalResult, ExportedConfigs } from './types.js';

export function exportResult(result: EvalResult): ExportedConfigs {
  const keys = Object.keys(result);
  const out: ExportedConfigs = newRecord(keys.length);
  for (const key of keys) {
    const e = result[key]!;
    if (e.cfgu.hidden === true) continue;
    setOwn(out, key, coerceValue(e.value, declaredTypeOf(e.cfgu)));
  }
  return out;
}

/** Evaluate a pipeline and export its last result: what `POST /export` answers. */
export async function exportPipeline(
  commands: readonly EvalCommandInput[],
  deps: EngineDeps,
  options?: PipelineOptions,
): Promise<{ configs: ExportedConfigs; backupStores: string[] }> {
  const { result, backupStores } = await evaluatePipeline(commands, deps, options);
  return { configs: exportResult(result), backupStores };
}
