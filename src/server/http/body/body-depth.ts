/**
 * How deeply a JSON text nests, found before it is parsed. A body of a few hundred kilobytes can nest hundreds of
 * thousands of arrays (`[[[[...]]]]`); parsing it, checking it and freezing it each take time that grows with it, on
 * the event loop every other request shares (400,000 levels took 0.2-0.8 s each, and the objects recorded as frozen
 * then made one garbage collection take 6 s). The parser refuses a text that nests deeper than the limit after one
 * pass over its characters, before any object is made. The limit is far above what a pipeline can use (a declaration
 * nests at most 64 levels, a `schema` declaration 32, an override is refused as too deeply nested long before), so
 * bodies below it keep their precise answers (400 or 422 naming the key), and low enough that parsing and checking
 * a body at the limit take about a millisecond.
 */

const OPEN_ARRAY = 0x5b; // [
const OPEN_OBJECT = 0x7b; // {
const CLOSE_ARRAY = 0x5d; // ]
const CLOSE_OBJECT = 0x7d; // }
const QUOTE = 0x22; // "
const BACKSLASH = 0x5c; // \

/** Deepest nesting a request body may have. */
export const MAX_BODY_NESTING = 10_000;

/**
 * True when `text`, read as JSON, opens more than `max` arrays and objects inside one another. Strings are skipped
 * (their brackets do not count); the text need not be valid JSON (the parser judges that afterwards). One pass,
 * stopping at the first level beyond `max`.
 */
export function nestsDeeperThan(text: string, max: number): boolean {
  // Each level opens with a character of its own: a text no longer than `max` cannot nest deeper.
  if (text.length <= max) return false;
  let depth = 0;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      // Skip the string: to the next quote that no backslash escapes.
      for (i++; i < n; i++) {
        const s = text.charCodeAt(i);
        if (s === BACKSLASH) i++;
        else if (s === QUOTE) break;
      }
    } else if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
      if (++depth > max) return true;
    } else if (c === CLOSE_ARRAY || c === CLOSE_OBJECT) {
      depth--;
    }
  }
  return false;
}
