/**
 * One catalogue of typed errors. Every failure cfgu reports is a CfguError with a stable `code`; the HTTP layer maps
 * the code to a status, the CLI maps it to an exit code. Messages are written for people and never contain a stack,
 * a file-system path of the server or a secret.
 */

/** The rule an evaluation failure broke (the `rule` of an `errors` item). */
export type FailureRule =
  | 'required'
  | 'pattern'
  | 'enum'
  | 'schema'
  | 'test'
  | 'const'
  | 'override'
  /** upsert only: a key the schema does not declare */
  | 'undeclared'
  /** upsert only: a `lazy` key (never stored) */
  | 'lazy';

/** One failure of one key in one command of a pipeline. */
export interface EvalFailure {
  /** 0-based index of the command in the pipeline. */
  command: number;
  key: string;
  rule: FailureRule;
  message: string;
}

/** Where a schema / set / key problem was found, as a JSON-pointer-like path (e.g. `/0/schema/keys/PORT/enum`). */
export interface InputIssue {
  path: string;
  message: string;
}

export const ErrorCodes = {
  /** A schema (Cfgu declarations) is invalid. */
  INVALID_SCHEMA: 'CFGU_INVALID_SCHEMA',
  /** A key name is invalid or reserved. */
  INVALID_KEY: 'CFGU_INVALID_KEY',
  /** A set path is invalid. */
  INVALID_SET: 'CFGU_INVALID_SET',
  /** The request or command input is malformed (not a pipeline, empty, ...). */
  INVALID_INPUT: 'CFGU_INVALID_INPUT',
  /** A store name is unknown, or no store was given and there is no default store. */
  UNKNOWN_STORE: 'CFGU_UNKNOWN_STORE',
  /** A command names a schema the server does not hold (`"schema": "app"`, `.configu`'s `schemas`). */
  UNKNOWN_SCHEMA: 'CFGU_UNKNOWN_SCHEMA',
  /** Evaluation (or upsert) failed validation: `failures` lists every failure. */
  VALIDATION_FAILED: 'CFGU_VALIDATION_FAILED',
  /** A store could not be reached or read. */
  STORE_UNAVAILABLE: 'CFGU_STORE_UNAVAILABLE',
  /** A request is over a configured limit. */
  LIMIT_EXCEEDED: 'CFGU_LIMIT_EXCEEDED',
  /** The server's own configuration (.configu) is invalid. */
  INVALID_CONFIGURATION: 'CFGU_INVALID_CONFIGURATION',
  /** The expression sandbox could not run at all (not the fault of the expression). */
  SANDBOX_UNAVAILABLE: 'CFGU_SANDBOX_UNAVAILABLE',
  /** The expression sandbox's queue is full (for everyone, or for this client): retry later. */
  SANDBOX_BUSY: 'CFGU_SANDBOX_BUSY',
  /** A request's expressions used up its budget (CPU time, sandbox restarts). */
  BUDGET_EXCEEDED: 'CFGU_BUDGET_EXCEEDED',
  /** No credential, or one the server does not accept (unknown key or token, bad or expired JWT). */
  UNAUTHORIZED: 'CFGU_UNAUTHORIZED',
  /** A valid credential whose scope does not cover every command of the pipeline. */
  FORBIDDEN: 'CFGU_FORBIDDEN',
  /** The caller sent more requests than its rate limit allows. */
  RATE_LIMITED: 'CFGU_RATE_LIMITED',
  /** A JSON request body declared in a charset other than UTF-8. */
  UNSUPPORTED_CHARSET: 'CFGU_UNSUPPORTED_CHARSET',
  /** A JSON request body with a `__proto__` or `constructor.prototype` property (the prototype-poisoning guard). */
  FORBIDDEN_PROPERTY: 'CFGU_FORBIDDEN_PROPERTY',
  /** A write named a revision of a set that is no longer its current one: nothing was written. */
  REVISION_CONFLICT: 'CFGU_REVISION_CONFLICT',
  /** A write would make a schema fail at a set where it passed before (`impact` says where); nothing was written. */
  WRITE_BREAKS: 'CFGU_WRITE_BREAKS',
  /** A write to a store `.configu` declares `readOnly: true`; nothing was written. */
  READ_ONLY_STORE: 'CFGU_READ_ONLY_STORE',
  /** A valid credential without the right to write (or to break) the keys of a write; nothing was written. */
  WRITE_FORBIDDEN: 'CFGU_WRITE_FORBIDDEN',
  /** The browser console was asked for from an address other than loopback while authentication is off. */
  CONSOLE_LOOPBACK_ONLY: 'CFGU_CONSOLE_LOOPBACK_ONLY',
} as const;

export type ErrorCode = (typeof ErrorCodes)[keyof typeof ErrorCodes];

export class CfguError extends Error {
  readonly code: ErrorCode;
  constructor(code: ErrorCode, message: string) {
    super(message);
    this.name = 'CfguError';
    this.code = code;
  }
}

/** A schema, key, set or request shape is invalid; `issues` says where. */
export class InputError extends CfguError {
  readonly issues: InputIssue[];
  constructor(
    code: typeof ErrorCodes.INVALID_SCHEMA | typeof ErrorCodes.INVALID_KEY | typeof ErrorCodes.INVALID_SET | typeof ErrorCodes.INVALID_INPUT,
    message: string,
    issues: InputIssue[] = [],
  ) {
    super(code, message);
    this.name = 'InputError';
    this.issues = issues;
  }
}

export class UnknownStoreError extends CfguError {
  readonly store: string | undefined;
  readonly known: string[];
  constructor(store: string | undefined, known: string[]) {
    const list = known.length ? known.map((k) => `"${k}"`).join(', ') : '(none)';
    super(
      ErrorCodes.UNKNOWN_STORE,
      store === undefined
        ? `no store was given and there is no default store; known stores: ${list}`
        : `unknown store "${store}"; known stores: ${list}`,
    );
    this.name = 'UnknownStoreError';
    this.store = store;
    this.known = known;
  }
}

/** A schema name the server does not hold; `closest` are the names it holds that are close to it (at most three). */
export class UnknownSchemaError extends CfguError {
  readonly schema: string;
  readonly closest: string[];
  constructor(schema: string, closest: string[], why?: string) {
    const list = closest.map((n) => `"${n}"`);
    const hint = list.length > 1 ? `${list.slice(0, -1).join(', ')} or ${list[list.length - 1]}` : list[0];
    super(ErrorCodes.UNKNOWN_SCHEMA, `unknown schema "${schema}": ${why ?? (hint ? `did you mean ${hint}?` : 'no schema of the server has a close name')}`);
    this.name = 'UnknownSchemaError';
    this.schema = schema;
    this.closest = closest;
  }
}

export class ValidationError extends CfguError {
  readonly failures: EvalFailure[];
  constructor(failures: EvalFailure[]) {
    super(
      ErrorCodes.VALIDATION_FAILED,
      failures.length === 1 ? `1 key failed validation` : `${failures.length} keys failed validation`,
    );
    this.name = 'ValidationError';
    this.failures = failures;
  }
}

export class StoreUnavailableError extends CfguError {
  readonly store: string;
  /** Seconds after which a retry makes sense (the `Retry-After` header). */
  readonly retryAfter: number;
  constructor(store: string, reason: string, retryAfter = 5) {
    super(ErrorCodes.STORE_UNAVAILABLE, `store "${store}" is unavailable: ${reason}`);
    this.name = 'StoreUnavailableError';
    this.store = store;
    this.retryAfter = retryAfter;
  }
}

export class LimitError extends CfguError {
  constructor(message: string) {
    super(ErrorCodes.LIMIT_EXCEEDED, message);
    this.name = 'LimitError';
  }
}

/** The server's .configu (or another file the operator owns) is invalid. `file` is for the operator's eyes only. */
export class ConfigurationError extends CfguError {
  readonly file: string | undefined;
  readonly property: string | undefined;
  constructor(message: string, file?: string, property?: string) {
    super(ErrorCodes.INVALID_CONFIGURATION, message);
    this.name = 'ConfigurationError';
    this.file = file;
    this.property = property;
  }
}

export class SandboxUnavailableError extends CfguError {
  constructor(message: string) {
    super(ErrorCodes.SANDBOX_UNAVAILABLE, message);
    this.name = 'SandboxUnavailableError';
  }
}

export class SandboxBusyError extends CfguError {
  /** Seconds after which a retry makes sense (the `Retry-After` header). */
  readonly retryAfter: number;
  constructor(message: string, retryAfter = 1) {
    super(ErrorCodes.SANDBOX_BUSY, message);
    this.name = 'SandboxBusyError';
    this.retryAfter = retryAfter;
  }
}

/** Which budget of a request ran out. */
export type BudgetRule = 'cpu-budget' | 'restart-budget';

export class BudgetExceededError extends CfguError {
  readonly rule: BudgetRule;
  constructor(rule: BudgetRule, message: string) {
    super(ErrorCodes.BUDGET_EXCEEDED, message);
    this.name = 'BudgetExceededError';
    this.rule = rule;
  }
}

/**
 * The request carries no credential the server accepts. `reason` says why (expired, wrong issuer, ...) and is for
 * the log only: the client always gets the same answer, so a caller learns nothing about what the server checks.
 */
export class UnauthorizedError extends CfguError {
  readonly reason: string;
  constructor(reason: string) {
    super(ErrorCodes.UNAUTHORIZED, 'a valid bearer key is required (Authorization: Bearer <key>)');
    this.name = 'UnauthorizedError';
    this.reason = reason;
  }
}

/** One command of a pipeline that the caller's credential may not run: its 0-based index, store and set. */
export interface RefusedCommand {
  command: number;
  /** The store the command names, or the default store's name; null when it names none and there is no default. */
  store: string | null;
  set: string;
}

/** The credential is valid but its scope does not cover these commands; nothing was read. */
export class ForbiddenError extends CfguError {
  readonly refused: RefusedCommand[];
  /** `message`: the detail, when the refusal is not of a pipeline's commands (POST /matrix says sets or a prefix). */
  constructor(refused: RefusedCommand[], total: number, message?: string) {
    const list = refused.map((r) => `command ${r.command} (store ${r.store === null ? '(none)' : `"${r.store}"`}, set "${r.set}")`);
    super(
      ErrorCodes.FORBIDDEN,
      message ??
        `${refused.length} of ${total} command${total === 1 ? '' : 's'} ${refused.length === 1 ? 'is' : 'are'} outside the scope of this credential: ${list.join(', ')}`,
    );
    this.name = 'ForbiddenError';
    this.refused = refused;
  }
}

export class RateLimitedError extends CfguError {
  /** Seconds until the caller's window resets (the `Retry-After` header). */
  readonly retryAfter: number;
  constructor(limit: number, windowSeconds: number, retryAfter: number) {
    super(ErrorCodes.RATE_LIMITED, `more than ${limit} requests in ${windowSeconds} s; retry after ${retryAfter} s`);
    this.name = 'RateLimitedError';
    this.retryAfter = retryAfter;
  }
}

/**
 * The server's JSON parser refused a request body before reading it as a pipeline: it is declared in a charset other
 * than UTF-8, or it holds a `__proto__` or `constructor.prototype` property. The message is the whole answer.
 */
export class BodyRefusedError extends CfguError {
  constructor(code: typeof ErrorCodes.UNSUPPORTED_CHARSET | typeof ErrorCodes.FORBIDDEN_PROPERTY) {
    super(
      code,
      code === ErrorCodes.UNSUPPORTED_CHARSET
        ? 'the request body must be JSON in UTF-8 (Content-Type: application/json; charset=utf-8)'
        : 'the request body contains a `__proto__` or `constructor.prototype` property, which the server refuses',
    );
    this.name = 'BodyRefusedError';
  }
}

/** A write named an expected revision of a set, and the set is at another one (`current`); nothing was written. */
export class RevisionConflictError extends CfguError {
  readonly store: string;
  readonly set: string;
  readonly expected: number;
  readonly current: number;
  constructor(store: string, set: string, expected: number, current: number) {
    super(
      ErrorCodes.REVISION_CONFLICT,
      `set "${set}" of store "${store}" is at revision ${current}, not ${expected}: it changed since it was read; nothing was written`,
    );
    this.name = 'RevisionConflictError';
    this.store = store;
    this.set = set;
    this.expected = expected;
    this.current = current;
  }
}

/** What a write does to one named schema at one set (core/impact.ts). */
export interface ImpactEntry {
  schema: string;
  set: string;
  /** `breaks`: it passed before and fails after; `fixes`: the reverse; `changes`: some evaluated value differs. */
  status: 'unchanged' | 'changes' | 'breaks' | 'fixes';
  /** The keys whose evaluated value differs (names only). */
  changed: string[];
  /** The failures after the write (none for `unchanged`, `changes` and `fixes` of a passing schema). */
  failures: Array<{ key: string; rule: FailureRule; message: string }>;
}

/** The write makes some schema fail at some set where it passed; nothing was written. */
export class WriteBreaksError extends CfguError {
  readonly impact: ImpactEntry[];
  constructor(impact: ImpactEntry[]) {
    const broken = impact.filter((i) => i.status === 'breaks');
    const list = broken.map((i) => `schema "${i.schema}" at set "${i.set}"`).join(', ');
    super(ErrorCodes.WRITE_BREAKS, `the write would make ${list} fail, which passed before; nothing was written (allowBreaking needs the right to break)`);
    this.name = 'WriteBreaksError';
    this.impact = impact;
  }
}

/** A write to a store declared `readOnly: true`. */
export class ReadOnlyStoreError extends CfguError {
  readonly store: string;
  constructor(store: string) {
    super(ErrorCodes.READ_ONLY_STORE, `store "${store}" is read-only (.configu declares it readOnly: true); nothing was written`);
    this.name = 'ReadOnlyStoreError';
    this.store = store;
  }
}

/** What a credential may not do in a write: `write` these keys, or `break` schemas (allowBreaking). */
export class WriteForbiddenError extends CfguError {
  readonly store: string;
  readonly set: string;
  readonly right: 'write' | 'break';
  readonly keys: string[];
  constructor(store: string, set: string, right: 'write' | 'break', keys: string[]) {
    super(
      ErrorCodes.WRITE_FORBIDDEN,
      right === 'write'
        ? `this credential may not write ${keys.length === 1 ? 'key' : 'keys'} ${keys.map((k) => `"${k}"`).join(', ')} of set "${set}" in store "${store}"; nothing was written`
        : `this credential may not make a breaking write (allowBreaking) to set "${set}" of store "${store}"; nothing was written`,
    );
    this.name = 'WriteForbiddenError';
    this.store = store;
    this.set = set;
    this.right = right;
    this.keys = keys;
  }
}

/**
 * The browser console (GET /console) asked for by a client that is not on this host while authentication is off:
 * without a credential to ask for, the console is served on loopback only.
 */
export class ConsoleLoopbackOnlyError extends CfguError {
  constructor() {
    super(
      ErrorCodes.CONSOLE_LOOPBACK_ONLY,
      'without authentication the console is served to loopback clients only (127.0.0.0/8, ::1); open it on this host, or turn ' +
        'authentication on (interface.proxy.auth.enabled with a key or credential, or CONFIGU_AUTH_ENABLED) to serve it to other addresses',
    );
    this.name = 'ConsoleLoopbackOnlyError';
  }
}

export const isCfguError = (e: unknown): e is CfguError => e instanceof CfguError;
