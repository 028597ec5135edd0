/**
 * The console's frame: sign-in, then the header (store, schema, the views, who is signed in, whether updates are
 * live), the set tree on the left and the current view. Everything a view needs comes through ConsoleContext.
 */
import { useEffect, useState } from 'preact/hooks';
import { Api, ApiError, type Problem, type SchemaSummary, type Session, type StoreInfo } from './api.js';
import { followChanges } from './changes.js';
import { ProblemView, Loading, problemOf } from './components.js';
import { ConsoleContext, type Changes, type ConsoleState } from './context.js';
import { keepToken, storedToken } from './credential.js';
import { formatRoute, navigate, useRoute, type View } from './route.js';
import { SignIn } from './sign-in.js';
import { SetTree } from './views/tree.js';
import { SchemaView } from './views/schema.js';
import { MatrixView } from './views/matrix.js';
import { EditView } from './views/edit.js';
import { HistoryView } from './views/history.js';

type Start = { state: 'checking' } | { state: 'sign-in'; problem?: Problem } | { state: 'failed'; problem: Problem } | { state: 'in'; api: Api; session: Session };

export function App() {
  const [start, setStart] = useState<Start>({ state: 'checking' });
  const check = (api: Api): void => {
    api.session().then(
      (session) => setStart({ state: 'in', api, session }),
      (e) => {
        if (e instanceof ApiError && e.status === 401) {
          keepToken(undefined, false);
          setStart({ state: 'sign-in', ...(api.hasToken ? { problem: e.problem } : {}) });
        } else setStart({ state: 'failed', problem: problemOf(e) });
      },
    );
  };
  useEffect(() => check(new Api(storedToken())), []);
  if (start.state === 'checking') return <Loading what="the session" />;
  if (start.state === 'failed')
    return (
      <main id="main" class="sign-in">
        <h1>cfgu console</h1>
        <ProblemView problem={start.problem} title="The server did not answer the console" />
        <button onClick={() => check(new Api(storedToken()))}>Try again</button>
      </main>
    );
  if (start.state === 'sign-in')
    return (
      <SignIn
        problem={start.problem}
        onSignedIn={(api, session, remember) => {
          keepToken(remember ? api.token : undefined, remember);
          setStart({ state: 'in', api, session });
        }}
      />
    );
  const signOut = (problem?: Problem): void => {
    keepToken(undefined, false);
    setStart({ state: 'sign-in', ...(problem ? { problem } : {}) });
  };
  return <SignedIn api={start.api} session={start.session} signOut={signOut} />;
}

const VIEW_NAMES: Record<View, string> = { schema: 'Values', matrix: 'Matrix', edit: 'Edit', history: 'History' };

function SignedIn({ api, session, signOut }: { api: Api; session: Session; signOut: (problem?: Problem) => void }) {
  const route = useRoute();
  const [stores, setStores] = useState<StoreInfo[] | Problem | undefined>(undefined);
  const [schemas, setSchemas] = useState<SchemaSummary[]>([]);
  const [changes, setChanges] = useState<Changes>({ seq: 0, state: 'connecting' });
  const [message, setMessage] = useState('');

  useEffect(() => {
    api.stores().then((r) => setStores(r.stores), (e) => setStores(problemOf(e)));
    api.schemas().then((r) => setSchemas(r.schemas), () => setSchemas([]));
  }, [api]);
  const storeList = Array.isArray(stores) ? stores : [];
  const store = storeList.find((s) => s.name === route.store) ?? storeList.find((s) => s.default) ?? storeList[0];

  useEffect(() => {
    if (!store) return undefined;
    setChanges({ seq: 0, state: 'connecting' });
    return followChanges(api, store.name, {
      change: (notice) => setChanges((c) => ({ seq: c.seq + 1, last: notice, state: 'live' })),
      status: (state, problem) => {
        setChanges((c) => ({ ...c, state }));
        if (problem?.status === 401) signOut(problem);
      },
    });
  }, [api, store?.name]);

  if (stores === undefined) return <Loading what="the stores" />;
  if (!Array.isArray(stores)) return <ProblemView problem={stores} title="The stores could not be listed" />;
  if (!store) return <p>Your credential may read no store of this server.</p>;
  const schema = route.schema ?? schemas[0]?.name;
  // The route with the schema the header shows (the first one the credential may use when the address names none).
  const state: ConsoleState = { api, session, stores: storeList, store, route: { ...route, ...(schema !== undefined ? { schema } : {}) }, navigate, changes, announce: setMessage };
  const views = (['schema', 'matrix', 'edit', 'history'] as View[]).filter((v) => (v === 'edit' ? store.write : v === 'history' ? store.history : true));
  return (
    <ConsoleContext.Provider value={state}>
      <a class="skip" href="#main">
        Skip to the content
      </a>
      <Header stores={storeList} store={store} schemas={schemas} schema={schema} views={views} changes={changes} session={session} signOut={signOut} />
      <div class="body">
        <aside aria-label="Sets">
          <SetTree />
        </aside>
        <main id="main" tabIndex={-1}>
          {route.view === 'schema' && <SchemaView />}
          {route.view === 'matrix' && <MatrixView />}
          {route.view === 'edit' && <EditView />}
          {route.view === 'history' && <HistoryView />}
        </main>
      </div>
      <p class="status" role="status" aria-live="polite">
        {message}
      </p>
    </ConsoleContext.Provider>
  );
}

interface HeaderProps {
  stores: StoreInfo[];
  store: StoreInfo;
  schemas: SchemaSummary[];
  schema: string | undefined;
  views: View[];
  changes: Changes;
  session: Session;
  signOut: (problem?: Problem) => void;
}

function Header({ stores: storeList, store, schemas, schema, views, changes, session, signOut }: HeaderProps) {
  const route = useRoute();
  return (
  <header class="bar">
    <strong class="brand">cfgu console</strong>
    <label>
      Store{' '}
      <select value={store.name} onChange={(e) => navigate({ store: (e.target as HTMLSelectElement).value, set: '' })}>
        {storeList.map((s) => (
          <option key={s.name} value={s.name}>
            {s.name} ({s.kind}
            {s.readOnly ? ', read-only' : ''})
          </option>
        ))}
      </select>
    </label>
    <label>
      Schema{' '}
      <select value={schema ?? ''} onChange={(e) => navigate({ schema: (e.target as HTMLSelectElement).value })} disabled={schemas.length === 0}>
        {schemas.length === 0 && <option value="">(no schema you may use)</option>}
        {schemas.map((s) => (
          <option key={s.name} value={s.name}>
            {s.name} ({s.keys} keys)
          </option>
        ))}
      </select>
    </label>
    <nav aria-label="Views">
      {views.map((v) => (
        <a key={v} href={formatRoute({ ...route, store: store.name, ...(schema !== undefined ? { schema } : {}), view: v, params: {} })} aria-current={route.view === v ? 'page' : undefined} onClick={(e) => (e.preventDefault(), navigate({ view: v }))}>
          {VIEW_NAMES[v]}
        </a>
      ))}
    </nav>
    <span class={`live live-${changes.state}`} title="Updates from the server's change stream">
      <span aria-hidden="true">●</span> {changes.state === 'live' ? 'live' : changes.state === 'connecting' ? 'connecting' : 'not live'}
    </span>
    <span class="who">
      {session.authentication ? `signed in as ${session.subject ?? session.kind}` : 'no authentication (loopback)'}
      {session.access === 'scoped' ? ' · scoped' : ''}
    </span>
    {session.authentication && (
      <button type="button" onClick={() => signOut()}>
        Sign out
      </button>
    )}
  </header>
  );
}
