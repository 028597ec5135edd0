/**
 * The matrix as a WAI-ARIA grid: keys down, sets across, a cell per key and set showing its state by a symbol and a
 * colour, its state word and value in text for screen readers, and a tip with the value when the cell is hovered or
 * focused (hidden values masked). Arrow keys move between cells, Home and End to the row's ends (with Ctrl, the
 * grid's), Page Up and Down by a screenful, Enter opens the set in the values view with the key's explanation open.
 *
 * Only the rows in view are rendered (with a few more above and below): two spacer rows stand for the others, their
 * heights the row height (measured from a rendered row) times the rows left out, so 1,000 keys by 50 sets renders
 * about 30 rows of 50 cells. The cell that holds the tab stop (roving tabindex) is remembered by key and set, so a
 * refetch keeps it.
 */
import { useEffect, useLayoutEffect, useMemo, useRef, useState } from 'preact/hooks';
import type { VNode } from 'preact';
import { setLabel } from '../components.js';
import type { Matrix, MatrixCell } from './read-api.js';

const SYMBOLS: Record<string, string> = { ok: '✓', missing: '∅' };
const WORDS: Record<string, string> = {
  ok: 'passing',
  missing: 'missing',
  test: 'fails its test',
  enum: 'not in its enum',
  pattern: 'does not match its pattern',
  schema: 'fails its JSON schema',
  const: 'const failed',
  override: 'override refused',
};
const symbolOf = (state: string): string => SYMBOLS[state] ?? '✗';
const tone = (state: string): string => (state === 'ok' ? 'ok' : state === 'missing' ? 'missing' : 'failing');

/** A cell in words: its state, its value (masked when hidden), where it came from, its first failure. */
export function cellText(cell: MatrixCell): string {
  const value = cell.withheld === 'hidden' ? '(hidden)' : cell.value === undefined ? 'no value' : JSON.stringify(cell.value);
  const from = cell.origin === 'store' ? `from ${setLabel(cell.set ?? '')}` : cell.origin === 'empty' ? '' : `(${cell.origin})`;
  const failure = cell.failures?.[0]?.message;
  return [WORDS[cell.state] ?? cell.state, [value, from].filter(Boolean).join(' '), failure].filter(Boolean).join(' · ');
}

export interface GridProps {
  matrix: Matrix;
  /** The rows shown (indexes into `matrix.keys`), after the filters. */
  rows: number[];
  /** Ids (cellId) of the cells whose value changed with the last refetch. */
  changed: ReadonlySet<string>;
  settle(id: string): void;
  /** The sets picked for a diff (at most two). */
  picked: readonly string[];
  pick(set: string, on: boolean): void;
  open(set: string, key: string): void;
}

const OVERSCAN = 8;

interface Viewport {
  top: number;
  height: number;
}

interface TipState {
  text: string;
  x: number;
  y: number;
}

/** The tip beside the hovered or focused cell: one element for the whole grid, placed in the viewport, re-rendered alone. */
function Tip({ handle }: { handle: { set?: (tip: TipState | undefined) => void } }) {
  const [tip, setTip] = useState<TipState | undefined>(undefined);
  handle.set = setTip;
  if (!tip) return null;
  return (
    <div class="matrix-tip" aria-hidden="true" style={{ left: `${tip.x}px`, top: `${tip.y}px` }}>
      {tip.text}
    </div>
  );
}

/** The tip of the cell an event's target is in (none outside a cell). */
function tipOf(matrix: Matrix, target: EventTarget | null): TipState | undefined {
  const td = target instanceof Element ? target.closest<HTMLElement>('td[data-cell]') : null;
  if (!td) return undefined;
  const [k, s] = td.dataset.cell!.split(':').map(Number);
  const cell = matrix.cells[k!]?.[s!];
  if (!cell) return undefined;
  const r = td.getBoundingClientRect();
  return { text: `${matrix.keys[k!]} at ${setLabel(matrix.sets[s!] ?? '')}: ${cellText(cell)}`, x: Math.max(4, Math.min(r.left, innerWidth - 320)), y: r.bottom + 4 };
}

/** The rows in view: the scroll position and height of the scroller, and the measured height of a row. */
function useWindow(rowCount: number, measureKey: unknown) {
  const scroller = useRef<HTMLDivElement>(null);
  const [rowHeight, setRowHeight] = useState(32);
  const [view, setView] = useState<Viewport>({ top: 0, height: 600 });
  const measure = (): void => {
    const el = scroller.current;
    if (el) setView((v) => (v.top === el.scrollTop && v.height === el.clientHeight ? v : { top: el.scrollTop, height: el.clientHeight }));
  };
  useEffect(() => {
    measure();
    addEventListener('resize', measure);
    return () => removeEventListener('resize', measure);
  }, []);
  // The height of a row, measured when the rows or the viewport change (zoom changes both): not at every scroll.
  useLayoutEffect(() => {
    const row = scroller.current?.querySelector<HTMLElement>('tbody tr[data-row]');
    if (row && row.offsetHeight > 0 && Math.abs(row.offsetHeight - rowHeight) > 0.5) setRowHeight(row.offsetHeight);
  }, [rowCount, view.height, measureKey]);
  const first = Math.max(0, Math.floor(view.top / rowHeight) - OVERSCAN);
  const last = Math.min(rowCount, Math.ceil((view.top + view.height) / rowHeight) + OVERSCAN);
  /** Scrolls row `row` into view below the sticky header. */
  const reveal = (row: number, header: number): void => {
    const el = scroller.current;
    if (!el) return;
    if (row * rowHeight < el.scrollTop) el.scrollTop = row * rowHeight;
    else if (header + (row + 1) * rowHeight > el.scrollTop + el.clientHeight) el.scrollTop = header + (row + 1) * rowHeight - el.clientHeight;
    setView({ top: el.scrollTop, height: el.clientHeight });
  };
  return { scroller, rowHeight, view, first, last, measure, reveal };
}

/** The rows' vnodes, kept: a scroll renders only the rows that come into view (Preact skips a vnode it rendered). */
function useRowCache(matrix: Matrix, rows: number[], changed: ReadonlySet<string>, settle: (id: string) => void) {
  const cache = useMemo(() => new Map<number, { index: number; stop: number; vnode: VNode }>(), [matrix, rows, changed]);
  return (k: number, index: number, stop: number): VNode => {
    const hit = cache.get(k);
    if (hit && hit.index === index && hit.stop === stop) return hit.vnode;
    const vnode = <Row key={matrix.keys[k]} matrix={matrix} k={k} index={index} stop={stop} changed={changed} settle={settle} />;
    cache.set(k, { index, stop, vnode });
    return vnode;
  };
}

/** The id of a cell for the change highlight: by names, which a refetch keeps (indexes move when a set appears). */
export const cellId = (key: string, set: string): string => `${key}|${set}`;

export function MatrixGrid({ matrix, rows, changed, settle, picked, pick, open }: GridProps) {
  const head = useRef<HTMLTableSectionElement>(null);
  const win = useWindow(rows.length, matrix);
  // Fixed column widths: a scroll lays out only the new rows, and no column changes width as rows come and go.
  const keyWidth = useMemo(() => Math.min(32, 3 + matrix.keys.reduce((n, k) => Math.max(n, k.length), 3)), [matrix]);
  const { first, last, rowHeight } = win;
  const [active, setActive] = useState<{ key: string; set: string } | undefined>(undefined);
  const wantFocus = useRef(false);
  const tip = useMemo<{ set?: (tip: TipState | undefined) => void }>(() => ({}), []);
  const rowOf = useRowCache(matrix, rows, changed, settle);
  const showTip = (target: EventTarget | null): void => tip.set?.(tipOf(matrix, target));
  const hideTip = (): void => tip.set?.(undefined);

  // The tab stop: the active cell if it is still shown, else the first rendered row at the active column.
  let r = active ? rows.indexOf(matrix.keys.indexOf(active.key)) : -1;
  if (r < first || r >= last) r = first;
  const c = Math.max(0, active ? matrix.sets.indexOf(active.set) : 0);
  useLayoutEffect(() => {
    if (!wantFocus.current) return;
    wantFocus.current = false;
    win.scroller.current?.querySelector<HTMLElement>(`td[data-cell="${rows[r]}:${c}"]`)?.focus();
  });

  /** Moves the tab stop to row `to` (an index into `rows`), column `col`, scrolling it into view. */
  const moveTo = (to: number, col: number): void => {
    const row = Math.max(0, Math.min(rows.length - 1, to));
    const column = Math.max(0, Math.min(matrix.sets.length - 1, col));
    win.reveal(row, head.current?.offsetHeight ?? 0);
    wantFocus.current = true;
    setActive({ key: matrix.keys[rows[row]!]!, set: matrix.sets[column]! });
  };
  const onKeyDown = (e: KeyboardEvent): void => {
    if (!(e.target instanceof HTMLElement) || !e.target.matches('td[data-cell]')) return;
    const page = Math.max(1, Math.floor(win.view.height / rowHeight) - 1);
    const ctrl = e.ctrlKey || e.metaKey;
    const keys: Record<string, () => void> = {
      ArrowDown: () => moveTo(r + 1, c),
      ArrowUp: () => moveTo(r - 1, c),
      ArrowRight: () => moveTo(r, c + 1),
      ArrowLeft: () => moveTo(r, c - 1),
      Home: () => moveTo(ctrl ? 0 : r, 0),
      End: () => moveTo(ctrl ? rows.length - 1 : r, matrix.sets.length - 1),
      PageDown: () => moveTo(r + page, c),
      PageUp: () => moveTo(r - page, c),
      Enter: () => open(matrix.sets[c]!, matrix.keys[rows[r]!]!),
    };
    const action = keys[e.key];
    if (!action) return;
    e.preventDefault();
    action();
  };
  const onFocus = (e: FocusEvent): void => {
    const td = e.target instanceof HTMLElement ? e.target.closest<HTMLElement>('td[data-cell]') : null;
    if (td) {
      const [k, s] = td.dataset.cell!.split(':').map(Number);
      const key = matrix.keys[k!]!;
      const set = matrix.sets[s!]!;
      if (active?.key !== key || active.set !== set) setActive({ key, set });
    }
    showTip(e.target);
  };

  return (
    <>
    <div class="matrix-scroll" ref={win.scroller} onScroll={() => (win.measure(), hideTip())}>
      <table
        role="grid"
        class="matrix"
        style={{ width: `calc(${keyWidth}ch + ${matrix.sets.length} * var(--set-column))` }}
        aria-label={`Keys by sets (${rows.length} of ${matrix.keys.length} keys)`}
        aria-rowcount={rows.length + 1}
        aria-colcount={matrix.sets.length + 1}
        onKeyDown={onKeyDown}
        onFocusIn={onFocus}
        onFocusOut={hideTip}
        onMouseOver={(e) => showTip(e.target)}
        onMouseLeave={hideTip}
      >
        <colgroup>
          <col style={{ width: `${keyWidth}ch` }} />
          <col span={matrix.sets.length} class="set-column" />
        </colgroup>
        <thead ref={head}>
          <HeaderRow matrix={matrix} picked={picked} pick={pick} />
        </thead>
        <tbody>
          {first > 0 && <tr class="spacer" aria-hidden="true" style={{ height: `${first * rowHeight}px` }} />}
          {rows.slice(first, last).map((k, i) => rowOf(k, first + i, first + i === r ? c : -1))}
          {last < rows.length && <tr class="spacer" aria-hidden="true" style={{ height: `${(rows.length - last) * rowHeight}px` }} />}
        </tbody>
      </table>
    </div>
    <Tip handle={tip} />
    </>
  );
}

function HeaderRow({ matrix, picked, pick }: Pick<GridProps, 'matrix' | 'picked' | 'pick'>) {
  return (
    <tr role="row" aria-rowindex={1}>
      <th scope="col" role="columnheader" class="corner">
        Key
      </th>
      {matrix.sets.map((set, s) => (
        <th key={set} scope="col" role="columnheader" class="set-head">
          <label>
            <input type="checkbox" checked={picked.includes(set)} onChange={(e) => pick(set, (e.target as HTMLInputElement).checked)} />
            <span class="sr-only">Compare </span>
            <span class="set-path">{setLabel(set)}</span>
          </label>
          {matrix.failed[s]! > 0 && (
            <span class="failed-count" title={`${matrix.failed[s]} not passing`}>
              {matrix.failed[s]}
              <span aria-hidden="true"> ✗</span>
              <span class="sr-only"> not passing</span>
            </span>
          )}
        </th>
      ))}
    </tr>
  );
}

interface RowProps {
  matrix: Matrix;
  /** The key's index in `matrix.keys`. */
  k: number;
  /** The row's index among the rows shown. */
  index: number;
  /** The column of the tab stop when it is in this row, else -1. */
  stop: number;
  changed: ReadonlySet<string>;
  settle(id: string): void;
}

function Row({ matrix, k, index, stop, changed, settle }: RowProps) {
  const key = matrix.keys[k]!;
  return (
    <tr data-row role="row" aria-rowindex={index + 2}>
      <th scope="row" role="rowheader" class="key" title={key}>
        {key}
      </th>
      {matrix.sets.map((set, s) => {
        const cell = matrix.cells[k]![s]!;
        const id = cellId(key, set);
        return (
          <td
            key={set}
            role="gridcell"
            data-cell={`${k}:${s}`}
            aria-label={cellText(cell)}
            tabIndex={s === stop ? 0 : -1}
            class={`cell cell-${tone(cell.state)}${cell.inherited ? ' inherited' : ''}${changed.has(id) ? ' changed' : ''}`}
            onAnimationEnd={() => settle(id)}
          >
            {symbolOf(cell.state)}
          </td>
        );
      })}
    </tr>
  );
}
