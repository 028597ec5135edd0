/**
 * What every view of the console shares, through one Preact context: the API with the signed-in credential, who that
 * is and what it may do, the stores it may see, the route, and the store's change notices (a counter that grows with
 * each notice, so a view refetches by listing `changes.seq` among its effect's inputs).
 */
import { createContext } from 'preact';
import { useContext } from 'preact/hooks';
import type { Api, Session, StoreInfo } from './api.js';
import type { ChangeNotice } from './changes.js';
import type { Navigate, Route } from './route.js';

export interface Changes {
  /** Grows by one with every notice of the current store (0: none yet). */
  seq: number;
  /** The last notice. */
  last?: ChangeNotice;
  /** Whether the stream is connected. */
  state: 'connecting' | 'live' | 'offline';
}

export interface ConsoleState {
  api: Api;
  session: Session;
  stores: StoreInfo[];
  /** The store the route names, or the default store. */
  store: StoreInfo | undefined;
  route: Route;
  navigate: Navigate;
  changes: Changes;
  /** Says something in the page's status line (read by screen readers too). */
  announce(message: string): void;
}

export const ConsoleContext = createContext<ConsoleState | undefined>(undefined);

export function useConsole(): ConsoleState {
  const state = useContext(ConsoleContext);
  if (!state) throw new Error('useConsole outside the console');
  return state;
}

/** Whether a set changed with a notice: `sets` null means any set may have. */
export function touches(notice: ChangeNotice | undefined, set: string): boolean {
  if (!notice) return false;
  return notice.sets === null || notice.sets.includes(set);
}
