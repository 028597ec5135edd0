/**
 * Redaction of hidden values from failure messages (docs/security.md, "What can carry a value out").
 *
 * A message written by an expression, a library (chai, zod, Ajv, validator) or the sandbox may quote any value the
 * expression could read, and every expression of a command can read every value of the command's result. So before
 * such a message is kept, every value that must not leave is searched for in it:
 *
 * - the values of keys whose Cfgu says `hidden: true`, and
 * - the values of `const` keys computed from a hidden one (taint, see constReadsHidden).
 *
 * Each value is searched in several forms: as stored, escaped as JSON and as a single-quoted string (how chai and most
 * libraries quote it), and, when it coerces to a number, a boolean, an object or an array, as that value's text and the
 * text of each of its strings and numbers. Then:
 *
 * - A form of MIN_RUN characters or more: every run of the message of at least MIN_RUN characters that also occurs in
 *   the form is replaced by `[hidden]` (overlapping runs make one). So a value cut short by a message's length limit
 *   or split by an escape is still found, down to runs of MIN_RUN characters.
 * - A form shorter than MIN_RUN characters cannot be told apart from ordinary text: a message that contains it anywhere
 *   is replaced whole by SHORT_VALUE_MESSAGE.
 * - When the forms of one command add up to more than MAX_SEARCH_CHARS characters, every message is replaced whole by
 *   LARGE_VALUES_MESSAGE (the search would cost too much memory).
 *
 * Pure, without node built-ins: the sandbox bundle uses it too, inside the isolate (defence in depth).
 */
import { coerceValue, declaredTypeOf } from './coerce.js';
import { analyseTemplate, parseTemplate } from './template.js';
import type { EvalResult } from './types.js';

/** What a redacted run of a message becomes. */
export const HIDDEN_MARK = '[hidden]';
/** The shortest run of a message that is compared with a hidden value's text. */
export const MIN_RUN = 4;
/** Every form of every secret of one command, in characters, above which messages are withheld whole. */
export const MAX_SEARCH_CHARS = 128 * 1024;
/** Most strings and numbers taken from one coerced object or array value. */
const MAX_LEAVES = 10_000;

export const SHORT_VALUE_MESSAGE = `[withheld: the message contains the text of a hidden value shorter than ${MIN_RUN} characters]`;
export const LARGE_VALUES_MESSAGE = `[withheld: the hidden values of this evaluation are too large to search the message for them]`;

/** One evaluated key as redaction sees it: its value text (the stored form), its origin and its Cfgu. */
export interface RedactionEntry {
  key: string;
  text: string;
  origin: string;
  cfgu: { hidden?: unknown; const?: unknown; schema?: unknown } & Record<string, unknown>;
  /** Already known to hold a value derived from a hidden one (an earlier command of the pipeline found it). */
  tainted?: boolean;
}

/** Members of `$` that hold no other key's value (the key under evaluation's own view, and `$.input`). */
const OWN_MEMBERS = new Set(['key', 'value', 'storedValue', 'origin', 'cfgu', 'labels', 'input']);

/** `$.configs.NAME` or `$.configs["NAME"]` / `$.configs['NAME']`. */
const CONFIGS_ACCESS = /\$\.configs(?:\.([A-Za-z_$][\w$]*)|\[\s*(?:"([^"\\]*)"|'([^'\\]*)')\s*\])/g;
/** `$.member`. */
const MEMBER_ACCESS = /\$\.([A-Za-z_$][\w$]*)/g;

/**
 * Whether a `const` template may read the value of a hidden key (so its own value is treated as hidden). Decided on
 * the text, conservatively: true when an expression part
 * - names a key of `hidden` as a whole token (anywhere: `$.configs.DB_PASSWORD.value`, `$.configs['db-password']`, or
 *   inside any string), or
 * - reaches `$.configs` other than by naming a present key directly: any `$` that is not `$.configs.NAME`,
 *   `$.configs["NAME"]` (NAME a key of `known`) or `$.<own member>` (key, value, storedValue, origin, cfgu, labels,
 *   input), and any `configs` or `arguments` left over (`Object.values($.configs)`, `$["configs"]`, `_.get($, p)`,
 *   `arguments[0]`, `$.configs.valueOf()`: all count as reading every key).
 * A false positive only redacts more.
 */
export function constReadsHidden(template: string, known: ReadonlySet<string>, hidden: ReadonlySet<string>): boolean {
  if (analyseTemplate(template, hidden).references.length > 0) return true;
  for (const part of parseTemplate(template)) {
    if (part.kind !== 'expr') continue;
    let indirect = false;
    let rest = part.source.replace(CONFIGS_ACCESS, (_m, dotted?: string, double?: string, single?: string) => {
      const name = dotted ?? double ?? single ?? '';
      if (!known.has(name)) indirect = true;
      return ' ';
    });
    rest = rest.replace(MEMBER_ACCESS, (m, member: string) => (OWN_MEMBERS.has(member) ? ' ' : m));
    if (indirect || rest.includes('$') || /\b(configs|arguments)\b/.test(rest)) return true;
  }
  return false;
}

/**
 * The keys of `entries` treated as hidden: hidden keys (and entries already known to be tainted), and `const` keys
 * whose template reads one of them (transitively: a const that reads a tainted const is tainted too). Empty or not.
 */
export function hiddenNames(entries: readonly RedactionEntry[]): Set<string> {
  const hidden = new Set<string>();
  for (const e of entries) if (e.cfgu.hidden === true || e.tainted) hidden.add(e.key);
  if (!hidden.size) return hidden;
  const consts = entries.filter((e) => e.origin === 'const' && typeof e.cfgu.const === 'string' && !hidden.has(e.key));
  if (!consts.length) return hidden;
  const known = new Set(entries.map((e) => e.key));
  // Grows until nothing changes: each round either taints a const or ends, so at most one round per const.
  for (let changed = true; changed; ) {
    changed = false;
    for (const e of consts) {
      if (hidden.has(e.key) || !constReadsHidden(e.cfgu.const as string, known, hidden)) continue;
      hidden.add(e.key);
      changed = true;
    }
  }
  return hidden;
}

/** The keys of `entries` whose value must not leave: those of hiddenNames that hold a value. */
export function secretKeys(entries: readonly RedactionEntry[]): Set<string> {
  const hidden = hiddenNames(entries);
  return new Set(entries.filter((e) => e.text !== '' && hidden.has(e.key)).map((e) => e.key));
}

/** The texts under which a value may appear in a message (see the file's comment). */
export function formsOf(text: string, cfgu: RedactionEntry['cfgu']): string[] {
  const forms = new Set<string>();
  const add = (s: string) => {
    if (s === '') return;
    forms.add(s);
    const json = JSON.stringify(s).slice(1, -1);
    forms.add(json);
    forms.add(json.replace(/\\"/g, '"').replace(/'/g, "\\'"));
  };
  add(text);
  let coerced: unknown;
  try {
    coerced = coerceValue(text, declaredTypeOf(cfgu));
  } catch {
    coerced = text;
  }
  if (typeof coerced === 'number' || typeof coerced === 'boolean') add(String(coerced));
  else if (coerced !== null && typeof coerced === 'object') {
    add(JSON.stringify(coerced));
    // How an expression would print it (`[object Object]`, an array joined by commas). A parsed object with its own
    // `toString` or `valueOf` (a key of that name) cannot be converted: String() throws, and no expression could print
    // it that way either.
    try {
      add(String(coerced));
    } catch {
      /* not convertible to text */
    }
    const stack: unknown[] = [coerced];
    let leaves = 0;
    while (stack.length && leaves < MAX_LEAVES) {
      const v = stack.pop();
      if (typeof v === 'string' || typeof v === 'number') {
        leaves++;
        add(String(v));
      } else if (v !== null && typeof v === 'object') {
        for (const child of Object.values(v as Record<string, unknown>)) stack.push(child);
      }
    }
  }
  forms.delete('[object Object]');
  return [...forms];
}

/** Searches messages for a set of secret texts and redacts them. Secrets may be added between messages. */
export class Redactor {
  private readonly forms = new Set<string>();
  private readonly runs = new Set<string>();
  private readonly short: string[] = [];
  private chars = 0;
  private tooLarge = false;

  constructor(texts: ReadonlyArray<{ text: string; cfgu: RedactionEntry['cfgu'] }> = []) {
    for (const t of texts) this.add(t.text, t.cfgu);
  }

  /** No secret to search for. */
  get empty(): boolean {
    return this.forms.size === 0;
  }

  /** One more secret value (with the Cfgu that says how it coerces). */
  add(text: string, cfgu: RedactionEntry['cfgu']): void {
    for (const f of formsOf(text, cfgu)) {
      if (this.forms.has(f)) continue;
      this.forms.add(f);
      if (f.length < MIN_RUN) {
        this.short.push(f);
        continue;
      }
      this.chars += f.length;
      if (this.chars > MAX_SEARCH_CHARS) this.tooLarge = true;
      if (this.tooLarge) {
        this.runs.clear();
        continue;
      }
      for (let i = 0; i + MIN_RUN <= f.length; i++) this.runs.add(f.slice(i, i + MIN_RUN));
    }
  }

  /** The message with every hidden value redacted (or replaced whole, see the file's comment). */
  redact(message: string): string {
    if (this.empty || message === '' || message === SHORT_VALUE_MESSAGE || message === LARGE_VALUES_MESSAGE) return message;
    if (this.tooLarge) return LARGE_VALUES_MESSAGE;
    // Marks already in the message (the sandbox redacts first, the host again) are kept as they are.
    const pieces = message.split(HIDDEN_MARK);
    for (const piece of pieces) for (const s of this.short) if (piece.includes(s)) return SHORT_VALUE_MESSAGE;
    return pieces.map((piece) => this.redactRuns(piece)).join(HIDDEN_MARK);
  }

  private redactRuns(text: string): string {
    if (text.length < MIN_RUN) return text;
    const covered = new Uint8Array(text.length);
    let any = false;
    for (let i = 0; i + MIN_RUN <= text.length; i++) {
      if (!this.runs.has(text.slice(i, i + MIN_RUN))) continue;
      covered.fill(1, i, i + MIN_RUN);
      any = true;
    }
    if (!any) return text;
    let out = '';
    for (let i = 0; i < text.length; ) {
      if (!covered[i]) {
        out += text[i++];
        continue;
      }
      while (i < text.length && covered[i]) i++;
      out += HIDDEN_MARK;
    }
    return out;
  }
}

/** A Redactor for the secrets of `entries` (secretKeys). */
export function redactorFor(entries: readonly RedactionEntry[]): Redactor {
  const secret = secretKeys(entries);
  return new Redactor(entries.filter((e) => secret.has(e.key)));
}

/**
 * Redaction while a command's consts are computed one by one (the sandbox's side): the hidden values are known from
 * the start, and each const is checked for taint as its value arrives (consts come in dependency order, so one pass
 * suffices). The search is built at the first message only.
 */
export class ProgressiveRedaction {
  private readonly known: Set<string>;
  private readonly hidden: Set<string>;
  private readonly secrets: Array<{ text: string; cfgu: RedactionEntry['cfgu'] }> = [];
  private redactor: Redactor | undefined;

  /** `entries`: the command's values so far (consts already computed included). */
  constructor(entries: readonly RedactionEntry[]) {
    this.known = new Set(entries.map((e) => e.key));
    this.hidden = hiddenNames(entries);
    for (const e of entries) if (e.text !== '' && this.hidden.has(e.key)) this.secrets.push({ text: e.text, cfgu: e.cfgu });
  }

  /** A const's value is known: a secret too when its template reads a hidden key (constReadsHidden). */
  constComputed(key: string, template: string, text: string, cfgu: RedactionEntry['cfgu']): void {
    this.known.add(key);
    const secret = this.hidden.has(key) || (this.hidden.size > 0 && constReadsHidden(template, this.known, this.hidden));
    if (!secret) return;
    this.hidden.add(key);
    if (text === '') return;
    if (this.redactor) this.redactor.add(text, cfgu);
    else this.secrets.push({ text, cfgu });
  }

  redact(message: string): string {
    if (!this.secrets.length && !this.redactor) return message;
    this.redactor ??= new Redactor(this.secrets);
    return this.redactor.redact(message);
  }
}

/** A Redactor for the secrets of an evaluation result (the CLI's `export` uses it for `--filter` and `--template`). */
export function redactorForResult(result: EvalResult): Redactor {
  return redactorFor(Object.keys(result).map((key) => ({ key, text: result[key]!.value, origin: result[key]!.origin, cfgu: result[key]!.cfgu as RedactionEntry['cfgu'] })));
}
