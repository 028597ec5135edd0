/** Small pieces every view uses: a problem shown in the server's own words, a loading line, a value cell's state. */
import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ApiError, type Problem } from './api.js';

/** A problem body: its title, its detail and each listed failure, as the server wrote them. */
export function ProblemView({ problem, title }: { problem: Problem; title?: string }) {
  const errors = Array.isArray(problem.errors) ? (problem.errors as Array<Record<string, unknown>>) : [];
  const refused = Array.isArray(problem.refused) ? (problem.refused as Array<Record<string, unknown>>) : [];
  return (
    <div class="problem" role="alert">
      <p class="problem-title">
        <strong>{title ?? problem.title}</strong> <span class="muted">({problem.status === 0 ? 'no answer' : problem.status})</span>
      </p>
      {problem.detail && <p>{problem.detail}</p>}
      {errors.length > 0 && (
        <ul>
          {errors.map((e, i) => (
            <li key={i}>{String(e.message ?? e.detail ?? JSON.stringify(e))}</li>
          ))}
        </ul>
      )}
      {refused.length > 0 && (
        <ul>
          {refused.map((r, i) => (
            <li key={i}>refused: {[r.store, r.set, Array.isArray(r.keys) ? r.keys.join(', ') : undefined].filter(Boolean).join(' · ')}</li>
          ))}
        </ul>
      )}
    </div>
  );
}

/** The problem of any error (an ApiError's body; anything else described in words). */
export function problemOf(e: unknown): Problem {
  if (e instanceof ApiError) return e.problem;
  return { type: 'about:blank', title: 'Error in the console', status: 0, detail: (e as Error)?.message ?? String(e) };
}

export function Loading({ what }: { what: string }) {
  return (
    <p class="muted" aria-busy="true">
      Loading {what}…
    </p>
  );
}

export type Loaded<T> = { state: 'loading' } | { state: 'done'; value: T } | { state: 'failed'; problem: Problem };

/**
 * Runs `load` whenever one of `inputs` changes, and keeps its last answer while the next one loads (a refetch after a
 * change notice does not blank the page).
 */
export function useLoad<T>(load: (signal: AbortSignal) => Promise<T>, inputs: unknown[]): Loaded<T> {
  const [loaded, setLoaded] = useState<Loaded<T>>({ state: 'loading' });
  useEffect(() => {
    const abort = new AbortController();
    load(abort.signal).then(
      (value) => !abort.signal.aborted && setLoaded({ state: 'done', value }),
      (e) => !abort.signal.aborted && (e as Error)?.name !== 'AbortError' && setLoaded({ state: 'failed', problem: problemOf(e) }),
    );
    return () => abort.abort();
  }, inputs);
  return loaded;
}

/** Renders a Loaded: the loading line, the problem, or `children(value)`. */
export function Show<T>({ loaded, what, children }: { loaded: Loaded<T>; what: string; children: (value: T) => ComponentChildren }) {
  if (loaded.state === 'loading') return <Loading what={what} />;
  if (loaded.state === 'failed') return <ProblemView problem={loaded.problem} />;
  return <>{children(loaded.value)}</>;
}

/** A cell's state as a symbol and a word (never colour alone); the colour comes from the class. */
const STATES: Record<string, [string, string]> = {
  ok: ['✓', 'passing'],
  missing: ['✗', 'missing'],
  test: ['✗', 'fails its test'],
  enum: ['✗', 'not in its enum'],
  pattern: ['✗', 'does not match its pattern'],
  schema: ['✗', 'fails its JSON schema'],
  const: ['✗', 'const failed'],
  override: ['✗', 'override refused'],
};

export function StateBadge({ state }: { state: string }) {
  const [symbol, words] = STATES[state] ?? ['?', state];
  return (
    <span class={`state state-${state === 'ok' ? 'ok' : state === 'missing' ? 'missing' : 'failing'}`}>
      <span aria-hidden="true">{symbol}</span> {words}
    </span>
  );
}

/** A hidden value: never shown, never put in the page's text. */
export function Masked() {
  return (
    <span class="masked" title="hidden: the server never sends this value">
      <span aria-hidden="true">••••••</span> <span class="muted">(hidden)</span>
    </span>
  );
}

/** The set path as people read it: the root set is "(root)". */
export const setLabel = (set: string): string => (set === '' ? '(root)' : set);
