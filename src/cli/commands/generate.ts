/**
 * `cfgu generate`: the types of what `POST /export` and `cfgu export` answer for a schema (core/typegen), written as a
 * TypeScript module (`ts`), a TypeScript module with a zod validator (`zod`) or a JSON Schema document
 * (`json-schema`), on standard output or to a file. Reads no store and runs no expression.
 */
import { basename, resolve } from 'node:path';
import { generateTypes, typeNameProblem, TYPEGEN_FORMATS, type TypegenFormat } from '../../core/typegen/index.js';
import { writeFileAtomic } from '../../stores/atomic-write.js';
import { GLOBAL_HELP, list, parseCommandLine, rejectPositionals, str } from '../args.js';
import { EXIT_OK, ExitError, UsageError, flagError } from '../errors.js';
import { processIO, type CommandIO } from '../io.js';
import { displayPath } from '../paths.js';
import { loadSchemas } from '../schema-files.js';
import { runCommand } from '../session.js';

export const generateUsage = `Usage: cfgu generate --schema FILE [--format ts|zod|json-schema] [--name NAME] [--out FILE]

Write the types of what POST /export and \`cfgu export\` answer for a command with this schema:
one property per key that is not hidden, typed from its declaration (schema.type, schema, enum,
the test expressions cfgu can read, default, required, const), its description as a doc comment.

Options:
  --schema FILE       a *.cfgu.json|yaml|yml file, a quoted glob, or a name from .configu's
                      \`schemas\`; repeatable (the keys are merged, as for cfgu eval)
  --format FORMAT     ts (default): a TypeScript module exporting interface NAME, no imports;
                      zod: the same module with a zod validator NAME-in-lower-camel-case + Schema
                      (it imports 'zod'); json-schema: a JSON Schema (draft 2020-12) document
  --name NAME         the interface's name (default: from the schema file's or schema's name,
                      e.g. app-config.cfgu.json -> AppConfig)
  --out FILE          write to FILE atomically (default: standard output)

${GLOBAL_HELP}

Examples:
  cfgu generate --schema app.cfgu.json --out src/config.ts
  cfgu generate --schema app --format zod --name AppConfig --out src/config.ts
  cfgu generate --schema app.cfgu.yaml --format json-schema --out app.schema.json

Exit codes: 0 success, 1 --out cannot be written, 2 usage error (a bad flag, a bad schema, a key
that cannot be typed).`;

const OPTIONS = {
  schema: { type: 'string', multiple: true },
  format: { type: 'string' },
  name: { type: 'string' },
  out: { type: 'string' },
} as const;

/** `app-config.cfgu.json` or the schema name `app-config` -> `AppConfig`; `Config` when nothing usable is left. */
export function defaultTypeName(spec: string): string {
  const stem = basename(spec).replace(/\.cfgu\.(json|ya?ml)$/, '');
  const name = stem
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean)
    .map((w) => w[0]!.toUpperCase() + w.slice(1))
    .join('');
  if (!name) return 'Config';
  const candidate = /^[0-9]/.test(name) ? `Config${name}` : name;
  return typeNameProblem(candidate) ? `${candidate}Config` : candidate;
}

export function generateCommand(argv: string[], io: CommandIO = processIO()): Promise<number> {
  return runCommand(
    'generate',
    argv,
    async (session) => {
      const { values: v, positionals } = parseCommandLine('generate', argv, OPTIONS);
      if (v.help) {
        session.io.stdout.write(`${generateUsage}\n`);
        return EXIT_OK;
      }
      rejectPositionals(positionals);
      const format = (str(v.format) ?? 'ts') as TypegenFormat;
      if (!TYPEGEN_FORMATS.includes(format)) throw flagError(`--format must be ${TYPEGEN_FORMATS.join(', ')}, not "${format}"`);
      const specs = list(v.schema);
      const givenName = str(v.name);
      if (givenName !== undefined) {
        const problem = typeNameProblem(givenName);
        if (problem) throw flagError(`--name ${problem}`);
      }
      // `.configu` is read only when it exists: a schema file needs none, a schema's name does.
      const configuration = await session.configuration(str(v.config), false);
      const { schema } = loadSchemas(specs, session.io.cwd, configuration);
      const source = specs.length === 1 ? specs[0]! : specs.join(', ');
      const name = givenName ?? (specs.length === 1 ? defaultTypeName(specs[0]!) : 'Config');
      const outcome = generateTypes(schema, { name, format, source });
      if (!outcome.ok) {
        const n = outcome.problems.length;
        throw new UsageError(`${n === 1 ? 'a key' : `${n} keys`} cannot be typed:`, outcome.problems.map((p) => p.message));
      }
      const out = str(v.out);
      if (out === undefined) {
        session.io.stdout.write(outcome.text);
        return EXIT_OK;
      }
      const file = resolve(session.io.cwd, out);
      try {
        await writeFileAtomic(file, outcome.text);
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        throw new ExitError(1, `--out ${displayPath(file, session.io.cwd)}: cannot write${code ? ` (${code})` : ''}: ${(e as Error).message}`);
      }
      return EXIT_OK;
    },
    io,
  );
}
