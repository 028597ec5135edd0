/**
 * `cfgu matrix` and `cfgu diff`: the engine's matrix (core/matrix.ts) as a table for the terminal, or as JSON, and the
 * keys on which two sets differ (docs/cli.md, docs/explain.md "Comparing sets").
 */
import type { Matrix, MatrixCell } from '../core/index.js';

/** A set path as a table shows it: the root set is `(root)`. */
const setName = (set: string): string => (set === '' ? '(root)' : set);

/** Longest value a table cell shows; longer ones end with `…` (JSON output has them whole). */
const MAX_VALUE = 40;

function valueText(cell: MatrixCell): string {
  if (cell.withheld === 'hidden') return '(hidden)';
  if (cell.value === undefined) return '(no value)';
  // A value with a line break or another control character is shown as a JSON string, on one line.
  const text = /[\u0000-\u001f\u007f]/.test(cell.value) ? JSON.stringify(cell.value) : cell.value;
  return text.length > MAX_VALUE ? `${text.slice(0, MAX_VALUE - 1)}…` : text;
}

/** One cell as a table shows it: the value, where it came from unless its own set, and `✘ <state>` when not ok. */
export function cellText(cell: MatrixCell): string {
  let text = valueText(cell);
  if (cell.origin === 'store' && cell.inherited) text += ` (from ${cell.set === '' ? '/' : cell.set})`;
  else if (cell.origin === 'default' || cell.origin === 'const' || cell.origin === 'override') text += ` (${cell.origin})`;
  if (cell.state !== 'ok') {
    const tests = (cell.failures ?? []).filter((f) => f.test !== undefined).map((f) => f.test);
    text += ` ✘ ${cell.state}${cell.state === 'test' && tests.length ? ` ${tests.join(',')}` : ''}`;
  }
  return text;
}

/** Rows of text as aligned columns, two spaces apart, without trailing spaces. */
function columns(rows: string[][]): string {
  const widths: number[] = [];
  for (const row of rows) row.forEach((t, i) => (widths[i] = Math.max(widths[i] ?? 0, [...t].length)));
  return rows.map((row) => row.map((t, i) => (i === row.length - 1 ? t : t + ' '.repeat(widths[i]! - [...t].length))).join('  ').trimEnd()).join('\n');
}

/** The whole matrix as a table: a row per key, a column per set, and a last line counting the cells not ok. */
export function formatMatrixTable(m: Matrix): string {
  if (!m.sets.length) return `no sets${m.prefix !== undefined ? ` under the prefix ${setName(m.prefix)}` : ''} in store "${m.store}"\n`;
  const rows = [['KEY', ...m.sets.map(setName)], ...m.keys.map((key, k) => [key, ...m.cells[k]!.map(cellText)])];
  const notOk = m.failed.reduce((a, b) => a + b, 0);
  const where = m.failed.map((n, s) => (n ? `${setName(m.sets[s]!)} ${n}` : '')).filter(Boolean);
  const summary = `${m.keys.length} key${m.keys.length === 1 ? '' : 's'} at ${m.sets.length} set${m.sets.length === 1 ? '' : 's'}; ${
    notOk === 0 ? 'every cell is ok' : `${notOk} cell${notOk === 1 ? '' : 's'} not ok (${where.join(', ')})`
  }`;
  return `${columns(rows)}\n\n${summary}\n`;
}

/** Two cells differ when their state or their value (hidden values compared, not shown) differs. */
const differs = (a: MatrixCell, b: MatrixCell): boolean => a.state !== b.state || (a.value ?? '') !== (b.value ?? '');

/**
 * The matrix of two sets reduced to the keys that differ. `m` must hold the values of hidden keys (revealHidden), so
 * that they are compared; unless `reveal`, they are then withheld from the result as the matrix withholds them.
 */
export function diffOf(m: Matrix, reveal: boolean): Matrix & { same: number } {
  const keys: string[] = [];
  const cells: MatrixCell[][] = [];
  m.keys.forEach((key, k) => {
    const row = m.cells[k]!;
    if (!differs(row[0]!, row[1]!)) return;
    keys.push(key);
    cells.push(reveal ? row : row.map(withheld));
  });
  return { ...m, keys, cells, same: m.keys.length - keys.length };
}

function withheld(cell: MatrixCell): MatrixCell {
  if (!cell.hidden) return cell;
  const { value: _value, ...rest } = cell;
  return { ...rest, withheld: 'hidden' };
}

/** The keys that differ, side by side, and a last line saying how many are the same. */
export function formatDiffTable(d: Matrix & { same: number }): string {
  const [a, b] = d.sets.map(setName) as [string, string];
  const total = d.keys.length + d.same;
  if (!d.keys.length) return `no differences: the ${total} key${total === 1 ? ' is' : 's are'} the same at ${a} and ${b}\n`;
  const rows = [['KEY', a, b], ...d.keys.map((key, k) => [key, cellText(d.cells[k]![0]!), cellText(d.cells[k]![1]!)])];
  return `${columns(rows)}\n\n${d.keys.length} of ${total} key${total === 1 ? '' : 's'} differ${d.keys.length === 1 ? 's' : ''}\n`;
}
