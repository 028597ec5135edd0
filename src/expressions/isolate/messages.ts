/** Messages handed back to the host: bounded, never a stack or a function's whole source. */
import * as zod from 'zod';
import { StringCtor } from './intrinsics.js';

const MAX_MESSAGE = 500;

const FUNCTION_SOURCE = /'?function\s*([\w$]*)\s*\([^)]*\)\s*\{[\s\S]*\}'?/;

export function clip(text: string): string {
  // V8 quotes a whole function's source in some messages ("... of function 'function lodash(value) {...}'").
  if (text.length > 120 && FUNCTION_SOURCE.test(text)) text = text.replace(FUNCTION_SOURCE, (_m, name: string) => `${name || "anonymous"}()`);
  return text.length > MAX_MESSAGE ? `${text.slice(0, MAX_MESSAGE - 3)}...` : text;
}

/** A readable message for whatever an expression threw. Never a stack. */
export function messageOf(error: unknown): string {
  try {
    if (error instanceof zod.ZodError) return clip(zod.prettifyError(error));
    if (error !== null && (typeof error === 'object' || typeof error === 'function')) {
      const m = (error as { message?: unknown }).message;
      if (typeof m === 'string' && m !== '') return clip(m);
      const name = (error as { name?: unknown }).name;
      if (typeof name === 'string' && name !== '') return clip(name);
    }
    const text = StringCtor(error);
    return clip(text === '' ? 'the expression threw an empty value' : text);
  } catch {
    return 'the expression threw a value that cannot be read';
  }
}
