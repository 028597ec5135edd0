import type { ExpressionFailureKind } from '../core/ports.js';

/** An expression (CLI `--template` / `--filter`, `.configu` rendering) failed; `kind` says why. */
export class ExpressionError extends Error {
  readonly kind: ExpressionFailureKind;
  constructor(kind: ExpressionFailureKind, message: string) {
    super(message);
    this.name = 'ExpressionError';
    this.kind = kind;
  }
}
