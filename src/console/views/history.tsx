/**
 * The history (view `history`): the revisions of the route's set, newest first (GET /history), "Older" for the next
 * page, filtered by key and time range (URL parameters `key`, `since`, `until`); one opened (`rev`) shows its diff.
 * Rollback to a revision previews the restoring write with the same panel as the editor (./impact.tsx), then saves it
 * with a message. New revisions (a change notice touching the set) are prepended, highlighted.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import type { Problem } from '../api.js';
import { Loading, ProblemView, problemOf, setLabel } from '../components.js';
import { useConsole } from '../context.js';
import { ChangesTable, useWriteFlow, WritePanel, type Send } from './impact.js';
import { history, rollback, useHiddenKeys, useTouched, writeRights, type HistoryRecord } from './write-api.js';
import './history.css';

export function HistoryView() {
  const { store, route } = useConsole();
  if (!store) return null;
  const set = route.set ?? '';
  return (
    <section class="history" aria-labelledby="history-title">
      <h1 id="history-title">
        History of {setLabel(set)} <span class="muted">· store {store.name}</span>
      </h1>
      {store.history ? <Revisions key={`${store.name}\n${set}`} set={set} /> : <p>Store {store.name} keeps no history.</p>}
    </section>
  );
}

/** `2026-11-28T22:59` (a datetime-local input's value) for an ISO time, in the browser's time zone. */
function localInput(iso: string | undefined): string {
  if (!iso) return '';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '';
  const p = (n: number): string => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}`;
}

/** Revisions per page: a screenful or two of a dense table ("Older" reads the next). */
const PAGE = 25;

const isoOf = (local: string): string => (local === '' ? '' : new Date(local).toISOString());

interface Loaded {
  records: HistoryRecord[];
  next?: number;
  /** Revisions that arrived with the last refetch (highlighted). */
  fresh: Set<number>;
}

function Revisions({ set }: { set: string }) {
  const { api, session, store, route, navigate, changes, announce } = useConsole();
  const { key, since, until, rev } = route.params;
  const hidden = useHiddenKeys(api);
  const touched = useTouched(changes, [set]);
  const [reloads, setReloads] = useState(0);
  const [loaded, setLoaded] = useState<Loaded | Problem | undefined>(undefined);
  const [older, setOlder] = useState<'idle' | 'loading' | Problem>('idle');
  const filter = { store: store!.name, set, ...(key ? { key } : {}), ...(since ? { since } : {}), ...(until ? { until } : {}) };
  const filterKey = JSON.stringify(filter);
  const last = useRef<{ filter: string; records: HistoryRecord[]; next?: number } | undefined>(undefined);
  const show = (records: HistoryRecord[], next: number | undefined, fresh: Set<number>): void => {
    last.current = { filter: filterKey, records, ...(next !== undefined ? { next } : {}) };
    setLoaded({ records, ...(next !== undefined ? { next } : {}), fresh });
  };

  const latest = useRef(0);
  useEffect(() => {
    // A newer load supersedes this one: its answer is dropped (never aborted: see useLatest).
    const mine = ++latest.current;
    history(api, { ...filter, limit: PAGE }).then(
      (page) => {
        if (mine !== latest.current) return;
        const before = last.current?.filter === filterKey ? last.current : undefined;
        // Highlighted: what is newer than the last load showed (nothing on the first load).
        const top = before ? (before.records[0]?.revision ?? 0) : Infinity;
        // The newest page on top of the older pages the user already read ("Older"), which stay.
        const bottom = page.records.at(-1)?.revision ?? 0;
        const kept = before && page.next !== undefined ? before.records.filter((r) => r.revision < bottom) : [];
        const fresh = new Set(page.records.filter((r) => r.revision > top).map((r) => r.revision));
        show([...page.records, ...kept], kept.length ? before!.next : page.next, fresh);
      },
      (e) => mine === latest.current && setLoaded(problemOf(e)),
    );
  }, [filterKey, touched, reloads]);
  useEffect(() => () => void (latest.current = -1), []);

  const loadOlder = async (): Promise<void> => {
    if (!loaded || 'status' in loaded || loaded.next === undefined) return;
    setOlder('loading');
    try {
      const page = await history(api, { ...filter, limit: PAGE, before: loaded.next });
      show([...loaded.records, ...page.records.filter((r) => !loaded.records.some((o) => o.revision === r.revision))], page.next, new Set());
      setOlder('idle');
    } catch (e) {
      setOlder(problemOf(e));
    }
  };

  const [target, setTarget] = useState<number | undefined>(undefined);
  const rights = writeRights(session, store!, set, undefined);
  const send: Send = (options) => rollback(api, { store: store!.name, set, schema: route.schema ?? '', toRevision: target ?? 0, ...options });
  const write = useWriteFlow(api, { store: store!.name, set }, rights.mayBreak, send, (answer) => {
    setReloads((n) => n + 1);
    announce(`Rolled back: ${setLabel(answer.set)} is now at revision ${answer.revision}`);
  });
  const [previewAsked, setPreviewAsked] = useState(0);
  useEffect(() => void (previewAsked && write.preview()), [previewAsked]);
  const startRollback = (revision: number): void => (setTarget(revision), setPreviewAsked((n) => n + 1));

  if (!hidden || loaded === undefined) return <Loading what="the history" />;
  if ('status' in loaded) return <ProblemView problem={loaded} />;
  return (
    <div onKeyDown={(e) => e.key === 'Escape' && write.flow.step !== 'idle' && (e.preventDefault(), write.close())}>
      <Filters key={filterKey} keyName={key} since={since} until={until} apply={(params) => navigate({ params: { ...params, ...(rev ? { rev } : {}) } })} />
      {target !== undefined && (
        <WritePanel
          write={write}
          title={`Preview of the rollback of ${setLabel(set)} to revision ${target}`}
          hidden={hidden}
          defaultMessage={`rollback to revision ${target}`}
          reviewAgain={() => (setReloads((n) => n + 1), setPreviewAsked((n) => n + 1))}
        />
      )}
      {loaded.records.length === 0 ? (
        <p>{key || since || until ? 'No revision matches these filters.' : 'No revision yet: this set was never written through cfgu.'}</p>
      ) : (
        <RecordsTable
          records={loaded.records}
          fresh={loaded.fresh}
          open={rev === undefined ? undefined : Number(rev)}
          hidden={hidden}
          toggle={(r) => navigate({ params: { ...route.params, rev: rev === String(r) ? '' : String(r) } }, { replace: true })}
          rollbackTo={rights.refused || !route.schema ? undefined : startRollback}
        />
      )}
      {loaded.next !== undefined && (
        <p>
          <button type="button" onClick={loadOlder} disabled={older === 'loading'}>
            Older
          </button>
        </p>
      )}
      {typeof older === 'object' && <ProblemView problem={older} title="Older revisions could not be read" />}
      {rights.refused && <p class="muted">Rollback is not offered: {rights.refused}.</p>}
    </div>
  );
}

function Filters({ keyName, since, until, apply }: { keyName?: string | undefined; since?: string | undefined; until?: string | undefined; apply(params: Record<string, string>): void }) {
  const [k, setK] = useState(keyName ?? '');
  const [from, setFrom] = useState(localInput(since));
  const [to, setTo] = useState(localInput(until));
  const submit = (e: Event): void => {
    e.preventDefault();
    apply({ key: k.trim(), since: isoOf(from), until: isoOf(to) });
  };
  return (
    <form class="filters" onSubmit={submit} aria-label="Filter the revisions">
      <label>
        Key <input value={k} spellcheck={false} onInput={(e) => setK((e.target as HTMLInputElement).value)} />
      </label>
      <label>
        From <input type="datetime-local" value={from} onInput={(e) => setFrom((e.target as HTMLInputElement).value)} />
      </label>
      <label>
        Until <input type="datetime-local" value={to} onInput={(e) => setTo((e.target as HTMLInputElement).value)} />
      </label>
      <button type="submit">Filter</button>
      {(keyName || since || until) && (
        <button type="button" onClick={() => (setK(''), setFrom(''), setTo(''), apply({}))}>
          Clear filters
        </button>
      )}
    </form>
  );
}

interface RecordsTableProps {
  records: HistoryRecord[];
  fresh: Set<number>;
  open: number | undefined;
  hidden: (key: string) => boolean;
  toggle(revision: number): void;
  rollbackTo: ((revision: number) => void) | undefined;
}

function RecordsTable({ records, fresh, open, hidden, toggle, rollbackTo }: RecordsTableProps) {
  return (
    <table class="revisions">
      <caption class="muted">Revisions, newest first. Times are local; hover for the exact time in UTC.</caption>
      <thead>
        <tr>
          <th scope="col">Revision</th>
          <th scope="col">Time</th>
          <th scope="col">Who</th>
          <th scope="col">Message</th>
          <th scope="col">Keys</th>
          <th scope="col">
            <span class="visually-hidden">Actions</span>
          </th>
        </tr>
      </thead>
      {records.map((r) => (
        <tbody key={r.revision} class={fresh.has(r.revision) ? 'changed' : undefined}>
          <tr class={r.recorded ? undefined : 'outside'}>
            <th scope="row">{r.revision}</th>
            <td>
              <time dateTime={r.time} title={r.time}>
                {new Date(r.time).toLocaleString()}
              </time>
            </td>
            <td>{r.recorded ? (r.subject ?? '(unknown)') : <span class="outside-note">changed outside cfgu (not recorded who)</span>}</td>
            <td>{r.message ?? <span class="muted">(no message)</span>}</td>
            <td>
              {r.changes.map((c) => (
                <code key={c.key}>{c.key} </code>
              ))}
            </td>
            <td class="row-actions">
              <button type="button" aria-expanded={open === r.revision} aria-controls={`rev-${r.revision}-diff`} aria-label={`${open === r.revision ? 'Hide changes' : 'Changes'} of revision ${r.revision}`} onClick={() => toggle(r.revision)}>
                {open === r.revision ? 'Hide changes' : 'Changes'}
              </button>
              {rollbackTo && (
                <button type="button" aria-label={`Roll back to revision ${r.revision}`} title={`Restore the values this set had right after revision ${r.revision}`} onClick={() => rollbackTo(r.revision)}>
                  Roll back
                </button>
              )}
            </td>
          </tr>
          {open === r.revision && (
            <tr id={`rev-${r.revision}-diff`} class="diff-row">
              <td colSpan={6}>
                <ChangesTable changes={r.changes} hidden={hidden} caption={`The changes of revision ${r.revision}`} />
              </td>
            </tr>
          )}
        </tbody>
      ))}
    </table>
  );
}
