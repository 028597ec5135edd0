// Size check run by `npm test` before the tests (docs/architecture.md, "Sizes"): no source file of src/ over 400
// lines and no function over 100, but for the exceptions listed below, each justified in docs/architecture.md.
// A function's length runs from the line it starts on to the line it ends on in the TypeScript source, nested
// functions included (a function holding a 60-line callback is at least 60 lines long); every kind counts: function
// declarations and expressions, arrow functions, methods, getters and setters. TypeScript 7 ships no parser API, so
// each file is transpiled with esbuild (types removed, a source map kept), parsed with acorn, and each function's
// first and last positions mapped back to the source's lines.
// Usage: node scripts/check-sizes.mjs [<source folder>] (default: the repository's src/). Exit 0 when every file and
// function is within its limit and every exception is still needed.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { SourceMap } from 'node:module';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'acorn';
import { ancestor } from 'acorn-walk';
import { transformSync } from 'esbuild';

export const FILE_LINES = 400;
export const FUNCTION_LINES = 100;

/**
 * Files or functions allowed over their limit, as `<path relative to the source folder>` or
 * `<path>#<function name>`, each with its reason (the same reasons are in docs/architecture.md, "Sizes"). An entry
 * that is no longer over its limit fails the check, so that the list only shrinks.
 */
export const EXCEPTIONS = {};

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

const walk = (dir) =>
  readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? walk(p) : /\.tsx?$/.test(name) && !/\.d\.ts$/.test(name) ? [p] : [];
  });

function lineCount(text) {
  const lines = text.split('\n');
  return lines[lines.length - 1] === '' ? lines.length - 1 : lines.length;
}

/** The name a reader would look for: the declaration's, the method's, the variable's or the property's. */
function nameOf(node, ancestors) {
  if (node.id?.name) return node.id.name;
  const parent = ancestors[ancestors.length - 2];
  if (!parent) return '<anonymous>';
  if ((parent.type === 'MethodDefinition' || parent.type === 'Property' || parent.type === 'PropertyDefinition') && parent.key) {
    return parent.key.name ?? parent.key.value ?? '<computed>';
  }
  if (parent.type === 'VariableDeclarator' && parent.id?.name) return parent.id.name;
  if (parent.type === 'AssignmentExpression' && parent.left?.type === 'MemberExpression') return parent.left.property?.name ?? '<anonymous>';
  return '<anonymous>';
}

/** Every function of a TypeScript text: its name and its first and last line (1-based) in that text. */
export function functionsOf(text, file) {
  const out = transformSync(text, { loader: file.endsWith('.tsx') ? 'tsx' : 'ts', jsx: 'automatic', jsxImportSource: 'preact', format: 'esm', sourcemap: 'external', sourcefile: file, target: 'es2023' });
  const map = new SourceMap(JSON.parse(out.map));
  // The source line of a generated position; where a position has no mapping of its own, the nearest one before it.
  const sourceLine = (line, column) => {
    const entry = map.findEntry(line - 1, column);
    return entry && typeof entry.originalLine === 'number' ? entry.originalLine + 1 : undefined;
  };
  const ast = parse(out.code, { ecmaVersion: 'latest', sourceType: 'module', locations: true });
  const found = [];
  const visit = (node, _state, ancestors) => {
    const first = sourceLine(node.loc.start.line, node.loc.start.column);
    // esbuild maps a block's closing brace too; the last position of an arrow function's expression body maps to
    // the line of its last token (or the nearest mapped position before it).
    const last = sourceLine(node.loc.end.line, Math.max(0, node.loc.end.column - 1));
    if (first === undefined || last === undefined) return;
    found.push({ name: nameOf(node, ancestors), first, lines: Math.max(first, last) - first + 1 });
  };
  ancestor(ast, { FunctionDeclaration: visit, FunctionExpression: visit, ArrowFunctionExpression: visit });
  return found;
}

/** The files and functions over their limits under `source`, and the exceptions no longer needed. */
export function checkSizes(source, exceptions = EXCEPTIONS) {
  const over = [];
  const used = new Set();
  for (const file of walk(source).sort()) {
    const path = relative(source, file).split(sep).join('/');
    const text = readFileSync(file, 'utf8');
    const lines = lineCount(text);
    if (lines > FILE_LINES) {
      if (path in exceptions) used.add(path);
      else over.push(`${path}: ${lines} lines, over the limit of ${FILE_LINES} for a file`);
    }
    for (const f of functionsOf(text, file)) {
      if (f.lines <= FUNCTION_LINES) continue;
      const key = `${path}#${f.name}`;
      if (key in exceptions) used.add(key);
      else over.push(`${path}:${f.first} ${f.name}: ${f.lines} lines, over the limit of ${FUNCTION_LINES} for a function`);
    }
  }
  const stale = Object.keys(exceptions).filter((k) => !used.has(k)).map((k) => `${k}: listed as an exception but within its limit (remove it from the list)`);
  return { over, stale };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const source = resolve(process.argv[2] ?? join(root, 'src'));
  const { over, stale } = checkSizes(source);
  for (const line of [...over, ...stale]) console.error(`  ${line}`);
  if (over.length || stale.length) {
    console.error(`cfgu sizes: ${over.length + stale.length} finding(s) above (docs/architecture.md, "Sizes")`);
    process.exitCode = 1;
  }
}
