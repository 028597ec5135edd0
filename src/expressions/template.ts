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
  while (pos < template.length) {
    let best = -1;
    let which = 0;
    for (let i = 0; i < OPENERS.length; i++) {
      const at = template.indexOf(OPENERS[i]![0], pos);
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

/** True when the text holds at least one expression part. */
export function hasExpression(template: string): boolean {
  return parseTemplate(template).some((p) => p.kind === 'expr');
}

const KEY_CHAR = /[A-Za-z0-9_-]/;

/**
 * Which of `candidates` an expression source names, as a whole token (bounded by characters that cannot be part of a
 * ConfigKey). `$.configs.DB_HOST.value`, `$.configs['db-host']` and a bare `DB_HOST` all name their key. Used to order
 * `const` keys and to find cycles; a false positive can only order more strictly, never skip a dependency.
 */
export function namedKeys(source: string, candidates: Iterable<string>): string[] {
  const found: string[] = [];
  for (const key of candidates) {
    let from = 0;
    for (;;) {
      const at = source.indexOf(key, from);
      if (at === -1) break;
      const before = at === 0 ? '' : source[at - 1]!;
      const after = source[at + key.length] ?? '';
      if (!KEY_CHAR.test(before) && !KEY_CHAR.test(after)) {
        found.push(key);
        break;
      }
      from = at + 1;
    }
  }
  return found;
}

/** Keys named by any expression part of a template. */
export function templateReferences(template: string, candidates: Iterable<string>): string[] {
  const sources = parseTemplate(template)
    .filter((p): p is { kind: 'expr'; source: string } => p.kind === 'expr')
    .map((p) => p.source)
    .join('\n');
  return sources ? namedKeys(sources, candidates) : [];
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
