/**
 * The writing views' calls: `POST /upsert` and `POST /rollback` (a dry run, then the write naming the revision the dry
 * run returned), `GET /history`, and `POST /explain` at one set (which values the set stores itself, which it
 * inherits). Also what the console can tell from `GET /session` before asking: whether the credential's grants cover
 * a set and a key for writing (the server decides; this only spares the user a control that would be refused).
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import type { Api, KeyDeclaration, SchemaDocument, Session, StoreInfo } from '../api.js';
import { problemOf, type Loaded } from '../components.js';
import { touches, type Changes } from '../context.js';

/** A value as a write's answer or the history shows it: null when absent, `{hidden: true}` when not shown. */
export type ShownValue = string | null | { hidden: true };

export const isHiddenValue = (v: ShownValue): v is { hidden: true } => v !== null && typeof v === 'object';

export interface Change {
  key: string;
  before: ShownValue;
  after: ShownValue;
}

export interface Failure {
  key?: string;
  rule: string;
  message: string;
}

export type ImpactStatus = 'breaks' | 'fixes' | 'changes' | 'unchanged';

export interface ImpactEntry {
  schema: string;
  set: string;
  status: ImpactStatus;
  changed: string[];
  failures: Failure[];
}

/** The answer of POST /upsert and POST /rollback. */
export interface WriteAnswer {
  store: string;
  set: string;
  dryRun: boolean;
  revision: number | null;
  changes: Change[];
  impact: ImpactEntry[];
  impactTruncated: boolean;
}

/** What both writes share: where, the schema's name, and the write's options. */
export interface WriteOptions {
  store: string;
  set: string;
  schema: string;
  expectedRevision?: number;
  message?: string;
  dryRun?: boolean;
  allowBreaking?: boolean;
}

export type UpsertBody = WriteOptions & { values: Record<string, string | null> };
export type RollbackBody = WriteOptions & { toRevision: number; keys?: string[] };

export const upsert = (api: Api, body: UpsertBody): Promise<WriteAnswer> => api.request('/upsert', { method: 'POST', body });
export const rollback = (api: Api, body: RollbackBody): Promise<WriteAnswer> => api.request('/rollback', { method: 'POST', body });

export interface HistoryRecord {
  revision: number;
  time: string;
  subject: string | null;
  requestId: string | null;
  message: string | null;
  recorded: boolean;
  changes: Change[];
}

export interface HistoryPage {
  store: string;
  set: string;
  records: HistoryRecord[];
  next?: number;
}

export interface HistoryQuery {
  store: string;
  set: string;
  key?: string;
  since?: string;
  until?: string;
  before?: number;
  limit?: number;
}

export function history(api: Api, query: HistoryQuery): Promise<HistoryPage> {
  const q = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) if (value !== undefined && value !== '') q.set(name, String(value));
  return api.request(`/history?${q.toString()}`);
}

/** The records of a set newer than `revision` (the changes a conflict is about), newest first. */
export async function changesSince(api: Api, store: string, set: string, revision: number): Promise<HistoryRecord[]> {
  const page = await history(api, { store, set, limit: 50 });
  return page.records.filter((r) => r.revision > revision);
}

/** The part of POST /explain's answer the editor reads (docs/explain.md, "The shape"). */
export interface ExplainedKey {
  key: string;
  declared: boolean;
  hidden: boolean;
  value?: string;
  withheld?: 'hidden' | 'scope';
  origin: 'empty' | 'store' | 'override' | 'default' | 'const';
  set: string;
  lazy?: boolean;
  default?: { value?: string; withheld?: string };
  candidates: Array<{ set: string; status: string; value?: string; withheld?: string }>;
}

interface ExplainAnswer {
  ok: boolean;
  explanations: Array<{ keys: ExplainedKey[] }>;
}

/** What a key holds at the edited set: `stored` is the set's own value (null: none; hidden: one, not shown). */
export interface KeyAtSet {
  stored: string | null | { hidden: true };
  /** What the set gets without a value of its own, in words ("warn from prod", "default info", "no value"). */
  inherited: string;
}

function inheritedWords(k: ExplainedKey, set: string): string {
  if (k.origin === 'const') return `computed: ${k.withheld ? '(hidden)' : JSON.stringify(k.value ?? '')}`;
  const from = k.candidates.filter((c) => c.set !== set).pop();
  const words = (c: { value?: string; withheld?: string }): string =>
    c.withheld === 'scope' ? 'a value your scope may not read' : c.withheld ? '(hidden)' : JSON.stringify(c.value ?? '');
  if (from) return `${words(from)} from ${from.set || '(root)'}`;
  if (k.default) return `default ${k.default.withheld ? '(hidden)' : JSON.stringify(k.default.value ?? '')}`;
  return 'no value';
}

/** Every key of the schema at `set`: its own stored value and what it inherits. */
export async function valuesAt(api: Api, store: string, set: string, schema: string): Promise<Map<string, KeyAtSet>> {
  const answer = await api.request<ExplainAnswer>('/explain', { method: 'POST', body: [{ store, set, schema }] });
  const values = new Map<string, KeyAtSet>();
  for (const k of answer.explanations[0]?.keys ?? []) {
    if (!k.declared) continue;
    const own = k.candidates.find((c) => c.set === set);
    const stored: KeyAtSet['stored'] = !own ? null : own.withheld ? { hidden: true } : (own.value ?? null);
    values.set(k.key, { stored, inherited: inheritedWords(k, set) });
  }
  return values;
}

// ---- What the session's grants allow (mirrors the server's scope rules, docs/security.md) ----

type Grant = NonNullable<Session['grants']>[number];

const escape = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** A set pattern (`prod/**`, `*\/eu`, `""` for the root) as a regular expression over "/" + the set path. */
export function setPattern(pattern: string): RegExp {
  let p = pattern.trim();
  if (p === '' || p === '/') return /^$/;
  p = p.replace(/^\//, '').replace(/\/$/, '');
  let re = '';
  for (const segment of p.split('/')) {
    if (segment === '**') re += '(?:/[^/]+)*';
    else re += `/${segment === '*' ? '[^/]+' : segment.split('*').map(escape).join('[^/]*')}`;
  }
  return new RegExp(`^${re}$`);
}

const subject = (set: string): string => (set === '' ? '' : `/${set}`);
const keyPattern = (p: string): RegExp => new RegExp(`^${p.split('*').map(escape).join('.*')}$`);

function grantCoversKey(g: Grant, key: string, decl: KeyDeclaration | undefined): boolean {
  if (!g.keys && !g.labels) return true;
  if (g.keys?.some((p) => keyPattern(p).test(key))) return true;
  const labels = decl?.label === undefined ? [] : Array.isArray(decl.label) ? decl.label : [decl.label];
  return g.labels?.some((l) => labels.includes(l)) === true;
}

export interface WriteRights {
  /** Why nothing of the set may be written (undefined: some key may be). */
  refused?: string;
  /** Why a key may not be written by this credential (undefined: it may). */
  keyRefused(key: string): string | undefined;
  /** Whether a write that breaks a schema may be made (`allowBreaking`). */
  mayBreak: boolean;
}

/** What the session may write at a set of a store, as far as its grants tell (the server has the last word). */
export function writeRights(session: Session, store: StoreInfo, set: string, schema: SchemaDocument | undefined): WriteRights {
  if (store.readOnly) return { refused: `store "${store.name}" is read-only (declared readOnly in the server's .configu)`, keyRefused: () => 'read-only store', mayBreak: false };
  if (session.access === 'full') return { keyRefused: () => undefined, mayBreak: true };
  const grants = (session.grants ?? []).filter((g) => g.write && (g.stores.includes('*') || g.stores.includes(store.name)));
  if (!store.write || grants.length === 0) {
    return { refused: `your credential has no write grant for store "${store.name}"`, keyRefused: () => 'no write grant', mayBreak: false };
  }
  const covering = grants.filter((g) => g.sets.some((p) => setPattern(p).test(subject(set))));
  if (covering.length === 0) {
    const sets = [...new Set(grants.flatMap((g) => g.sets))].map((p) => (p === '' || p === '/' ? '(root)' : p)).join(', ');
    return { refused: `your credential's write grants for store "${store.name}" cover only the sets ${sets}`, keyRefused: () => 'no write grant', mayBreak: false };
  }
  return {
    keyRefused: (key) => (covering.some((g) => grantCoversKey(g, key, schema?.keys[key])) ? undefined : 'your credential may not write this key'),
    mayBreak: covering.some((g) => g.breaking === true),
  };
}

/**
 * The keys some named schema of the server declares `hidden` (among those the credential may use), so that a value
 * the server shows to a full-access credential (in a write's answer, in the history) is still masked on the page.
 * Undefined while they load; when they cannot be read, every value counts as hidden.
 */
export function useHiddenKeys(api: Api): ((key: string) => boolean) | undefined {
  const [hidden, setHidden] = useState<{ test: (key: string) => boolean } | undefined>(undefined);
  useEffect(() => {
    let live = true;
    void (async () => {
      const found = new Set<string>();
      const { schemas } = await api.schemas();
      for (const s of schemas) {
        const doc = await api.schema(s.name);
        for (const [key, decl] of Object.entries(doc.keys)) if (decl.hidden) found.add(key);
      }
      if (live) setHidden({ test: (key) => found.has(key) });
    })().catch(() => live && setHidden({ test: () => true })); // unknown: every value masked
    return () => void (live = false);
  }, [api]);
  return hidden?.test;
}

/**
 * A counter that grows when a change notice touches one of `sets` (a view refetches by listing it among its inputs).
 * Notices that arrived between two renders are seen only as the last one: then it grows anyway.
 */
export function useTouched(changes: Changes, sets: readonly string[]): number {
  const seen = useRef(changes.seq);
  const [count, setCount] = useState(0);
  useEffect(() => {
    if (changes.seq === seen.current) return;
    const missed = changes.seq - seen.current > 1;
    seen.current = changes.seq;
    if (missed || sets.some((s) => touches(changes.last, s))) setCount((n) => n + 1);
  }, [changes.seq]);
  return count;
}

/** The set and its ancestors, root first ("prod/eu" → "", "prod", "prod/eu"). */
export function hierarchyOf(set: string): string[] {
  if (set === '') return [''];
  const parts = set.split('/');
  return ['', ...parts.map((_, i) => parts.slice(0, i + 1).join('/'))];
}

/**
 * Runs `load` whenever one of `inputs` changes and keeps its last answer while the next loads, like useLoad; but an
 * answer that a newer load superseded is dropped rather than its request aborted (an aborted fetch is a failed
 * request in the browser's log, and a refetch after a change notice often overlaps the one after a save).
 */
export function useLatest<T>(load: () => Promise<T>, inputs: unknown[]): Loaded<T> {
  const [loaded, setLoaded] = useState<Loaded<T>>({ state: 'loading' });
  const latest = useRef(0);
  useEffect(() => {
    const mine = ++latest.current;
    load().then(
      (value) => mine === latest.current && setLoaded({ state: 'done', value }),
      (e) => mine === latest.current && setLoaded({ state: 'failed', problem: problemOf(e) }),
    );
  }, inputs);
  useEffect(() => () => void (latest.current = -1), []);
  return loaded;
}
