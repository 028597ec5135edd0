/**
 * Rendering `.configu` before it is parsed. The text is a template (`{{ expr }}` / `<% expr %>`) whose context is the
 * environment. The server injects the expression sandbox's trusted renderer; without it, this default substitutes
 * bare variable names only (`{{ DB_PASSWORD }}`, `<% HOME %>`); an unset variable renders as the empty string, and any
 * other expression is an error naming it.
 */
import { ConfigurationError } from '../core/errors.js';
import { parseTemplate } from '../core/template.js';

/** Renders a template with variables. May be synchronous or asynchronous. */
export type TemplateRenderer = (text: string, variables: Record<string, unknown>) => string | unknown | Promise<unknown>;

const BARE_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** True when every expression part of the template is a bare variable name (what `renderVariables` can render). */
export function onlyVariableNames(text: string): boolean {
  return parseTemplate(text).every((part) => part.kind === 'text' || BARE_NAME.test(part.source));
}

/** The default renderer: bare environment variable names only. */
export async function renderVariables(text: string, variables: Record<string, unknown>): Promise<string> {
  let out = '';
  for (const part of parseTemplate(text)) {
    if (part.kind === 'text') {
      out += part.text;
      continue;
    }
    if (!BARE_NAME.test(part.source)) {
      throw new ConfigurationError(
        `only variable names can be rendered here: "{{ ${part.source.slice(0, 60)} }}" is an expression`,
        undefined,
        undefined,
      );
    }
    const v = Object.prototype.hasOwnProperty.call(variables, part.source) ? variables[part.source] : undefined;
    out += v === undefined || v === null ? '' : String(v);
  }
  return out;
}
