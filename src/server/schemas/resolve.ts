/**
 * Commands that name a schema (`{"store": "main", "set": "prod", "schema": "app"}`) turned into the commands the
 * engine takes: the name replaced by the current version of that named schema (./registry.ts), the very object the
 * registry keeps, so the engine finds its prepared form by identity. Commands that carry their schema are left as
 * they are; a pipeline without any name is returned as it came.
 *
 * A name the server does not hold is a 400 (`CFGU_UNKNOWN_SCHEMA`) with the closest names. For a scoped principal, a
 * schema it may not use whole (one of its keys is outside every grant: ../access/scopes.ts, `mayUseServerSchema`) is
 * answered exactly as a name the server does not hold, and the closest names are taken only from those it may use, so
 * a scope cannot learn which other schemas exist.
 */
import { UnknownSchemaError } from '../../core/errors.js';
import { closestNames } from '../../core/suggest.js';
import type { ConfigSchema, EvalCommandInput } from '../../core/types.js';
import { SCHEMA_FILE } from '../../config/schema-file.js';
import { mayUseServerSchema, type Principal } from '../access/scopes.js';
import type { NamedSchema, NamedSchemas } from './registry.js';

/** A command as a request carries it: its schema, or the name of one the server holds. */
export type WireCommand = Omit<EvalCommandInput, 'schema'> & { schema: ConfigSchema | string };

/** Whether a pipeline names at least one schema. */
export function namesSchemas(commands: readonly WireCommand[]): boolean {
  for (const c of commands) if (typeof c.schema === 'string') return true;
  return false;
}

/** The schema names a pipeline uses, each once. */
export function schemaNamesOf(commands: readonly WireCommand[]): Set<string> {
  const names = new Set<string>();
  for (const c of commands) if (typeof c.schema === 'string') names.add(c.schema);
  return names;
}

/** The names `principal` may use (all of them without a scope). */
function usableNames(schemas: NamedSchemas, principal: Principal | undefined): string[] {
  return schemas.all().filter((s) => !principal || mayUseServerSchema(principal, s)).map((s) => s.name);
}

/** The error for a name that is not (for this principal) one of the server's schemas. */
export function unknownSchema(name: string, schemas: NamedSchemas, principal: Principal | undefined): UnknownSchemaError {
  const usable = usableNames(schemas, principal);
  // A file path where a name belongs: the server reads no file a request names; the names of entries whose file it is
  // (or whose name is the file's stem) come first.
  const path = /[/\\]/.test(name) || SCHEMA_FILE.test(name);
  if (path) {
    const stem = name.replace(/^.*[/\\]/, '').replace(SCHEMA_FILE, '');
    const closest = [...new Set([...usable.filter((n) => n === stem), ...closestNames(stem, usable)])].slice(0, 3);
    const hint = closest.length ? `; did you mean ${closest.map((n) => `"${n}"`).join(' or ')}?` : '';
    return new UnknownSchemaError(name, closest, `a request names one of the server's schemas, never a file${hint}`);
  }
  if (schemas.skipped.has(name) && !principal) {
    return new UnknownSchemaError(name, [], 'it names a URL in .configu, which the server does not fetch');
  }
  // Said only when true for everyone (a scope that may use none is told what any unknown name gets).
  if (!schemas.size && !principal) return new UnknownSchemaError(name, [], 'the server holds no named schemas');
  return new UnknownSchemaError(name, closestNames(name, usable));
}

/** The current version of `name` for `principal`, or UnknownSchemaError. `principal` undefined: no scope applies. */
export function namedSchemaFor(name: string, schemas: NamedSchemas, principal: Principal | undefined): NamedSchema {
  const held = schemas.get(name);
  if (held && (!principal || mayUseServerSchema(principal, held))) return held;
  throw unknownSchema(name, schemas, principal);
}

/**
 * The pipeline with every schema name replaced by that schema's current version. Throws UnknownSchemaError for the
 * first name that `principal` cannot use (undefined: no scope applies, e.g. a watch re-evaluating what was allowed).
 */
export function resolveCommands(commands: readonly WireCommand[], schemas: NamedSchemas, principal?: Principal): EvalCommandInput[] {
  if (!namesSchemas(commands)) return commands as EvalCommandInput[];
  const scope = principal && principal.grants !== 'all' ? principal : undefined;
  return commands.map((c) => (typeof c.schema === 'string' ? { ...c, schema: namedSchemaFor(c.schema, schemas, scope).schema } : (c as EvalCommandInput)));
}
