/**
 * `cfgu eval --explain`: the engine's explanation (core/explain.ts, docs/explain.md) as a tree for the terminal, or as
 * JSON. Neither is the eval format: the output is for people and tools, not for `cfgu export`.
 */
import type { CommandExplanation, ExplainOutcome, ExplainedCandidate, KeyExplanation } from '../core/index.js';

/** A line of the tree and the lines under it. */
interface Node {
  text: string;
  children: Node[];
}

const node = (text: string, children: Node[] = []): Node => ({ text, children });

/** A set path as the tree shows it: the root set is `(root)`. */
const setName = (set: string): string => (set === '' ? '(root)' : set);

/** A value as the tree shows it: the stored text as a JSON string, or why it is not shown. */
function shown(v: { value?: string; withheld?: string }): string {
  if (v.value !== undefined) return JSON.stringify(v.value);
  return v.withheld === 'scope' ? '(withheld: set not readable)' : '(hidden)';
}

function render(nodes: Node[], indent: string, out: string[]): void {
  nodes.forEach((n, i) => {
    const last = i === nodes.length - 1;
    out.push(`${indent}${last ? '└─ ' : '├─ '}${n.text}`);
    render(n.children, indent + (last ? '   ' : '│  '), out);
  });
}

function originLine(k: KeyExplanation): string {
  let text = `origin: ${k.origin}`;
  if (k.origin === 'store') text += `, set ${setName(k.set)}`;
  if (k.piped) {
    text += `, piped from ${k.piped.command === null ? 'standard input' : `command ${k.piped.command}`}`;
    if (k.origin !== 'store') text += ` (set ${setName(k.set)})`;
  }
  return text;
}

function candidateLines(candidates: readonly ExplainedCandidate[]): Node[] {
  const sets = Math.max(...candidates.map((c) => setName(c.set).length));
  const values = Math.max(...candidates.map((c) => shown(c).length));
  return candidates.map((c) => node(`${setName(c.set).padEnd(sets)}  ${shown(c).padEnd(values)}  ${c.status}`));
}

function keyNode(k: KeyExplanation): Node {
  // The value as the export gives it (coerced); a hidden key's, when revealed, as its text.
  const value = k.origin === 'empty' && !k.withheld ? '(empty)' : k.exported !== undefined ? JSON.stringify(k.exported) : shown(k);
  const children: Node[] = [node(originLine(k))];
  if (!k.declared) children.push(node('not declared by this command: carried through the pipe'));
  if (k.hidden) children.push(node('hidden: the export leaves it out'));
  if (k.lazy) children.push(node('lazy: never read from the store'));
  if (k.derivedFromHidden) children.push(node('computed from a hidden key (exported all the same)'));
  if (k.candidates.length) children.push(node('candidates (root first)', candidateLines(k.candidates)));
  if (k.override) children.push(node(`override: ${shown(k.override)}`));
  if (k.default) children.push(node(`default: ${shown(k.default)}`));
  if (k.const) {
    const reads = k.const.reads.map((r) => node(`reads ${r.key} = ${shown(r)} (${r.origin})`));
    children.push(node(`const: ${k.const.template}${k.const.computed ? '' : '  (not computed)'}`, reads));
  }
  if (k.tests.length) {
    const tests = k.tests.map((t) =>
      node(
        t.passed === true
          ? `✔ ${t.expression}`
          : t.passed === false
            ? `✘ ${t.expression}${t.message ? ` — ${t.message}` : ''}`
            : `- ${t.expression} (not run: ${t.skipped ?? 'unknown'})`,
      ),
    );
    children.push(node('tests', tests));
  }
  for (const f of k.failures) if (f.rule !== 'test') children.push(node(`✘ ${f.rule}: ${f.message}`));
  return node(`${k.key} = ${value}`, children);
}

function commandNode(c: CommandExplanation): Node {
  const where = `${c.store === null ? 'no store' : `store ${c.store}`}, set ${setName(c.set)}`;
  if (!c.evaluated) return node(`command ${c.command}: ${where}: not evaluated (the pipeline stopped before it)`);
  return node(`command ${c.command}: ${where} (reads ${c.hierarchy.map(setName).join(' > ')})`, c.keys.map(keyNode));
}

/** The explanation as a tree (one line per fact), ending with the outcome. */
export function formatExplanationTree(outcome: ExplainOutcome): string {
  const out: string[] = [];
  for (const c of outcome.explanations) {
    const n = commandNode(c);
    out.push(n.text);
    render(n.children, '', out);
  }
  // Failures that belong to no key of a result (an override of a key the schema does not declare).
  const listed = new Set(outcome.explanations.flatMap((c) => c.keys.map((k) => `${c.command}\u0000${k.key}`)));
  for (const f of outcome.failures) {
    if (!listed.has(`${f.command}\u0000${f.key}`)) out.push(`✘ command ${f.command}, key ${f.key}, rule ${f.rule}: ${f.message}`);
  }
  const n = outcome.failures.length;
  out.push(outcome.ok ? '✔ valid' : `✘ validation failed: ${n} failure${n === 1 ? '' : 's'}`);
  return `${out.join('\n')}\n`;
}

/** The explanation as JSON (the shape in docs/explain.md). */
export function formatExplanationJson(outcome: ExplainOutcome): string {
  return `${JSON.stringify(outcome, null, 2)}\n`;
}
