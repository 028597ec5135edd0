/**
 * The order `const` keys are evaluated in, and the cycles among them.
 */
import { truncate } from './names.js';
import { analysisWork } from './template.js';

let graphSteps = 0;

/**
 * Steps taken so far by the `const` analysis (template characters visited, names looked up, dependency edges and
 * cycle searches walked). A deterministic measure of work, for tests that check the analysis is linear.
 */
export function constAnalysisSteps(): number {
  return analysisWork.steps + graphSteps;
}

/**
 * Order const keys so that each comes after the const keys its template names, and find the cycles: Tarjan's
 * strongly connected components, iterative (a chain of 100,000 consts must not overflow the stack), linear in keys +
 * references. Components come out dependencies first. Every key of a component with more than one key, or naming
 * itself, is in a cycle; all of them report one cycle of their component (the shortest through its first key).
 */
export function orderConsts(names: string[], deps: Map<string, string[]>): { order: string[]; cycles: Map<string, string> } {
  const order: string[] = [];
  const cycles = new Map<string, string>();
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  let counter = 0;
  const enter = (key: string) => {
    index.set(key, counter);
    low.set(key, counter);
    counter++;
    stack.push(key);
    onStack.add(key);
  };
  for (const root of names) {
    if (index.has(root)) continue;
    enter(root);
    const work: Array<{ key: string; next: number }> = [{ key: root, next: 0 }];
    while (work.length) {
      const frame = work[work.length - 1]!;
      const out = deps.get(frame.key) ?? [];
      if (frame.next < out.length) {
        const d = out[frame.next++]!;
        graphSteps++;
        if (!index.has(d)) {
          enter(d);
          work.push({ key: d, next: 0 });
        } else if (onStack.has(d)) {
          low.set(frame.key, Math.min(low.get(frame.key)!, index.get(d)!));
        }
        continue;
      }
      work.pop();
      const parent = work[work.length - 1];
      if (parent) low.set(parent.key, Math.min(low.get(parent.key)!, low.get(frame.key)!));
      if (low.get(frame.key) !== index.get(frame.key)) continue;
      const members = new Set<string>();
      let m: string;
      do {
        m = stack.pop()!;
        onStack.delete(m);
        members.add(m);
      } while (m !== frame.key);
      if (members.size === 1 && !out.includes(frame.key)) {
        order.push(frame.key);
        continue;
      }
      const text = describeCycle(shortestCycle(frame.key, members, deps));
      // In the order they were reached (the stack gave them last first).
      for (const member of [...members].reverse()) cycles.set(member, text);
    }
  }
  return { order, cycles };
}

/** The shortest cycle through `start` inside its component (breadth-first), as the keys in order, `start` first. */
function shortestCycle(start: string, members: Set<string>, deps: Map<string, string[]>): string[] {
  const parent = new Map<string, string>();
  const queue = [start];
  for (let head = 0; head < queue.length; head++) {
    const key = queue[head]!;
    for (const d of deps.get(key) ?? []) {
      graphSteps++;
      if (d === start) {
        const path = [key];
        for (let k = key; k !== start; ) path.push((k = parent.get(k)!));
        return path.reverse();
      }
      if (members.has(d) && !parent.has(d)) {
        parent.set(d, key);
        queue.push(d);
      }
    }
  }
  return [start]; // unreachable for a component
}

const CYCLE_SHOWN = 8;

/** `A -> B -> A`; a long cycle is shortened (every key of it repeats the text in its failure). */
function describeCycle(cycle: string[]): string {
  const shown = cycle.length > CYCLE_SHOWN + 1 ? [...cycle.slice(0, CYCLE_SHOWN), `… (${cycle.length - CYCLE_SHOWN} more)`] : cycle;
  return [...shown.map((k) => truncate(k)), truncate(cycle[0]!)].join(' -> ');
}
