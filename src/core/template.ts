/**
 * Template parsing, shared by the host (dependency analysis) and the sandbox bundle (rendering).
 * A template is text with `{{ expr }}` and `<% expr %>` parts. Pure: imports nothing.
 */

export type TemplatePart = { kind: 'text'; text: string } | { kind: 'expr'; source: string };

const OPENERS: Array<[open: string, close: string]> = [
  ['{{', '}}'],
  ['<%', '%>'],
];

/**
 * Split a template into text and expression parts. An opener without its closer is literal text.
 * Throws nothing; an empty expression (`{{ }}`) is kept as an expression part with empty source.
 */
export function parseTemplate(template: string): TemplatePart[] {
  const parts: TemplatePart[] = [];
  let pos = 0;
  let text = '';
  // Where each opener next occurs at or after `pos` (searched again only once passed): without this, a template with
  // many `{{ }}` parts and no `<%` would be scanned to its end once per part.
  const next = OPENERS.map(([open]) => template.indexOf(open));
  while (pos < template.length) {
    let best = -1;
    let which = 0;
    for (let i = 0; i < OPENERS.length; i++) {
      if (next[i] !== -1 && next[i]! < pos) next[i] = template.indexOf(OPENERS[i]![0], pos);
      const at = next[i]!;
      if (at !== -1 && (best === -1 || at < best)) {
        best = at;
        which = i;
      }
    }
    if (best === -1) break;
    const [open, close] = OPENERS[which]!;
    const end = template.indexOf(close, best + open.length);
    if (end === -1) break;
    text += template.slice(pos, best);
    if (text) parts.push({ kind: 'text', text });
    text = '';
    parts.push({ kind: 'expr', source: template.slice(best + open.length, end).trim() });
    pos = end + close.length;
  }
  text += template.slice(pos);
  if (text) parts.push({ kind: 'text', text });
  return parts;
}

/** What the host needs to know about a `const` template before anything runs. */
export interface TemplateAnalysis {
  /** Names of `names` that an expression part holds as a whole token, each once, in order of first appearance. */
  references: string[];
  /** Number of expression parts (`{{ }}` and `<% %>`). */
  expressions: number;
}

/** Steps taken by analyseTemplate since the module loaded (characters visited + names looked up); tests read it. */
export const analysisWork = { steps: 0 };

/** A character that can be part of a ConfigKey (`[A-Za-z0-9_-]`). */
function isKeyChar(c: number): boolean {
  return (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || (c >= 48 && c <= 57) || c === 95 || c === 45;
}

/**
 * One pass over a template: the expression parts (as parseTemplate splits them) and the names they mention. A name is
 * mentioned when it is a whole token, i.e. a maximal run of ConfigKey characters: `$.configs.DB_HOST.value`,
 * `$.configs['db-host']` and a bare `DB_HOST` all name their key. Used to order `const` keys and to find cycles; a
 * false positive can only order more strictly, never skip a dependency. Linear in the template: every character is
 * visited once and every token costs one lookup, however many names there are.
 */
export function analyseTemplate(template: string, names: ReadonlySet<string>): TemplateAnalysis {
  const found = new Set<string>();
  let expressions = 0;
  let steps = 0;
  const n = template.length;
  let pos = 0;
  while (pos < n - 1) {
    // Find the next opener; the first one in the text wins, as in parseTemplate.
    let close = '';
    let i = pos;
    for (; i < n - 1; i++) {
      steps++;
      const c = template.charCodeAt(i);
      const d = template.charCodeAt(i + 1);
      if (c === 123 /* { */ && d === 123) {
        close = '}}';
        break;
      }
      if (c === 60 /* < */ && d === 37 /* % */) {
        close = '%>';
        break;
      }
    }
    if (!close) break;
    const end = template.indexOf(close, i + 2);
    // An opener without its closer is text, and so is everything after it.
    if (end === -1) break;
    expressions++;
    let start = -1;
    for (let j = i + 2; j <= end; j++) {
      steps++;
      if (j < end && isKeyChar(template.charCodeAt(j))) {
        if (start === -1) start = j;
      } else if (start !== -1) {
        const token = template.slice(start, j);
        steps++;
        if (names.has(token)) found.add(token);
        start = -1;
      }
    }
    pos = end + 2;
  }
  analysisWork.steps += steps;
  return { references: [...found], expressions };
}

/** How an expression's value becomes text inside a rendered template. */
export function stringifyTemplateValue(value: unknown): string {
  if (value === undefined || value === null) return '';
  if (typeof value === 'string') return value;
  if (typeof value === 'object') {
    try {
      return JSON.stringify(value) ?? '';
    } catch {
      return String(value);
    }
  }
  return String(value);
}
