/**
 * What the reading views share about live data: which change notices concern what a view shows, and which of its
 * values changed from one answer to the next (those get the `.changed` highlight of styles.css).
 */
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import type { Changes } from '../context.js';

/**
 * A counter that grows with each change notice that `concerns` (its `sets`, null when any set may have changed):
 * listed among a load's inputs, it refetches on the notices that matter and on no other.
 */
export function useRelevantChanges(changes: Changes, concerns: (sets: readonly string[] | null) => boolean): number {
  const state = useRef({ seen: changes.seq, count: 0 });
  if (changes.seq !== state.current.seen) {
    state.current.seen = changes.seq;
    if (changes.seq > 0 && changes.last && concerns(changes.last.sets)) state.current.count++;
  }
  return state.current.count;
}

/**
 * The ids whose signature differs from the previous answer's (or that were not in it), as long as both answers are of
 * the same `identity` (the same store, set, schema...): a new place is not a change. `settle(id)` drops an id once
 * its highlight has played (the element's `animationend`).
 */
export function useChanged<T>(identity: string, data: T | undefined, sign: (data: T) => Map<string, string>): [ReadonlySet<string>, (id: string) => void] {
  const previous = useRef<{ identity: string; signatures?: Map<string, string> }>({ identity });
  const [changed, setChanged] = useState<ReadonlySet<string>>(new Set());
  useEffect(() => {
    if (data === undefined) return;
    const signatures = sign(data);
    const before = previous.current;
    const next = new Set<string>();
    if (before.identity === identity && before.signatures) {
      for (const [id, signature] of signatures) if (before.signatures.get(id) !== signature) next.add(id);
    }
    previous.current = { identity, signatures };
    setChanged(next);
  }, [data]);
  const settle = useCallback((id: string) => {
    setChanged((current) => {
      if (!current.has(id)) return current;
      const next = new Set(current);
      next.delete(id);
      return next;
    });
  }, []);
  return [changed, settle];
}
