/** The export: hidden keys left out, every value coerced (coerce.ts). */
import { coerceValue, declaredTypeOf, isPlainInteger } from './coerce.js';
import { newRecord, setOwn } from './names.js';
import { evaluatePipeline, type EngineDeps, type PipelineOptions } from './eval.js';
import { STEP, runAtOnce, runInSlices, type Steps } from './slices.js';
import type { EvalCommandInput, EvalResult, EvaluatedConfig, ExportedConfigs, PipelineOutcome } from './types.js';

/** What an export reads: a result, with its entries in order when the engine knows them (`PipelineOutcome`). */
type Exportable = Pick<PipelineOutcome, 'result' | 'ordered'>;

/**
 * Call `each` for every exported entry, in `Object.keys(result)` order, hidden keys left out. With `ordered` (the
 * engine's entries in that order) the record is not read at all: for a command without a pipe it is then never made
 * (eval.ts, Evaluated), and nothing enumerates it or looks each key up again.
 */
function eachExported(from: Exportable, each: (key: string, e: EvaluatedConfig) => void): void {
  const entries = from.ordered;
  if (entries) {
    for (const e of entries) if (e.cfgu.hidden !== true) each(e.key, e);
    return;
  }
  const result = from.result;
  for (const key of Object.keys(result)) {
    const e = result[key]!;
    if (e.cfgu.hidden !== true) each(key, e);
  }
}

function exportedConfigs(from: Exportable): ExportedConfigs {
  const out: ExportedConfigs = newRecord(from.ordered?.length ?? Object.keys(from.result).length);
  eachExported(from, (key, e) => setOwn(out, key, coerceValue(e.value, declaredTypeOf(e.cfgu))));
  return out;
}

export function exportResult(result: EvalResult): ExportedConfigs {
  return exportedConfigs({ result });
}

/** Evaluate a pipeline and export its last result: what `POST /export` answers. */
export async function exportPipeline(
  commands: readonly EvalCommandInput[],
  deps: EngineDeps,
  options?: PipelineOptions,
): Promise<{ configs: ExportedConfigs; backupStores: string[] }> {
  const outcome = await evaluatePipeline(commands, deps, options);
  return { configs: exportedConfigs(outcome), backupStores: outcome.backupStores };
}

/**
 * The export as JSON text: the same bytes as `JSON.stringify(exportResult(result))`, written key by key, and how many
 * keys it holds (what `POST /export` and its watchers send). For a large schema this skips building the export object
 * (a hash table, see `newRecord`) and enumerating it twice more (once to count, once to serialise). The keys come in
 * the order `Object.keys(result)` gives, which is the order JSON.stringify gives for the export, whose keys are a
 * subset of the result's inserted in that order. A coerced number is finite, and `String` writes a finite number as
 * JSON does.
 */
export function exportJson(result: EvalResult): { text: string; keys: number } {
  return runAtOnce(exportedText({ result }));
}

/** The export's text in steps (slices.ts): a checkpoint every STEP entries. */
function* exportedText(from: Exportable): Steps<{ text: string; keys: number }> {
  let text = '';
  let keys = 0;
  const entries = from.ordered;
  if (entries) {
    for (let i = 0; i < entries.length; i++) {
      if (i % STEP === STEP - 1) yield;
      const e = entries[i]!;
      if (e.cfgu.hidden !== true) text += `${keys++ ? ',' : ''}${jsonString(e.key)}:${valueJson(e)}`;
    }
  } else {
    const result = from.result;
    const names = Object.keys(result);
    for (let i = 0; i < names.length; i++) {
      if (i % STEP === STEP - 1) yield;
      const key = names[i]!;
      const e = result[key]!;
      if (e.cfgu.hidden !== true) text += `${keys++ ? ',' : ''}${jsonString(key)}:${valueJson(e)}`;
    }
  }
  return { text: `{${text}}`, keys };
}

/**
 * The JSON text of an entry's exported value. A value stored as a plain integer, of a key that declares no type, is
 * exported as that number, whose JSON text is the stored text itself (coerce.ts, plainInteger); every other value is
 * coerced and written.
 */
function valueJson(e: EvaluatedConfig): string {
  const type = declaredTypeOf(e.cfgu);
  if (type === undefined && isPlainInteger(e.value)) return e.value;
  const v = coerceValue(e.value, type);
  return typeof v === 'number' ? String(v) : typeof v === 'string' ? jsonString(v) : JSON.stringify(v);
}

/** Strings up to this length are checked in JavaScript before quoting; longer ones go to JSON.stringify at once. */
const SHORT_STRING = 64;

/**
 * `JSON.stringify(s)` for a string, without the call for the common case. JSON.stringify changes a string's characters
 * only where they are `"`, `\`, a control character below U+0020 or a UTF-16 surrogate (it escapes a lone one); a
 * short string free of all four is quoted as it is, and any other goes to JSON.stringify. Keys match
 * `^[A-Za-z0-9_-]+$` and most values are short and plain, so for a 1,000-key export this halves the time of writing
 * the text (bench/RESULTS.md, "Writing the export's text").
 */
function jsonString(s: string): string {
  if (s.length > SHORT_STRING) return JSON.stringify(s);
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c === 0x22 || c === 0x5c || (c >= 0xd800 && c <= 0xdfff)) return JSON.stringify(s);
  }
  return `"${s}"`;
}

/** `exportPipeline` with the answer as JSON text (exportJson). */
export async function exportPipelineJson(
  commands: readonly EvalCommandInput[],
  deps: EngineDeps,
  options?: PipelineOptions,
): Promise<{ text: string; keys: number; backupStores: string[] }> {
  const outcome = await evaluatePipeline(commands, deps, options);
  return { ...(await runInSlices(exportedText(outcome))), backupStores: outcome.backupStores };
}
