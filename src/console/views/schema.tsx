/**
 * The values of a schema at a set (the default view): one `POST /explain` of the command `{store, set, schema}`
 * answers every key with its value, where it came from, its state and its failures, also when validation fails. A
 * row per key; "why?" opens the key's explanation under its row (kept in the URL's `why`, the keys in the order they
 * were opened; Escape closes the last one). `/` focuses the key filter. A notice of a change at the set or one of its
 * ancestors refetches; the rows whose value changed are highlighted, and nothing else moves.
 */
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import type { KeyDeclaration, SchemaDocument } from '../api.js';
import { Loading, Show, StateBadge, setLabel, useLoad } from '../components.js';
import { useConsole } from '../context.js';
import { Explanation, ValueText, originLabel } from './explain.js';
import { explain, isWithin, stateOf, type ExplainOutcome, type KeyExplanation } from './read-api.js';
import { useChanged, useRelevantChanges } from './read-hooks.js';
import './schema.css';

export function SchemaView() {
  const { route } = useConsole();
  if (route.schema === undefined)
    return (
      <section aria-labelledby="view-title" class="read-view">
        <h1 id="view-title">Values</h1>
        <p>The server holds no named schema your credential may use, so there is nothing to show at a set.</p>
      </section>
    );
  if (route.set === undefined) return <Loading what="the sets" />;
  return <Values schema={route.schema} set={route.set} />;
}

interface Answer {
  identity: string;
  outcome: ExplainOutcome;
  declarations: Record<string, KeyDeclaration>;
}

/** Whether the target of a key press is a field that takes text (where `/` and Escape are the field's own). */
const typing = (target: EventTarget | null): boolean => target instanceof HTMLElement && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName));

function Values({ schema, set }: { schema: string; set: string }) {
  const { api, store, changes } = useConsole();
  const storeName = store!.name;
  const identity = JSON.stringify([storeName, set, schema]);
  // A write at this set or above it changes what it reads; one below it does not.
  const relevant = useRelevantChanges(changes, (sets) => sets === null || sets.some((s) => isWithin(set, s)));
  const loaded = useLoad(
    async (signal): Promise<Answer> => {
      const [outcome, document] = await Promise.all([
        explain(api, { store: storeName, set, schema }, signal),
        api.request<SchemaDocument>(`/schemas/${encodeURIComponent(schema)}`, { signal }).catch(() => undefined),
      ]);
      return { identity, outcome, declarations: document?.keys ?? {} };
    },
    [identity, relevant],
  );
  const answer = loaded.state === 'done' ? loaded.value : undefined;
  const [changed, settle] = useChanged(identity, answer?.identity === identity ? answer : undefined, signatures);
  return (
    <section aria-labelledby="view-title" class="read-view values-view">
      <h1 id="view-title">
        <span class="muted">Values of</span> {schema} <span class="muted">at</span> {setLabel(set)}
      </h1>
      <Show loaded={loaded} what="the values">
        {(a) => (a.identity === identity ? <ValueTable answer={a} changed={changed} settle={settle} /> : <Loading what="the values" />)}
      </Show>
    </section>
  );
}

const keysOf = (a: Answer): KeyExplanation[] => (a.outcome.explanations[0]?.keys ?? []).filter((k) => k.declared);

function signatures(a: Answer): Map<string, string> {
  return new Map(keysOf(a).map((k) => [k.key, JSON.stringify([k.value, k.withheld, k.origin, k.set, k.failures])]));
}

/** The keys of the `why` parameter, in the order they were opened. */
const openOf = (why: string | undefined): string[] => (why ? why.split(',').filter(Boolean) : []);

function ValueTable({ answer, changed, settle }: { answer: Answer; changed: ReadonlySet<string>; settle(key: string): void }) {
  const { route, navigate } = useConsole();
  const [filter, setFilter] = useState('');
  const filterBox = useRef<HTMLInputElement>(null);
  const table = useRef<HTMLTableElement>(null);
  const open = openOf(route.params.why);
  const setOpen = (keys: string[]): void => navigate({ params: { ...route.params, why: keys.join(',') } }, { replace: true });
  const toggle = (key: string): void => setOpen(open.includes(key) ? open.filter((k) => k !== key) : [...open, key]);

  useEffect(() => {
    const onKey = (e: KeyboardEvent): void => {
      if (e.key === '/' && !typing(e.target) && !e.ctrlKey && !e.metaKey && !e.altKey) {
        e.preventDefault();
        filterBox.current?.focus();
      } else if (e.key === 'Escape' && open.length > 0 && !typing(e.target)) {
        const last = open[open.length - 1]!;
        setOpen(open.slice(0, -1));
        table.current?.querySelector<HTMLElement>(`[data-why="${CSS.escape(last)}"]`)?.focus();
      }
    };
    addEventListener('keydown', onKey);
    return () => removeEventListener('keydown', onKey);
  }, [route.params.why]);

  const command = answer.outcome.explanations[0];
  const keys = keysOf(answer);
  const needle = filter.trim().toLowerCase();
  const shown = useMemo(
    () => (needle ? keys.filter((k) => k.key.toLowerCase().includes(needle) || (answer.declarations[k.key]?.description ?? '').toLowerCase().includes(needle)) : keys),
    [answer, needle],
  );
  const failing = keys.filter((k) => k.failures.length > 0).length;
  return (
    <>
      <div class="values-tools">
        <input ref={filterBox} type="search" aria-label="Filter keys (press / to focus)" placeholder="Filter keys ( / )" value={filter} onInput={(e) => setFilter((e.target as HTMLInputElement).value)} />
        <span class="muted">
          {keys.length} keys · {failing === 0 ? 'all passing' : `${failing} not passing`}
          {answer.outcome.backupStores.length > 0 && ` · answered from the backup of ${answer.outcome.backupStores.join(', ')}`}
          {needle && ` · ${shown.length} shown`}
        </span>
      </div>
      <div class="table-scroll">
        <table class="values" ref={table}>
          <thead>
            <tr>
              <th scope="col">Key</th>
              <th scope="col">Value</th>
              <th scope="col">From</th>
              <th scope="col">State</th>
              <th scope="col">
                <span class="sr-only">Explanation</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {shown.map((k) => (
              <Row key={k.key} k={k} at={command?.set ?? ''} hierarchy={command?.hierarchy ?? []} declaration={answer.declarations[k.key]} open={open.includes(k.key)} changed={changed.has(k.key)} toggle={toggle} settle={settle} />
            ))}
          </tbody>
        </table>
      </div>
      {shown.length === 0 && <p class="muted">{needle ? 'No key matches the filter.' : 'The schema declares no key.'}</p>}
    </>
  );
}

interface RowProps {
  k: KeyExplanation;
  /** The set the values are read at. */
  at: string;
  hierarchy: readonly string[];
  declaration: KeyDeclaration | undefined;
  open: boolean;
  changed: boolean;
  toggle(key: string): void;
  settle(key: string): void;
}

function Row({ k, at, hierarchy, declaration, open, changed, toggle, settle }: RowProps) {
  const id = `why-${k.key}`;
  const inherited = k.origin === 'store' && k.set !== at;
  return (
    <>
      <tr class={changed ? 'changed' : undefined} onAnimationEnd={() => settle(k.key)}>
        <th scope="row" class="key">
          <code>{k.key}</code>
          {declaration?.description && <span class="description">{declaration.description}</span>}
        </th>
        <td>
          <ValueText value={k.origin === 'empty' ? undefined : k.value} withheld={k.withheld} />
          {k.derivedFromHidden && <span class="muted"> (from a hidden key)</span>}
        </td>
        <td>
          {originLabel(k.origin, k.set)}
          {inherited && <span class="muted"> (inherited)</span>}
        </td>
        <td>
          <StateBadge state={stateOf(k.failures)} />
          {k.failures.map((f, i) => (
            <span key={i} class="failure">
              {f.message}
            </span>
          ))}
        </td>
        <td>
          <button type="button" class="why-button" data-why={k.key} aria-expanded={open} aria-controls={open ? id : undefined} aria-label={`why? ${k.key}`} onClick={() => toggle(k.key)}>
            why? <span aria-hidden="true">{open ? '▾' : '▸'}</span>
          </button>
        </td>
      </tr>
      {open && (
        <tr class="why-row">
          <td colSpan={5} id={id}>
            <Explanation k={k} hierarchy={hierarchy} />
          </td>
        </tr>
      )}
    </>
  );
}
