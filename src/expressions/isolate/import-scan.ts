import { SetCtor } from './intrinsics.js';

// ---------------------------------------------------------------------------------------------------------------
// Dynamic import. In the child process, `import()` in the isolate returns a promise that never settles (in a plain
// script host, isolated-vm throws "Not supported" out of the call). Neither is a clear answer, so a call is found in the
// source first: a small scanner that skips strings, template text, comments and regex literals, so that
// `'import(' !== 'x'` is an ordinary expression. Whatever it misses still cannot import anything.
// ---------------------------------------------------------------------------------------------------------------
const WORD_START = /[A-Za-z_$\\\u0080-\uffff]/;
const WORD_PART = /[\w$\\\u0080-\uffff]/;
const SPACE = /\s/;
/** Words after which `/` starts a regex literal rather than a division. */
const BEFORE_REGEX = new SetCtor(['return', 'typeof', 'instanceof', 'in', 'of', 'new', 'delete', 'void', 'throw', 'case', 'do', 'else', 'yield', 'await']);

/** Index of the next character that is not white space or a comment. */
function skipBlank(src: string, i: number): number {
  for (;;) {
    while (i < src.length && SPACE.test(src[i]!)) i++;
    if (src[i] === '/' && src[i + 1] === '/') {
      while (i < src.length && src[i] !== '\n') i++;
    } else if (src[i] === '/' && src[i + 1] === '*') {
      const end = src.indexOf('*/', i + 2);
      i = end === -1 ? src.length : end + 2;
    } else {
      return i;
    }
  }
}

export function callsImport(src: string): boolean {
  if (!src.includes('import')) return false;
  // '{' block or object, '$' template substitution, '(' parenthesis, 'I' the parenthesis after `import`
  const open: string[] = [];
  let regexAllowed = true;
  let member = false; // the previous token was `.` or `?.`
  let i = 0;
  const template = (): void => {
    // i is just inside a template literal (or just after the `}` of a substitution)
    while (i < src.length) {
      const c = src[i]!;
      if (c === '\\') i += 2;
      else if (c === '`') {
        i++;
        regexAllowed = false;
        return;
      } else if (c === '$' && src[i + 1] === '{') {
        i += 2;
        open.push('$');
        regexAllowed = true;
        return;
      } else i++;
    }
  };
  while ((i = skipBlank(src, i)) < src.length) {
    const c = src[i]!;
    if (c === '"' || c === "'") {
      for (i++; i < src.length && src[i] !== c && src[i] !== '\n'; i++) if (src[i] === '\\') i++;
      i++;
      regexAllowed = member = false;
    } else if (c === '`') {
      i++;
      member = false;
      template();
    } else if (c === '/' && regexAllowed) {
      let inClass = false;
      for (i++; i < src.length && src[i] !== '\n'; i++) {
        const r = src[i]!;
        if (r === '\\') i++;
        else if (r === '[') inClass = true;
        else if (r === ']') inClass = false;
        else if (r === '/' && !inClass) break;
      }
      i++;
      while (i < src.length && WORD_PART.test(src[i]!)) i++;
      regexAllowed = member = false;
    } else if (WORD_START.test(c)) {
      const start = i;
      while (i < src.length && WORD_PART.test(src[i]!)) i++;
      const word = src.slice(start, i);
      const next = skipBlank(src, i);
      if (word === 'import' && !member && src[next] === '(') {
        open.push('I');
        i = next + 1;
        regexAllowed = true;
      } else {
        regexAllowed = BEFORE_REGEX.has(word);
      }
      member = false;
    } else if (c >= '0' && c <= '9') {
      while (i < src.length && (WORD_PART.test(src[i]!) || src[i] === '.')) i++;
      regexAllowed = member = false;
    } else if (c === '.' && src[i + 1] === '.' && src[i + 2] === '.') {
      i += 3;
      regexAllowed = true;
      member = false;
    } else if (c === '.' || (c === '?' && src[i + 1] === '.' && !(src[i + 2]! >= '0' && src[i + 2]! <= '9'))) {
      i += c === '.' ? 1 : 2;
      member = true;
    } else if (c === '(' || c === '[' || c === '{') {
      if (c !== '[') open.push(c);
      i++;
      regexAllowed = true;
      member = false;
    } else if (c === ')' || c === '}') {
      const top = open.pop();
      i++;
      member = false;
      // `import(...)` followed by `{` is a method named import (`{ import() {} }`), not a call
      if (top === 'I' && src[skipBlank(src, i)] !== '{') return true;
      if (top === '$') template();
      else regexAllowed = false;
    } else if (c === ']') {
      i++;
      regexAllowed = member = false;
    } else {
      i++;
      regexAllowed = true;
      member = false;
    }
  }
  return false;
}
