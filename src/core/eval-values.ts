/**
 * Steps 1-5 of a command's evaluation (docs/engine.md): empty, store, override, default, pipe; the store's winning
 * value per key, and the pipe's merge rule.
 */
import { type EvalFailure } from './errors.js';
import { isArrayIndex, keyProblem, newRecord, setOwn, truncate, type ParsedSet } from './names.js';
import { stringifyValue, type PreparedSchema } from './schema.js';
import { STEP, type Steps } from './slices.js';
import type { EvalResult, EvaluatedConfig } from './types.js';
import type { Config } from './ports.js';
import type { CheckedCommand } from './eval.js';

/**
 * A command's evaluation (steps 1-5, then const and validate):
 * - `byIndex`: the entry the result holds for each schema key, by the key's position (PreparedKey.index);
 * - `ordered`: the result's entries in the order `Object.keys(result)` gives, when no key is an array index (then that
 *   order is the order the keys were set in); undefined otherwise;
 * - `result`: the record itself, made when first asked for.
 * The export walks `ordered` (export.ts) and the checks reach entries through `byIndex`, so for a command without a
 * pipe the record is never made on the way to `POST /export`'s answer. Making a 1,000-key record (a hash table,
 * names.ts, newRecord), enumerating it and looking every key up again took about a third of such an export's time.
 * The steps after evaluateValues change an entry's fields, never which entry a key holds, so all three stay true;
 * `upsert`, which replaces entries, uses only the record.
 */
export class Evaluated {
  private record: EvalResult | undefined;

  constructor(
    readonly byIndex: readonly EvaluatedConfig[],
    readonly ordered: readonly EvaluatedConfig[] | undefined,
    record: EvalResult | undefined,
  ) {
    this.record = record;
  }

  get result(): EvalResult {
    if (!this.record) {
      // Only a command without a pipe comes without its record, and then `byIndex` is in schema order.
      const record = newRecord<EvaluatedConfig>(this.byIndex.length);
      for (const e of this.byIndex) setOwn(record, e.key, e);
      this.record = record;
    }
    return this.record;
  }
}

/**
 * Step 2's choice for each schema key, by position: the config of the deepest set of the hierarchy holding a non-empty
 * value, or undefined. A pure function of the schema, the set path and the store's answer; for a frozen answer (the
 * in-process stores hand out the same frozen answer while their data is unchanged, src/stores/common.ts AnswerMemo)
 * it is kept with the answer, so a repeated request skips the walk. A network store's answer is new each time and
 * is walked each time.
 */
const winnersByAnswer = new WeakMap<readonly Config[], { schema: PreparedSchema; set: string; winners: ReadonlyArray<Config | undefined> }>();

function storeWinners(schema: PreparedSchema, set: ParsedSet, stored: readonly Config[]): ReadonlyArray<Config | undefined> {
  const frozen = Object.isFrozen(stored);
  const known = frozen ? winnersByAnswer.get(stored) : undefined;
  if (known && known.schema === schema && known.set === set.path) return known.winners;
  const depth = new Map<string, number>();
  set.hierarchy.forEach((s, i) => depth.set(s, i));
  const winners = new Array<Config | undefined>(schema.keys.length);
  // Depth of the set each key's value came from so far (-1: none yet).
  const best = new Int32Array(schema.keys.length).fill(-1);
  for (const c of stored) {
    if (c.value === '') continue;
    const p = schema.byName.get(c.key);
    if (!p || p.isConst || p.isLazy) continue;
    const d = depth.get(c.set);
    if (d === undefined) continue;
    if (best[p.index]! < d) {
      best[p.index] = d;
      winners[p.index] = c;
    }
  }
  if (frozen) winnersByAnswer.set(stored, { schema, set: set.path, winners });
  return winners;
}

/** Steps 1-5: empty, store, override, default, pipe. Pure; in steps (slices.ts), a checkpoint every STEP keys. */
export function* evaluateValues(
  command: CheckedCommand,
  stored: readonly Config[],
  pipe: EvalResult | undefined,
  failures: EvalFailure[],
): Steps<Evaluated> {
  const { schema, set, overrides, index } = command;
  const n = schema.keys.length;
  // The entries by the key's position in the schema (PreparedKey.index).
  const entries: EvaluatedConfig[] = new Array<EvaluatedConfig>(n);
  // 1. empty, 2. store: each key starts empty or with the value its store step chose (storeWinners).
  const winners = stored.length ? storeWinners(schema, set, stored) : undefined;
  for (let i = 0; i < n; i++) {
    if (i % STEP === STEP - 1) yield;
    const p = schema.keys[i]!;
    const w = winners?.[i];
    entries[i] = w
      ? { key: p.key, value: w.value, origin: 'store', cfgu: p.cfgu, set: w.set }
      : { key: p.key, value: '', origin: 'empty', cfgu: p.cfgu, set: set.path };
  }
  // 3. override
  const overridden = Object.keys(overrides);
  for (let i = 0; i < overridden.length; i++) {
    if (i % STEP === STEP - 1) yield;
    const key = overridden[i]!;
    const p = schema.byName.get(key);
    if (!p) {
      const problem = keyProblem(key);
      failures.push({
        command: index,
        key,
        rule: 'override',
        message: problem ? `override for an invalid key: ${problem}` : `override for key "${truncate(key)}", which the command's schema does not declare`,
      });
      continue;
    }
    if (p.isConst) {
      failures.push({ command: index, key, rule: 'override', message: `key "${key}" is computed by \`const\` and cannot be overridden` });
      continue;
    }
    let text: string;
    try {
      text = stringifyValue(overrides[key]);
    } catch {
      // JSON.stringify overflows the stack on a value nested too deeply (the body parser does not): a bad override.
      failures.push({ command: index, key, rule: 'override', message: `the override for key "${key}" cannot be stored: it is nested too deeply` });
      continue;
    }
    const e = entries[p.index]!;
    e.value = text;
    e.origin = 'override';
    e.set = set.path;
  }
  // 4. default
  for (let i = 0; i < n; i++) {
    if (i % STEP === STEP - 1) yield;
    const p = schema.keys[i]!;
    const e = entries[i]!;
    if (e.origin === 'empty' && p.defaultText !== undefined) {
      e.value = p.defaultText;
      e.origin = 'default';
    }
  }
  // 5. pipe: the piped result's keys in its order, then this command's other keys in schema order.
  if (!pipe) return new Evaluated(entries, schema.keysInOrder ? entries : undefined, undefined);
  const pipeKeys = Object.keys(pipe);
  const merged: EvalResult = newRecord(pipeKeys.length + n);
  const byIndex = entries.slice();
  const ordered: EvaluatedConfig[] = [];
  let inOrder = schema.keysInOrder;
  for (let i = 0; i < pipeKeys.length; i++) {
    if (i % STEP === STEP - 1) yield;
    const key = pipeKeys[i]!;
    const piped = pipe[key]!;
    const p = schema.byName.get(key);
    const e = p ? (byIndex[p.index] = pipeWinner(piped, entries[p.index]!)) : piped;
    setOwn(merged, key, e);
    ordered.push(e);
    if (inOrder && isArrayIndex(key)) inOrder = false;
  }
  for (let i = 0; i < entries.length; i++) {
    if (i % STEP === STEP - 1) yield;
    const e = entries[i]!;
    if (Object.prototype.hasOwnProperty.call(merged, e.key)) continue;
    setOwn(merged, e.key, e);
    ordered.push(e);
  }
  return new Evaluated(byIndex, inOrder ? ordered : undefined, merged);
}

/** The pipe's merge rule for a key both results hold. */
export function pipeWinner(piped: EvaluatedConfig, current: EvaluatedConfig): EvaluatedConfig {
  if (piped.origin === 'empty') return current;
  if (current.origin === 'empty') return piped;
  if (current.origin === 'default' && piped.origin !== 'default') return piped;
  return current;
}
