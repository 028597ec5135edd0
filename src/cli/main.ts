/**
 * The `cfgu` dispatcher: a table of sub-commands, each a one-line summary and a function from its arguments (and the
 * I/O it may use) to an exit code. Add a sub-command by adding a row. The binary's entry point is bin.ts.
 */
import { EXIT_OK, EXIT_USAGE } from '../core/error-catalogue.js';
import { processIO, type CommandIO } from './io.js';
import { version } from '../server/process/version.js';
import { describeSandboxBuild } from '../expressions/isolated-vm.js';

export interface SubCommand {
  summary: string;
  run(argv: string[], io: CommandIO): Promise<number>;
}

// Each command's code is loaded when it runs (the build puts each in a chunk of its own): `cfgu health` or
// `cfgu export` never loads the server, and `cfgu --version` loads none of them (docs/cli.md, "Start-up").
export const commands: Record<string, SubCommand> = {
  serve: { summary: 'run the configuration proxy server', run: async (a, io) => (await import('./serve.js')).serveCommand(a, io) },
  upsert: { summary: 'validate values and write them to a store', run: async (a, io) => (await import('./commands/upsert.js')).upsertCommand(a, io) },
  history: { summary: 'print the revisions of a set: who changed what, when and why', run: async (a, io) => (await import('./commands/history.js')).historyCommand(a, io) },
  rollback: {
    summary: 'give a set the values of an earlier revision, as a new revision',
    run: async (a, io) => (await import('./commands/rollback.js')).rollbackCommand(a, io),
  },
  eval: { summary: 'evaluate a schema against a store and print the result (JSON)', run: async (a, io) => (await import('./commands/eval.js')).evalCommand(a, io) },
  matrix: {
    summary: 'evaluate a schema at many sets: a table of each key at each set',
    run: async (a, io) => (await import('./commands/matrix.js')).matrixCommand(a, io),
  },
  diff: { summary: 'the keys on which two sets differ, side by side', run: async (a, io) => (await import('./commands/matrix.js')).diffCommand(a, io) },
  export: {
    summary: 'export an eval result from standard input (json, dotenv, yaml, ...)',
    run: async (a, io) => (await import('./commands/export.js')).exportCommand(a, io),
  },
  health: {
    summary: 'check a proxy running on this machine (for container health checks)',
    run: async (a, io) => (await import('./commands/health.js')).healthCommand(a, io),
  },
  generate: {
    summary: 'write the types of a schema\'s export (TypeScript, zod, JSON Schema)',
    run: async (a, io) => (await import('./commands/generate.js')).generateCommand(a, io),
  },
  token: { summary: 'create a scoped bearer token for the proxy and its .configu entry', run: async (a, io) => (await import('./commands/token.js')).tokenCommand(a, io) },
};

function usage(): string {
  const width = Math.max(...Object.keys(commands).map((n) => n.length));
  const rows = Object.entries(commands).map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`);
  return `Usage: cfgu <command> [options]\n\nCommands:\n${rows.join('\n')}\n\nOptions:\n  -V, --version  print the version\n  -h, --help     show this help\n\nRun "cfgu <command> --help" for a command's options.`;
}

/** Run `cfgu ...argv` and resolve to its exit code. */
export async function main(argv: string[], io: CommandIO = processIO()): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    io.stdout.write(`${usage()}\n`);
    return name === undefined ? EXIT_USAGE : EXIT_OK;
  }
  if (name === '--version' || name === '-V') {
    // First line: the version alone (for scripts); second: the Node and the sandbox build it runs here.
    io.stdout.write(`${version}\nnode ${process.versions.node}, sandbox ${describeSandboxBuild()}\n`);
    return EXIT_OK;
  }
  const command = commands[name];
  if (!command) {
    io.stderr.write(`cfgu: unknown command "${name}"\n\n${usage()}\n`);
    return EXIT_USAGE;
  }
  return command.run(rest, io);
}
