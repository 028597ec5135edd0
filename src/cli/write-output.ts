/**
 * What `cfgu upsert`, `cfgu rollback` and `cfgu history` print, the same whether the store was opened here or a
 * server answered (`--server`): the changes of a write, the impact of a preview, a set's history.
 */
import { HIDDEN_MARK, parseSet, type ImpactEntry, type RevisionRecord, type ShownChange, type ShownValue } from '../core/index.js';

export type { ShownChange, ShownValue };

/** The answer of a write (local or a server's POST /upsert, /rollback). */
export interface WriteAnswer {
  store: string;
  set: string;
  dryRun: boolean;
  revision?: number;
  changes: ShownChange[];
  impact?: ImpactEntry[];
  /** True when more sets were under the written one than the impact evaluated. */
  impactTruncated?: boolean;
}

/** A history page (local or a server's GET /history). */
export interface HistoryAnswer {
  store: string;
  set: string;
  records: Array<Omit<RevisionRecord, 'set' | 'changes'> & { changes: ShownChange[] }>;
  next?: number;
}

/** The longest `--message` (as POST /upsert takes it). */
export const MAX_MESSAGE_LENGTH = 500;

const isMasked = (v: ShownValue): v is { hidden: true } => typeof v === 'object' && v !== null;
const absent = (v: ShownValue) => v === null || v === '';
const shown = (v: ShownValue) => (isMasked(v) ? HIDDEN_MARK : JSON.stringify(v));

/** `store "main", set "prod"` or `store "main", root set`. */
export function whereOf(store: string, set: string): string {
  const parsed = parseSet(set);
  const path = 'path' in parsed ? parsed.path : set;
  return `store "${store}", ${path === '' ? 'root set' : `set "${path}"`}`;
}

/** One line per change: `+ KEY = "v"`, `- KEY (was "v")`, `~ KEY = "new" (was "old")`, `= KEY = "v" (unchanged)`. */
export function changeLine(c: ShownChange): string {
  if (absent(c.before) && absent(c.after)) return `= ${c.key} (absent, unchanged)`;
  if (absent(c.before)) return `+ ${c.key} = ${shown(c.after)}`;
  if (absent(c.after)) return `- ${c.key} (was ${shown(c.before)})`;
  if (!isMasked(c.before) && !isMasked(c.after) && c.before === c.after) return `= ${c.key} = ${shown(c.after)} (unchanged)`;
  return `~ ${c.key} = ${shown(c.after)} (was ${shown(c.before)})`;
}

/** Mask the values of `hidden` keys. */
export function maskChanges<C extends { key: string; before: ShownValue; after: ShownValue }>(changes: readonly C[], hidden: ReadonlySet<string>): C[] {
  const mask = (v: ShownValue): ShownValue => (absent(v) ? null : { hidden: true });
  return changes.map((c) => (hidden.has(c.key) ? { ...c, before: mask(c.before), after: mask(c.after) } : c));
}

const count = (n: number) => `${n} ${n === 1 ? 'change' : 'changes'}`;

/** The lines of the impact of a write. */
export function impactLines(impact: readonly ImpactEntry[], truncated: boolean, set: string): string[] {
  if (!impact.length) return ['impact: no named schema declares a changed key'];
  const lines = ['impact:'];
  for (const i of impact) {
    const where = `schema "${i.schema}", ${i.set === '' ? 'root set' : `set "${i.set}"`}`;
    lines.push(`  ${where}: ${i.status}${i.changed.length ? ` (${i.changed.join(', ')})` : ''}`);
    for (const f of i.failures) lines.push(`    key ${f.key}, rule ${f.rule}: ${f.message}`);
  }
  if (truncated) lines.push(`  (only some of the sets under ${set === '' ? 'the root set' : `"${set}"`} were evaluated)`);
  return lines;
}

/**
 * What a write prints. A write: `N changes in <where>:` and a line per change (as `cfgu upsert` always printed). A
 * preview: `preview, nothing written: N changes in <where> at revision R:`, the changes, then the impact. `title`
 * (rollback) follows the count.
 */
export function writeLines(answer: WriteAnswer, title = ''): string[] {
  const where = whereOf(answer.store, answer.set);
  const n = answer.changes.length;
  const at = answer.revision === undefined ? '' : ` at revision ${answer.revision}`;
  const body = answer.changes.map(changeLine);
  if (answer.dryRun) {
    const head = `preview, nothing written: ${n === 0 ? `no changes in ${where}${title}${at}` : `${count(n)} in ${where}${title}${at}:`}`;
    const impact = !answer.impact ? [] : n === 0 ? ['impact: none (nothing changes)'] : impactLines(answer.impact, !!answer.impactTruncated, answer.set);
    return [head, ...body, ...impact];
  }
  if (n === 0) return [`no changes in ${where}${title}`];
  return [`${count(n)} in ${where}${title}:`, ...body];
}

/** What `cfgu history` prints: one block per record, newest first. */
export function historyLines(answer: HistoryAnswer): string[] {
  const where = whereOf(answer.store, answer.set);
  if (!answer.records.length) return [`no history in ${where}`];
  const lines = [`history of ${where}, newest first:`];
  for (const r of answer.records) {
    const who = r.recorded ? (r.subject ?? '-') : 'outside cfgu (not recorded)';
    lines.push(`revision ${r.revision}  ${r.time}  ${who}${r.message ? `  ${JSON.stringify(r.message)}` : ''}`);
    for (const c of r.changes) lines.push(`  ${changeLine(c)}`);
  }
  if (answer.next !== undefined) lines.push(`older records: add --before ${answer.next}`);
  return lines;
}
