/**
 * The matrix: one schema at every set of the store (`POST /matrix` with `prefix: ""`), keys down and sets across
 * (./matrix-grid.tsx). A scoped credential asks for the sets it may read instead (`sets`: the list of `GET /sets`),
 * since a prefix needs a grant of the whole subtree and the given sets are checked one by one as exports are. Filters
 * "only problems" and "only differences" and the two sets picked for a diff live in the URL (`problems`,
 * `differences`, `compare`). Every change notice of the store refetches (a set may have appeared); the reader's
 * scroll position and focus stay, and the cells whose value changed are highlighted.
 */
import { useMemo } from 'preact/hooks';
import { Loading, Show, StateBadge, setLabel, useLoad } from '../components.js';
import { useConsole } from '../context.js';
import type { SetList } from '../api.js';
import { ValueText } from './explain.js';
import { MatrixGrid, cellId } from './matrix-grid.js';
import { matrix as matrixOf, type Matrix, type MatrixCell } from './read-api.js';
import { useChanged } from './read-hooks.js';
import './matrix.css';

export function MatrixView() {
  const { route } = useConsole();
  if (route.schema === undefined)
    return (
      <section aria-labelledby="view-title" class="read-view">
        <h1 id="view-title">Matrix</h1>
        <p>The server holds no named schema your credential may use, so there is nothing to compare.</p>
      </section>
    );
  return <MatrixOf schema={route.schema} />;
}

interface Answer {
  identity: string;
  /** Undefined when the credential may read no set of the store. */
  matrix: Matrix | undefined;
  /** Sets left out by the scope (asked by list), or 0. */
  withheld: number;
}

/** What a cell's value is, for comparing cells: a hidden value by the set that holds it (never by its text). */
function sameness(cell: MatrixCell): string {
  if (cell.withheld === 'hidden') return `hidden:${cell.origin}:${cell.set ?? ''}`;
  return cell.value === undefined ? 'none' : `=${cell.value}`;
}

function signatures(a: Answer): Map<string, string> {
  const out = new Map<string, string>();
  const m = a.matrix;
  if (!m) return out;
  m.keys.forEach((key, k) => m.sets.forEach((set, s) => out.set(cellId(key, set), JSON.stringify(m.cells[k]![s]!))));
  return out;
}

function MatrixOf({ schema }: { schema: string }) {
  const { api, store, session, changes } = useConsole();
  const storeName = store!.name;
  const identity = JSON.stringify([storeName, schema]);
  const loaded = useLoad(
    async (signal): Promise<Answer> => {
      if (session.access === 'full') return { identity, matrix: await matrixOf(api, { store: storeName, schema, prefix: '' }, signal), withheld: 0 };
      const list = await api.request<SetList>(`/sets?store=${encodeURIComponent(storeName)}`, { signal });
      if (list.sets.length === 0) return { identity, matrix: undefined, withheld: list.withheld };
      return { identity, matrix: await matrixOf(api, { store: storeName, schema, sets: list.sets }, signal), withheld: list.withheld };
    },
    [identity, changes.seq],
  );
  const answer = loaded.state === 'done' && loaded.value.identity === identity ? loaded.value : undefined;
  const [changed, settle] = useChanged(identity, answer, signatures);
  return (
    <section aria-labelledby="view-title" class="read-view matrix-view">
      <h1 id="view-title">
        <span class="muted">Matrix of</span> {schema} <span class="muted">in store</span> {storeName}
      </h1>
      <Show loaded={loaded} what="the matrix">
        {(a) =>
          a.identity !== identity ? (
            <Loading what="the matrix" />
          ) : a.matrix === undefined ? (
            <p>Your credential may read no set of this store{a.withheld > 0 ? ` (${a.withheld} hidden by your scope)` : ''}.</p>
          ) : a.matrix.sets.length === 0 ? (
            <p>The store holds no value at any set yet: there is nothing to compare.</p>
          ) : (
            <MatrixBody matrix={a.matrix} withheld={a.withheld} changed={changed} settle={settle} />
          )
        }
      </Show>
    </section>
  );
}

interface BodyProps {
  matrix: Matrix;
  withheld: number;
  changed: ReadonlySet<string>;
  settle(id: string): void;
}

/** A set in the `compare` parameter: the root set as "(root)" (no set segment has parentheses). */
const toParam = (set: string): string => (set === '' ? '(root)' : set);
const fromParam = (text: string): string => (text === '(root)' ? '' : text);

function MatrixBody({ matrix, withheld, changed, settle }: BodyProps) {
  const { route, navigate } = useConsole();
  const problems = route.params.problems === '1';
  const differences = route.params.differences === '1';
  const picked = (route.params.compare ?? '').split(',').filter(Boolean).map(fromParam).filter((s) => matrix.sets.includes(s));
  const setParam = (name: string, value: string): void => navigate({ params: { ...route.params, [name]: value } }, { replace: true });
  const rows = useMemo(() => {
    const out: number[] = [];
    matrix.cells.forEach((row, k) => {
      if (problems && row.every((c) => c.state === 'ok')) return;
      if (differences && row.every((c) => sameness(c) === sameness(row[0]!))) return;
      out.push(k);
    });
    return out;
  }, [matrix, problems, differences]);
  const notOk = matrix.failed.reduce((a, b) => a + b, 0);
  const pick = (set: string, on: boolean): void => {
    const rest = picked.filter((s) => s !== set);
    setParam('compare', (on ? [...rest, set].slice(-2) : rest).map(toParam).join(','));
  };
  return (
    <>
      <p class="muted matrix-summary">
        {matrix.keys.length} keys × {matrix.sets.length} sets · {notOk === 0 ? 'every cell passing' : `${notOk} ${notOk === 1 ? 'cell' : 'cells'} not passing`}
        {withheld > 0 && ` · ${withheld} ${withheld === 1 ? 'set' : 'sets'} hidden by your scope`}
        {matrix.fromBackup && ' · answered from the store’s backup'}
      </p>
      <div class="matrix-tools">
        <label>
          <input type="checkbox" checked={problems} onChange={(e) => setParam('problems', (e.target as HTMLInputElement).checked ? '1' : '')} /> Only problems
        </label>
        <label>
          <input type="checkbox" checked={differences} onChange={(e) => setParam('differences', (e.target as HTMLInputElement).checked ? '1' : '')} /> Only differences
        </label>
        <span class="muted legend">
          <span class="cell-ok">✓</span> passing · <span class="cell-missing">∅</span> missing · <span class="cell-failing">✗</span> failing · tick two sets to compare them
        </span>
      </div>
      {rows.length === 0 ? (
        <p>No key matches the filters.</p>
      ) : (
        <MatrixGrid matrix={matrix} rows={rows} changed={changed} settle={settle} picked={picked} pick={pick} open={(set, key) => navigate({ view: 'schema', set, params: { why: key } })} />
      )}
      {picked.length === 2 && <Diff matrix={matrix} a={picked[0]!} b={picked[1]!} />}
    </>
  );
}

/** The keys whose values differ between two sets, the first picked (old) beside the second (new). */
function Diff({ matrix, a, b }: { matrix: Matrix; a: string; b: string }) {
  const sa = matrix.sets.indexOf(a);
  const sb = matrix.sets.indexOf(b);
  const differ = matrix.keys.map((_, k) => k).filter((k) => sameness(matrix.cells[k]![sa]!) !== sameness(matrix.cells[k]![sb]!));
  const side = (cell: MatrixCell) => (
    <td>
      <ValueText value={cell.value} withheld={cell.withheld} />
      {cell.origin !== 'store' && cell.origin !== 'empty' && <span class="muted"> ({cell.origin})</span>}
      {cell.state !== 'ok' && (
        <>
          {' '}
          <StateBadge state={cell.state} />
        </>
      )}
    </td>
  );
  return (
    <section class="diff" aria-labelledby="diff-title">
      <h2 id="diff-title">
        Diff of {setLabel(a)} and {setLabel(b)}
      </h2>
      <p class="muted">
        {differ.length} of {matrix.keys.length} keys differ{differ.length === 0 ? ': the two sets give the same values.' : '.'}
      </p>
      {differ.length > 0 && (
        <div class="table-scroll">
          <table class="diff-table">
            <thead>
              <tr>
                <th scope="col">Key</th>
                <th scope="col">{setLabel(a)}</th>
                <th scope="col">{setLabel(b)}</th>
              </tr>
            </thead>
            <tbody>
              {differ.map((k) => (
                <tr key={matrix.keys[k]}>
                  <th scope="row">
                    <code>{matrix.keys[k]}</code>
                  </th>
                  {side(matrix.cells[k]![sa]!)}
                  {side(matrix.cells[k]![sb]!)}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
