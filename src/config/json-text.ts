/**
 * Strict JSON for `*.cfgu.json` files: a syntax error is reported as JSON (line, column, what was expected), never
 * in YAML's words, and never quoting the file's text. Duplicate keys in one object are refused, as in YAML files.
 */
import YAML from 'yaml';

export interface JsonProblem {
  line: number;
  column: number;
  message: string;
}

/** 1-based line and column of a character offset. */
function lineColumn(text: string, offset: number): { line: number; column: number } {
  const before = text.slice(0, offset);
  const line = before.split('\n').length;
  return { line, column: offset - (before.lastIndexOf('\n') + 1) + 1 };
}

/** What went wrong, in the parser's words less the position and the quoted text. */
function describe(message: string): string {
  const m = message
    .replace(/ (?:in JSON )?at position \d+.*$/s, '')
    .replace(/, .*is not valid JSON$/s, '')
    .replace(/^Unexpected end of JSON input$/, 'Unexpected end of the file')
    .replace(/ after JSON$/, ' after the JSON value');
  return m.charAt(0).toLowerCase() + m.slice(1);
}

const failsAt = (text: string, n: number): boolean => {
  try {
    JSON.parse(text.slice(0, n));
    return false;
  } catch (e) {
    const message = (e as Error).message;
    if (/^Unexpected end of JSON input/.test(message)) return false;
    const at = /at position (\d+)/.exec(message);
    // An error at the very end of a prefix only says the prefix is incomplete.
    return !at || Number(at[1]) < n;
  }
};

/**
 * Where a syntax error is. V8 names the position for most errors but not for an unexpected token: then it is found as
 * the shortest prefix of the text that is already wrong (not merely incomplete).
 */
function errorOffset(text: string, message: string): number {
  const at = /at position (\d+)/.exec(message);
  if (at) return Number(at[1]);
  if (/^Unexpected end of JSON input/.test(message)) return text.length;
  let lo = 0;
  let hi = text.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (failsAt(text, mid + 1)) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/** Parse JSON text; on a syntax error or a duplicate key, return where and what instead. */
export function parseJsonText(input: string): { ok: true; value: unknown } | { ok: false; problem: JsonProblem } {
  const text = input.charCodeAt(0) === 0xfeff ? input.slice(1) : input;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    const message = (e as Error).message;
    return { ok: false, problem: { ...lineColumn(text, errorOffset(text, message)), message: describe(message) } };
  }
  // JSON.parse keeps the last of two equal keys silently; YAML's parser (JSON is YAML) reports them.
  const duplicate = YAML.parseDocument(text, { uniqueKeys: true }).errors.find((err) => err.code === 'DUPLICATE_KEY');
  if (duplicate) {
    const offset = duplicate.pos[0];
    const quoted = /^"(?:[^"\\]|\\.)*"/.exec(text.slice(offset))?.[0];
    const name = quoted ? (JSON.parse(quoted) as string) : undefined;
    return { ok: false, problem: { ...lineColumn(text, offset), message: name === undefined ? 'duplicate key' : `duplicate key "${name}"` } };
  }
  return { ok: true, value };
}
