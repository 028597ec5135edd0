/**
 * The reading views' calls and the shapes of their answers: `POST /explain` (every key of a schema at a set, with why
 * it has its value, also when validation fails) and `POST /matrix` (one schema at many sets, a cell per key and set).
 * (`POST /export` is not needed: an explanation carries every value the export gives.)
 * The shapes are the server's (docs/explain.md, docs/server.md "POST /matrix"); only what the console reads is typed.
 * Hidden values never arrive: the server sends `withheld: "hidden"` in their place.
 */
import type { Api } from '../api.js';

export type Origin = 'empty' | 'store' | 'override' | 'default' | 'const';
export type Withheld = 'hidden' | 'scope';

export interface ExplainedCandidate {
  set: string;
  status: 'won' | 'shadowed' | 'overridden';
  value?: string;
  withheld?: Withheld;
}

export interface ExplainedInput {
  value?: string;
  withheld?: Withheld;
}

export interface ExplainedRead extends ExplainedInput {
  key: string;
  origin: Origin;
}

export interface ExplainedTest {
  index: number;
  expression: string;
  /** null: not run (`skipped` says why). */
  passed: boolean | null;
  message?: string;
  skipped?: string;
}

export interface Failure {
  rule: string;
  message: string;
  /** For rule `test` in a matrix cell: the index of the failed expression. */
  test?: number;
}

export interface KeyExplanation {
  key: string;
  declared: boolean;
  hidden: boolean;
  value?: string;
  withheld?: Withheld;
  origin: Origin;
  set: string;
  lazy?: true;
  derivedFromHidden?: true;
  candidates: ExplainedCandidate[];
  override?: ExplainedInput;
  default?: ExplainedInput;
  const?: { template: string; computed: boolean; reads: ExplainedRead[] };
  tests: ExplainedTest[];
  failures: Failure[];
}

export interface CommandExplanation {
  command: number;
  store: string | null;
  set: string;
  hierarchy: string[];
  evaluated: boolean;
  keys: KeyExplanation[];
}

export interface ExplainOutcome {
  version: number;
  ok: boolean;
  failures: Array<Failure & { command: number; key: string }>;
  explanations: CommandExplanation[];
  backupStores: string[];
}

/** The command of an explanation or an export: `schema` is an object or the name of one of the server's schemas. */
export interface ReadCommand {
  store: string;
  set: string;
  schema: string | { keys: Record<string, unknown> };
}

export function explain(api: Api, command: ReadCommand, signal?: AbortSignal): Promise<ExplainOutcome> {
  return api.request('/explain', { body: [command], ...(signal ? { signal } : {}) });
}

export type CellState = 'ok' | 'missing' | 'test' | 'enum' | 'pattern' | 'schema' | 'const' | 'override';

export interface MatrixCell {
  state: CellState;
  origin: Origin;
  /** For origin `store`: the set that holds the value. */
  set?: string;
  inherited?: true;
  hidden?: true;
  value?: string;
  withheld?: 'hidden';
  failures?: Failure[];
}

export interface Matrix {
  version: number;
  store: string;
  prefix?: string;
  sets: string[];
  keys: string[];
  /** `cells[k][s]`: key `keys[k]` at set `sets[s]`. */
  cells: MatrixCell[][];
  failed: number[];
  fromBackup: boolean;
}

/** Exactly one of `sets` and `prefix`. `schema`: an object, or the name of one of the server's schemas. */
export type MatrixRequest = { store: string; schema: string | { keys: Record<string, unknown> } } & ({ prefix: string } | { sets: string[] });

export function matrix(api: Api, body: MatrixRequest, signal?: AbortSignal): Promise<Matrix> {
  return api.request('/matrix', { body, ...(signal ? { signal } : {}) });
}

/** The state a key's failures give it, as a matrix cell names it: `ok`, or the rule of the first failure. */
export function stateOf(failures: readonly Failure[]): CellState {
  const first = failures[0];
  if (!first) return 'ok';
  return first.rule === 'required' ? 'missing' : (first.rule as CellState);
}

/** Whether `set` is `ancestor` or below it ("" is above every set). */
export function isWithin(set: string, ancestor: string): boolean {
  return ancestor === '' || set === ancestor || set.startsWith(`${ancestor}/`);
}
