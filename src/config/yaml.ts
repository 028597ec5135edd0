/** YAML parsing with the first problem located, for `.configu` and `*.cfgu.yaml` files (each words its own message). */
import YAML from 'yaml';

export interface YamlProblem {
  /** 1-based; absent when the problem has no place (e.g. too many aliases). */
  line?: number;
  column?: number;
  /** One line, without the position the `yaml` package appends. */
  message: string;
}

export type YamlParse = { ok: true; value: unknown } | { ok: false; problem: YamlProblem };

/** Parse one document with unique keys; `maxAliasCount` bounds alias expansion (a "billion laughs" file). */
export function parseYaml(text: string, maxAliasCount: number): YamlParse {
  const doc = YAML.parseDocument(text, { uniqueKeys: true, prettyErrors: true });
  if (doc.errors.length) {
    const err = doc.errors[0]!;
    const pos = err.linePos?.[0];
    const message = err.message.split('\n')[0]!.replace(/ at line \d+, column \d+:?$/, '');
    return { ok: false, problem: pos ? { line: pos.line, column: pos.col, message } : { message } };
  }
  try {
    return { ok: true, value: doc.toJS({ maxAliasCount }) as unknown };
  } catch (e) {
    return { ok: false, problem: { message: (e as Error).message.split('\n')[0]! } };
  }
}
