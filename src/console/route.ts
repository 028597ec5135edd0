/**
 * The page's state lives in the URL's query (`/console?view=matrix&store=main&schema=app&set=prod/eu`), so that a link
 * pasted into a chat opens the same place. Views add their own parameters (a matrix filter, the two sets of a diff,
 * an open revision): every parameter is a string, absent when it has its default.
 */
import { useEffect, useState } from 'preact/hooks';

export type View = 'schema' | 'matrix' | 'edit' | 'history';
export const VIEWS: readonly View[] = ['schema', 'matrix', 'edit', 'history'];

export interface Route {
  view: View;
  store?: string;
  /** The set path ("" is the root set). */
  set?: string;
  /** The name of one of the server's schemas. */
  schema?: string;
  /** Every other parameter of the query, as given. */
  params: Readonly<Record<string, string>>;
}

const OWN = new Set(['view', 'store', 'set', 'schema']);

export function parseRoute(search: string): Route {
  const q = new URLSearchParams(search);
  const view = q.get('view');
  const params: Record<string, string> = {};
  for (const [k, v] of q) if (!OWN.has(k)) params[k] = v;
  const route: Route = { view: VIEWS.includes(view as View) ? (view as View) : 'schema', params };
  const store = q.get('store');
  const set = q.get('set');
  const schema = q.get('schema');
  if (store !== null) route.store = store;
  if (set !== null) route.set = set;
  if (schema !== null) route.schema = schema;
  return route;
}

export function formatRoute(route: Route): string {
  const q = new URLSearchParams();
  q.set('view', route.view);
  if (route.store !== undefined) q.set('store', route.store);
  if (route.schema !== undefined) q.set('schema', route.schema);
  if (route.set !== undefined) q.set('set', route.set);
  for (const [k, v] of Object.entries(route.params)) if (v !== '') q.set(k, v);
  // Slashes of set paths stay readable in the address bar.
  return `?${q.toString().replace(/%2F/g, '/')}`;
}

/** A change of the route: the given members replace the current ones; `params` replaces all view parameters. */
export type RoutePatch = Partial<Omit<Route, 'params'>> & { params?: Record<string, string> };

export type Navigate = (patch: RoutePatch, options?: { replace?: boolean }) => void;

const listeners = new Set<() => void>();

export function navigate(patch: RoutePatch, options: { replace?: boolean } = {}): void {
  const current = parseRoute(location.search);
  // Another view starts with its own parameters.
  const params = patch.params ?? (patch.view && patch.view !== current.view ? {} : current.params);
  const next: Route = { ...current, ...patch, params };
  const url = `${location.pathname}${formatRoute(next)}`;
  if (options.replace) history.replaceState(null, '', url);
  else history.pushState(null, '', url);
  for (const l of listeners) l();
}

/** The current route, following navigation and the browser's back and forward buttons. */
export function useRoute(): Route {
  const [search, setSearch] = useState(location.search);
  useEffect(() => {
    const update = (): void => setSearch(location.search);
    listeners.add(update);
    addEventListener('popstate', update);
    return () => {
      listeners.delete(update);
      removeEventListener('popstate', update);
    };
  }, []);
  return parseRoute(search);
}
